"""The live cockpit: the controller of a live host, composed of parts with one job each.

* :mod:`~kimitui.live.controller`: ``LiveController`` (the UI's ``kimitui.control.Controller``);
* :mod:`~kimitui.live.fleet`: ``FleetController``, several hosts in one session (one ``LiveController`` each);
* :mod:`~kimitui.live.on_host`: what works on the host once it is known (GPU stream, server
  follower, swaps, the foreign-port check) and closing it by the quit rule (:mod:`~kimitui.live.quitting`);
* :mod:`~kimitui.live.swaps`: the swap plan and the swaps, one at a time, their outcome followed;
* :mod:`~kimitui.live.foreign`: a port held by a process kimitui did not start, and the ways on;
* :mod:`~kimitui.live.recorder`: the session's recording, events before it opens held;
* :mod:`~kimitui.live.sweeps` and :mod:`~kimitui.live.sweep_defaults`: sweeps and their remembered form;
* :mod:`~kimitui.live.profiles`: the one way profiles are loaded;
* :mod:`~kimitui.live.tasks`: background tasks whose failures are shown;
* :mod:`~kimitui.live.server_follower`: the followed server's log and metrics, retargeted on every swap.

Only ``kimitui.commands`` imports this package.
"""

from kimitui.live.controller import DEFAULT_LEVELS, DEFAULT_PROFILE, LiveController
from kimitui.live.fleet import FleetController

__all__ = ["DEFAULT_LEVELS", "DEFAULT_PROFILE", "FleetController", "LiveController"]
