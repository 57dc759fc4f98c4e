"""Multi-node and PD profiles: their TOML shape, validation errors, the processes they render, lint."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.profiles import ProfileError, deployment, lint_profile, load_profile, render_argv


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}')
    return path


def test_single_server_profiles_render_exactly_as_before() -> None:
    for name in ("ep8-tuned", "ep8-eplb", "tp8"):
        p = load_profile(name)
        (spec,) = deployment(p)
        assert (spec.role, spec.node, spec.entry, spec.port) == ("server", None, True, p.port)
        assert spec.argv == render_argv(p)
        assert deployment(p, simulated=True, sim_args=("--time-scale", "9"))[0].argv == render_argv(
            p, simulated=True, sim_args=("--time-scale", "9"))
        assert "--nodes" not in spec.argv and "--pd" not in spec.argv


def test_two_nodes_render_one_command_per_node_with_rank_and_rendezvous() -> None:
    p = load_profile("ep16-2node")
    specs = deployment(p)
    assert [(s.role, s.node, s.entry, s.port) for s in specs] == [("node-1", "gpu-b", False, None),
                                                                  ("node-0", None, True, p.port)]
    for rank, spec in ((1, specs[0]), (0, specs[1])):
        tail = spec.argv[spec.argv.index("--nnodes"):]
        assert tail[:6] == ["--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", "gpu-a.example:20000"]
        assert spec.argv[1:3] == ["-m", "sglang.launch_server"]
    sim = deployment(p, simulated=True)
    assert sim[0].argv[1:5] == ["-m", "kimitui", "sim", "serve"] and "--node-rank" in sim[0].argv


def test_pd_renders_prefill_decode_and_the_router_on_the_profile_port() -> None:
    p = load_profile("pd-1p1d")
    specs = {s.role: s for s in deployment(p)}
    assert list(specs) == ["prefill-0", "decode-0", "router"] and specs["router"].entry
    pre, dec, router = specs["prefill-0"].argv, specs["decode-0"].argv, specs["router"].argv
    assert pre[pre.index("--disaggregation-mode") + 1] == "prefill" and "--disaggregation-bootstrap-port" in pre
    assert dec[dec.index("--disaggregation-mode") + 1] == "decode" and "--disaggregation-bootstrap-port" not in dec
    assert dec[dec.index("--base-gpu-id") + 1] == "4" and dec[dec.index("--port") + 1] == "30020"
    assert router[1:4] == ["-m", "sglang_router.launch_router", "--pd-disaggregation"]
    assert router[router.index("--prefill"):router.index("--prefill") + 3] == ["--prefill", "http://127.0.0.1:30010", "8998"]
    assert router[-4:] == ["--host", "127.0.0.1", "--port", str(p.port)]
    assert specs["prefill-0"].gpus == (0, 1, 2, 3) and specs["decode-0"].gpus == (4, 5, 6, 7)
    sim_router = deployment(p, simulated=True)[-1].argv
    assert sim_router[1:3] == ["-m", "kimitui.sim.router"]
    assert not [i for i in lint_profile(p) if i.severity == "error"]


def test_several_servers_of_a_role_are_a_list_of_tables(tmp_path: Path) -> None:
    path = _write(tmp_path, "pd2", 'extends = "pd-1p1d"\n[pd]\n[[pd.prefill]]\nport = 31001\n'
                  '[[pd.prefill]]\nport = 31002\nbootstrap_port = 9001\nbase_gpu_id = 4\n'
                  '[[pd.decode]]\nport = 31003\nnode = "gpu-b"\n')
    p = load_profile(str(path))
    specs = deployment(p, addresses={"gpu-b": "gpu-b.example"})
    assert [s.role for s in specs] == ["prefill-0", "prefill-1", "decode-0", "router"]
    assert specs[2].node == "gpu-b" and "http://gpu-b.example:31003" in specs[-1].argv


@pytest.mark.parametrize(("body", "field", "words"), [
    ('nodes = ["a", "b"]\n', "nodes", "dist_init_addr"),
    ('nodes = ["a", "b"]\ndist_init_addr = "a-no-port"\n', "dist_init_addr", "HOST:PORT"),
    ('nodes = ["a", "a"]\ndist_init_addr = "a:1"\n', "nodes", "once"),
    ('[pd]\n[pd.prefill]\nport = 1\nprot = 1\n', "pd.prefill.0.prot", "unknown field"),
    ('[pd]\n[pd.decode]\nbase_gpu_id = 0\n', "pd.decode.0.port", "required"),
])
def test_bad_deployments_are_errors_naming_file_line_and_field(tmp_path: Path, body: str, field: str, words: str) -> None:
    path = _write(tmp_path, "bad", 'extends = "ep8-tuned"\n' + body)
    with pytest.raises(ProfileError) as err:
        load_profile(str(path))
    assert err.value.field == field and words in err.value.message, str(err.value)
    assert err.value.path == path and err.value.line is not None


@pytest.mark.parametrize(("body", "words"), [
    ('[pd.prefill]\nport = 31001\n', "no decode"),
    ('[pd.prefill]\nport = 31001\n[pd.decode]\nport = 31002\nbase_gpu_id = 2\n', "both use GPU 2"),
    ('[pd.prefill]\nport = 31001\n[pd.decode]\nport = 31001\nbase_gpu_id = 4\n', "both use port 31001"),
    ('[pd.prefill]\nport = 31001\nbootstrap_port = 30001\n[pd.decode]\nport = 31002\nbase_gpu_id = 4\n',
     "both use port 30001"),
])
def test_lint_catches_missing_roles_shared_gpus_and_ports(tmp_path: Path, body: str, words: str) -> None:
    path = _write(tmp_path, "pdlint", f'extends = "ep8-tuned"\ntp_size = 4\nep_size = 4\nport = 30001\n[pd]\n{body}')
    errors = [str(i) for i in lint_profile(load_profile(str(path))) if i.severity == "error"]
    assert any(words in e for e in errors), errors


def test_a_pd_server_s_own_knobs_are_linted_under_its_path(tmp_path: Path) -> None:
    path = _write(tmp_path, "pdep", 'extends = "pd-1p1d"\n[pd]\n[pd.prefill]\nport = 31001\ntp_size = 4\nep_size = 3\n'
                  '[pd.decode]\nport = 31002\nbase_gpu_id = 4\n')
    errors = [i for i in lint_profile(load_profile(str(path))) if i.severity == "error"]
    assert [i.field for i in errors] == ["pd.prefill[0].ep_size"], errors
