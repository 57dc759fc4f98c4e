"""The live controller's parts on their own: the recording handle, the sweep defaults, the quit rule,
the profile book and the swap options (issue 14: one job each, typed)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kimitui.events import Note, SweepSpec
from kimitui.launcher import guard
from kimitui.launcher.swap import DEFAULT_TIMEOUT_S, SwapOptions
from kimitui.live.profiles import ProfileBook
from kimitui.live.quitting import quit_rule, stops_server_on_quit
from kimitui.live.recorder import RecorderHandle
from kimitui.live.sweep_defaults import DEFAULT_LEVELS, SweepDefaults
from kimitui.live.sweeps import guard_notice
from kimitui.profiles import load_profile
from kimitui.recording import read_recording
from kimitui.session import Session
from kimitui.tui.model.cockpit_state import CockpitModel


def test_events_before_the_recording_opens_are_written_first(tmp_path: Path) -> None:
    session, errors = Session(host="sim"), []
    rec = RecorderHandle(session, wanted=True, path=str(tmp_path / "r.jsonl"), on_error=lambda *e: errors.append(e))
    rec.hold_early()
    session.publish(Note(host="sim", text="before"))
    rec.open("sim", "ep8-tuned")
    session.publish(Note(host="sim", text="after"))
    rec.close()
    assert not errors and rec.path is None and rec.last_path is not None
    notes = [e.text for e in read_recording(rec.last_path).events if isinstance(e, Note)]
    assert notes == ["before", "after"]


def test_a_recording_that_cannot_be_written_is_an_error_not_a_raise(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    errors: list[tuple[str, str]] = []
    rec = RecorderHandle(Session(host="sim"), wanted=True, path=str(blocker / "r.jsonl"),
                         on_error=lambda source, message: errors.append((source, message)))
    assert rec.toggle("sim", None) is False
    assert errors and errors[0][0] == "recording" and "cannot record" in errors[0][1]


def test_a_recording_not_wanted_opens_only_when_toggled(tmp_path: Path) -> None:
    rec = RecorderHandle(Session(host="sim"), wanted=False, path=str(tmp_path / "r.jsonl"), on_error=print)
    rec.hold_early()
    rec.open("sim", None)
    assert rec.path is None
    assert rec.toggle("sim", None) is True and rec.path == str(tmp_path / "r.jsonl")
    assert rec.toggle("sim", None) is False and rec.path is None


def test_sweep_defaults_remember_all_but_where_the_sweep_goes(tmp_path: Path) -> None:
    store = SweepDefaults(tmp_path / "state" / "sweep-defaults.json")
    first = store.spec("http://127.0.0.1:1", "m")
    assert first.levels == DEFAULT_LEVELS and first.mode == "sustained" and first.max_tokens == 512
    store.remember(SweepSpec(url="http://elsewhere:2", model="other", levels=[4, 8], max_tokens=64))
    saved = json.loads(store.path.read_text())
    assert "url" not in saved and "model" not in saved
    again = store.spec("http://127.0.0.1:1", "m")
    assert (again.url, again.model, again.levels, again.max_tokens) == ("http://127.0.0.1:1", "m", [4, 8], 64)


def test_sweep_defaults_that_no_longer_validate_fall_back(tmp_path: Path) -> None:
    path = tmp_path / "sweep-defaults.json"
    path.write_text(json.dumps({"levels": "many", "unknown": 1}))
    spec = SweepDefaults(path).spec("http://127.0.0.1:1", "m")
    assert spec.levels == DEFAULT_LEVELS
    path.write_text("not json")
    assert SweepDefaults(path).spec("http://127.0.0.1:1", "m").levels == DEFAULT_LEVELS


def test_the_quit_rule_in_words() -> None:
    real = quit_rule(busy="swap", simulated=False, found_at_start=False, host_name="ct200")
    assert real.startswith("The swap under way is finished or rolled back first") and "ct200 keeps running" in real
    assert "stopped" in quit_rule(busy=None, simulated=True, found_at_start=False, host_name="sim")
    assert "keeps running" in quit_rule(busy="sweep", simulated=True, found_at_start=True, host_name="sim")
    assert stops_server_on_quit(simulated=True, started_here=True, found_at_start=False)
    assert not stops_server_on_quit(simulated=True, started_here=True, found_at_start=True)
    assert not stops_server_on_quit(simulated=False, started_here=True, found_at_start=False)


def test_the_profile_book_puts_the_simulated_host_on_its_port() -> None:
    book = ProfileBook([], sim_port=30123)
    assert book.target("ep8-tuned", simulated=True).port == 30123
    shipped = book.load("ep8-tuned").port
    assert book.target("ep8-tuned", simulated=False).port == shipped
    assert book.at_port("ep8-tuned", None).port == shipped and book.at_port("ep8-tuned", 30999).port == 30999
    assert "ep8-tuned" in book.names()


def test_swap_options_are_frozen_with_the_cockpits_defaults() -> None:
    options = SwapOptions()
    assert (options.timeout, options.rollback_timeout, options.rollback, options.do_warmup) == (
        DEFAULT_TIMEOUT_S, DEFAULT_TIMEOUT_S, True, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.timeout = 1.0  # type: ignore[misc]  # the point: it cannot be changed
    assert dataclasses.replace(options, timeout=5.0).timeout == 5.0



def test_the_guards_sweep_notice_is_a_warning_the_errors_counter_does_not_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep of a confounded change says so first, as a warning: the sweep runs, nothing failed."""
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path))
    guard.mark_baseline("sim", "ep8-tuned")
    event = guard_notice("sim", load_profile("ep8-v2"))
    assert event is not None and event.source == "guard" and event.severity == "warning"
    assert "confounded" in (event.message + event.detail)
    model = CockpitModel()
    model.apply([event])
    assert model.errors == 0 and model.take_notices()[-1].severity == "warning"
    assert guard_notice("sim", load_profile("ep8-tuned")) is None  # the baseline itself: nothing to say
