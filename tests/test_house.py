"""The house rules, checked on every run: the layering, the type checker, short functions.

These read kimitui's own files (ast, not regexes over text), so a rule broken anywhere in
``kimitui/`` fails here with the file, line and what to do.  The layering is the picture in
../shared/DESIGN.md: sources (telemetry, loadgen, launcher, replay) -> the session (events,
session) -> consumers (recording, analysis, report, tui); the command line opens the TUI.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kimitui"
MAX_FUNCTION_LINES = 80

STDLIB = set(sys.stdlib_module_names)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # what it imports, dotted (absolute)
    line: int
    path: Path
    local: bool  # inside a function body


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    module = _module_name(path)
    found: list[Import] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend(Import(module, a.name, child.lineno, path, local) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.append(Import(module, child.module, child.lineno, path, local))
            visit(child, inner)

    visit(tree, False)
    return found


@functools.cache  # every rule reads the same tree: parse it once per run (each parse took ~10 s on a busy CI)
def _all_imports() -> tuple[Import, ...]:
    return tuple(imp for path in sorted(PACKAGE.rglob("*.py")) for imp in _imports(path))


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _where(imp: Import) -> str:
    return f"{imp.path.relative_to(ROOT)}:{imp.line} imports {imp.target}"


def test_only_the_commands_that_open_it_import_the_tui() -> None:
    openers = {"kimitui.commands.run", "kimitui.commands.replay"}
    bad = [_where(i) for i in _all_imports()
           if _within(i.target, "kimitui.tui") and not _within(i.module, "kimitui.tui") and i.module not in openers]
    assert not bad, "only `kimitui run` and `kimitui replay` open the TUI:\n" + "\n".join(bad)


def test_only_the_command_line_composes_the_live_cockpit() -> None:
    allowed = ("kimitui.live", "kimitui.commands", "kimitui.cli")
    bad = [_where(i) for i in _all_imports()
           if _within(i.target, "kimitui.live") and not any(_within(i.module, a) for a in allowed)]
    assert not bad, "kimitui.live composes the sources for `kimitui run`; the TUI sees it only as a Controller:\n" + "\n".join(bad)


def test_textual_and_rich_stay_in_the_tui_and_the_command_line() -> None:
    allowed = ("kimitui.tui", "kimitui.commands", "kimitui.cli")
    bad = [_where(i) for i in _all_imports()
           if i.target.split(".")[0] in ("textual", "rich", "textual_plot")
           and not any(_within(i.module, a) for a in allowed)]
    assert not bad, "domain code never draws (move the drawing to tui/ or commands/):\n" + "\n".join(bad)


DRAWING = ("textual", "rich", "textual_plot", "textual_hires_canvas")
"""What draws on a terminal: the cockpit's view model (``kimitui.tui.model``) imports none of it."""


def test_the_cockpit_model_imports_neither_textual_nor_rich() -> None:
    model = "kimitui.tui.model"
    bad = [_where(i) for i in _all_imports()
           if _within(i.module, model)
           and (i.target.split(".")[0] in DRAWING or (_within(i.target, "kimitui.tui") and not _within(i.target, model)))]
    assert not bad, ("kimitui/tui/model/ is what the panels show, as plain data: it imports neither textual nor rich, "
                     "nor the widgets, screens or paint beside it (move the drawing to tui/renderables/ or the widget):\n"
                     + "\n".join(bad))


def test_the_domain_never_imports_the_command_line_or_the_cockpit_composition() -> None:
    upper = ("kimitui.commands", "kimitui.cli", "kimitui.tui", "kimitui.__main__")
    bad = [_where(i) for i in _all_imports()
           if any(_within(i.target, u) for u in upper)
           and not any(_within(i.module, u) for u in upper)]
    assert not bad, "\n".join(bad)


SOURCES = ("kimitui.telemetry", "kimitui.loadgen", "kimitui.launcher", "kimitui.replay")
CONSUMERS = ("kimitui.report", "kimitui.tui", "kimitui.recording.writer")
"""``kimitui.analysis`` is pure functions over events (a level's statistics, windows): sources use it too."""


def test_sources_never_import_consumers() -> None:
    bad = [_where(i) for i in _all_imports()
           if any(_within(i.module, s) for s in SOURCES) and any(_within(i.target, c) for c in CONSUMERS)]
    assert not bad, "a source publishes events; it never reads a consumer:\n" + "\n".join(bad)


def test_analysis_and_the_session_depend_only_on_events() -> None:
    base = ("kimitui.events", "kimitui.session", "kimitui.analysis")
    formats = "kimitui.sglang"  # pure, below every layer: how a log line's kinds and fields read
    bad = [_where(i) for i in _all_imports()
           if any(_within(i.module, m) for m in base) and _within(i.target, "kimitui")
           and not any(_within(i.target, m) for m in base)
           and not (_within(i.module, "kimitui.analysis") and _within(i.target, formats))]
    assert not bad, "\n".join(bad)


SGLANG_MAY_IMPORT = ("kimitui.sglang", "kimitui.events", "kimitui.knobs")
"""``kimitui.knobs`` is the pure rule of which setting names are knobs and secrets (it imports nothing of kimitui)."""


def test_the_sglang_package_imports_only_events_and_the_knob_rules() -> None:
    bad = [_where(i) for i in _all_imports()
           if _within(i.module, "kimitui.sglang") and _within(i.target, "kimitui")
           and not any(_within(i.target, m) for m in SGLANG_MAY_IMPORT)]
    assert not bad, ("kimitui.sglang holds SGLang's formats, below every layer: it imports only "
                     f"{', '.join(SGLANG_MAY_IMPORT)}:\n" + "\n".join(bad))


def test_the_launcher_and_telemetry_do_not_import_each_other() -> None:
    pair = ("kimitui.launcher", "kimitui.telemetry")
    bad = [_where(i) for i in _all_imports()
           for a, b in (pair, pair[::-1]) if _within(i.module, a) and _within(i.target, b)]
    assert not bad, ("what both need of SGLang lives in kimitui.sglang; what composes them lives in "
                     "kimitui.live:\n" + "\n".join(bad))


HOST_NEVER_IMPORTS = ("kimitui.config", "kimitui.sim")
"""The host room knows no caller: the config's tables become host plans in ``kimitui.hosts_from_config``,
and the simulator's own builder is passed in."""


def test_the_host_room_imports_neither_the_config_nor_the_simulator() -> None:
    bad = [_where(i) for i in _all_imports()
           if _within(i.module, "kimitui.host") and any(_within(i.target, t) for t in HOST_NEVER_IMPORTS)]
    assert not bad, ("kimitui.host builds hosts from what its caller resolved (kimitui.host.factory.HostPlan); "
                     "resolve the config, and inject the simulator's builder, outside it:\n" + "\n".join(bad))


def test_the_nvml_agent_imports_only_the_standard_library_and_pynvml() -> None:
    agent = PACKAGE / "telemetry" / "agent.py"
    bad = []
    for imp in _imports(agent):
        top = imp.target.split(".")[0]
        if top in STDLIB or top == "pynvml" or imp.target == "__future__":
            continue
        if imp.target in ("kimitui.sim.nvml", "kimitui.sim") and imp.local:  # fake mode only, on the simulated host
            continue
        bad.append(_where(imp))
    assert not bad, "the agent runs on the GPU host with a bare python3:\n" + "\n".join(bad)


def _functions(path: Path) -> list[tuple[int, str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(n.end_lineno - n.lineno + 1, n.name, n.lineno) for n in ast.walk(tree)  # type: ignore[operator]  # end_lineno is set by ast.parse
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_function_is_longer_than_80_lines() -> None:
    long = [f"{path.relative_to(ROOT)}:{line} {name}: {n} lines"
            for path in sorted(PACKAGE.rglob("*.py")) for n, name, line in _functions(path) if n > MAX_FUNCTION_LINES]
    assert not long, f"split these into functions of at most {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, text in enumerate(path.read_text().splitlines(), 1):
            m = IGNORE.search(text)
            if m and (not m.group("codes") or not re.match(r"\s*(#|\()\s*\S", m.group("rest"))):
                bad.append(f"{path.relative_to(ROOT)}:{number}: {text.strip()}")
    assert not bad, "write `# type: ignore[code]  # why`:\n" + "\n".join(bad)


def test_mypy_finds_no_error_in_the_package(tmp_path: Path) -> None:
    from mypy import api  # the test extra pins it; a missing mypy is a failure, not a skip

    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path),
                                "--no-error-summary", str(PACKAGE)])
    assert status == 0, f"mypy (config in pyproject.toml):\n{out}{err}"


DOTTED = re.compile(r"kimitui(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FILE_PATH = re.compile(r"kimitui/[A-Za-z0-9_/]+\.py")


def _resolves(name: str) -> bool:
    """``kimitui.a.b.C.d``: the longest importable module prefix, then attributes (or pydantic fields)."""
    import importlib
    import importlib.util

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if module.endswith("__main__"):
            return True  # importing it would start the app
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            continue
        obj: object = importlib.import_module(module)
        for attr in parts[i:]:
            fields = getattr(obj, "model_fields", {})
            if attr in fields:
                return True
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_name_the_docs_and_docstrings_cite_exists() -> None:
    texts = [*sorted(PACKAGE.rglob("*.py")), *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md",
             *sorted((ROOT / "tests" / "support").glob("*.py"))]
    bad = []
    for path in texts:
        text = path.read_text()
        for name in sorted(set(DOTTED.findall(text))):
            if not _resolves(name.rstrip(".")):
                bad.append(f"{path.relative_to(ROOT)}: {name}")
        for file in sorted(set(FILE_PATH.findall(text))):
            if not (ROOT / file).exists():
                bad.append(f"{path.relative_to(ROOT)}: {file}")
    assert not bad, "names that do not exist (renamed or removed?):\n" + "\n".join(bad)
