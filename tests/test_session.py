"""The hub: fan-out, bounded queues that drop oldest, sinks that never drop."""

import asyncio

import pytest

from kimitui.events import Dropped, Note, parse_event, dump_event, GpuSample, GpuReading
from kimitui.session import Session


async def test_every_subscriber_and_sink_gets_every_event():
    s = Session()
    seen: list = []
    s.add_sink(seen.append)
    a, b = s.subscribe("a"), s.subscribe("b")
    for i in range(3):
        s.publish(Note(text=str(i)))
    assert [e.text for e in seen] == ["0", "1", "2"]
    assert [e.text for e in a.drain()] == ["0", "1", "2"]
    assert [(await b.get()).text for _ in range(3)] == ["0", "1", "2"]


async def test_slow_subscriber_drops_oldest_and_is_told_how_many():
    s = Session()
    slow = s.subscribe("slow", maxsize=2)
    fast = s.subscribe("fast", maxsize=100)
    for i in range(5):
        s.publish(Note(text=str(i)))
    got = slow.drain()
    assert isinstance(got[0], Dropped) and got[0].count == 3 and got[0].subscriber == "slow"
    assert [e.text for e in got[1:]] == ["3", "4"]
    assert slow.dropped_total == 3
    assert len(fast.drain()) == 5  # the fast one lost nothing


async def test_kind_filter_and_waiting_get():
    s = Session()
    sub = s.subscribe("notes", kinds=["note"])
    waiter = asyncio.create_task(sub.get())
    await asyncio.sleep(0)  # one turn of the loop: the waiter is waiting before anything is published
    s.publish(GpuSample(gpus=[GpuReading(index=0)]))
    s.publish(Note(text="hi"))
    assert (await asyncio.wait_for(waiter, 1)).text == "hi"
    assert sub.drain() == []


async def test_broken_sink_does_not_break_publish():
    s = Session()
    def boom(_):
        raise RuntimeError("x")
    s.add_sink(boom)
    sub = s.subscribe("ok")
    s.publish(Note(text="still"))
    assert sub.drain()[0].text == "still"


async def test_closed_subscription_ends_iteration():
    s = Session()
    sub = s.subscribe("x")
    async def consume():
        return [e async for e in sub]
    task = asyncio.create_task(consume())
    s.publish(Note(text="a"))
    await asyncio.sleep(0.01)  # a turn or two of the loop: the consumer has "a" and waits for more when closed
    sub.close()
    assert [e.text for e in await asyncio.wait_for(task, 1)] == ["a"]


def test_event_json_round_trip_and_field_errors():
    ev = GpuSample(seq=3, gpus=[GpuReading(index=1, util_pct=50.0, throttle_reasons=["sw_power_cap"])])
    assert parse_event(dump_event(ev)) == ev
    with pytest.raises(Exception) as info:
        parse_event({"kind": "note"})
    assert "text" in str(info.value)
