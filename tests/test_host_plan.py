"""build_host: a HostPlan (resolved by the caller) becomes a host; the simulated host is the caller's builder."""

from __future__ import annotations

from kimitui.config import parse_config
from kimitui.host import Host, LocalHost
from kimitui.host.base import EventCallback
from kimitui.host.factory import HostPlan, build_host
from kimitui.host.ssh import SSHHost
from kimitui.hosts_from_config import host_plan
from kimitui.sim.gpustate import SIM_NAME_ENV


def test_the_simulated_host_is_built_by_the_function_the_caller_passes() -> None:
    built: list[str] = []

    def simulated(name: str, on_event: EventCallback | None) -> Host:
        built.append(name)
        return LocalHost(name, on_event, simulated=True)

    lab = build_host(HostPlan("lab", simulated=True, python="python3.12", env={"K": "v"}), simulated)
    assert built == ["lab"] and isinstance(lab, LocalHost) and lab.simulated
    assert (lab.python, lab.env) == ("python3.12", {"K": "v"})
    plain = build_host(HostPlan("local"), simulated)
    assert built == ["lab"] and isinstance(plain, LocalHost) and not plain.simulated and plain.python is None


def test_an_ssh_plan_with_a_planned_jump_builds_the_chain() -> None:
    edge = HostPlan("edge", address="edge.example", user="ops", port=2200)
    gpu = build_host(HostPlan("gpu", address="gpu.example", key="/k", jump=edge, simulated=True),
                     lambda name, on_event: LocalHost(name, on_event))
    assert isinstance(gpu, SSHHost) and gpu.simulated and gpu.client_keys == ["/k"]
    assert isinstance(gpu.jump, SSHHost) and gpu.jump.target == "ops@edge.example:2200"


def test_the_config_resolves_a_simulated_table_to_a_plan_with_its_own_home() -> None:
    config = parse_config('[hosts.lab]\nsim = true\n[hosts.gpu]\naddress = "g"\njump = "lab2"\n'
                          '[hosts.lab2]\nsim = true\naddress = "l2"\n')
    assert host_plan(config, "lab") == HostPlan("lab", simulated=True, python="python3", env={SIM_NAME_ENV: "lab"})
    gpu = host_plan(config, "gpu")
    assert isinstance(gpu.jump, HostPlan) and gpu.jump.address == "l2" and gpu.env == {}
    assert host_plan(config, "sim") == HostPlan("sim", simulated=True)
