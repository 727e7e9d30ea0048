"""The workspace's dal.toml is read once, by descriptor, below the workspace: where the wall cannot keep it
read-only (Landlock holds it by the guard's restore, after the command), a script's program that swaps it
for a symlink to a policy file outside never has that file taken for the policy. Next to a canary policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from dal.effects import Policy, PolicyError
from tests.swaprace import race, swapping

MINE = '[run]\nallow = ["echo"]\n'
OUTSIDE = '[run]\nallow = ["canaryprog"]\n'


def test_a_dal_toml_swapped_for_a_symlink_out_is_never_taken_for_the_policy(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside").mkdir()
    canary = tmp_path / "outside" / "dal.toml"
    canary.write_text(OUTSIDE)
    with swapping(ws / "dal.toml", MINE, canary):
        outcomes = race(lambda: Policy.load(ws), 800, until=lambda out: {type(o) for o in out} >= {Policy, PolicyError})
    policies = [o for o in outcomes if isinstance(o, Policy)]
    refused = [o for o in outcomes if isinstance(o, PolicyError)]
    assert not [p for p in policies if "canaryprog" in p.allowed]
    assert all("echo" in p.allowed for p in policies)
    assert policies and refused, "the race did not run: both states must have been met"
    assert all("outside" in str(e) or "changed while" in str(e) for e in refused), refused[:3]


def test_a_policy_file_that_leads_out_or_is_a_fifo_is_an_error(tmp_path: Path) -> None:
    import os

    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside.toml").write_text(OUTSIDE)
    (ws / "dal.toml").symlink_to(tmp_path / "outside.toml")
    with pytest.raises(PolicyError, match="leads outside"):
        Policy.load(ws)
    (ws / "dal.toml").unlink()
    (ws / "inner.toml").write_text(MINE)
    (ws / "dal.toml").symlink_to("inner.toml")  # a link that stays in the workspace is followed
    assert "echo" in Policy.load(ws).allowed
    os.mkfifo(ws / "p.toml")
    with pytest.raises(PolicyError, match="no such file|not a regular file"):  # and no wait for a writer
        Policy.load(ws, ws / "p.toml")
    # a file the operator names outside the workspace is read as named
    assert "canaryprog" in Policy.load(ws, tmp_path / "outside.toml").allowed


def test_the_policy_files_state_is_read_without_waiting_on_a_fifo_or_following_a_link_out(tmp_path: Path) -> None:
    import os

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "dal.toml").write_text(MINE)
    policy = Policy.load(ws)
    assert policy.file_state()[1] == policy.file_sha256
    (ws / "dal.toml").unlink()
    os.mkfifo(ws / "dal.toml")  # no writer: a blocking open would wait forever
    assert policy.file_state() == (str(ws / "dal.toml"), None)
    (ws / "dal.toml").unlink()
    (tmp_path / "copy.toml").write_text(MINE)  # the same bytes, outside
    (ws / "dal.toml").symlink_to(tmp_path / "copy.toml")
    assert policy.file_state() == (str(ws / "dal.toml"), None)
