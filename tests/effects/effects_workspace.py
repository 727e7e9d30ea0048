"""Build a workspace with every kind of symlink, and hard links, next to an outside directory holding a canary."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CANARY = "canary: must never change\n"


def build_workspace(root: Path) -> tuple[Path, Path]:
    ws = root / "ws"
    outside = root / "outside"
    (ws / "docs").mkdir(parents=True)
    (ws / "sub").mkdir()
    outside.mkdir()
    (outside / "canary.txt").write_text(CANARY)
    (ws / "notes.txt").write_text("beta\nalpha\nbeta\nTODO: gamma\n")
    (ws / "docs" / "a.md").write_text("# A\nTODO one\n")
    (ws / "my file.txt").write_text("spaced\n")
    os.symlink("../outside", ws / "link_out")  # directory symlink leaving the workspace
    os.symlink("/etc/passwd", ws / "link_passwd")  # absolute file symlink
    os.symlink("../outside/canary.txt", ws / "file_link_out")
    os.symlink("../outside/created-by-dangling", ws / "dangling")  # a write would create its target
    os.symlink("docs", ws / "link_in")  # stays inside
    os.symlink("..", ws / "sub" / "up")  # back to the workspace root: still inside
    # An existing tree with a symlink deep inside: `cp -r docs dest` would write through dest/docs/a.md.
    (ws / "dest" / "docs").mkdir(parents=True)
    os.symlink("../../../outside/canary.txt", ws / "dest" / "docs" / "a.md")
    # Hard links to the canary: a name inside the workspace for a file outside, at the top and in a tree.
    os.link(outside / "canary.txt", ws / "hard_canary")
    (ws / "hard_tree" / "docs").mkdir(parents=True)  # `cp -r docs hard_tree` would write into docs/a.md
    os.link(outside / "canary.txt", ws / "hard_tree" / "docs" / "a.md")
    # Protected paths: a git repository's config and hooks, a nested repository, a run store.
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "nested" / ".git").mkdir(parents=True)
    (ws / "nested" / ".git" / "config").write_text("")
    # A real, empty run store (an empty file there is refused as a truncated store: docs/receipts.md).
    from dal.receipts.store import Store

    Store(ws / ".dal" / "dal.db").close()
    # A folder that looks like git internals: renamed or copied to `.git` it would become them.
    (ws / "tpl" / "hooks").mkdir(parents=True)
    (ws / "tpl" / "hooks" / "post-checkout").write_text("#!/bin/sh\n")
    (ws / "tpl" / "config").write_text("")
    # A folder whose entry leads out: `diff notes.txt trap` compares notes.txt with trap/notes.txt.
    (ws / "trap").mkdir()
    os.symlink("../../outside/canary.txt", ws / "trap" / "notes.txt")
    # A relative symlink that points inside where it is (to the workspace) and out once moved up.
    (ws / "deep" / "a").mkdir(parents=True)
    os.symlink("../..", ws / "deep" / "a" / "up2")
    return ws, outside


def snapshot(path: Path) -> dict[str, bytes | str]:
    """Every entry under `path` with its content (files) or link target (symlinks)."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(path))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = p.read_bytes()
            else:
                out[rel] = "dir"
    return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serve_folder(site: Path) -> Iterator[str]:
    """A local HTTP server of the folder `site`, quiet, on a free port of 127.0.0.1: its base URL."""

    def handler(*a: object, **kw: object) -> _Quiet:
        return _Quiet(*a, directory=str(site), **kw)  # type: ignore[arg-type]

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def private_tmp_sh() -> str:
    """Shell that mounts an empty tmpfs on /tmp in the current (private) mount namespace, keeping reachable
    this interpreter's environment and the repository when they live under /tmp (a clone in /tmp/x, as CI
    may make): each is bound back at its own path from the old /tmp."""
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    keep = sorted({p for p in (os.path.realpath(sys.prefix), os.path.realpath(repo)) if p.startswith("/tmp/")})
    binds = "".join(f" && mkdir -p '{p}' && mount --bind '/run/dal-old-tmp{p[4:]}' '{p}'" for p in keep)
    return ("mkdir -p /run/dal-old-tmp && mount --bind /tmp /run/dal-old-tmp && mount -t tmpfs -o mode=1777 tmpfs /tmp"
            + binds)


def no_bwrap_prefix(tmp_path: Path) -> list[str] | None:
    """A private mount namespace in which /usr/bin/bwrap is an empty file: `dal run --unsandboxed-as-root`
    then runs without the wall, as a reproduction of an attack does (root only); None where that cannot be made."""
    import shutil

    if os.geteuid() != 0 or not shutil.which("unshare") or not os.path.exists("/usr/bin/bwrap"):
        return None
    empty = tmp_path / "nobwrap"
    empty.write_text("")
    return ["unshare", "-m", "--", "sh", "-c", f'mount --bind {empty} /usr/bin/bwrap && exec "$@"', "x"]
