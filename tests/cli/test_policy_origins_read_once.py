"""`dal policy check` says which programs the policy file names by reading that file again: by descriptor
below the workspace, and only when its bytes are the ones the policy was built from. A dal.toml swapped for
a symlink to another file, or rewritten, since the policy was loaded names nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from dal.cli.policy_cmd import _origins
from dal.effects import Policy, PolicyError


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "dal.toml").write_text('[run]\nallow = ["jq"]\n')
    (tmp_path / "outside.toml").write_text('[run]\nallow = ["jq", "canaryprog"]\n')
    return w


def test_the_file_as_loaded_names_its_programs(ws: Path) -> None:
    _base, named, _gated = _origins(Policy.load(ws))
    assert "jq" in named


def test_a_file_rewritten_since_the_policy_was_loaded_names_nothing(ws: Path) -> None:
    policy = Policy.load(ws)
    (ws / "dal.toml").write_text('[run]\nallow = ["jq", "canaryprog"]\n')
    _base, named, _gated = _origins(policy)
    assert named == set()


def test_a_file_swapped_for_a_symlink_out_is_not_read(ws: Path) -> None:
    policy = Policy.load(ws)
    (ws / "dal.toml").unlink()
    (ws / "dal.toml").symlink_to(ws.parent / "outside.toml")
    with pytest.raises(PolicyError, match="leads outside"):  # the policy cannot be rebuilt from it either
        _origins(policy)
