"""The REPL in-process: prompt-toolkit's pipe input and dummy output drive a real session."""

from __future__ import annotations

import _thread
import argparse
import threading
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from dal.repl.completer import DalCompleter, inside_string_or_comment
from dal.repl.history import default_history_path

ENTER = "\r"


def test_a_multi_line_fn_then_a_call(drive, history_file: Path) -> None:
    out = drive("fn add(a, b) {" + ENTER + "return a + b" + ENTER + "}" + ENTER + "add(40, 2)" + ENTER)
    assert "42" in out.splitlines()
    assert "add" in drive.repl.session.names()
    # The fn went into history as one entry of three lines, auto-indented.
    assert "+fn add(a, b) {\n+    return a + b\n+}\n" in history_file.read_text()


def test_history_is_written_on_demand(drive, history_file: Path) -> None:
    assert not history_file.parent.exists()
    drive("let x = 1" + ENTER + "x" + ENTER)
    entries = [line[1:] for line in history_file.read_text().splitlines() if line.startswith("+")]
    assert entries == ["let x = 1", "x"]


def test_an_error_then_a_correct_input(drive) -> None:
    out = drive("y + 1" + ENTER + "let y = 2" + ENTER + "y + 1" + ENTER)
    lines = out.splitlines()
    assert any(line.startswith("error[") for line in lines), out
    caret = next(i for i, line in enumerate(lines) if "^" in line)
    assert lines[caret - 1].endswith("y + 1"), "the caret sits under the source line"
    assert lines[-1] == "3"


def test_state_persists_and_expressions_print_in_dal_form(drive) -> None:
    out = drive('let m = {"a": [1, true, null]}' + ENTER + "m" + ENTER + "m.a" + ENTER + '"s"' + ENTER)
    lines = out.splitlines()
    assert '{"a": [1, true, null]}' in lines
    assert "[1, true, null]" in lines
    assert '"s"' in lines


def test_ctrl_c_at_the_prompt_clears_the_line(drive) -> None:
    out = drive("let lost = 1\x03" + "let kept = 2" + ENTER + "kept" + ENTER)
    assert "lost" not in drive.repl.session.names()
    assert out.splitlines()[-1] == "2"


def test_tab_completes_a_name_in_scope(drive) -> None:
    # Completion runs in the background: wait for its menu before Tab, and for Tab's effect
    # before Enter. The first Enter takes the highlighted completion, the second runs the input.
    def buffer(repl):
        return repl.prompt_session().default_buffer

    def menu_ready(repl) -> bool:
        state = buffer(repl).complete_state
        return state is not None and bool(state.completions)

    def completed(repl) -> bool:
        return buffer(repl).text == "total_count"

    out = drive("let total_count = 5" + ENTER + "total_c", menu_ready, "\t", completed, ENTER, ENTER)
    assert out.splitlines()[-1] == "5"


def test_esc_enter_runs_an_incomplete_input_and_shows_its_syntax_error(drive) -> None:
    out = drive("fn broken() {" + "\x1b\r" + "let after = 1" + ENTER + "after" + ENTER)
    assert "error[syntax]" in out
    assert out.splitlines()[-1] == "1"


def test_two_empty_lines_run_an_incomplete_input(drive) -> None:
    out = drive("let xs = [1," + ENTER + ENTER + ENTER + "1 + 1" + ENTER)
    assert "error[syntax]" in out
    assert out.splitlines()[-1] == "2"


def test_meta_commands(drive, workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "lib.dal"
    script.write_text('fn greet(n) { return "hi " + n }\n')
    out = drive(
        ":help" + ENTER + ":help split" + ENTER + ":steps" + ENTER + ":policy" + ENTER + ":receipts" + ENTER
        + f":load {script}" + ENTER + 'greet("dal")' + ENTER + ":nope" + ENTER
        + ":reset" + ENTER + ":steps" + ENTER + ":quit" + ENTER + "1 + 1" + ENTER
    )  # fmt: skip
    assert ":load" in out and "Ctrl-D" in out  # :help
    assert "split(" in out  # :help split shows the signature
    assert "steps:" in out and "(budget 1,000,000 per input)" in out
    assert "policy" in out
    assert '"hi dal"' in out  # :load ran the script into the session
    assert "unknown command :nope" in out
    assert "0 in this session" in out  # :reset
    assert out.rstrip().endswith("0 in this session")  # :quit left before 1 + 1


def test_banner_names_version_workspace_and_policy(drive, workspace: Path) -> None:
    import dal

    first = drive("").splitlines()[0]
    assert dal.__version__ in first and str(workspace) in first and "policy" in first


def test_ctrl_c_during_an_evaluation_interrupts_it_and_keeps_the_state(workspace, capsys) -> None:
    from dal.repl.app import Repl
    from dal.repl.session import Session

    # A budget far beyond what 0.3 s can use, so only the interrupt can end the loop.
    session = Session(filename="<repl>", max_steps=10**15, workspace=workspace)
    repl = Repl(session, workspace=workspace, color=False)
    repl.handle("let before = 7")
    # SIGINT reaches the main thread while the loop runs in the worker, as Ctrl-C in a terminal does.
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        repl.handle("while true { }")
    finally:
        timer.cancel()
    repl.handle("before")
    out = capsys.readouterr().out
    assert "interrupted" in out
    assert out.splitlines()[-1] == "7"


def test_plain_input_when_stdin_is_not_a_terminal(session, workspace, capsys) -> None:
    from dal.repl.app import Repl

    repl = Repl(session, workspace=workspace, color=False)
    repl.run_plain(["fn f(x) {\n", "  return x * 2\n", "}\n", "f(21)\n"])
    assert capsys.readouterr().out.splitlines()[-1] == "42"


def _complete(completer: DalCompleter, text: str, requested: bool = True) -> dict[str, str]:
    event = CompleteEvent(completion_requested=requested)
    return {c.text: c.display_meta_text for c in completer.get_completions(Document(text), event)}


def test_completion_candidates(session) -> None:
    from dal.repl.app import META_COMMANDS

    session.execute("let counter = 1")
    session.execute("fn compute(x) { return x }")
    completer = DalCompleter(session.names, META_COMMANDS)

    found = _complete(completer, "co")
    assert found["counter"] == "defined"
    assert found["compute"] == "defined"
    assert found["contains"].startswith("contains(")  # a builtin shows its signature
    assert found["continue"] == "keyword"

    assert _complete(completer, "let x = spl")["split"].startswith("split(")
    # the builtins of issue 16, with their signatures
    assert _complete(completer, "let s = fo")["format"] == "format(template, value, ...)"
    assert _complete(completer, "sor")["sort"] == "sort(list) or sort(list, key)"
    assert {"sleep", "slice"} & set(_complete(completer, "sl")) == {"sleep"}
    assert _complete(completer, 'print("co') == {}  # inside a string
    assert _complete(completer, "# co") == {}  # inside a comment
    assert _complete(completer, "counter.co") == {}  # a field: unknown statically
    assert set(_complete(completer, ":re")) == {":receipts", ":reset"}
    assert "keys" in _complete(completer, ":help ke")


def test_completion_knows_script_arguments(session) -> None:
    completer = DalCompleter(session.names, {})
    assert _complete(completer, "par")["param"] == "keyword"
    assert _complete(completer, "param count: ") == {t: "argument type" for t in ("str", "int", "float", "bool")}
    assert _complete(completer, "param ratio: fl") == {"float": "argument type"}
    assert _complete(completer, "let x = {\"a\": ") != {"str": "argument type"}  # a map entry is no param
    session.execute('param greeting: str = "hi"')  # the REPL binds a declared argument to its default
    assert _complete(completer, "gree")["greeting"] == "defined"
    assert session.execute("greeting").value == "hi"


def test_a_user_definition_shadows_the_builtin_in_completion(session) -> None:
    session.execute("fn record(state, operation, outcome) { return state }")
    completer = DalCompleter(session.names, {})
    assert _complete(completer, "recor")["record"] == "defined"


def test_inside_string_or_comment() -> None:
    assert inside_string_or_comment('x = "abc')
    assert not inside_string_or_comment('x = "a\\"b" + ')
    assert inside_string_or_comment('x = "a" # note')
    assert not inside_string_or_comment('x = "#" + ')
    assert not inside_string_or_comment('"abc\nx')  # strings end with their line


def test_history_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_history_path({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "dal" / "history"
    monkeypatch.setenv("HOME", str(tmp_path))
    expected = tmp_path / ".local" / "state" / "dal" / "history"
    assert default_history_path({}) == expected
    assert default_history_path({"XDG_STATE_HOME": "relative/ignored"}) == expected


def test_the_repl_command_registers_its_flags() -> None:
    from dal.cli.repl_cmd import register
    from dal.repl.main import run_repl

    parser = argparse.ArgumentParser(prog="dal")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["repl", "--max-steps", "10", "--history", "h.txt"])
    assert args.command == "repl" and args.max_steps == 10 and args.history == Path("h.txt")
    assert args.func is run_repl
    assert parser.parse_args(["repl"]).max_steps == 1_000_000


def _dal_repl(argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """`dal repl ARGV` with `stdin` piped in (not a terminal: the plain loop)."""
    import io

    from dal.repl.main import build_parser, run_repl

    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    return run_repl(build_parser().parse_args(argv))


def test_run_obeys_the_same_policy_flags_as_dal_run(workspace, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(workspace)
    history = str(tmp_path / "h")
    code = _dal_repl(
        ["--history", history, "--allow-run=git"],
        'let r = run("echo hello")\nr.ok\nr.stdout\nrun("curl http://example.com").status\n:policy\n',
        monkeypatch,
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "true" in out.splitlines() and '"hello\\n"' in out
    assert '"denied"' in out  # curl is not allowed: checked, never executed
    assert "git" in next(line for line in out.splitlines() if line.startswith("programs:"))


def test_a_bad_policy_file_is_a_usage_error(workspace, tmp_path, monkeypatch, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("this is [not toml")
    code = _dal_repl(
        ["--workspace", str(workspace), "--policy", str(bad), "--history", str(tmp_path / "h")], "", monkeypatch
    )
    assert code == 2
    assert "bad.toml" in capsys.readouterr().err


def test_loops_leave_receipts_visible_with_the_receipts_command(session, workspace, capsys) -> None:
    from dal.repl.app import Repl

    repl = Repl(session, workspace=workspace, color=False)
    assert "no loop" in repl.receipts_text()
    repl.handle("let i = 0")
    repl.handle("while i < 3 { i = i + 1 }")
    repl.handle(":receipts")
    out = capsys.readouterr().out
    assert "`while i < 3`" in out and "after 3 iterations" in out


def test_an_interrupted_loop_gets_its_receipt(workspace, capsys) -> None:
    from dal.repl.app import Repl
    from dal.repl.session import Session

    repl = Repl(Session(max_steps=10**15, workspace=workspace), workspace=workspace, color=False)
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    try:
        repl.handle("while true { }")
    finally:
        timer.cancel()
    assert "interrupt" in repl.receipts_text()


def test_a_spent_budget_leaves_the_session_usable(workspace, capsys) -> None:
    from dal.repl.app import Repl
    from dal.repl.session import Session

    repl = Repl(Session(max_steps=1000, workspace=workspace), workspace=workspace, color=False)
    repl.handle("let kept = 41")
    repl.handle("while true { }")
    out = capsys.readouterr().out
    assert "error[budget]" in out and "--max-steps" in out
    repl.handle("kept + 1")
    assert capsys.readouterr().out.splitlines()[-1] == "42"


def test_an_unwritable_history_costs_the_history_not_the_session(drive, tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the history folder should be")
    out = drive("1 + 2" + ENTER)
    assert out.splitlines()[-1] == "3"


def test_a_ctrl_c_as_an_input_ends_does_not_stop_the_next_one(session, workspace, capsys) -> None:
    import time

    from dal.repl.app import Repl

    repl = Repl(session, workspace=workspace, color=False)
    # The work in the worker ignores the request (as an input that just finished would).
    timer = threading.Timer(0.05, _thread.interrupt_main)
    timer.start()
    value, error = repl.in_worker(lambda: time.sleep(0.3) or "done")
    assert (value, error) == ("done", None)
    repl.handle("1 + 1")
    assert capsys.readouterr().out.splitlines()[-1] == "2"


def test_each_input_has_the_whole_budget() -> None:
    """A runaway loop stopped by the budget leaves the session usable: the budget is per input."""
    from dal.core.errors import DalError
    from dal.repl.session import Session

    s = Session(max_steps=2_000, write=lambda text: None)
    s.execute("let n = 0")
    with pytest.raises(DalError, match="step budget exhausted"):
        s.execute("while true { n = n + 1 }")
    assert s.execute("n > 0").value is True
    assert s.last_steps < 2_000 < s.steps_used


def test_a_session_leaves_one_run_receipt(tmp_path) -> None:
    """`dal repl` writes one receipt for the session: its effects and loop receipts, seen by `dal receipts`."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "dal", "repl"],
        input='let n = 0\nwhile n < 3 { n = n + 1 }\nrun("touch made.txt")\n',
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "session receipt" in proc.stderr
    (path,) = (tmp_path / ".dal" / "receipts").glob("*.json")
    receipt = json.loads(path.read_text())
    from dal.receipts.schema import validate

    validate(receipt)
    assert receipt["operation"] == "repl" and receipt["status"] == "completed"
    assert [e["command"] for e in receipt["effects"]["items"]] == ["touch made.txt"]
    assert receipt["loops"][0]["clause"] == "n < 3"
    listing = subprocess.run([sys.executable, "-m", "dal", "receipts"], cwd=tmp_path, capture_output=True, text=True)
    assert receipt["run_id"] in listing.stdout
