"""Run SGLang's ``bench_serving`` without torch (reference/feasibility.md §6).

``sglang/__init__.py`` and ``sglang.srt.disaggregation.utils`` import torch and
GPU kernels; the benchmark itself needs neither.  Register bare package objects
so those ``__init__`` files are skipped while real submodules still load, stub
the one constant, then hand over to the real CLI.  Bench-only: run it with the
separate venv that ``bench/bench_client.py`` describes, never from tests.
"""

import importlib.util
import os
import sys
import types

_spec = importlib.util.find_spec("sglang")  # finds it without executing it
if _spec is None or _spec.origin is None:
    sys.exit("sglang is not installed in this Python: use the venv bench/bench_client.py describes")
_root = os.path.dirname(_spec.origin)


def _bare_pkg(name: str, path: str) -> None:
    m = types.ModuleType(name)
    m.__path__ = [path]
    m.__package__ = name
    sys.modules[name] = m


for _name, _sub in [("sglang", ""), ("sglang.srt", "srt"), ("sglang.srt.utils", "srt/utils"),
                    ("sglang.srt.disaggregation", "srt/disaggregation")]:
    _bare_pkg(_name, os.path.join(_root, _sub))
_stub = types.ModuleType("sglang.srt.disaggregation.utils")
vars(_stub)["FAKE_BOOTSTRAP_HOST"] = "2.2.2.2"
sys.modules["sglang.srt.disaggregation.utils"] = _stub

from sglang.benchmark.serving import cli_main  # type: ignore[import-not-found]  # noqa: E402  # sglang lives in the bench's own venv

cli_main()
