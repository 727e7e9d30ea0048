"""Issue 15, point 10: the REPL as a newcomer meets it, driven through the installed `dal` (tmux for the
terminal, a pipe for piped input)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DAL = str(Path(sys.executable).with_name("dal"))


def _prompts(screen: str) -> int:
    return sum(1 for line in screen.splitlines() if line.startswith("dal>"))


def test_unterminated_string_is_an_error_and_tab_completes_a_field(terminal, workspace: Path, repl_env) -> None:
    terminal.start([DAL, "repl"], cwd=workspace, env=repl_env)
    terminal.wait_for(lambda s: "Type :help" in s and s.rstrip().endswith("dal>"))
    # A string cannot span lines: Enter shows the error at once, no `...` continuation.
    terminal.type_line('let s = "abc')
    screen = terminal.wait_for(lambda s: "unterminated string" in s and _prompts(s) == 2)
    assert "... " not in screen
    # Tab after `state.` offers the map's keys.
    terminal.type_line('let state = {"attempt": 1, "status": "pending"}')
    terminal.wait_for(lambda s: _prompts(s) == 3)
    terminal.send("state.st")
    terminal.wait_for(lambda s: any("status" in line and "field" in line for line in s.splitlines()))
    terminal.send("Tab")
    terminal.wait_for(lambda s: "dal> state.status" in s.splitlines())
    terminal.send("Enter")  # the first Enter takes the completion, the second runs the line
    terminal.send("Enter")
    terminal.wait_for(lambda s: '"pending"' in s)
    # A mistyped meta-command gets a did-you-mean.
    terminal.type_line(":hlep")
    terminal.wait_for("did you mean :help?")
    terminal.send("C-d")
    terminal.wait_for("[exited]")
    assert not (workspace / ".dal").exists()  # it only evaluated: no store, no run


def test_piped_input_reports_its_own_lines_and_exits_1_after_an_error(tmp_path: Path) -> None:
    p = subprocess.run([DAL, "repl"], input="1 + 1\nlet x = 2\n\nlet y = nope\nprint(x)\n", cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert " --> <stdin>:4:9" in p.stdout and "<repl:" not in p.stdout
    assert p.stdout.startswith("2\n") and p.stdout.rstrip().endswith("2")  # it went on after the error
    assert not (tmp_path / ".dal").exists()
    ok = subprocess.run([DAL, "repl"], input="1 + 1\n", cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout == "2\n" and not (tmp_path / ".dal").exists()


def test_a_session_that_runs_a_command_still_leaves_its_receipt(tmp_path: Path) -> None:
    p = subprocess.run([DAL, "repl"], input='run("true")\n', cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "session receipt" in p.stderr
    assert len(list((tmp_path / ".dal" / "receipts").glob("*.json"))) == 1


def test_the_session_receipt_says_its_steps_are_the_sessions_and_the_budget_each_inputs(tmp_path: Path) -> None:
    # Each input has the whole budget: a session may use more steps in all than one budget holds.
    script = 'run("true")\n' + "".join(f"let {v} = 0\nwhile {v} < 8 {{ {v} = {v} + 1 }}\n" for v in "ijk")
    p = subprocess.run([DAL, "repl", "--max-steps", "100"], input=script, cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    shown = subprocess.run([DAL, "receipt", "show", "latest"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60).stdout
    ran = next(line for line in shown.splitlines() if line.strip().startswith("ran "))
    assert " steps in the session (100 per input), 1 effect" in ran, ran
    used = int(ran.split(" steps in the session")[0].rsplit(", ", 1)[1].replace(",", ""))
    assert used > 100 and " of 100 steps" not in ran
