"""The host supervisor's fatal-line check against the real SGLang 0.5.18 crash logs (issue 31).

The real main process announces a child's death as ``SIGQUIT received. signum=None, ...``, not the
``Received sigquit from a child process`` the older simulator printed; a log whose only fatal sign is
that line (the children's tracebacks went elsewhere) must still be read as a crash.
"""

from __future__ import annotations

from kimitui.launcher.supervisor_host import FATAL, quote_exception
from tests.support.real_sglang import real_output_dir

LOGS = real_output_dir() / "logs"


def _lines(name: str) -> list[str]:
    return (LOGS / name).read_text(errors="replace").splitlines()


def test_the_real_sigquit_line_is_fatal() -> None:
    lines = _lines("tiny-qwen3moe-tp2-ep2-eplb-crash.log")
    sigquit = [line for line in lines if "SIGQUIT received" in line]
    assert sigquit and all(FATAL.search(line) for line in sigquit)
    # the main process's own lines (no "TP0 EP0" prefix) carry only the SIGQUIT line as a fatal sign
    main_only = [line for line in lines if not line.startswith("[") or "] " not in line or " TP" not in line.split("] ")[0]]
    fatal = [i for i, line in enumerate(main_only) if FATAL.search(line)]
    assert fatal and "SIGQUIT received" in main_only[fatal[0]]
    assert quote_exception(main_only, fatal[0]).endswith("It usually means one child failed.")


def test_the_real_crash_log_quotes_the_kernels_error() -> None:
    lines = _lines("tiny-qwen3moe-tp2-ep2-eplb-crash.log")
    fatal = [i for i, line in enumerate(lines) if FATAL.search(line)]
    assert quote_exception(lines, fatal[0]).startswith("RuntimeError: Expected offsets[num_token_blocks] == numel")
    assert any("SIGQUIT received" in lines[i] for i in fatal)


def test_the_recorder_dump_crash_is_fatal_and_quotes_its_error() -> None:
    """Both real servers died on a recorder endpoint: a scheduler traceback, then SIGQUIT."""
    said = {"tiny-llama.log": "Exception: Please set ServerArgs.expert_distribution_recorder_mode to use "
                              "ExpertDistributionRecorder.",  # /start_expert_distribution_record without a mode
            "tiny-qwen3moe.log": "AttributeError: module 'torch.cpu' has no attribute 'empty_cache'"}
    for name, error in said.items():
        lines = _lines(name)
        fatal = [i for i, line in enumerate(lines) if FATAL.search(line)]
        assert any("SIGQUIT received" in lines[i] for i in fatal), name
        assert quote_exception(lines, fatal[0]) == error
