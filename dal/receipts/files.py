"""Receipt files: `<run_id>.json` and `<run_id>.md` under `.dal/receipts/`, each written atomically.

A reader (a person, a CI job, a kill -9 at the wrong moment) sees either the whole file or no file:
the bytes go to a temporary file in the same folder and are renamed over the final name. When the files
are the only record of the run (the store could not take its receipt), the file and its folder are also
fsynced, so that they survive a power loss; when the store holds the receipt (committed with an fsync, so
it survives a power loss itself) they are copies for people and are not (docs/durability.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dal.core.fsutil import atomic_write_text, mkstemp
from dal.core.gitignored import ignore_folder
from dal.core.jsontext import dumps

DEFAULT_RECEIPTS_DIR = Path(".dal") / "receipts"


def receipts_dir(
    directory: str | os.PathLike[str] | None = None, workspace: str | os.PathLike[str] | None = None
) -> Path:
    """Where receipt files go: `--receipts DIR` when given, else `<workspace>/.dal/receipts`."""
    if directory:
        return Path(directory).expanduser()
    return Path(workspace or ".") / DEFAULT_RECEIPTS_DIR


def probe_receipts_dir(
    directory: str | os.PathLike[str] | None = None, workspace: str | os.PathLike[str] | None = None,
    *, write: bool = True,
) -> str | None:
    """Why receipt files could not be written in their folder and what to do, or None when they can: the
    folder is made if missing, then a small probe file is created, written and removed in it. `dal run`
    asks before anything runs, so that an unwritable folder stops the run while nothing has happened yet.
    `write` false: the folder only, no probe file (a job's run, whose receipt files are written only if the
    store cannot take the receipt: a file made and removed in every job cost ext4 an inode each time)."""
    folder = receipts_dir(directory, workspace)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if folder.parent.name == ".dal":
            ignore_folder(folder.parent)  # git never sees the receipts (dal.core.gitignored)
        if not write:
            return None
        fd, probe = mkstemp(folder, ".probe.", ".tmp")
        try:
            os.write(fd, b"dal receipts probe\n")
        finally:
            os.close(fd)
            os.unlink(probe)
    except FileExistsError:
        return f"{folder} exists and is not a folder; choose another with --receipts DIR"
    except OSError as e:
        import errno

        if e.errno == errno.EROFS:
            return (f"{folder}: it is on a file system mounted read-only, where no chmod helps; choose a folder "
                    "on a writable disk with --receipts DIR")
        return f"{folder}: {e.strerror or e}; make the folder writable or choose another with --receipts DIR"
    return None


def atomic_write(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> Path:
    """Write `text` to `path` so that the file is always either the old one, absent, or whole; `durable`:
    and it survives a power loss (dal.core.fsutil fsyncs the file and its folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, durable=durable)
    return path


def receipt_json(receipt: dict[str, Any]) -> str:
    """The text of `<run_id>.json`: the receipt itself, indented for people, UTF-8, newline-terminated (a
    lone surrogate in a string written as its JSON escape, see dal.core.jsontext)."""
    return dumps(receipt, indent=2) + "\n"


def write_receipt_files(
    receipt: dict[str, Any],
    directory: str | os.PathLike[str] | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
    durable: bool = True,
    job: Mapping[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Write `<run_id>.json` and `<run_id>.md` atomically and return their paths (json, md). `durable`
    false: without fsyncs, for a receipt the store already holds durably. `job`: the queue's job the run
    belongs to (its `next:` says a worker continues it).

    The folder is `directory` when given (`--receipts DIR`), else `<workspace>/.dal/receipts`.
    """
    from dal.receipts.markdown import render_markdown

    folder = receipts_dir(directory, workspace)
    run_id = receipt["run_id"]
    json_path = atomic_write(folder / f"{run_id}.json", receipt_json(receipt), durable=durable)
    md_path = atomic_write(folder / f"{run_id}.md", render_markdown(receipt, job=job), durable=durable)
    return json_path, md_path

