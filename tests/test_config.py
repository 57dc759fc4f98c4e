"""Config: where it is read from, and errors that name file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.config import Config, ConfigError, config_path, find_key_line, load_config, parse_config

GOOD = """\
default_host = "gpu1"

[hosts.gpu1]
address = "gpu-host.example"
user = "ops"
port = 2222
key = "~/.ssh/id_ed25519"
jump = "bastion"
python = "/opt/venv/bin/python"

[hosts.bastion]
address = "bastion.example"
trust_on_first_use = true

[hosts.lab]
sim = true

[keys]
sweep = "w"

[ui]
gpu_refresh_hz = 2

[sim]
port = 30011
"""


def test_full_config_is_read(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text(GOOD)
    c = load_config(f)
    assert c.path == f and c.default_host == "gpu1"
    gpu = c.hosts["gpu1"]
    assert (gpu.address, gpu.user, gpu.port, gpu.jump, gpu.python) == (
        "gpu-host.example", "ops", 2222, "bastion", "/opt/venv/bin/python")
    assert gpu.key == str(Path.home() / ".ssh/id_ed25519")
    assert gpu.trust_on_first_use is False and gpu.keepalive_s == 1.0  # defaults
    assert c.hosts["bastion"].trust_on_first_use and c.hosts["lab"].sim
    assert c.keys == {"sweep": "w"} and c.ui == {"gpu_refresh_hz": 2}
    assert c.sim.port == 30011 and Config().sim.port is None  # default: each profile's own port


def test_where_the_file_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KIMITUI_CONFIG", raising=False)
    path, explicit = config_path(None)
    assert path == tmp_path / "xdg" / "kimitui" / "config.toml" and not explicit
    assert load_config(None) == Config()  # no file at the default place: the sim host
    env_file = tmp_path / "env.toml"
    env_file.write_text('default_host = "sim"\n')
    monkeypatch.setenv("KIMITUI_CONFIG", str(env_file))
    assert load_config(None).default_host == "sim"
    flag_file = tmp_path / "flag.toml"
    flag_file.write_text("[keys]\nquit = 'x'\n")
    assert load_config(flag_file).keys == {"quit": "x"}  # --config beats the env var
    with pytest.raises(ConfigError, match=r"nope\.toml: config file not found"):
        load_config(tmp_path / "nope.toml")  # asked for explicitly: must exist


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[hosts.gpu]\naddress = "a"\nport = 99999\n', "c.toml:3: hosts.gpu.port: Input should be less than or equal to 65535"),
        ('[hosts.gpu]\naddress = "a"\nadress = "typo"\n', "c.toml:3: hosts.gpu.adress: unknown field `adress`"),
        ('\n\n[hosts.gpu]\nuser = "ops"\n', "c.toml:3: hosts.gpu: `address` is required"),
        ('[hosts.gpu]\naddress = "a"\n\n[hosts.gpu2]\naddress = "b"\nkeepalive_s = "fast"\n',
         "c.toml:6: hosts.gpu2.keepalive_s: Input should be a valid number"),
        ('[hosts]\ngpu.address = "a"\ngpu.port = -1\n', "c.toml:3: hosts.gpu.port: Input should be greater than or equal to 1"),
        ('default_host = "gpu9"\n[hosts.gpu]\naddress = "a"\n', "c.toml:1: default_host: no [hosts.gpu9] table"),
        ('[hosts.gpu]\naddress = "a"\njump = "nowhere"\n', "c.toml:3: hosts.gpu.jump: 'nowhere' is neither a configured host"),
        ('[hosts."bad name"]\naddress = "a"\n', "c.toml:1: hosts.bad name: host name 'bad name'"),
        ('[ui]\nrates = [1, 2]\n', "c.toml:2: ui.rates"),
        ('[hosts.gpu]\naddress = "a"\nport = \n', "c.toml:3:8: invalid TOML: Invalid value"),
        ("[hosts.gpu\n", "c.toml:1:11: invalid TOML: Expected ']'"),
        ('[ui]\nx = 1\n\n[sim]\nport = 70000\n', "c.toml:5: sim.port: Input should be less than or equal to 65535"),
        ('[sim]\nport = "high"\n', "c.toml:2: sim.port: Input should be a valid integer"),
        ('[sim]\nprot = 30011\n', "c.toml:2: sim.prot: unknown field `prot`"),
    ],
)
def test_errors_name_file_line_and_field(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "c.toml")
    assert str(err.value).startswith(expected), str(err.value)


def test_error_from_a_real_file_names_its_path(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text(GOOD.replace("port = 2222", 'port = "ssh"'))
    with pytest.raises(ConfigError, match=rf"^{f}:6: hosts\.gpu1\.port: "):
        load_config(f)


def test_key_lines_ignore_multiline_strings_and_other_tables() -> None:
    text = '[hosts.a]\nnote = """\nport = 1\n"""\n[hosts.b]\nport = 2\n[hosts.a.x]\n'
    assert find_key_line(text, ("hosts", "b", "port")) == 6
    assert find_key_line(text, ("hosts", "a", "port")) == 1  # falls back to the table
    assert find_key_line(text, ("missing",)) is None
