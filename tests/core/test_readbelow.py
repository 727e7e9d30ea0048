"""dal/core/readbelow.py: a name below a root is read by descriptor, once, and never leads outside it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dal.core.readbelow import NotBelow, read_below, read_text_below, stat_below
from tests.swaprace import CANARY, make_canary, race, swapping


def _both(out: list[object]) -> bool:
    return any(isinstance(o, str) for o in out) and any(isinstance(o, NotBelow) for o in out)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    (w / "sub").mkdir(parents=True)
    (w / "sub" / "a.dal").write_text("print(1)\n")
    return w


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    return make_canary(tmp_path / "outside")


def test_reads_a_file_below_the_root_by_relative_or_absolute_name(ws: Path) -> None:
    assert read_text_below(ws, "sub/a.dal") == "print(1)\n"
    assert read_text_below(ws, ws / "sub" / "a.dal") == "print(1)\n"
    assert read_text_below(ws, "sub/../sub/./a.dal") == "print(1)\n"
    assert read_below(ws, "sub/a.dal", limit=3) == b"pri"


def test_a_symlink_that_stays_below_the_root_is_followed(ws: Path) -> None:
    (ws / "link.dal").symlink_to("sub/a.dal")
    (ws / "abs.dal").symlink_to(ws / "sub" / "a.dal")
    (ws / "dirlink").symlink_to("sub")
    (ws / "sub" / "up.dal").symlink_to("../link.dal")
    for name in ("link.dal", "abs.dal", "dirlink/a.dal", "sub/up.dal", "dirlink/up.dal"):
        assert read_text_below(ws, name) == "print(1)\n", name


def test_every_way_out_is_refused_and_the_canary_is_never_read(ws: Path, canary: Path) -> None:
    (ws / "out.dal").symlink_to(canary)
    (ws / "rel.dal").symlink_to(os.path.relpath(canary, ws))
    (ws / "outdir").symlink_to(canary.parent)
    (ws / "sub" / "hop.dal").symlink_to("../rel.dal")
    for name in ("out.dal", "rel.dal", "outdir/secret.txt", "sub/hop.dal", "../outside/secret.txt",
                 str(canary), "sub/../../outside/secret.txt"):
        with pytest.raises(NotBelow, match="outside"):
            read_below(ws, name)


def test_not_regular_files_are_refused_without_hanging(ws: Path, canary: Path) -> None:
    os.mkfifo(ws / "fifo.dal")  # no writer: a blocking open would wait forever
    with pytest.raises(NotBelow, match="not a regular file"):
        read_below(ws, "fifo.dal")
    os.link(canary, ws / "hard.dal")  # a hard link to a file outside the root
    with pytest.raises(NotBelow, match="2 hard links"):
        read_below(ws, "hard.dal")
    with pytest.raises(IsADirectoryError):
        read_below(ws, "sub")
    with pytest.raises(IsADirectoryError):
        read_below(ws, ".")
    with pytest.raises(FileNotFoundError):
        read_below(ws, "sub/missing.dal")
    with pytest.raises(NotADirectoryError):
        read_below(ws, "sub/a.dal/x")


def test_a_symlink_loop_is_an_error_not_a_hang(ws: Path) -> None:
    (ws / "l1").symlink_to("l2")
    (ws / "l2").symlink_to("l1")
    with pytest.raises(OSError, match="symbolic links"):
        read_below(ws, "l1")


def test_stat_below_reports_a_symlink_and_refuses_a_folder_that_leads_out(ws: Path, canary: Path) -> None:
    (ws / "out.dal").symlink_to(canary)
    (ws / "outdir").symlink_to(canary.parent)
    assert stat_below(ws, "sub/a.dal").st_size == len("print(1)\n")
    assert os.path.islink(ws / "out.dal") and stat_below(ws, "out.dal").st_size == len(str(canary))
    with pytest.raises(NotBelow):
        stat_below(ws, "outdir/secret.txt")


def test_a_name_swapped_for_a_symlink_out_never_yields_the_canary(ws: Path, canary: Path) -> None:
    name = ws / "s.dal"
    with swapping(name, "print(2)\n", canary):
        outcomes = race(lambda: read_text_below(ws, "s.dal"), 3000, until=_both)
    texts = [o for o in outcomes if isinstance(o, str)]
    refused = [o for o in outcomes if isinstance(o, NotBelow)]
    assert texts and refused, "the race did not run: both states must have been met"
    assert all(t == "print(2)\n" for t in texts)
    assert not [o for o in outcomes if not isinstance(o, str | NotBelow)]


def test_a_folder_swapped_for_a_symlink_out_never_yields_the_canary(ws: Path, canary: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "secret.txt").write_text("inside\n")
    with swapping(ws / "d", None, canary.parent):
        outcomes = race(lambda: read_text_below(ws, "d/secret.txt"), 3000, until=_both)
    assert [o for o in outcomes if isinstance(o, str)] and [o for o in outcomes if isinstance(o, NotBelow)]
    assert CANARY not in repr(outcomes)


def test_a_file_moved_out_while_it_is_opened_is_refused(ws: Path, tmp_path: Path) -> None:
    # Without /proc's view of the descriptor this is the walk's word only; with it, the check is on the file.
    stop = threading.Event()
    away = tmp_path / "away.dal"

    def mover() -> None:
        while not stop.is_set():
            try:
                os.rename(ws / "sub" / "a.dal", away)
                os.rename(away, ws / "sub" / "a.dal")
            except FileNotFoundError:
                pass

    t = threading.Thread(target=mover)
    t.start()
    try:
        outcomes = race(lambda: read_text_below(ws, "sub/a.dal"), 2000)
    finally:
        stop.set()
        t.join()
    assert all(o == "print(1)\n" or isinstance(o, FileNotFoundError | NotBelow) for o in outcomes)


def test_an_absolute_name_through_the_roots_symlinked_prefix_is_below_it(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "ws").mkdir(parents=True)
    (real / "ws" / "a.dal").write_text("x\n")
    (tmp_path / "alias").symlink_to(real)
    ws = tmp_path / "alias" / "ws"  # the root as the operator names it, through a symlink
    (real / "ws" / "abs.dal").symlink_to(ws / "a.dal")
    assert read_text_below(ws, ws / "a.dal") == "x\n"
    assert read_text_below(ws, "abs.dal") == "x\n"
    with pytest.raises(NotBelow):  # named through a prefix the root was not given by: not resolved by name
        read_text_below(real / "ws", "abs.dal")


def test_a_folder_swapped_under_a_dotdot_walk_is_refused_not_a_closed_descriptor(ws: Path, canary: Path) -> None:
    # `d/sub/..` walks back to `d` by name; a `d` that became a symlink out meanwhile is NotBelow (once an
    # EBADF: the failed re-walk's descriptor was closed twice).
    (ws / "d" / "sub").mkdir(parents=True)
    (ws / "d" / "secret.txt").write_text("inside\n")
    (canary.parent / "sub").mkdir()
    with swapping(ws / "d", None, canary.parent):
        outcomes = race(lambda: read_text_below(ws, "d/sub/../secret.txt"), 2000, until=_both)
    assert _both(outcomes) and CANARY not in repr(outcomes)
    assert all(o == "inside\n" or isinstance(o, NotBelow | FileNotFoundError) for o in outcomes), \
        [o for o in outcomes if not isinstance(o, str | NotBelow)][:5]
