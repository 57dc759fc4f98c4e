"""The load worker's events reach its pipe a batch at a time, never one write per event (issue 33).

One pipe write per event was ~3 % of the worker's CPU at C=2048.  Events now wait up to ``FLUSH_S`` (or until
``FLUSH_BYTES`` wait) and go in one write, in order, and nothing waiting is lost when the worker closes.  The
whole pipe, parent and all, is exercised by the sweep runner's tests; here the transport records its writes.
"""

from __future__ import annotations

import asyncio

from kimitui.events import ErrorEvent, dump_event
from kimitui.loadgen import worker


class RecordingTransport:
    """A pipe transport's surface, keeping each write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


def _event(i: int, size: int = 10) -> ErrorEvent:
    return ErrorEvent(host="h", source="sweep", message=f"event {i} " + "x" * size, t=float(i))


async def test_events_of_one_moment_go_to_the_pipe_in_one_write_in_order() -> None:
    transport = RecordingTransport()
    out = worker._EventOut(transport, loop=asyncio.get_running_loop())  # type: ignore[arg-type]
    events = [_event(i) for i in range(5)]
    for ev in events:
        out.emit(ev)
    assert transport.writes == []  # none written yet: they wait for the others of this moment
    await asyncio.sleep(worker.FLUSH_S * 3)
    assert transport.writes == [b"".join(dump_event(ev).encode() + b"\n" for ev in events)]
    out.emit(_event(5))
    await out.close()  # what still waits is written before the pipe closes
    assert transport.writes[-1] == dump_event(_event(5)).encode() + b"\n" and transport.closed


async def test_a_large_batch_is_written_at_once() -> None:
    transport = RecordingTransport()
    out = worker._EventOut(transport, loop=asyncio.get_running_loop())  # type: ignore[arg-type]
    big = _event(0, size=worker.FLUSH_BYTES)
    out.emit(_event(1))
    out.emit(big)
    assert len(transport.writes) == 1 and transport.writes[0].endswith(dump_event(big).encode() + b"\n")
    await out.close()
    assert len(transport.writes) == 1  # nothing left over, and no empty write
