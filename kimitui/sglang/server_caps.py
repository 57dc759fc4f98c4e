"""What a server's ``/server_info`` says a sweep may ask of it: speculative figures, metric labels.

Pure functions over the args dict (no I/O): the sweep command, the cockpit's sweeps and the sweep
form all judge a server the same way.  Nothing is sent that the server did not say it takes: a
strict OpenAI-compatible server (vLLM, an older SGLang) may refuse an unknown body field, and a
header it does not read is noise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kimitui.events import SWEEP_LABELS, SweepSpec

DEFAULT_LABELS_HEADER = "x-custom-labels"
"""SGLang's default ``--tokenizer-metrics-custom-labels-header`` (0.5.23 ``arg_groups/fields/observability.py``)."""

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}")
"""An HTTP header name (RFC 9110 token): the name goes into pre-built request bytes, so a server's odd
setting (a space, a colon, a line break) must not reach them."""


def is_header_name(name: str) -> bool:
    """Whether ``name`` may be written as a header's name as it is."""
    return _HEADER_NAME.fullmatch(name) is not None


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
    bad_header: str | None = None
    """The server's labels header when it is no HTTP header name (no labels are sent then)."""

    @property
    def spec_details(self) -> bool:
        return self.spec_algorithm is not None

    def describe(self) -> list[str]:
        """Two short lines for the sweep form: labels, then speculative figures."""
        if not self.known:
            return ["labels and speculative figures: the server's /server_info is not read yet; the sweep asks it "
                    "when it starts"]
        if self.bad_header is not None:
            labels = (f"labels: none sent, the server's tokenizer_metrics_custom_labels_header "
                      f"{self.bad_header[:40]!r} is no HTTP header name")
        elif self.labels:
            labels = f"labels: {', '.join(self.labels)} via {self.labels_header} (SGLang's metrics split by sweep and level)"
        else:
            labels = ("labels: none sent (this server takes none of kimitui's): kimitui's figures are the same, "
                      "SGLang's own metrics are not split by sweep and level. To have them: a profile of your own "
                      "that extends this one, with tokenizer_metrics_allowed_custom_labels = "
                      f"[{', '.join(repr(k) for k in SWEEP_LABELS)}]")
        spec = (f"speculative: {self.spec_algorithm}, per-request accept length asked for"
                if self.spec_algorithm else "speculative: off on this server")
        return [labels, spec]


def sweep_caps(args: Mapping[str, Any] | None) -> SweepCaps:
    """Read ``/server_info``'s args (SGLang 0.5.23 names); an unknown or missing server allows nothing.

    Labels follow 0.5.23 ``entrypoints/openai/serving_base.py`` ``extract_custom_labels``: the server
    reads them only when ``tokenizer_metrics_allowed_custom_labels`` is set and the header is non-empty,
    and keeps only the allowed names.
    """
    if not args:
        return SweepCaps(known=args is not None)
    algo = args.get("speculative_algorithm")
    spec_algorithm = algo if isinstance(algo, str) and algo and algo.upper() != "NONE" else None
    allowed = args.get("tokenizer_metrics_allowed_custom_labels")
    labels = [k for k in SWEEP_LABELS if isinstance(allowed, list) and k in allowed]
    header = args.get("tokenizer_metrics_custom_labels_header", DEFAULT_LABELS_HEADER)
    if not labels or not isinstance(header, str) or not header:
        return SweepCaps(spec_algorithm=spec_algorithm)
    if not is_header_name(header):
        return SweepCaps(spec_algorithm=spec_algorithm, bad_header=header)
    return SweepCaps(spec_algorithm=spec_algorithm, labels_header=header, labels=labels)


def apply_caps(spec: SweepSpec, caps: SweepCaps) -> SweepSpec:
    """``spec`` asking exactly what ``caps`` allows (and nothing a previous server allowed)."""
    return spec.model_copy(update={"spec_details": caps.spec_details, "labels_header": caps.labels_header,
                                   "labels": list(caps.labels)})
