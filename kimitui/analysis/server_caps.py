"""What a server's ``/server_info`` says a sweep may ask of it: speculative figures, metric labels.

Pure functions over the args dict (no I/O): the sweep command, the cockpit's sweeps and the sweep
form all judge a server the same way.  Nothing is sent that the server did not say it takes: a
strict OpenAI-compatible server (vLLM, an older SGLang) may refuse an unknown body field, and a
header it does not read is noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kimitui.events import SWEEP_LABELS, SweepSpec

DEFAULT_LABELS_HEADER = "x-custom-labels"
"""SGLang's default ``--tokenizer-metrics-custom-labels-header`` (0.5.23 ``arg_groups/fields/observability.py``)."""


@dataclass(frozen=True)
class SweepCaps:
    """What a sweep may ask of one server."""

    spec_algorithm: str | None = None
    """The server's speculative algorithm; per-request figures are asked for when set."""
    labels_header: str | None = None
    labels: list[str] = field(default_factory=list)
    """Which of kimitui's :data:`~kimitui.events.SWEEP_LABELS` the server allows."""
    known: bool = True
    """False: no ``/server_info`` read yet (the sweep itself asks it when it starts)."""

    @property
    def spec_details(self) -> bool:
        return self.spec_algorithm is not None

    def describe(self) -> list[str]:
        """Two short lines for the sweep form: labels, then speculative figures."""
        if not self.known:
            return ["labels and speculative figures: the server's /server_info is not read yet; the sweep asks it "
                    "when it starts"]
        if self.labels:
            labels = f"labels: {', '.join(self.labels)} via {self.labels_header} (SGLang's metrics split by sweep and level)"
        else:
            labels = ("labels: this server allows none of kimitui's; add tokenizer_metrics_allowed_custom_labels = "
                      f"[{', '.join(repr(k) for k in SWEEP_LABELS)}] to the profile")
        spec = (f"speculative: {self.spec_algorithm}, per-request accept length asked for"
                if self.spec_algorithm else "speculative: off on this server")
        return [labels, spec]


def sweep_caps(args: Mapping[str, Any] | None) -> SweepCaps:
    """Read ``/server_info``'s args (SGLang 0.5.23 names); an unknown or missing server allows nothing."""
    if not args:
        return SweepCaps(known=args is not None)
    algo = args.get("speculative_algorithm")
    allowed = args.get("tokenizer_metrics_allowed_custom_labels")
    header = args.get("tokenizer_metrics_custom_labels_header")
    if header is None and "tokenizer_metrics_allowed_custom_labels" in args:
        header = DEFAULT_LABELS_HEADER
    labels = [k for k in SWEEP_LABELS if isinstance(allowed, list) and k in allowed]
    return SweepCaps(
        spec_algorithm=str(algo) if isinstance(algo, str) and algo and algo.upper() != "NONE" else None,
        labels_header=str(header) if labels and isinstance(header, str) and header else None,
        labels=labels if isinstance(header, str) and header else [],
    )


def apply_caps(spec: SweepSpec, caps: SweepCaps) -> SweepSpec:
    """``spec`` asking exactly what ``caps`` allows (and nothing a previous server allowed)."""
    return spec.model_copy(update={"spec_details": caps.spec_details, "labels_header": caps.labels_header,
                                   "labels": list(caps.labels)})
