"""Profile errors blame the user's file and say what was searched; a profile accepts every fault
``kimitui sim serve --fault`` does (the PD transfer faults too, run here through real servers)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx
import pytest

from kimitui.profiles import FAULTS, ProfileError, load_profile
from kimitui.profiles.loader import profile_dirs, shipped_dir
from kimitui.sim.settings import FAULT_KINDS
from tests.support.net import free_port
from tests.support.simserver import start_sim
from tests.test_sim_pd import SCALE, start_router, tp4_profile

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A --profiles folder; no ./profiles, user or $KIMITUI_PROFILES profile in the way."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("KIMITUI_PROFILES", raising=False)
    (tmp_path / "mine").mkdir()
    return tmp_path / "mine"


def test_a_too_deep_user_chain_blames_the_users_profile_not_a_shipped_one(here: Path) -> None:
    parent = "ep8-tuned"  # ep8-tuned -> ep8 -> tp8: the shipped files sit at the chain's far end
    for i in range(31):
        (here / f"u{i}.toml").write_text(f'# layer {i}\nextends = "{parent}"\n')
        parent = f"u{i}"
    with pytest.raises(ProfileError) as caught:
        load_profile("u30", [here])
    err = caught.value
    assert err.path == here / "u30.toml" and err.line == 2 and err.field == "extends", str(err)
    assert "deeper than 32" in err.message and "u30 -> u29" in err.message, err.message
    assert str(shipped_dir()) not in str(err)
    load_profile("u25", [here])  # a chain within the limit still loads


def test_a_profile_extending_its_own_name_lists_the_whole_search_path(here: Path) -> None:
    (here / "solo.toml").write_text('description = "refines a solo that does not exist"\nextends = "solo"\n')
    with pytest.raises(ProfileError) as caught:
        load_profile("solo", [here])
    err = caught.value
    assert err.path == here / "solo.toml" and err.line == 2, str(err)
    assert f"{here} (this file's)" in err.message, err.message
    for d in profile_dirs([here]):
        assert str(d) in err.message, (d, err.message)


def test_pd_transfer_faults_are_profile_faults_as_they_are_sim_serve_faults(here: Path) -> None:
    assert set(FAULT_KINDS) == set(FAULTS) and {"slow_transfer", "transfer_fail"} <= set(FAULTS)
    for fault in ("slow_transfer", "transfer_fail"):
        (here / f"{fault}.toml").write_text(f'extends = "pd-1p1d"\n[sim]\nfault = "{fault}"\nfault_rate = 1.0\n')
        assert load_profile(fault, [here]).sim.fault == fault


def test_a_profiles_transfer_fail_fails_transfers_through_the_router(here: Path) -> None:
    """The fault set in a profile (not on the command line) reaches the running decode server."""
    folder = Path(tempfile.mkdtemp(prefix="kimitui-pdfault-"))
    good = tp4_profile(folder)
    failing = folder / "tp4-fail.toml"
    failing.write_text('extends = "ep8-tuned"\ntp_size = 4\nep_size = 4\n[sim]\nfault = "transfer_fail"\n'
                       'fault_rate = 1.0\n')
    bootstrap = free_port()
    prefill = start_sim(good, time_scale=SCALE, env={"KIMITUI_SIM_STATE": str(folder / "a.json")}, wait_ready=False,
                        extra_args=["--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", str(bootstrap)])
    decode = start_sim(str(failing), time_scale=SCALE, env={"KIMITUI_SIM_STATE": str(folder / "b.json")},
                       wait_ready=False, extra_args=["--disaggregation-mode", "decode", "--base-gpu-id", "4"])
    router = None
    try:
        for s in (prefill, decode):
            s.start()
        for s in (prefill, decode):
            s.wait_healthy(s.ready_timeout)
        router = start_router(prefill, bootstrap, decode)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
        r = httpx.post(router.url + "/v1/chat/completions", json=body, timeout=30, trust_env=False)
        assert r.status_code == 500 and "KVTransferError" in r.text, r.text
    finally:
        if router is not None:
            router.stop()
        for s in (prefill, decode):
            s.stop()
            s.cleanup()
