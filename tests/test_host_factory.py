"""make_host: config tables become real hosts (the simulated one, SSH, jump chains)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.config import ConfigError, parse_config
from kimitui.host import LocalHost
from kimitui.hosts_from_config import make_host
from kimitui.host.ssh import SSHHost
from tests.support.sshd import SSHTestServer


def test_no_config_means_the_simulated_host() -> None:
    host = make_host(parse_config(""), None)
    assert isinstance(host, LocalHost) and host.name == "sim" and host.simulated
    assert make_host(parse_config(""), "sim").simulated


def test_choice_order_and_unknown_names() -> None:
    config = parse_config('[hosts.a]\naddress = "a.example"\n[hosts.b]\naddress = "b.example"\n', "c.toml")
    assert make_host(config).name == "a"  # the first one
    assert make_host(config, "b").name == "b"
    config = parse_config('default_host = "b"\n[hosts.a]\naddress = "a.example"\n[hosts.b]\naddress = "b.example"\n')
    assert make_host(config).name == "b"
    with pytest.raises(ConfigError, match=r"no host 'zz' in c\.toml; configured: a, b"):
        make_host(parse_config('[hosts.a]\naddress = "a"\n[hosts.b]\naddress = "b"\n', "c.toml"), "zz")


def test_ssh_options_and_jump_chain_from_config() -> None:
    config = parse_config(
        '[hosts.gpu]\naddress = "gpu-host.example"\nuser = "ops"\nport = 2222\nkey = "/k"\n'
        'jump = "mid"\nkeepalive_s = 1.5\npython = "python3.12"\n'
        '[hosts.mid]\naddress = "mid.example"\njump = "ops@edge.example:2200"\n'
        '[hosts.lab]\nsim = true\n[hosts.remote-sim]\nsim = true\naddress = "sim.example"\n'
    )
    gpu = make_host(config, "gpu")
    assert isinstance(gpu, SSHHost) and gpu.target == "ops@gpu-host.example:2222"
    assert gpu.client_keys == ["/k"] and gpu.keepalive_s == 1.5 and gpu.python == "python3.12"  # type: ignore[attr-defined]
    assert isinstance(gpu.jump, SSHHost) and gpu.jump.name == "mid" and gpu.jump.jump == "ops@edge.example:2200"
    assert not gpu.simulated  # type: ignore[attr-defined]
    lab = make_host(config, "lab")
    assert isinstance(lab, LocalHost) and lab.simulated
    remote_sim = make_host(config, "remote-sim")
    assert isinstance(remote_sim, SSHHost) and remote_sim.simulated  # type: ignore[attr-defined]


def test_jump_loop_is_refused() -> None:
    config = parse_config('[hosts.a]\naddress = "a"\njump = "b"\n[hosts.b]\naddress = "b"\njump = "a"\n', "c.toml")
    with pytest.raises(ConfigError, match="loop: a -> b -> a"):
        make_host(config, "a")


async def test_configured_host_really_connects(
    ssh_server: SSHTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    text = (
        f'[hosts.gpu]\naddress = "127.0.0.1"\nport = {ssh_server.port}\nuser = "{ssh_server.user}"\n'
        f'key = "{ssh_server.client_key_path}"\nagent = false\nknown_hosts = "{tmp_path / "none"}"\n'
        f"trust_on_first_use = true\n"
    )
    events: list = []
    host = make_host(parse_config(text), "gpu", on_event=events.append)
    host.ssh_config = None  # type: ignore[attr-defined]  # keep the test away from ~/.ssh/config
    assert (await host.run(["echo", "configured"])).stdout == "configured\n"
    await host.close()
    recorded = (tmp_path / "data" / "kimitui" / "known_hosts").read_text()
    assert recorded.startswith(f"[127.0.0.1]:{ssh_server.port} ssh-ed25519 ")
    assert [e.state for e in events][-2:] == ["connected", "closed"] and events[0].host == "gpu"
