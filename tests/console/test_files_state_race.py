"""The console's view of the files an uncertain effect writes looks below the run's workspace only, by
descriptor: a folder on the way that a script swaps for a symlink to a folder outside never has the outside
file's size or age shown to the operator deciding. In process, next to a canary."""

from __future__ import annotations

import os
from pathlib import Path

from dal.console.views import files_state
from tests.swaprace import make_canary, race, swapping


def test_a_folder_swapped_for_a_symlink_out_never_shows_the_outside_files_size(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "secret.txt").write_text("in")  # 2 bytes
    canary = make_canary(tmp_path / "outside", "x" * 776)  # 777 bytes, with its newline
    with swapping(ws / "d", None, canary.parent):
        outcomes = race(lambda: files_state(str(ws), ["d/secret.txt"])[0]["state"], 3000, until=lambda out: {
            "exists", "outside the workspace: not looked at"} <= {str(o).split(",")[0] for o in out})
    assert not [o for o in outcomes if "777 bytes" in str(o)]
    states = {str(o).split(",")[0] for o in outcomes}
    assert {"exists", "outside the workspace: not looked at"} <= states, "both states must have been met"
    assert states <= {"exists", "outside the workspace: not looked at",
                      "cannot be read (the path changed while it was being opened)"}, states


def test_links_and_paths_out_are_reported_without_being_followed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    canary = make_canary(tmp_path / "outside")
    (ws / "link.txt").symlink_to(canary)
    (ws / "dir").symlink_to(canary.parent)
    (ws / "a.txt").write_text("abc")
    got = {d["path"]: d["state"] for d in files_state(str(ws), [
        "a.txt", "link.txt", "dir/secret.txt", "../outside/secret.txt", str(canary), str(ws / "a.txt"), "gone"])}
    assert got["a.txt"].startswith("exists, 3 bytes") and got[str(ws / "a.txt")].startswith("exists, 3 bytes")
    assert got["link.txt"] == "a symlink (not followed)"
    for p in ("dir/secret.txt", "../outside/secret.txt", str(canary)):
        assert got[p] == "outside the workspace: not looked at", p
    assert got["gone"] == "does not exist"
    assert os.path.exists(canary)
