"""Every command kimitui would run, parsed by SGLang 0.5.23's own parser (tests/support/sglang_parser.py).

kimitui renders launch commands itself; the only judge of whether SGLang accepts one is
SGLang.  Every process of every shipped profile (``profiles/`` and the packaged
``kimitui/data/profiles``, rendered by :func:`kimitui.profiles.deploy.deployment`, the
launcher's own function: PD servers and the router included) and the profiles the autopilot
writes (kimitui/tune: each start's default candidates, one and two steps, written by
``variants.write_profile`` and loaded back as a swap would) go through
``prepare_server_args`` / ``parse_router_args`` in ONE process of the parser venv (torch's
import costs seconds).  The known-flags data the simulator and the lint play from
(``kimitui/sglang/flags/sglang-0.5.23.json``) must equal what that parser declares.

Skipped (with the set-up command) where the venv is not built; ``.ci/run`` builds it and sets
``KIMITUI_REQUIRE_SGLANG_PARSER=1``, so in CI these tests always run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kimitui.profiles import Profile, load_profile
from kimitui.profiles.deploy import deployment
from kimitui.profiles.loader import shipped_dir
from kimitui.tune.candidates import default_candidates, parse_change
from kimitui.tune.variants import step_settings, variant_name, write_profile
from tests.support import dev_venv
from tests.support import sglang_parser

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[1]
FLAGS_FILE = REPO / "kimitui" / "sglang" / "flags" / f"sglang-{sglang_parser.SGLANG_VERSION}.json"
DRAFT_MODEL = "/root/models/Kimi-K2.6-DFlash"
"""Known to the autopilot as ``--draft-model``, so its DFLASH candidate is planned too."""
CHANGES = ("cuda_graph_max_bs=128", "enable_expert_distribution_metrics=true")
"""``kimitui tune --change`` steps whose flags SGLang renamed (issue 31): written and parsed like the defaults."""


@dataclass(frozen=True)
class Case:
    """One process of one profile, as SGLang's parser will see it."""

    profile: str
    """Where the profile came from (a file, or the tune step that wrote it)."""
    role: str
    argv: list[str]
    expect_ok: bool = True

    @property
    def request(self) -> dict[str, Any]:
        return sglang_parser.command_of(self.argv)


def _parser_python() -> Path:
    return dev_venv.python_or_skip(sglang_parser.parser_python(), sglang_parser.parser_venv(), "SGLang parser",
                                   "sglang_parser.py", "KIMITUI_REQUIRE_SGLANG_PARSER")


def _cases_of(label: str, profile: Profile) -> list[Case]:
    return [Case(label, spec.role, [str(a) for a in spec.argv]) for spec in deployment(profile)]


def shipped_cases() -> list[Case]:
    """Every process of every profile file in ``profiles/`` and the package's ``data/profiles``."""
    cases: list[Case] = []
    for folder in (REPO / "profiles", shipped_dir()):
        for path in sorted(folder.glob("*.toml")):
            cases += _cases_of(str(path.relative_to(REPO) if path.is_relative_to(REPO) else path),
                               load_profile(str(path)))
    return cases


def autopilot_cases(out: Path) -> list[Case]:
    """The profiles a tune writes: from every shipped start, each default candidate as one step, and
    the first two candidates' families combined (a second step keeps the first's change)."""
    shipped = [load_profile(str(p)) for p in sorted(shipped_dir().glob("*.toml"))]
    cases: list[Case] = []
    for start in shipped:
        cands, _skipped = default_candidates(start, shipped, draft_model=DRAFT_MODEL)
        cands += [parse_change(c) for c in CHANGES]  # an operator's --change steps (graph-bs, expert metrics)
        steps = [step_settings({}, c) for c in cands]
        if len(cands) >= 2:
            steps.append(step_settings(step_settings({}, cands[0]), cands[1]))
        for settings in steps:
            name = variant_name(start.name, settings)
            path = write_profile(out / f"{name}.toml", name, start.name, settings, f"{start.name} + test step")
            cases += _cases_of(f"tune step {name} (written to {path.name})", load_profile(name, [out]))
    return cases


def broken_cases() -> list[Case]:
    """Commands SGLang must refuse: if these pass, the parser is not the one judging."""
    ep8 = load_profile(str(REPO / "profiles" / "ep8.toml"))
    unknown = ep8.model_copy(update={"extra_args": ["--no-such-flag", "1"]})
    py = "python3"
    return [
        *[Case("ep8 + --no-such-flag", c.role, c.argv, expect_ok=False) for c in _cases_of("", unknown)],
        Case("bad choice", "server", [py, "-m", sglang_parser.SERVER_MODULE, "--model-path", "m",
                                      "--load-format", "not-a-format"], expect_ok=False),
        Case("bad int", "server", [py, "-m", sglang_parser.SERVER_MODULE, "--model-path", "m", "--tp-size", "eight"],
             expect_ok=False),
        Case("router unknown flag", "router", [py, "-m", sglang_parser.ROUTER_MODULE, "--pd-disaggregation",
                                               "--decode", "http://127.0.0.1:30020", "--no-such-router-flag"],
             expect_ok=False),
    ]


def deprecated_case() -> Case:
    """A flag 0.5.23 still takes but warns about (``DeprecatedStoreTrueAction``)."""
    return Case("deprecated spelling", "server", ["python3", "-m", sglang_parser.SERVER_MODULE, "--model-path", "m",
                                                  "--dp-size", "2", "--enable-dp-attention"])


def refusals(cases: list[Case], results: list[dict[str, Any]]) -> list[str]:
    """One line per command SGLang refused: the profile, the process and SGLang's own message."""
    return [f"{c.profile} [{c.role}]: {r['error']}" for c, r in zip(cases, results, strict=True) if not r["ok"]]


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case through the venv in one call, and the flags file as the parser declares it."""
    py = _parser_python()
    groups = {"shipped": shipped_cases(), "autopilot": autopilot_cases(tmp_path_factory.mktemp("tune-profiles")),
              "broken": broken_cases(), "deprecated": [deprecated_case()]}
    flat = [c for cases in groups.values() for c in cases]
    answer = sglang_parser.run_in_venv(py, [c.request for c in flat], dump_flags=True)
    results = iter(answer["results"])
    return {"versions": answer["versions"], "flags_json": answer["flags_json"],
            **{name: (cases, [next(results) for _ in cases]) for name, cases in groups.items()}}


def test_the_venv_holds_the_versions_kimitui_renders_for(parsed: dict[str, Any]) -> None:
    assert parsed["versions"]["sglang"] == sglang_parser.SGLANG_VERSION
    assert parsed["versions"]["sglang_router"] == sglang_parser.ROUTER_VERSION


def test_sglang_accepts_every_process_of_every_shipped_profile(parsed: dict[str, Any]) -> None:
    cases, results = parsed["shipped"]
    roles = {c.role for c in cases}
    assert {"server", "node-0", "node-1", "prefill-0", "decode-0", "router"} <= roles  # every deployment shape
    assert len(cases) >= 2 * 16
    assert refusals(cases, results) == []


def test_sglang_accepts_every_profile_the_autopilot_writes(parsed: dict[str, Any]) -> None:
    cases, results = parsed["autopilot"]
    flags = {a for c in cases for a in c.argv}
    assert {"--enable-eplb", "--moe-dense-tp-size", "--speculative-dflash-block-size"} <= flags  # the seeds' steps
    assert {"--cuda-graph-max-bs-decode", "--expert-balancedness-report-mode"} <= flags  # the --change steps
    assert refusals(cases, results) == []


def test_sglang_refuses_what_it_does_not_know_and_the_refusal_names_profile_process_and_message(
        parsed: dict[str, Any]) -> None:
    cases, results = parsed["broken"]
    lines = refusals(cases, results)
    assert len(lines) == len(cases), f"SGLang accepted a command it must refuse: {lines}"
    assert lines[0] == "ep8 + --no-such-flag [server]: sglang serve: error: unrecognized arguments: --no-such-flag 1"
    assert "argument --load-format: invalid choice: 'not-a-format'" in lines[1]
    assert "argument --tp-size/--tensor-parallel-size: invalid int value: 'eight'" in lines[2]
    assert lines[3] == ("router unknown flag [router]: launch_router.py: error: unrecognized arguments: "
                        "--no-such-router-flag")


def test_a_deprecated_flag_is_accepted_with_sglangs_own_warning(parsed: dict[str, Any]) -> None:
    _cases, [result] = parsed["deprecated"]
    assert result["ok"], result["error"]
    assert any("'--enable-dp-attention' is deprecated" in line and "--attn-dp-size" in line for line in result["log"])


def test_the_known_flags_data_is_what_sglangs_parser_declares(parsed: dict[str, Any]) -> None:
    """Regenerate with ``<venv>/bin/python tests/support/sglang_flags_dump.py > kimitui/sglang/flags/...``."""
    assert FLAGS_FILE.read_text() == parsed["flags_json"], (
        f"{FLAGS_FILE.relative_to(REPO)} differs from SGLang {sglang_parser.SGLANG_VERSION}'s parser: regenerate it "
        f"with `$(python3 tests/support/sglang_parser.py where)/bin/python tests/support/sglang_flags_dump.py "
        f"> {FLAGS_FILE.relative_to(REPO)}`")
