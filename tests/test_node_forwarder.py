"""A node's GPU stream publishes to its own session; its one sink forwards to the cockpit's (composition)."""

from __future__ import annotations

from kimitui.events import ConnectionState, ErrorEvent, Event, GpuProcs, GpuSample
from kimitui.live.on_host import node_session
from kimitui.session import Session


def test_a_node_session_forwards_gpu_samples_and_trouble_to_the_home_host_and_keeps_the_rest() -> None:
    cockpit = Session(host="pair-a")
    seen: list[Event] = []
    cockpit.add_sink(seen.append)
    node = node_session(cockpit, "pair-a", "pair-b")
    assert type(node) is Session  # a plain session: nothing overrides publish
    node.publish(GpuSample(host="pair-b", seq=3))
    node.publish(GpuProcs(host="pair-b"))  # the node's process list would be taken for the home host's
    node.publish(ConnectionState(host="pair-b", state="connected"))
    node.publish(ConnectionState(host="pair-b", state="lost", detail="reset by peer"))
    node.publish(ConnectionState(host="pair-b", state="failed"))
    node.publish(ErrorEvent(host="pair-b", source="gpu", message="nvml gone"))
    assert [(e.kind, e.host) for e in seen] == [("gpu_sample", "pair-a"), ("error", "pair-a"), ("error", "pair-a"),
                                                ("error", "pair-a")]
    sample, lost, failed, error = seen
    assert isinstance(sample, GpuSample) and (sample.node, sample.seq) == ("pair-b", 3)
    assert isinstance(lost, ErrorEvent) and (lost.source, lost.severity, lost.message) == (
        "node pair-b", "warning", "link lost reset by peer")
    assert isinstance(failed, ErrorEvent) and (failed.severity, failed.message) == ("error", "link failed")
    assert isinstance(error, ErrorEvent) and (error.source, error.message) == ("node pair-b: gpu", "nvml gone")
