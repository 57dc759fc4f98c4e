"""``kimitui capacity``: the highest load at which an SLO holds, found by a bracketing search.

* :mod:`kimitui.capacity.slo` - the SLO grammar and its check on a level's requests;
* :mod:`kimitui.capacity.search` - the search (pure over a ``measure`` callback) and the
  same answer read off an ordinary sweep's levels;
* :mod:`kimitui.capacity.answer` - probes, curve points, goodput and the answer's sentence;
* :mod:`kimitui.capacity.probe` - one point measured live (a one-level sweep) or taken from a recording.
"""

from kimitui.capacity.answer import CapacityAnswer, CurvePoint, Probe
from kimitui.capacity.search import SearchParams, capacity_from_levels, find_capacity
from kimitui.capacity.slo import Slo, SloCheck, SloError, parse_slo

__all__ = ["CapacityAnswer", "CurvePoint", "Probe", "SearchParams", "Slo", "SloCheck", "SloError",
           "capacity_from_levels", "find_capacity", "parse_slo"]
