"""Fixtures for the REPL tests: a real session, an in-process REPL on a pipe, a real terminal in tmux."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def session(workspace: Path):
    """A real interpreter session (the REPL tests skip until `dal.repl.session` exists)."""
    session_mod = pytest.importorskip("dal.repl.session")
    return session_mod.Session(filename="<repl>", max_steps=1_000_000, workspace=workspace, policy=None)


@pytest.fixture
def history_file(tmp_path: Path) -> Path:
    # Two levels that do not exist yet: the history must create them on demand.
    return tmp_path / "state" / "dal" / "history"


@pytest.fixture
def drive(session, workspace: Path, history_file: Path, capsys: pytest.CaptureFixture[str]):
    """`drive(keys, *later) -> output`: type into a fresh in-process REPL, then Ctrl-D.

    `later` chunks are typed 0.2 s apart; a callable among them is a condition on the REPL to wait
    for first (keys that depend on background work, such as completion).

    Keys use terminal bytes: "\\r" is Enter, "\\t" Tab, "\\x03" Ctrl-C, "\\x1b\\r" Esc Enter.
    The REPL is left on `drive.repl` for inspection.
    """
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from dal.repl.app import Repl
    from dal.repl.history import LazyFileHistory

    def run(keys: str, *later: str | Callable[[Any], bool]) -> str:
        with create_pipe_input() as pipe:
            repl = Repl(
                session,
                workspace=workspace,
                history=LazyFileHistory(history_file),
                input=pipe,
                output=DummyOutput(),
                color=False,
            )
            run.repl = repl  # type: ignore[attr-defined]
            pipe.send_text(keys)

            missed: list[str] = []

            def type_the_rest() -> None:
                for chunk in later:
                    if callable(chunk):  # wait (at most 10 s) until the REPL is in the state asked for
                        deadline = time.monotonic() + 10
                        while not chunk(repl) and time.monotonic() < deadline:
                            time.sleep(0.01)
                        if not chunk(repl):
                            missed.append(getattr(chunk, "__name__", repr(chunk)))
                    else:
                        time.sleep(0.2)
                        pipe.send_text(chunk)
                time.sleep(0.1 if later else 0)
                pipe.send_text("\x04")

            repl.prompt_session()  # made here, before the typist's conditions can look at it
            typist = threading.Thread(target=type_the_rest, daemon=True)
            typist.start()
            assert repl.run() == 0
            typist.join()
        assert not missed, f"the REPL never reached: {missed}"
        return capsys.readouterr().out

    return run


class Terminal:
    """A program in a real terminal (a detached tmux session on its own server socket)."""

    def __init__(self, socket: str, width: int = 100, height: int = 40) -> None:
        self.socket = socket
        self.width = width
        self.height = height

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=_TMUX_ENV,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def start(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        command = " ".join(_shell_quote(a) for a in argv)
        exports = " ".join(f"{k}={_shell_quote(v)}" for k, v in env.items())
        # `; sleep` keeps the pane open after the program ends, so its last screen can be read.
        self.tmux(
            "new-session", "-d", "-x", str(self.width), "-y", str(self.height), "-c", str(cwd),
            f"env {exports} {command}; echo '[exited]'; sleep 30",
        )  # fmt: skip

    def send(self, *keys: str) -> None:
        """Send keys as tmux names them: literal text, or "Enter", "C-c", "C-d", "Tab"."""
        for key in keys:
            if key in {"Enter", "C-c", "C-d", "Tab", "Escape", "BSpace"}:
                self.tmux("send-keys", "-t", "0", key)
            else:
                self.tmux("send-keys", "-t", "0", "-l", key)

    def type_line(self, text: str) -> None:
        self.send(text, "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "0")

    def wait_for(self, predicate: Callable[[str], bool] | str, timeout: float = 10.0) -> str:
        """Poll the screen until `predicate` holds (or the text appears); fail with the screen."""
        check = (lambda s: predicate in s) if isinstance(predicate, str) else predicate
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if check(screen):
                return screen
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {predicate!r}; the screen was:\n{screen}")

    def kill(self) -> None:
        try:
            socket_path = self.tmux("display-message", "-p", "#{socket_path}").strip()
        except (RuntimeError, subprocess.TimeoutExpired):
            socket_path = ""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10, env=_TMUX_ENV)
        if socket_path.endswith(self.socket):  # tmux leaves the socket file behind
            Path(socket_path).unlink(missing_ok=True)


# Our own server even when the tests themselves run inside tmux.
_TMUX_ENV = {k: v for k, v in os.environ.items() if k not in {"TMUX", "TMUX_PANE"}}


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    pytest.importorskip("dal.repl.session")
    term = Terminal(f"dal-repl-test-{uuid.uuid4().hex[:12]}")
    try:
        yield term
    finally:
        term.kill()


@pytest.fixture
def repl_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a REPL in the terminal: this checkout, a private state folder, no colour quirks."""
    return {
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "HOME": str(tmp_path),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }


@pytest.fixture
def repl_argv() -> list[str]:
    """`python -m dal repl` once the main CLI exists, the REPL module directly before that."""
    if (REPO / "dal" / "cli" / "main.py").exists():
        return [sys.executable, "-m", "dal", "repl"]
    return [sys.executable, "-m", "dal.repl"]
