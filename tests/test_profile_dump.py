"""A resolved profile dumped as TOML loads back to the same profile."""

from __future__ import annotations

from kimitui.profiles import load_profile
from kimitui.profiles.dump import profile_to_toml
from tests.support.profiles import ProfileDirs, profile_env, write_profile  # noqa: F401


def test_dump_round_trips_without_extends(profile_env: ProfileDirs) -> None:
    p = load_profile("ep8-v2")
    p = p.model_copy(update={"env": {"NCCL_P2P_DISABLE": "1"}, "extra_args": ["--log-level", "debug"]})
    text = profile_to_toml(p)
    assert "extends" not in text and "source_path" not in text
    path = write_profile(profile_env.tmp / "out", "ep8-v2", text)
    back = load_profile(str(path))
    assert back.knobs() == p.knobs()
    assert (back.launcher, back.sim, back.description) == (p.launcher, p.sim, p.description)
    assert back.extends is None
