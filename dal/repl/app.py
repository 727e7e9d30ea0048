"""The DAL REPL: a prompt-toolkit session over one `dal.repl.session.Session`.

The shape follows ptpython: Enter runs the input once the parser says it is complete and otherwise
opens a continuation line; Ctrl-C at the prompt clears the line, Ctrl-C during an evaluation
interrupts it and keeps the session; Ctrl-D leaves. Evaluation runs in a worker thread so the main
thread stays free to turn Ctrl-C (SIGINT) into `Session.interrupt()`.
"""

from __future__ import annotations

import inspect
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.filters import has_selection
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.output import Output
from prompt_toolkit.styles import Style

from dal import __version__
from dal.repl import completeness
from dal.repl.completer import DalCompleter, builtin_signatures, builtins_table
from dal.repl.lexer import KEYWORDS, DalLexer
from dal.repl.wiring import SessionWiring, describe_policy

PROMPT = "dal> "
INDENT = "    "

META_COMMANDS: dict[str, str] = {
    ":help": "this help; :help NAME describes a builtin or keyword",
    ":steps": "steps of the last input and of the session, and the per-input budget",
    ":receipts": "the receipts of this session's run",
    ":policy": "the policy that run() obeys",
    ":load": "run a script (FILE) into this session",
    ":reset": "forget every definition and start counting steps again",
    ":quit": "leave the REPL (Ctrl-D does too)",
}
_USAGE = {":load": ":load FILE", ":help": ":help [NAME]"}

KEYWORD_HELP: dict[str, str] = {
    "let": "let NAME = EXPR declares a variable in the current block; NAME = EXPR assigns it later",
    "fn": "fn NAME(a, b) { ... return e } defines a function; fn(a) { ... } is a function value",
    "if": "if COND { } else if COND { } else { }; COND must be a boolean",
    "else": "if COND { } else if COND { } else { }",
    "while": "while COND { } repeats while COND is true; every exit of the loop leaves a receipt",
    "for": "for x in LIST { } runs the block once per item",
    "in": "for x in LIST { } runs the block once per item",
    "break": "break leaves the innermost loop",
    "continue": "continue starts the next iteration of the innermost loop",
    "return": "return EXPR ends the function with a value; it is the last statement of its block",
    "and": "a and b: both booleans, b is evaluated only when a is true",
    "or": "a or b: both booleans, b is evaluated only when a is false",
    "not": "not a: a must be a boolean",
    "true": "the boolean literal true",
    "false": "the boolean literal false",
    "null": "the absent value; a function without return returns null",
}

_ALIASES = {":q": ":quit", ":exit": ":quit", ":h": ":help", ":?": ":help"}

HELP = """\
Type DAL statements or an expression; an expression's value is shown in DAL literal form.
Definitions (let, fn) stay for the rest of the session.

  Enter          run the input once it is complete; while a brace, bracket, parenthesis
                 or string is open it starts a continuation line (...)
  Esc Enter      run the input as it is (two empty lines do the same)
  Tab            complete keywords, builtins and the names you defined
  Ctrl-C         clear the line, or interrupt the running input (its loops get receipts)
  Ctrl-D         leave
  Up / Down      history, kept in {history}

Commands:
{commands}"""

_STYLE = Style.from_dict(
    {
        "prompt": "ansigreen bold",
        "continuation": "ansibrightblack",
    }
)


class Repl:
    """One interactive session: reads inputs, evaluates them in `session`, prints results and errors."""

    def __init__(
        self,
        session: Any,
        *,
        workspace: Path,
        wiring: SessionWiring | None = None,
        history: History | None = None,
        input: Input | None = None,
        output: Output | None = None,
        stdout: TextIO | None = None,
        color: bool | None = None,
    ) -> None:
        self.session = session
        self.workspace = workspace
        self.wiring = wiring if wiring is not None else SessionWiring(session)
        self.wiring.attach()
        self.policy_summary, self.policy_detail = describe_policy(getattr(session, "policy", None))
        self.history = history if history is not None else InMemoryHistory()
        self._stdout = stdout
        self.color = self._want_color() if color is None else color
        self._input = input
        self._output = output
        self._prompt: PromptSession[str] | None = None
        self.errors = 0  # inputs that failed (piped input exits 1 after any)
        try:
            self._execute_takes_filename = "filename" in inspect.signature(session.execute).parameters
        except (TypeError, ValueError):
            self._execute_takes_filename = False

    # -- output ------------------------------------------------------------------------------

    @property
    def stdout(self) -> TextIO:
        # Resolved on use so that a redirected sys.stdout (pytest's capture) is honoured.
        return self._stdout if self._stdout is not None else sys.stdout

    def write(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def _want_color(self) -> bool:
        from dal.core.diagnostics import want_color

        return want_color(self.stdout)

    def banner(self) -> str:
        return (
            f"DAL {__version__} · workspace {self.workspace} · policy: {self.policy_summary}\n"
            "Type :help for help, Ctrl-D to leave."
        )

    # -- the prompt --------------------------------------------------------------------------

    def is_complete(self, text: str) -> bool:
        # The grammar decides (dal/repl/completeness.py).
        return completeness.is_complete(text)

    def ready_to_run(self, document: Document) -> bool:
        """Whether Enter at this point runs the input rather than opening a new line."""
        text = document.text
        if not text.strip() or text.lstrip().startswith(":"):
            return True
        if document.text_after_cursor.strip():
            return False  # the cursor is inside the input: Enter splits the line, as in an editor
        if self.is_complete(text):
            return True
        lines = text.split("\n")
        # Two empty lines in a row run an incomplete input, so the parser can say what is missing.
        return len(lines) >= 3 and not lines[-1].strip() and not lines[-2].strip()

    def key_bindings(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("enter", filter=~has_selection)
        def _enter(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            if buf.complete_state is not None and buf.complete_state.current_completion is not None:
                buf.complete_state = None  # Enter in the menu takes the highlighted completion
                return
            if self.ready_to_run(buf.document):
                buf.validate_and_handle()
            else:
                _newline_with_indent(buf)

        @kb.add("escape", "enter")
        def _force_run(event: KeyPressEvent) -> None:
            event.current_buffer.validate_and_handle()

        for closer in "}])":
            kb.add(closer)(_dedent_then_insert(closer))
        return kb

    def prompt_session(self) -> PromptSession[str]:
        if self._prompt is None:
            self._prompt = PromptSession(
                message=FormattedText([("class:prompt", PROMPT)]),
                prompt_continuation=lambda width, _line, _wrap: FormattedText(
                    [("class:continuation", "...".ljust(width))]
                ),
                multiline=True,
                lexer=PygmentsLexer(DalLexer),
                completer=DalCompleter(self._names, META_COMMANDS, fields=self._fields),
                complete_while_typing=True,
                auto_suggest=AutoSuggestFromHistory(),
                history=self.history,
                key_bindings=self.key_bindings(),
                style=_STYLE,
                include_default_pygments_style=True,
                enable_open_in_editor=True,
                input=self._input,
                output=self._output,
            )
        return self._prompt

    def _names(self) -> Iterable[str]:
        return self.session.names()

    def _fields(self, name: str) -> Iterable[str]:
        """The keys of the map `name` holds now (Tab after `state.`)."""
        value = getattr(self.session.engine, "globals", {}).get(name)
        return sorted(k for k in value if isinstance(k, str)) if isinstance(value, dict) else ()

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Read, evaluate, print until Ctrl-D or :quit. Returns the exit code."""
        completeness.warm_up()
        self.write(self.banner())
        prompt = self.prompt_session()
        while True:
            try:
                text = prompt.prompt()
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt: the line is dropped, nothing else changes
            except EOFError:
                break
            try:
                if not self.handle(text):
                    break
            except KeyboardInterrupt:
                # A Ctrl-C that arrived after the evaluation ended, while printing: nothing was lost.
                self.write("(interrupted)")
        self.close()
        return 0

    def run_plain(self, lines: Iterable[str]) -> int:
        """The same loop for input that is not a terminal (`dal repl < file`): no prompt, no editing.
        Errors name the input's own lines (`<stdin>:4:9`), and the exit is 1 when any input failed, so
        that a pipeline notices."""
        pending = ""
        start = line_no = 1
        self.errors = 0
        for line in lines:
            if not pending:
                start = line_no
            pending += line
            line_no += 1
            if pending.strip().startswith(":") or self.is_complete(pending):
                keep_going = self._handle_at(pending, start)
                pending = ""
                if not keep_going:
                    break
        if pending.strip():
            self._handle_at(pending, start)
        self.close()
        return 1 if self.errors else 0

    def _handle_at(self, text: str, line: int) -> bool:
        """handle() for piped input starting at `line`: the blank lines in front put every error's line
        where it is in the input."""
        if text.strip().startswith(":"):
            return self.handle(text)
        if text.strip():
            self.evaluate("\n" * (line - 1) + text, filename="<stdin>")
        return True

    def close(self) -> None:
        """End the session's run (its run receipt), if the session knows how."""
        close = getattr(self.session, "close", None)
        if callable(close):
            try:
                close()
            except Exception as e:  # leaving must always work
                self.write(f"warning: closing the session failed: {e}")

    def handle(self, text: str) -> bool:
        """Run one input (DAL or a :command). Returns False when the REPL should end."""
        stripped = text.strip()
        if not stripped:
            return True
        if stripped.startswith(":"):
            return self.meta(stripped)
        self.evaluate(text)
        return True

    # -- evaluation --------------------------------------------------------------------------

    def evaluate(self, source: str, filename: str | None = None) -> None:
        outcome, error = self.in_worker(lambda: self._execute(source, filename))
        if error is not None:
            self.show_error(error)
            return
        if outcome is not None and getattr(outcome, "is_expression", False):
            text = self.repr(outcome.value)
            if text != "null":  # like Python's None: a call for its effect shows nothing
                self.write(self.highlight(text))

    def _execute(self, source: str, filename: str | None) -> Any:
        if filename is None:
            return self.session.execute(source)
        if self._execute_takes_filename:
            return self.session.execute(source, filename=filename)
        # Session names its inputs after `session.filename`: borrow it so errors in a loaded
        # script point into that file.
        saved = self.session.filename
        self.session.filename = filename
        try:
            return self.session.execute(source)
        finally:
            self.session.filename = saved

    def in_worker(self, fn: Callable[[], Any]) -> tuple[Any, BaseException | None]:
        """Run `fn` in a thread; Ctrl-C meanwhile interrupts the session instead of the REPL.

        While it runs, SIGINT goes to a handler that only asks the session to stop. A handler rather
        than catching KeyboardInterrupt: the exception can land anywhere, even between two lines of
        the except clause, and the REPL would go back to the prompt with the evaluation still running.
        """
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # handed to the main thread, which reports it
                box["error"] = e
            finally:
                done.set()

        presses = 0

        def on_sigint(_signum: int, _frame: Any) -> None:
            nonlocal presses
            presses += 1
            self.session.interrupt()
            if presses == 1:
                self.write("")  # the terminal echoed ^C: start the report on a line of its own
            elif presses == 2:
                self.write("stopping... a running command gets a few seconds (DAL_STOP_GRACE), then is stopped")

        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            threading.Thread(target=work, name="dal-eval", daemon=True).start()
            while not done.wait(0.05):
                pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        error = box.get("error")
        if presses and getattr(error, "kind", None) != "interrupted":
            self._drop_stale_interrupt()
        return box.get("value"), error

    def _drop_stale_interrupt(self) -> None:
        # The evaluation ended on its own just as Ctrl-C arrived: the request is still pending in the
        # runtime and would stop the next input at its first step. Session has no API to withdraw it.
        rt = getattr(self.session, "rt", None)
        if rt is not None and getattr(rt, "interrupt_reason", None) is not None:
            rt.interrupt_reason = None

    def repr(self, value: Any) -> str:
        from dal.eval.values import dal_repr

        return dal_repr(value)

    def highlight(self, text: str) -> str:
        if not self.color:
            return text
        from pygments import highlight
        from pygments.formatters import TerminalFormatter

        return highlight(text, DalLexer(), TerminalFormatter()).rstrip("\n")

    def show_error(self, error: BaseException) -> None:
        from dal.core.errors import DalError

        self.errors += 1
        if isinstance(error, DalError) and error.kind != "internal":
            from dal.core.diagnostics import render

            self.write(render(error, color=self.color))
        else:
            # A bug in DAL, not in the input: say so plainly, keep the session.
            self.write(f"internal error (a bug in DAL, not in your input): {type(error).__name__}: {error}")

    # -- meta-commands -----------------------------------------------------------------------

    def meta(self, text: str) -> bool:
        command, _, arg = text.partition(" ")
        command = _ALIASES.get(command, command)
        arg = arg.strip()
        if command == ":quit":
            return False
        if command == ":help":
            self.write(self.help(arg))
        elif command == ":steps":
            s = self.session
            self.write(
                f"steps: {s.last_steps:,} in the last input (budget {s.max_steps:,} per input), "
                f"{s.steps_used:,} in this session"
            )
        elif command == ":policy":
            self.write(self.policy_text())
        elif command == ":receipts":
            self.write(self.receipts_text())
        elif command == ":reset":
            self.session.reset()
            self.write("session reset: every definition is gone and the step count is back to 0")
        elif command == ":load":
            self.load(arg)
        else:
            import difflib

            self.errors += 1
            close = difflib.get_close_matches(command, [*META_COMMANDS, *_ALIASES], n=1, cutoff=0.6)
            hint = f" (did you mean {_ALIASES.get(close[0], close[0])}?)" if close else ""
            self.write(f"unknown command {command}{hint}; :help lists the commands")
        return True

    def help(self, topic: str = "") -> str:
        if not topic:
            usage = {c: _USAGE.get(c, c) for c in META_COMMANDS}
            width = max(len(u) for u in usage.values())
            commands = "\n".join(f"  {usage[c].ljust(width)}  {summary}" for c, summary in META_COMMANDS.items())
            where = getattr(self.history, "filename", None)
            return HELP.format(commands=commands, history=where or "memory (this session only)")
        signatures = builtin_signatures()
        if topic in signatures:
            signature, _ = signatures[topic]
            return f"{signature}\n{_builtin_doc(topic)}".rstrip()
        if topic in KEYWORDS:
            return KEYWORD_HELP.get(topic, f"{topic} is a DAL keyword")
        name = _ALIASES.get(topic, topic) if topic.startswith(":") else f":{topic}"
        if name in META_COMMANDS:
            return f"{_USAGE.get(name, name)}  {META_COMMANDS[name]}"
        return f"no help for {topic!r}: try a builtin name, a keyword or a :command"

    def policy_text(self) -> str:
        return self.policy_detail

    def receipts_text(self) -> str:
        from dal.receipts.render import describe_loop

        items = self.wiring.loop_receipts()
        if not items:
            return "no loop has exited yet in this session"
        return "\n".join(f"{i}. {describe_loop(r)}" for i, r in enumerate(items, 1))

    def load(self, arg: str) -> None:
        if not arg:
            self.write("usage: :load FILE")
            return
        path = Path(arg).expanduser()
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            self.write(f"cannot read {path}: {getattr(e, 'strerror', None) or e}")
            return
        self.evaluate(source, filename=str(path))


def _builtin_doc(name: str) -> str:
    table = builtins_table() or {}
    return (getattr(table.get(name), "doc", "") or "").strip()


def _newline_with_indent(buf: Buffer) -> None:
    line = buf.document.current_line_before_cursor
    indent = line[: len(line) - len(line.lstrip())]
    if line.split("#", 1)[0].rstrip().endswith(("{", "[", "(")):
        indent += INDENT
    buf.insert_text("\n" + indent)


def _dedent_then_insert(closer: str) -> Callable[[KeyPressEvent], None]:
    def handler(event: KeyPressEvent) -> None:
        buf = event.current_buffer
        before = buf.document.current_line_before_cursor
        if before and not before.strip():
            buf.delete_before_cursor(min(len(INDENT), len(before)))
        buf.insert_text(closer)

    return handler
