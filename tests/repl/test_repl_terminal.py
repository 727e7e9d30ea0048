"""The REPL in a real terminal: tmux runs it, keys are sent, the screen is read back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest


def _prompts(screen: str) -> int:
    # capture-pane trims trailing spaces, so an empty prompt reads "dal>".
    return sum(1 for line in screen.splitlines() if line.startswith("dal>"))


def test_a_session_in_a_real_terminal(terminal, workspace: Path, repl_env, repl_argv: list[str]) -> None:
    # A budget the endless loop cannot use up before Ctrl-C arrives.
    argv = [*repl_argv, "--max-steps", "1000000000000000"]
    terminal.start(argv, cwd=workspace, env=repl_env)
    terminal.wait_for(lambda s: "Type :help" in s and s.rstrip().endswith("dal>"))

    # A multi-line fn: Enter continues while the brace is open.
    terminal.type_line("fn add(a, b) {")
    terminal.wait_for("... ")
    terminal.type_line("return a + b")
    terminal.type_line("}")
    terminal.wait_for(lambda s: _prompts(s) == 2)

    # An expression result; Tab completes a name in scope (the first Enter takes the completion).
    terminal.send("ad")
    terminal.wait_for(lambda s: any("add" in line and "defined" in line for line in s.splitlines()))
    terminal.send("Tab")
    terminal.wait_for(lambda s: "dal> add" in s.splitlines())
    terminal.send("Enter")
    terminal.type_line("(40, 2)")
    screen = terminal.wait_for(lambda s: "\n42\n" in s)

    # An error with its caret, and the session goes on.
    terminal.type_line("add(missing, 1)")
    screen = terminal.wait_for(lambda s: "^" in s and _prompts(s) == 4)
    lines = screen.splitlines()
    assert any(line.startswith("error[") and "missing" in line for line in lines), screen
    caret_line = next(line for line in lines if line.strip().startswith("|") and "^" in line)
    source_line = lines[lines.index(caret_line) - 1]
    assert "add(missing, 1)" in source_line
    assert source_line.index("missing") == caret_line.index("^"), "the caret points at the name"

    # Ctrl-C during an endless loop interrupts it and keeps the state.
    terminal.type_line("while true { }")
    terminal.wait_for(lambda s: s.rstrip().endswith("while true { }"))
    # A Ctrl-C typed before the prompt has handed the terminal back (a few ms after Enter) is read as
    # typeahead for the next prompt, not as SIGINT: give it a moment, and press again if needed.
    for attempt in range(5):
        time.sleep(0.3)
        terminal.send("C-c")
        try:
            terminal.wait_for(lambda s: "interrupted" in s and s.rstrip().endswith("dal>"), timeout=2)
            break
        except AssertionError:
            if attempt == 4:
                raise
    terminal.type_line("add(1, 2)")
    terminal.wait_for(lambda s: "\n3\n" in s)

    # Ctrl-C at the prompt drops the line.
    terminal.send("let dropped = 1")
    terminal.send("C-c")
    terminal.type_line(":steps")
    terminal.wait_for("budget 1,000,000,000,000,000 per input")

    # Ctrl-D ends it.
    terminal.send("C-d")
    terminal.wait_for("[exited]")
    assert (Path(repl_env["XDG_STATE_HOME"]) / "dal" / "history").is_file()


def test_dal_alone_on_a_terminal_starts_the_repl(terminal, workspace: Path, repl_env, repl_argv) -> None:
    if repl_argv[-1] != "repl":
        pytest.skip("the main CLI (dal/cli/main.py) is not there yet")
    terminal.start(repl_argv[:-1], cwd=workspace, env=repl_env)
    terminal.wait_for(lambda s: "Type :help" in s and s.rstrip().endswith("dal>"))
    terminal.type_line('"a" + "b"')
    terminal.wait_for('\n"ab"\n')
    terminal.send("C-d")
    terminal.wait_for("[exited]")
