"""Why a request straggled: the cause of each slow stretch, and the level's lost throughput by cause.

Issue 18.  The field notes' operator guessed four hypotheses for a 66.6 s request and could not tell
which was true.  Everything needed to tell is already in the event stream: SGLang's log lines (EPLB,
KV retraction, prefill batches, the CUDA-graph flag on decode lines), the NVML samples (clock-event
reasons, clocks, PCIe), the server's health, the load process's own health and the SSH link's state.

* :mod:`.catalogue` names the causes and how each is shown;
* :mod:`.event_clock` puts every stream on one time axis (the SSH link delivers logs and samples
  seconds late: a line's own timestamp and a sample's ``host_t`` say when it happened);
* :mod:`.log_sources`, :mod:`.gpu_sources`, :mod:`.session_sources` fold events into
  :class:`~.episodes.Episode` spans, and :class:`~.timeline.CauseTimeline` keeps them, bounded;
* :mod:`.stretches` finds where a request's stream went slow;
* :mod:`.attribute` overlaps the two and says the cause, its share and how sure it is;
* :mod:`.tail` splits a level's shortfall against its median decode rate by cause.

Pure functions and small classes over :mod:`kimitui.events`: the cockpit, replay, reports and the
bench share them, so a recording made before this module existed gets causes too.
"""
