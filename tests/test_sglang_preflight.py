"""The host's own SGLang asked before a swap stops anything: the parser played from data, the script, the answer.

Pure parts here (the argparse walk over 0.5.23's dumped options, the script run under a Python
without SGLang, the reading of its answer); the swaps on the simulated host are in
tests/test_sglang_preflight_swap.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kimitui.profiles import deployment, lint_profile, load_profile
from kimitui.profiles.render import knob_args
from kimitui.sglang.flag_check import FlagSpec, KnownFlags, known_flags, refusal, unknown_flags
from kimitui.sglang.preflight import SCRIPT, ProcessArgs, process_args, read_answer, request


def flags_0523() -> KnownFlags:
    flags = known_flags("0.5.23")
    assert flags is not None, "kimitui/sglang/flags/sglang-0.5.23.json ships with kimitui"
    return flags


def test_every_shipped_profile_parses_with_0_5_23s_options() -> None:
    from kimitui.profiles.loader import scan_profiles

    profiles, _broken = scan_profiles()
    assert len(profiles) >= 10
    for p in profiles:
        for spec in deployment(p):
            checked = process_args(spec.role, spec.argv)
            if checked is not None and checked.kind == "server":
                assert refusal(flags_0523(), checked.args) == "", (p.name, spec.role)


@pytest.mark.parametrize(("extra", "message"), [
    (["--no-such-flag"], "sglang serve: error: unrecognized arguments: --no-such-flag"),
    (["--expert-balancedness-report-mode", "loud"],
     "sglang serve: error: argument --expert-balancedness-report-mode: invalid choice: 'loud' "
     "(choose from 'off', 'server_log', 'prometheus', 'both')"),
    (["--max-running-requests"], "sglang serve: error: argument --max-running-requests: expected one argument"),
    (["--max-running-requests", "many"],
     "sglang serve: error: argument --max-running-requests: invalid int value: 'many'"),
    (["--enable-metrics=yes"], "sglang serve: error: argument --enable-metrics: ignored explicit argument 'yes'"),
    (["stray"], "sglang serve: error: unrecognized arguments: stray"),
])
def test_what_0_5_23s_parser_refuses_is_refused_in_its_words(extra: list[str], message: str) -> None:
    """The messages are what SGLang 0.5.23's own argparse printed for the same argument lists."""
    argv = knob_args(load_profile("ep8-tuned"))
    assert refusal(flags_0523(), argv) == ""
    assert refusal(flags_0523(), [*argv, *extra]) == message


def test_argparse_forms_the_walk_knows() -> None:
    flags = flags_0523()
    assert refusal(flags, ["--model-path", "m", "--chunked-prefill-size=-1"]) == ""  # a negative value after '='
    assert refusal(flags, ["--model-path", "m", "--num-continuous", "4"]) == ""  # a unique prefix, as argparse allows
    assert refusal(flags, ["--tp-size", "8"]) == ("sglang serve: error: the following arguments are required: "
                                                   "--model-path/--model")
    ambiguous = refusal(flags, ["--model-path", "m", "--enable-m"])
    assert ambiguous.startswith("sglang serve: error: ambiguous option: --enable-m could match --enable-")
    assert unknown_flags(flags, ["--model-path", "m", "--no-such-flag", "1", "--bogus=2", "--no-such-flag"]) == [
        "--no-such-flag", "--bogus"]


def test_nargs_and_choices_from_data() -> None:
    flags = KnownFlags("x", (FlagSpec(("--pair",), True, nargs=2), FlagSpec(("--many",), True, nargs="+"),
                             FlagSpec(("--mode", "-m"), True, choices=("a", "b")), FlagSpec(("--on",), False)))
    assert refusal(flags, ["--pair", "1", "2", "--many", "x", "y", "--mode", "b", "--on"]) == ""
    assert refusal(flags, ["--pair", "1", "--on"]) == "sglang serve: error: argument --pair: expected 2 arguments"
    assert refusal(flags, ["--many", "--on"]) == "sglang serve: error: argument --many: expected at least one argument"
    assert "argument --mode/-m: invalid choice: 'c'" in refusal(flags, ["--mode", "c"])


def test_the_lint_names_flags_0_5_23_does_not_know_and_the_deprecated_no_op(tmp_path) -> None:
    prof = tmp_path / "odd.toml"
    prof.write_text('name = "odd"\nextends = "ep8-tuned"\nextra_args = ["--log-level", "info", "--no-such-flag"]\n')
    issues = lint_profile(load_profile(str(prof)))
    unknown = [i for i in issues if i.field == "extra_args[2]"]
    assert [i.severity for i in unknown] == ["warning"]
    assert "--no-such-flag is not a flag of SGLang 0.5.23" in unknown[0].message
    (cont,) = [i for i in issues if i.field == "num_continuous_decode_steps"]
    assert cont.severity == "warning" and "deleting the flag" in cont.message and "parser refuses it" in cont.message
    assert not [i for i in lint_profile(load_profile("ep8-tuned")) if "is not a flag of SGLang" in i.message]
    prof.write_text('name = "odd"\nextends = "ep8-tuned"\nextra_args = ["--enable-flashinfer-allreduce-fusion"]\n')
    (old,) = [i for i in lint_profile(load_profile(str(prof))) if i.field == "extra_args[0]"]
    assert old.severity == "warning" and "is deprecated in SGLang 0.5.23" in old.message


def test_the_script_under_a_python_without_sglang_says_so() -> None:
    """This venv has no SGLang: the real script answers that, it does not fail."""
    good = process_args("server", deployment(load_profile("ep8-tuned"))[0].argv)
    assert good is not None and good.kind == "server" and good.args[:2] == ("--model-path", "/root/models/Kimi-K2.6")
    res = subprocess.run([sys.executable, "-c", SCRIPT], input=request([good]), capture_output=True, text=True,
                         timeout=120)
    answer = read_answer(res.stdout, res.stderr, res.returncode)
    assert res.returncode == 0 and answer.checks == () and answer.refusals("p") == []
    assert answer.problem.startswith(f"no SGLang in {sys.executable}")
    assert answer.warnings("p") == [f"the host's SGLang could not check p's command ({answer.problem}); going on unchecked"]


def test_the_simulated_host_plays_0_5_23_in_the_same_script() -> None:
    good = process_args("server", deployment(load_profile("ep8-tuned"))[0].argv)
    assert good is not None
    bad = ProcessArgs("decode-0", "server", (*good.args, "--no-such-flag"))
    router_args = ("--pd-disaggregation", "--prefill", "http://127.0.0.1:1", "8998", "--decode", "http://127.0.0.1:2",
                   "--host", "127.0.0.1", "--port", "3")
    router = ProcessArgs("router", "router", router_args)
    bad_router = ProcessArgs("router-b", "router", (*router_args, "--policy", "fastest"))
    res = subprocess.run([sys.executable, "-c", SCRIPT],
                         input=request([good, bad, router, bad_router], simulated=True),
                         capture_output=True, text=True, timeout=120)
    answer = read_answer(res.stdout, res.stderr, res.returncode)
    assert answer.version == "0.5.23 (simulated)", res.stderr
    assert [(c.role, c.verdict) for c in answer.checks] == [
        ("server", "ok"), ("decode-0", "refused"), ("router", "ok"), ("router-b", "refused")]
    assert answer.refusals("pd")[0] == ("SGLang 0.5.23 (simulated) on the host refuses pd decode-0: "
                                        "sglang serve: error: unrecognized arguments: --no-such-flag")
    assert "launch_router.py: error: argument --policy: invalid choice: 'fastest'" in answer.refusals("pd")[1]


def test_an_answer_that_is_not_one_is_a_problem_not_a_refusal() -> None:
    crashed = read_answer("", "Traceback ...\nRuntimeError: CUDA init\n", 1)
    assert crashed.problem.startswith("the check printed no answer (exit 1)") and "CUDA init" in crashed.problem
    assert crashed.refusals("p") == [] and crashed.warnings("p")
    missing = read_answer("", "/opt/venv/bin/python: command not found\n", 127)
    assert "command not found" in missing.problem


def test_cuda_graph_max_bs_renders_the_decode_flag_0_5_23_accepts() -> None:
    """0.5.23 split ``--cuda-graph-max-bs`` into ``-decode``/``-prefill`` and refuses the old flag as ambiguous:
    the knob (the largest captured decode batch) renders ``--cuda-graph-max-bs-decode``, which the parser takes
    and the lint does not flag; the old spelling in extra_args is still named, and the simulated host refuses it."""
    from kimitui.profiles import Profile
    from kimitui.sim.settings import SimConfigError, check_flags

    p = Profile(name="t", model_path="/m", cuda_graph_max_bs=128)
    args = knob_args(p)
    assert args[args.index("--cuda-graph-max-bs-decode") + 1] == "128" and "--cuda-graph-max-bs" not in args
    assert refusal(flags_0523(), args) == ""
    assert not [i for i in lint_profile(p) if "is not a flag of SGLang" in i.message]
    check_flags(p)  # the simulated host accepts it
    old = Profile(name="t", model_path="/m", extra_args=["--cuda-graph-max-bs", "128"])
    (warning,) = [i for i in lint_profile(old) if "is not a flag of SGLang" in i.message]
    assert warning.field == "extra_args[0]" and "ambiguous option: --cuda-graph-max-bs could match" in warning.message
    with pytest.raises(SimConfigError, match="ambiguous option: --cuda-graph-max-bs could match"):
        check_flags(old)


def test_the_simulated_answers_are_the_real_0_5_23_answers() -> None:
    """The same request to the real SGLang 0.5.23 and sglang_router (tests/support/sglang_parser.py's venv)
    and to the simulated host: the same verdict and the same message for every process."""
    from tests.support.sglang_parser import parser_python, required

    python = parser_python()
    if python is None:
        if required():
            pytest.fail("the SGLang parser venv is required here (KIMITUI_REQUIRE_SGLANG_PARSER=1) but not built")
        pytest.skip("no SGLang parser venv (tests/support/sglang_parser.py setup builds it)")
    server = process_args("server", deployment(load_profile("ep8-tuned"))[0].argv)
    assert server is not None
    router = ("--pd-disaggregation", "--prefill", "http://127.0.0.1:1", "8998", "--decode", "http://127.0.0.1:2",
              "--host", "127.0.0.1", "--port", "3")
    processes = [server, ProcessArgs("unknown", "server", (*server.args, "--no-such-flag")),
                 ProcessArgs("choice", "server", (*server.args, "--schedule-policy", "newest-first")),
                 ProcessArgs("missing", "server", (*server.args, "--max-running-requests")),
                 ProcessArgs("ambiguous", "server", (*server.args, "--cuda-graph-max-bs", "8")),
                 ProcessArgs("router", "router", router),
                 ProcessArgs("router-bad", "router", (*router, "--policy", "fastest"))]
    answers = {}
    for simulated, py in ((False, str(python)), (True, sys.executable)):
        res = subprocess.run([py, "-c", SCRIPT], input=request(processes, simulated=simulated), capture_output=True,
                             text=True, timeout=300)
        answers[simulated] = read_answer(res.stdout, res.stderr, res.returncode)
    real, played = answers[False], answers[True]
    assert real.version == "0.5.23" and played.version == "0.5.23 (simulated)", real.problem
    assert [(c.role, c.verdict) for c in real.checks] == [
        ("server", "ok"), ("unknown", "refused"), ("choice", "refused"), ("missing", "refused"),
        ("ambiguous", "refused"), ("router", "ok"), ("router-bad", "refused")]
    assert real.checks == played.checks


def test_an_sglang_without_num_continuous_decode_steps_refuses_the_seeds_profiles() -> None:
    """Upstream's open change deletes the no-op flag: the same parser less that one option refuses ep8-tuned,
    which the preflight would then report before stopping anything."""
    flags = flags_0523()
    (cont,) = [s for s in flags.specs if "--num-continuous-decode-steps" in s.names]
    assert cont.deprecated and "Deletion pending upstream" in cont.deprecated
    without = KnownFlags("next", tuple(s for s in flags.specs if s is not cont))
    argv = knob_args(load_profile("ep8-tuned"))
    assert refusal(flags, argv) == ""
    assert refusal(without, argv) == "sglang serve: error: unrecognized arguments: --num-continuous-decode-steps 8"
