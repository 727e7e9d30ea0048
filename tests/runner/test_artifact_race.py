"""A receipt's artifacts (the paths a run wrote, with their size and digest) are read once, by descriptor,
below the workspace or a write root: a script's program that swaps an artifact's name for a symlink to a
file outside, or for a FIFO, gets neither that file's digest or size into the receipt nor DAL stuck."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from dal.receipts.build import artifact_of
from tests.swaprace import make_canary, race, swapping

INSIDE = "written by the run\n"


def _canary(tmp_path: Path) -> tuple[Path, str]:
    canary = make_canary(tmp_path / "outside", "a secret of another size")
    return canary, hashlib.sha256(canary.read_bytes()).hexdigest()


def test_an_artifact_swapped_for_a_symlink_out_never_carries_the_outside_files_digest(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    canary, secret = _canary(tmp_path)
    with swapping(ws / "a.txt", INSIDE, canary):
        outcomes = race(lambda: artifact_of(ws, "a.txt"), 3000,
                        until=lambda out: len({o["sha256"] for o in out if isinstance(o, dict)}) >= 2)
    assert not [o for o in outcomes if not isinstance(o, dict)]
    digests = {o["sha256"] for o in outcomes}  # type: ignore[index]
    sizes = {o["size"] for o in outcomes}  # type: ignore[index]
    assert secret not in digests and canary.stat().st_size not in sizes
    assert digests == {hashlib.sha256(INSIDE.encode()).hexdigest(), None}, "both states must have been met"
    assert {o["state"] for o in outcomes} == {"exists"}  # type: ignore[index]


def test_an_artifact_in_a_write_root_outside_the_workspace_is_read_below_that_root(tmp_path: Path) -> None:
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    canary, secret = _canary(tmp_path)
    (out / "r.txt").write_text(INSIDE)
    (out / "link.txt").symlink_to(canary)
    ok = artifact_of(ws, str(out / "r.txt"), (str(out),))
    assert ok["size"] == len(INSIDE) and ok["sha256"] == hashlib.sha256(INSIDE.encode()).hexdigest()
    assert artifact_of(ws, str(out / "link.txt"), (str(out),)) == {
        "path": str(out / "link.txt"), "state": "exists", "size": None, "sha256": None}
    # below no root at all: looked at, never opened
    assert artifact_of(ws, str(canary)) == {"path": str(canary), "state": "exists", "size": None, "sha256": None}
    assert artifact_of(ws, "gone.txt")["state"] == "missing"
    assert secret not in repr([artifact_of(ws, str(p), (str(out),)) for p in out.iterdir()])


def test_an_artifact_that_is_a_fifo_is_reported_without_opening_it_to_wait(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "pipe")  # no writer: a blocking open would wait forever
    assert artifact_of(ws, "pipe") == {"path": "pipe", "state": "exists", "size": None, "sha256": None}
