"""A fleet on screen: one :class:`CockpitModel` per host, the focused one drawn by every panel.

Events name their host; :meth:`FleetModels.apply` folds each into its host's model, so switching
the focus shows a host's whole state at once (nothing is re-read).  A replay's position events
and a drop count concern every host and go to all.  With one host (no fleet) every event goes
to its one model, whatever host it names, exactly as before fleets existed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kimitui.events import Event
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.fold import Notice, Part

BROADCAST_KINDS = frozenset({"replay_state", "dropped"})
"""Events about the session, not one host: every model folds them."""


@dataclass(frozen=True)
class FleetRow:
    """One host on the fleet strip."""

    host: str
    focused: bool
    link: str
    """``connected``, ``lost``, ``reconnecting``, ``failed``, ``connecting``..."""
    profile: str | None
    state: str
    """The profile's state (``serving``, ``starting``, ``rolled_back``...)."""
    gen_tok_s: float | None
    gpus: int
    util_pct: float | None
    """Mean GPU utilisation over the host's GPUs (None: no sample yet)."""
    errors: int
    sweep: str | None
    """``C=16 2/5`` while a sweep runs on the host, else None."""


class FleetModels:
    """Host -> its model, the focus, and the routing of events between them."""

    def __init__(self, hosts: Iterable[str], *, fleet: bool) -> None:
        names = list(hosts) or ["sim"]
        self.fleet = fleet
        """Several hosts (events are routed by host); False: one model takes every event."""
        self.models: dict[str, CockpitModel] = {name: CockpitModel(host=name) for name in names}
        self.focused = names[0]

    @property
    def hosts(self) -> list[str]:
        return list(self.models)

    @property
    def model(self) -> CockpitModel:
        """The focused host's model (what the panels draw)."""
        return self.models[self.focused]

    def focus(self, host: str) -> CockpitModel:
        if host not in self.models:
            raise KeyError(host)
        self.focused = host
        return self.model

    def step(self, by: int) -> str:
        """The host ``by`` places from the focused one, round the fleet."""
        names = self.hosts
        return names[(names.index(self.focused) + by) % len(names)]

    def apply(self, events: Iterable[Event]) -> tuple[set[Part], bool]:
        """Fold a batch: (parts of the focused model to redraw, whether any host's summary may have changed)."""
        if not self.fleet:
            return self.model.apply(events), False
        batches: dict[str, list[Event]] = {}
        for ev in events:
            if ev.kind in BROADCAST_KINDS:
                for name in self.models:
                    batches.setdefault(name, []).append(ev)
                continue
            name = ev.host if ev.host in self.models else self.focused
            batches.setdefault(name, []).append(ev)
        dirty: set[Part] = set()
        for name, batch in batches.items():
            parts = self.models[name].apply(batch)
            if name == self.focused:
                dirty = parts
        return dirty, bool(batches)

    def notices(self) -> list[Notice]:
        """The focused host's notices, and the others' warnings and errors named by host."""
        out = self.model.take_notices()
        for name, model in self.models.items():
            if name == self.focused:
                continue
            for notice in model.take_notices():
                if notice.severity in ("warning", "error"):
                    out.append(Notice(notice.severity, f"{name}: {notice.message}"))
        return out

    def rows(self) -> list[FleetRow]:
        return [self.row(name) for name in self.models]

    def row(self, host: str) -> FleetRow:
        m = self.models[host]
        utils = [g.reading.util_pct for g in m.gpus.values() if g.reading is not None and g.reading.util_pct is not None]
        gen = m.server.get("gen_throughput")
        return FleetRow(
            host=host, focused=host == self.focused, link=m.connection, profile=m.profile, state=m.profile_state,
            gen_tok_s=float(gen) if isinstance(gen, (int, float)) and not isinstance(gen, bool) else None,
            gpus=len(m.gpus), util_pct=sum(utils) / len(utils) if utils else None, errors=m.errors,
            sweep=_sweep_words(m),
        )


def _sweep_words(m: CockpitModel) -> str | None:
    sw = m.sweep
    if sw is None or sw.outcome is not None:
        return None
    if sw.concurrency is None:
        return "sweep starting"
    done = len({lv.concurrency for lv in sw.levels})
    return f"sweep C={sw.concurrency} {done}/{len(sw.spec.levels)}"
