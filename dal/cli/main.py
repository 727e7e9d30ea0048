"""The `dal` command line: a thin layer over the engine, the runner and the store.

Exit codes of `dal run`: 0 completed or skipped, 1 failed, 2 rejected or usage error, 3 waiting,
4 exhausted, 130 interrupted (143 when stopped by SIGTERM, 129 by SIGHUP, 131 by SIGQUIT).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from dal import __version__
from dal.cli import entry
from dal.core.readbelow import UnreadableScript
from dal.core.readbelow import read_script as _read_script

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WAITING, EXIT_EXHAUSTED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_PIPE = 141  # 128 + SIGPIPE: stdout's reader went away
COLOR_CHOICES = ("auto", "always", "never")

DESCRIPTION = """\
DAL runs tool-loop scripts whose every step is counted, every shell effect is checked by a policy
before it runs, and every loop exit and run end leaves a durable receipt.

common commands:
  dal run script.dal            run a script (exit 0 completed, 1 failed, 2 rejected,
                                3 waiting for a person, 4 budget exhausted, 130 interrupted)
  dal check script.dal          parse and check a script without running anything
  dal fmt script.dal            print the script in canonical layout (--write to rewrite it)
  dal policy check "CMD"        say whether the policy allows a shell command, and why
  dal receipts                  list runs, newest first
  dal receipt show latest       show one run's receipt and the next safe move
  dal approve RUN / dal deny RUN
                                decide an effect held for approval
  dal resolve RUN --effect N --as done|failed|retry
                                say what happened to an effect whose outcome is unknown
  dal resume RUN                continue a waiting or interrupted run from its journal
  dal test [PATHS]              run workflow tests (*.test.dal) with fakes and fault injection
  dal submit script.dal / dal worker
                                queue a run / run queued jobs (dal jobs, dal schedule)
  dal mcp                       serve DAL to a coding agent over MCP (stdio)
  dal repl                      interactive session (also: `dal` alone on a terminal)
  dal console                   the operator console in a browser (runs waiting for a person)
  dal completion bash|zsh|fish  print a shell completion script
"""


def _terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`, without importing shutil and its compression modules (~2.5 ms):
    argparse asks for the width at every add_argument, so every command would import it."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns


class _Parser(argparse.ArgumentParser):
    """Every `dal` parser: no abbreviated flags (`--j` is not `--json`, `--wait` not `--waiting`), a
    mistyped flag or command answered with this (sub)command's usage and a "did you mean", and `--color`
    accepted after any command."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("allow_abbrev", False)
        super().__init__(*args, **kw)
        top = kw.get("prog", "dal") == "dal"  # shown in the top level's help only, accepted everywhere
        self.add_argument("--color", choices=COLOR_CHOICES, default=argparse.SUPPRESS, metavar="WHEN",
                          help="colour: auto (a terminal, unless NO_COLOR is set), always or never"
                          if top else argparse.SUPPRESS)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        takes_args = any(a.dest == "script_args" for a in self._actions)
        # A script's NAME=VALUE words after dal's flags are gathered by main(); anything else left over is a
        # subcommand's own unknown flag: its usage, not the top level's (which argparse would print).
        unknown = [w for w in extras if not (takes_args and "=" in w and not w.startswith("-"))]
        if unknown and self.prog != "dal":
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed, extras

    def error(self, message: str) -> Any:  # usage errors exit 2 with the usage line
        self.print_usage(sys.stderr)
        from dal.cli import hostmode

        hostmode.error(message + self._suggestion(message), EXIT_USAGE)
        raise SystemExit(EXIT_USAGE)

    def _suggestion(self, message: str) -> str:
        """` (did you mean ...?)` for a mistyped command, choice or flag."""
        import difflib
        import re

        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            word, options = choice.group(1), re.findall(r"'([^']*)'", choice.group(2))
        else:
            flag = re.search(r"unrecognized arguments: (-\S+)", message)
            if not flag:
                return ""
            word = flag.group(1).split("=", 1)[0]
            options = [o for o in self._option_string_actions if o.startswith("--")]
        close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
        return f" (did you mean {close[0]}?)" if close else ""

    def _get_formatter(self) -> argparse.HelpFormatter:
        # The width HelpFormatter itself computes when none is given (the terminal's, less 2).
        return self.formatter_class(prog=self.prog, width=_terminal_columns() - 2)



# `dal check` and `dal fmt` need only the parser and the resolver, and `dal run` needs none of the other
# commands: asked for by name, they register only themselves (check and fmt both), so a cold start does
# not import the other commands' modules (the REPL, the decisions, the receipt views).
_LIGHT_COMMANDS = ("check", "fmt", "run")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `dal` argument parser; `only` (one of _LIGHT_COMMANDS) registers just that subcommand (check
    and fmt together)."""
    p = _Parser(
        prog="dal",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-V", "--version", action="version", version=f"dal {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    if only is None or only == "run":
        from dal.cli import run_cmd

        run_cmd.register(sub)

    if only != "run":  # check and fmt import nothing, but each parser costs argparse's gettext look-ups
        _register_check_and_fmt(sub)

    if only is None:
        from dal.cli import (
            console_cmd,
            durable_cmd,
            policy_cmd,
            receipts_cmd,
            repl_cmd,
            store_cmd,
            test_cmd,
            worker_cmd,
        )

        for mod in (policy_cmd, receipts_cmd, durable_cmd, repl_cmd, test_cmd, worker_cmd, store_cmd, console_cmd):
            mod.register(sub)
        from dal.cli import mcp_cmd

        mcp_cmd.register(sub)
        h = sub.add_parser("help", help="show the help of dal or of one command",
                           description="`dal help` is `dal --help`; `dal help CMD [SUB]` is `dal CMD [SUB] --help`.")
        h.add_argument("topic", nargs="*", metavar="COMMAND")
        h.set_defaults(func=lambda args: _cmd_help(p, args.topic))
        from dal.cli import completion_cmd

        completion_cmd.register(sub, p)
    return p


def _cmd_help(parser: argparse.ArgumentParser, topic: list[str]) -> int:
    """`dal help [COMMAND [SUB]]`: the same text as `--help`, exit 0 (2 for an unknown command)."""
    if not topic:
        parser.print_help()
        return EXIT_OK
    try:
        parser.parse_args([*topic, "--help"])
    except SystemExit as e:
        return int(e.code or 0)
    return EXIT_OK


def _register_check_and_fmt(sub: Any) -> None:
    c = sub.add_parser(
        "check",
        help="parse and statically check scripts; runs nothing",
        description="Parse and resolve each script: syntax errors, undefined names, wrong arity, "
        "`break` outside a loop... and warn about `while` loops with no declared bound. Runs nothing. "
        "Exit 0 when clean or only warnings, 2 on errors.",
    )
    c.add_argument("scripts", nargs="+", type=Path, metavar="SCRIPT")
    c.add_argument("--json", action="store_true", help="print diagnostics as JSON")
    c.set_defaults(func=_cmd_check)

    f = sub.add_parser(
        "fmt",
        help="print a script in canonical layout",
        description="Print the script in DAL's canonical layout: one statement per line, four-space "
        "indentation, comments kept. With --write, rewrite the file in place (atomically).",
    )
    f.add_argument("scripts", nargs="+", type=Path, metavar="SCRIPT")
    f.add_argument("--write", "-w", action="store_true", help="rewrite the files instead of printing")
    f.add_argument("--check", action="store_true", help="exit 1 if a file is not formatted; change nothing")
    f.add_argument("--json", action="store_true",
                   help="print one JSON object: each file, whether it was already canonical, whether it was "
                   "rewritten, and (without --write or --check) its canonical text")
    f.set_defaults(func=_cmd_fmt)


def expand_scripts(paths: list[Path]) -> list[Path]:
    """The scripts `check` and `fmt` work on: each file named, and the `*.dal` files under each directory
    named (sorted, hidden folders and .dal/ skipped); a folder with none is reported as not a script."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.dal")
                           if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
            out.extend(found if found else [path])  # an empty folder is reported as the path it is
        else:
            out.append(path)
    return out


def read_scripts(paths: list[Path], report: list[dict[str, Any]] | None = None) -> Any:
    """(path, source) for each script; one that cannot be read is reported (`dal: error: ...` on stderr,
    and in `report` when given) and skipped, so the others are still checked; `_Unreadable.count` counts them."""
    for path in expand_scripts(paths):
        try:
            yield path, _read(path)
        except UnreadableScript as e:
            _Unreadable.count += 1
            sys.stderr.write(f"dal: error: {e}\n")
            if report is not None:
                report.append({"severity": "error", "kind": "file", "message": str(e), "file": str(path),
                               "line": 0, "column": 0, "help": None})


class _Unreadable:
    count = 0


def read_script(path: Path) -> str:
    """Read a script or exit 2 with a message naming the file."""
    try:
        return _read(path)
    except UnreadableScript as e:
        _die(str(e))
    raise AssertionError  # pragma: no cover


def _read(path: Path) -> str:
    """A script's text. Below the current folder (where a script's programs may have swapped the name for a
    symlink) it is read by descriptor, never leaving it (dal/core/readbelow.py): `dal check` would print an
    outside file's lines, `dal fmt --write` copy them into the workspace. Below the workspace found from
    there too (and the one enclosing it), as `dal check ../x.dal` from a subfolder names a file there."""
    from dal.core.readbelow import root_of

    roots = [os.getcwd()]
    if root_of(os.path.abspath(path), roots) is None:  # found only then: `dal check` stays light
        from dal.runner.workspace import find_workspace

        found = find_workspace(None)
        roots += [str(found.path)] + ([str(found.outer)] if found.outer is not None else [])
    return _read_script(path, roots)


def _die(message: str, code: int = EXIT_USAGE) -> Any:
    from dal.cli import hostmode

    raise SystemExit(hostmode.error(message, code))


def _cmd_check(args: argparse.Namespace) -> int:
    from dal.core.diagnostics import render, want_color
    from dal.eval.interpreter import check_source

    color = want_color(sys.stderr)
    worst = EXIT_OK
    report = []
    _Unreadable.count = 0
    for path, source in read_scripts(args.scripts, report):
        extra = {}
        if path.name.endswith(".test.dal"):  # test scripts see the `dal test` builtins too
            from dal.testing import TEST_BUILTINS

            extra["builtins"] = TEST_BUILTINS
        warnings: list = []
        checked, errors = check_source(source, str(path), warnings=warnings, **extra)
        if checked is not None:
            from dal.cli.lints import lint

            warnings.extend(lint(checked.program, str(path), source))
        for e in errors:
            report.append({"severity": "error", **e.to_json()})
            if not args.json:
                sys.stderr.write(render(e, color) + "\n\n")
        for w in warnings:
            report.append({"severity": "warning", **w.to_json()})
            if not args.json:
                sys.stderr.write(render(w, color, severity="warning") + "\n\n")
        if errors:
            worst = EXIT_USAGE
        params = []
        if checked is not None:
            from dal.eval.args import declared, describe_params

            params = declared(checked.program)
        if not args.json:
            counted = [f"{len(errors)} error{'s' if len(errors) != 1 else ''}"] if errors else ["ok"]
            if warnings:
                counted.append(f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''}")
            if params:
                counted.append(f"arguments: {describe_params(params)}")
            status = ", ".join(counted)
            sys.stderr.write(f"{path}: {status}\n")
    if _Unreadable.count:
        worst = EXIT_USAGE
    if args.json:
        from dal.cli import hostmode

        hostmode.emit("diagnostics", {"diagnostics": report})
    return worst


def _cmd_fmt(args: argparse.Namespace) -> int:
    from dal.core.diagnostics import render, want_color
    from dal.core.errors import DalError
    from dal.syntax.format import format_source

    changed = 0
    broken = 0
    _Unreadable.count = 0
    unreadable: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    for path, source in read_scripts(args.scripts, unreadable):
        try:
            out = format_source(source, str(path))
        except DalError as e:
            sys.stderr.write(render(e, want_color(sys.stderr)) + "\n")
            files.append({"path": str(path), "error": {"severity": "error", **e.to_json()}})
            broken += 1  # the others are still formatted
            continue
        entry: dict[str, Any] = {"path": str(path), "canonical": out == source, "written": False}
        files.append(entry)
        if args.check:
            if out != source:
                changed += 1
                sys.stderr.write(f"{path}: would reformat\n")
        elif args.write:
            if out != source:
                from dal.core.fsutil import atomic_write_text

                atomic_write_text(path, out)
                entry["written"] = True
                sys.stderr.write(f"{path}: reformatted\n")
        elif args.json:
            entry["text"] = out
        else:
            sys.stdout.write(out)
    files += [{"path": u["file"], "error": u} for u in unreadable]
    code = EXIT_USAGE if broken or _Unreadable.count else 1 if changed else EXIT_OK
    if args.json:
        from dal.cli import hostmode

        hostmode.emit("formatted", {"files": files, "exit_code": code})
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Big integers print in full: DAL integers have arbitrary precision.
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    from dal.cli import hostmode

    hostmode.activate(argv)
    try:
        return hostmode.finish(_main(argv))
    except SystemExit as e:  # a usage error, or a command's _die
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_USAGE)
        raise SystemExit(hostmode.finish(code)) from None


def _main(argv: list[str]) -> int:
    parser = build_parser(only=argv[0] if argv and argv[0] in _LIGHT_COMMANDS else None)
    command: Any = None
    if not argv:
        if sys.stdin.isatty() and sys.stdout.isatty():
            from dal.repl.main import run_repl

            args = parser.parse_args(["repl"])
            command = run_repl
        if command is None:
            parser.print_help()
            return EXIT_USAGE
    else:
        args, extra = parser.parse_known_args(argv)
        # A script's NAME=VALUE arguments after one of dal's flags (`dal run s.dal --quiet to=ann`): argparse
        # takes positionals only before the first flag, so gather the rest here; anything else is unknown.
        given = [w for w in extra if "=" in w and not w.startswith("-")] if hasattr(args, "script_args") else []
        if len(given) != len(extra):
            parser.error(f"unrecognized arguments: {' '.join(w for w in extra if w not in given)}")
        if given:
            args.script_args = [*(args.script_args or []), *given]
        command = getattr(args, "func", None)
        if not command:
            parser.print_help()
            return EXIT_USAGE
    color = getattr(args, "color", "auto")
    if color != "auto":
        from dal.core.diagnostics import COLOR_CHOICE

        COLOR_CHOICE["force"] = color == "always"
    # Until here a Ctrl-C ends a `dal` process quietly (dal/cli/entry.py); from here it is a
    # KeyboardInterrupt that the command (and the runner, while a script runs) handles.
    entry.command_started(one_shot=argv[:1] in (["run"], ["resume"], ["check"], ["fmt"]))
    try:
        return int(command(args))
    except KeyboardInterrupt:
        entry.command_done()  # a second Ctrl-C while this is said changes nothing
        sys.stderr.write("dal: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout left (`dal receipts | head -1`): quiet, as Unix tools are.
        from dal.cli.run_cmd import silence_stdout

        silence_stdout()
        return EXIT_PIPE
    finally:
        entry.command_done()  # the command is over: a late Ctrl-C cannot change its exit
