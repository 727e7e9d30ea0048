"""What the test harnesses that drive `dal` as real processes share (tests/durable/conftest.py,
tests/worker/worker_queue.py, tests/console/console_helpers.py, tests/pg/world.py): the repository, a
command's result, a workspace's files, the environment of a `dal` child, the `dal` command in this process,
the bytecode cache of the children, a workspace with its policy and input file, and stopping worker
process groups. Each harness keeps what is its own
(its policy, its store, its waits); this module only holds the pieces that were the same in each."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import attrs

REPO = Path(__file__).resolve().parents[1]

# The policy of the queue, console and PostgreSQL harnesses (the durability tests' own allows no `sleep`).
SEND_POLICY = """\
[run]
allow = ["sleep"]

# `tee` stands in for a program that leaves the machine: each line it appends to outbox.txt is one send.
[programs.tee]
class = "external"
"""


def make_workspace(ws: Path, policy: str) -> Path:
    """Folder `ws` as a workspace: `policy` as its dal.toml, and the input file the scripts read."""
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "dal.toml").write_text(policy, encoding="utf-8")
    (ws / "input.txt").write_text("quarterly figures\n", encoding="utf-8")
    return ws


@attrs.define
class Result:
    code: int
    out: str
    err: str


class Files:
    """The files of a workspace `ws`: what a test writes there, and the lines a script appended."""

    ws: Path

    def write(self, name: str, text: str) -> Path:
        p = self.ws / name
        p.write_text(text, encoding="utf-8")
        return p

    def lines(self, name: str) -> list[str]:
        p = self.ws / name
        return p.read_text(encoding="utf-8").splitlines() if p.exists() else []


def dal_env(extra: dict[str, str], *, validate: bool, pycache: Path | None = None,
            keep_bytecode_flag: bool = True, store: str | None = None) -> dict[str, str]:
    """The environment of a `dal` child: this one's without any DAL_ variable (nor PYTHONDONTWRITEBYTECODE
    unless `keep_bytecode_flag`), this repository on PYTHONPATH, receipts validated and the ceiling of the
    workspace search passed on when `validate`, the children's bytecode in `pycache`, `store` as DAL_STORE,
    then `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DAL_") and (keep_bytecode_flag or k != "PYTHONDONTWRITEBYTECODE")}
    if validate:
        env["DAL_VALIDATE_RECEIPTS"] = "1"
        env["DAL_CEILING_DIRECTORIES"] = os.environ.get("DAL_CEILING_DIRECTORIES", "")
    if store is not None:
        env["DAL_STORE"] = store
    env["PYTHONPATH"] = str(REPO)
    if pycache is not None:
        env["PYTHONPYCACHEPREFIX"] = str(pycache)  # bytecode cached outside the repo: faster starts
    env.update(extra)
    return env


def cli_in(ws: Path, *args: str) -> Result:
    """`dal ARGS` in this process, from folder `ws` (fast): the same main() the command runs."""
    from dal.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(ws)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:
                code = int(e.code or 0)
    finally:
        os.chdir(cwd)
    return Result(code, out.getvalue(), err.getvalue())


def pycache_dir() -> Path:
    """Bytecode of the children, kept between sessions outside the repository (starts ~0.4 s faster)."""
    p = Path(tempfile.gettempdir()) / f"dal-test-pycache-{os.getuid()}"
    p.mkdir(exist_ok=True)
    return p


def stop_groups(procs: list[subprocess.Popen[str]]) -> None:
    """Kill each process still running with its process group (a worker with its children), stopped or not."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait(timeout=10)
