"""The loop: measure the start, then per candidate swap, sweep (again while unsure), judge, keep or revert.

Every phase is saved before it begins (:mod:`.state`), so a tune killed anywhere resumes with the
undecided step redone from its swap, and the best so far is what it swaps back to.  It ends with
the best known-good profile serving, always: a candidate that fails to start is rolled back by the
swap itself; one that is not kept is swapped back; a skip, a stop or an interrupt swaps back too.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Literal

from kimitui.events import Marker, SweepSpec, TuneProgress, TuneStepView
from kimitui.profiles import load_profile
from kimitui.report.sweep_summary import SweepRun, pick_sweep, summarize
from kimitui.tune import report
from kimitui.tune import state as store
from kimitui.tune.host import Latest, TuneAborted, TuneHost, measure, refresh_server_info, swap_to
from kimitui.tune.state import Measured, StepRecord, StepStatus, TuneState
from kimitui.tune.steps import StepJudgement, judge_step, merge_runs, remeasure_spec
from kimitui.tune.variants import materialize, step_settings


class TuneFailed(Exception):
    """The host cannot serve the best profile again: a human must look (the state says where it stood)."""


class Tuner:
    """Runs one tune's plan on a host; :meth:`pause`, :meth:`skip`, :meth:`stop` steer it meanwhile."""

    def __init__(self, host: TuneHost, state: TuneState, directory: Path) -> None:
        self.host = host
        self.state = state
        self.dir = directory
        self.latest = Latest()
        self._abort = asyncio.Event()
        self._resume = asyncio.Event()
        self._resume.set()
        self._skip = False
        self._stop: Literal["stopped", "interrupted"] | None = None
        """``stopped`` (the operator's stop: final) or ``interrupted`` (Ctrl-C, a lost cockpit: resumable)."""
        self._began = time.monotonic()
        self._serving: str | None = None
        self._best_run: SweepRun | None = None

    # ------------------------------------------------------------------ steering
    def pause(self) -> None:
        """Finish the phase under way, then wait (a sweep is not cut: its figures would be wasted)."""
        self._resume.clear()
        self._publish("paused")

    def unpause(self) -> None:
        self._resume.set()
        self._publish()

    def skip(self) -> None:
        """Give up the step under way: its sweep stops, the best serves again, the next step follows."""
        self._skip = True
        self._abort.set()

    def stop(self, how: Literal["stopped", "interrupted"] = "stopped") -> None:
        """End the tune now: the best so far serves again; ``interrupted`` leaves it resumable."""
        self._stop = how
        self._abort.set()
        self._resume.set()

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    # ------------------------------------------------------------------ the loop
    async def run(self) -> TuneState:
        st = self.state
        st.status = "running"
        self._serving = self.host.running_profile
        forget = self.host.session.add_sink(self.latest)
        self._save()
        try:
            await self._measure_start()
            while self._stop is None and (step := st.current) is not None:
                if (why := self._limit()) is not None:
                    st.note = why
                    break
                await self._resume.wait()
                if self._stop is None:
                    await self._step(step)
            await self._serve_best()
            st.status = "finished" if self._stop is None else self._stop
            if self._stop is not None and not st.note:
                st.note = f"{self._stop} by the operator" if self._stop == "stopped" else "interrupted"
        except TuneFailed as exc:
            st.status, st.note = "failed", str(exc)
        finally:
            forget()  # a second tune in the same cockpit session adds its own
            if st.status != "running":
                report.write(st, self.dir, self.host.profile_dirs)
            self._save()
        return st

    def _limit(self) -> str | None:
        st, plan = self.state, self.state.plan
        decided = sum(1 for s in st.steps if s.status in ("kept", "reverted", "failed"))
        if plan.max_steps is not None and decided >= plan.max_steps:
            return f"stopped at --max-steps {plan.max_steps}"
        if plan.time_budget_s is not None:
            per_step = self._step_seconds()
            if self._elapsed() + per_step > plan.time_budget_s:
                return (f"stopped at the time budget: {self._elapsed():.0f} s spent, a step takes about "
                        f"{per_step:.0f} s, {plan.time_budget_s:.0f} s allowed")
        return None

    def _step_seconds(self) -> float:
        done = [s.ended - s.started for s in self.state.steps if s.started is not None and s.ended is not None]
        return sum(done) / len(done) if done else 0.0

    def _elapsed(self) -> float:
        return self.state.elapsed_s + (time.monotonic() - self._began)

    async def _measure_start(self) -> None:
        """The start's sweep, once per tune (a resumed tune reads the best's sweeps back)."""
        st = self.state
        if st.best_runs:
            self._best_run = merge_runs([_read(m) for m in st.best_runs])
            return
        st.best = st.best or st.plan.start
        self._marker(f"tune {st.tune_id}: measuring the start, {st.best}")
        await self._serve(st.best, fatal=True)
        try:
            run, measured = await self._sweep(f"start-r0", {"step": "start"})
        except TuneAborted:
            return
        st.best_runs = [measured]
        self._best_run = run
        self._save()

    async def _step(self, step: StepRecord) -> None:
        st = self.state
        start = load_profile(st.plan.start, self.host.profile_dirs)
        step.status, step.started, step.runs, step.against = "running", time.time(), [], st.best
        settings = step_settings(st.best_settings, step.candidate)
        existing = step.candidate.source.removeprefix("profile ") if step.candidate.source.startswith("profile ") else None
        step.profile = materialize(start, settings, step.candidate.label, self.host.profile_dirs, existing)
        self._phase(step, "swapping")
        self._marker(f"tune step {step.index}: {step.candidate.label} ({step.profile}) against {st.best}")
        switch = await swap_to(self.host, step.profile)
        st.swaps += 1
        self._serving = step.profile if switch.outcome == "ok" else switch.from_profile if switch.outcome == "rolled_back" else None
        if switch.outcome != "ok":
            self._decide(step, "failed", f"{step.profile} did not start: {switch.reason or switch.outcome}"
                         + (f"; {switch.from_profile} rolled back" if switch.outcome == "rolled_back" else ""))
            await self._serve_best()
            return
        await self._measure_step(step, settings)

    async def _measure_step(self, step: StepRecord, settings: dict[str, object]) -> None:
        st = self.state
        runs: list[SweepRun] = []
        judgement: StepJudgement | None = None
        try:
            for r in range(st.plan.repeat_limit):
                spec = st.plan.workload
                if judgement is not None:  # unsure: measure again where the noise is
                    spec = remeasure_spec(st.plan.workload, judgement, st.plan.objective)
                    self._marker(f"tune step {step.index}: unsure ({judgement.unsure}); sweeping again at "
                                 f"C={','.join(map(str, spec.levels))}"
                                 + (f" with {spec.requests_per_level} requests per level" if spec.requests_per_level
                                    else ""))
                self._phase(step, "sweeping" if r == 0 else f"sweeping again ({r + 1} of at most {st.plan.repeat_limit})")
                run, measured = await self._sweep(f"step-{step.index:02d}-r{r}", {"step": step.index, "repeat": r},
                                                  spec)
                runs.append(run)
                step.runs.append(measured)
                assert self._best_run is not None
                judgement = judge_step(self._best_run, merge_runs(runs), st.plan.objective, slo=st.plan.slo,
                                       rates=st.plan.cost_rates())
                if judgement.decided:
                    break
        except TuneAborted:
            if self._skip:
                self._skip = False
                self._abort.clear()
                self._decide(step, "skipped", "skipped by the operator")
            else:
                step.status, step.phase, step.runs = "pending", "", []  # redone on resume
                self._save()
            await self._serve_best()
            return
        assert judgement is not None
        self._conclude(step, judgement, runs, settings)
        if step.status != "kept":
            await self._serve_best()

    def _conclude(self, step: StepRecord, j: StepJudgement, runs: list[SweepRun], settings: dict[str, object]) -> None:
        st = self.state
        step.verdict = j.comparison.verdict
        step.objective_change, step.level_lines, step.cause = j.objective_change, j.level_lines, j.cause
        n = len(runs)
        sweeps = f"{n} sweep{'s' if n != 1 else ''}"
        where = f"; {j.where}" if j.where else ""
        if j.decision == "better":
            st.best, st.best_settings, st.best_runs = step.profile or st.best, dict(settings), list(step.runs)
            self._best_run = merge_runs(runs)
            self._decide(step, "kept", f"better beyond noise after {sweeps}{where}")
            return
        why = {"worse": "worse beyond noise", "same": "the same within ±5 % (it buys nothing)",
               "unsure": f"not judged: still unsure after {sweeps} (the repeat limit): {j.unsure}",
               "not_comparable": j.objective_change}[j.decision]
        self._decide(step, "reverted", f"{why}{where}")

    def _decide(self, step: StepRecord, status: StepStatus, reason: str) -> None:
        step.status, step.reason, step.phase, step.ended = status, reason, "", time.time()
        self._marker(f"tune step {step.index}: {status}: {reason}")
        self._save()

    # ------------------------------------------------------------------ on the host
    async def _sweep(self, name: str, meta: dict[str, object],
                     workload: SweepSpec | None = None) -> tuple[SweepRun, Measured]:
        url, model = self.host.sweep_target()
        workload = workload or self.state.plan.workload
        spec = workload.model_copy(update={"url": url, "model": workload.model or model})
        await refresh_server_info(self.host, url)
        path = self.dir / f"{name}.jsonl.gz"
        for n in range(2, 100):  # a step redone after a resume keeps the interrupted attempt's recording
            if not path.exists():
                break
            path = self.dir / f"{name}-{n}.jsonl.gz"
        run = await measure(self.host, spec, path, self.latest, {"tune_id": self.state.tune_id, **meta}, self._abort)
        self.state.sweeps += 1
        peak = run.peak
        return run, Measured(path=str(path), sweep_id=run.sweep_id, peak_c=peak[0] if peak else None,
                             peak_tok_s=peak[1] if peak else None)

    async def _serve_best(self) -> None:
        await self._serve(self.state.best, fatal=True)

    async def _serve(self, profile: str, *, fatal: bool) -> None:
        if self.host.running_profile == profile and self._serving in (profile, None):
            self._serving = profile
            return
        self._publish(phase=f"swapping back to {profile}")
        switch = await swap_to(self.host, profile)
        self.state.swaps += 1
        if switch.outcome == "ok":
            self._serving = profile
        elif fatal:
            raise TuneFailed(f"{profile} does not serve again on {self.host.host_name}: {switch.reason or switch.outcome}")

    # ------------------------------------------------------------------ what the operator sees
    def _phase(self, step: StepRecord, phase: str) -> None:
        step.phase = phase
        self._save()

    def _marker(self, label: str) -> None:
        self.host.session.publish(Marker(host=self.host.host_name, label=label))

    def _save(self) -> None:
        self.state.elapsed_s += time.monotonic() - self._began
        self._began = time.monotonic()
        store.save(self.state, self.dir)
        self._publish()

    def _publish(self, status: str | None = None, phase: str | None = None) -> None:
        self.host.session.publish(progress_event(self.state, self.host.host_name, status=status, phase=phase))


def progress_event(st: TuneState, host: str, *, status: str | None = None, phase: str | None = None) -> TuneProgress:
    cur = st.current
    return TuneProgress(
        host=host, tune_id=st.tune_id, status=status or st.status, start=st.plan.start, best=st.best or st.plan.start,
        objective=st.plan.objective, step=cur.index if cur is not None and cur.status == "running" else None,
        phase=phase if phase is not None else (cur.phase if cur is not None else ""),
        steps=[TuneStepView(index=s.index, label=s.candidate.label, profile=s.profile, status=s.status, phase=s.phase,
                            objective_change=s.objective_change, cause=s.cause, reason=s.reason) for s in st.steps],
        skipped=list(st.plan.skipped), note=st.note, elapsed_s=st.elapsed_s)


def _read(m: Measured) -> SweepRun:
    return pick_sweep(summarize(m.path), m.sweep_id)


def new_state(tune_id: str, host: str, plan: store.TunePlan) -> TuneState:
    steps = [StepRecord(index=i + 1, candidate=c) for i, c in enumerate(plan.candidates)]
    return TuneState(tune_id=tune_id, host=host, plan=plan, best=plan.start, steps=steps)

