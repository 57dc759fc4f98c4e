"""The one background lifecycle (kimitui.supervised): start once, stop idempotently, restart with backoff."""

from __future__ import annotations

import asyncio

import pytest

from kimitui.host.base import HostUnavailable
from kimitui.host.local import LocalHost
from kimitui.supervised import RestartingTask, SupervisedTask
from tests.support.waiting import wait_for


class _Ticker(SupervisedTask):
    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.runs = 0
        self.fail = fail

    async def _run(self) -> None:
        self.runs += 1
        if self.fail:
            raise RuntimeError("a bug in the loop")
        await asyncio.Event().wait()


async def test_start_runs_one_task_and_stop_is_idempotent() -> None:
    t = _Ticker()
    await t.start()
    await t.start()  # already running: no second task
    await asyncio.sleep(0)  # one turn of the loop: the task has begun its run
    assert t.running and t.runs == 1
    await t.stop()
    assert not t.running
    await t.stop()
    await t.start()  # a stopped task starts again
    await asyncio.sleep(0)  # one turn of the loop: the task has begun its run
    assert t.running and t.runs == 2
    await t.stop()


async def test_stop_never_raises_what_the_task_died_of(caplog: pytest.LogCaptureFixture) -> None:
    t = _Ticker(fail=True)
    await t.start()
    await wait_for(lambda: not t.running, 2, "the failing task to end")
    await t.stop()
    assert "a bug in the loop" in caplog.text


class _DownThenUp(LocalHost):
    """A host whose link is down until ``wait_connected`` has been asked ``down_for`` times."""

    def __init__(self, down_for: int) -> None:
        super().__init__("flaky")
        self.down_for = down_for
        self.waits = 0

    @property
    def connected(self) -> bool:
        return self.waits >= self.down_for

    async def wait_connected(self, timeout: float | None = 30.0) -> None:
        self.waits += 1
        if self.waits < self.down_for:
            raise HostUnavailable("flaky: link down")


class _Follower(RestartingTask):
    label = "test"

    def __init__(self, host: _DownThenUp, lives: int) -> None:
        super().__init__(host, reconnect_timeout_s=0.01, min_backoff_s=0.01, max_backoff_s=0.04)
        self.lives = lives
        self.started = 0
        self.errors: list[str] = []
        self.done = asyncio.Event()

    async def _life(self) -> bool:
        self.started += 1
        if self.started >= self.lives:
            self.done.set()
            await asyncio.Event().wait()
        return False

    def _error(self, message: str, detail: str = "") -> None:
        self.errors.append(f"{message}: {detail}")


async def test_a_life_that_ends_is_restarted_once_the_host_is_back() -> None:
    host = _DownThenUp(down_for=3)
    f = _Follower(host, lives=3)
    await f.start()
    await asyncio.wait_for(f.done.wait(), 5)
    assert f.started == 3
    assert host.waits == 3  # two refusals while the link was down, then it came back
    assert f.errors == ["test host unreachable: flaky: link down"] * 2
    await f.stop()
    await f.stop()
    assert not f.running


class _Swallower(RestartingTask):
    """A life that cancels a helper and awaits it under ``suppress(CancelledError)``: a cancellation of
    the life itself landing there is swallowed (as in the GPU stream's pinger and the SSH stream's reader)."""

    def __init__(self) -> None:
        super().__init__(LocalHost("t"), min_backoff_s=0.01, max_backoff_s=0.01)
        self.lives = 0
        self.awaiting_helper = False

    async def _life(self) -> bool:
        import contextlib

        async def slow_to_end() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await asyncio.sleep(0.3)  # a helper that tidies up before it ends
                raise

        self.lives += 1
        helper = asyncio.get_running_loop().create_task(slow_to_end())
        await asyncio.sleep(0.01)
        helper.cancel()
        self.awaiting_helper = True
        with contextlib.suppress(asyncio.CancelledError):  # meant for the helper's; swallows ours too
            await helper
        self.awaiting_helper = False
        return True

    def _error(self, message: str, detail: str = "") -> None:
        pass


async def test_a_cancelled_restarting_task_ends_even_if_a_life_swallowed_the_cancel() -> None:
    """A loop shutting down cancels every task and waits: one that restarts after a swallowed cancel held a
    test worker's event loop for ever (CI hung at a test's teardown)."""
    t = _Swallower()
    task = asyncio.get_running_loop().create_task(t._run())
    await wait_for(lambda: t.awaiting_helper, 2, "a life awaiting its cancelled helper")
    task.cancel()  # lands in the suppress(CancelledError) meant for the helper
    done, _ = await asyncio.wait({task}, timeout=5)
    assert done, f"still running after its cancel ({t.lives} lives)"
    assert task.cancelled()


async def test_stop_lets_its_callers_own_cancellation_through() -> None:
    t = _Ticker()
    await t.start()
    await asyncio.sleep(0)
    gate = asyncio.Event()

    class _Slow(_Ticker):
        async def _run(self) -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                gate.set()
                await asyncio.sleep(0.2)  # ends a moment after its cancel
                raise

    slow = _Slow()
    await slow.start()
    await asyncio.sleep(0)
    stopper = asyncio.get_running_loop().create_task(slow.stop())
    await gate.wait()
    stopper.cancel()  # the caller of stop() is cancelled while stop() waits for the task
    with pytest.raises(asyncio.CancelledError):
        await stopper
    await t.stop()
