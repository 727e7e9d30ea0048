"""`dal run`: run one script under its budgets, its policy and its receipts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dal.runner.options import add_policy_flags, add_run_flags, add_script_args, spec_options


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a script",
        description="Run a DAL script. The whole script is parsed and checked before anything runs; every "
        "run() is checked by the policy before it executes; every loop exit and the run's end leave a "
        "receipt (in the store and as .dal/receipts/<run_id>.json and .md).\n\n"
        "exit codes: 0 completed or skipped, 1 failed, 2 rejected (syntax or name errors) or usage error, "
        "3 waiting for a person (approval, uncertain effect, busy key), 4 a budget ran out, "
        "130 interrupted (143 on SIGTERM, 129 on SIGHUP, 131 on SIGQUIT)",
    )
    p.add_argument("script", type=Path, metavar="SCRIPT", help="the script's path, or - to read it from stdin")
    add_script_args(p)
    p.add_argument("--key", metavar="KEY",
                   help="operation key: a second run with the key of a completed run is skipped; one of an "
                   "interrupted or waiting run resumes it")
    p.add_argument("--new-attempt", action="store_true",
                   help="start the key's operation over: close its journal (and any decisions waiting in it) "
                   "and run every effect again, as a new attempt linked to the key's last run; also re-runs a "
                   "completed key")
    add_run_flags(p)
    add_policy_flags(p)
    p.set_defaults(func=cmd_run)


def spec_from_args(args: argparse.Namespace, script: Path | None, source: str | None = None) -> Any:
    """The run the flags describe (dal.runner.build.build_spec); a bad flag or policy exits 2 here.
    `source`: the script's text (`dal run -`), kept in the workspace's .dal/scripts/ so it can be resumed."""
    from dal.runner.build import SpecError, build_spec

    notes: list[str] = []
    try:
        spec = build_spec(script, source=source, **spec_options(args), notes=notes)
    except SpecError as e:
        from dal.cli import hostmode

        raise SystemExit(hostmode.error(str(e), 2)) from None
    if not (args.quiet or args.json):
        for note in notes:
            sys.stderr.write(f"dal: note: {note}\n")
    refuse_missing_store_folder(spec.store)
    return spec


def refuse_missing_store_folder(location: Any) -> None:
    """A store named by --store or $DAL_STORE goes in a folder that exists: a typo (`--store /srv/jbos/x.db`)
    must not silently build a tree and start a second, empty history. Only the default, WORKSPACE/.dal/, is
    created by DAL."""
    import os

    if location.origin == "default" or not location.is_file:  # a database server's store has no folder here
        return
    folder = os.path.dirname(location.path)
    if not os.path.isdir(folder):
        from dal.cli import hostmode

        flag = "$DAL_STORE" if location.origin == "env" else "--store"
        raise SystemExit(hostmode.error(
            f"the folder {folder} for the run store {location.path} ({flag}) does not exist; DAL does not create "
            f"it. Create it first (mkdir -p {folder}) or name a store in an existing folder. Nothing ran.", 2))


class _Tee:
    """Host mode's script output: passed on to stderr as it comes, and its end (all of it, up to CAP
    characters) kept for the JSON receipt's `output.stdout_tail`."""

    CAP = 8 << 20

    def __init__(self, write: Any) -> None:
        self.write_on = write
        self.parts: list[str] = []
        self.kept = 0

    def write(self, text: str) -> Any:
        self.parts.append(text)
        self.kept += len(text)
        if self.kept > 2 * self.CAP:  # keep memory bounded: fold to the last CAP characters now and then
            self.parts = [self.text()]
            self.kept = len(self.parts[0])
        return self.write_on(text)

    def text(self) -> str:
        return "".join(self.parts)[-self.CAP:]


def hooks_from_args(args: argparse.Namespace, denials: Any = None, output: Any = None) -> Any:
    """What the command line lends the run: its output streams (`output`: host mode's _Tee), notices and
    denials (`denials`: a dal.cli.denials.DenialReporter)."""
    from dal.core.visible import visible
    from dal.runner.spec import RunHooks

    out = output if output is not None else sys.stderr if args.json else sys.stdout
    write = out.write
    if _is_tty(out):
        # The script's print() is data: exact when it goes to a file or a pipe, but on a terminal its
        # control characters are shown, not played (docs/cli.md, "Output").
        def write(text: str) -> Any:
            return out.write(visible(text, lines=True))

    return RunHooks(
        write=write,
        on_loop_receipt=_print_loop if args.verbose and not args.json else None,
        notify=(lambda text: sys.stderr.write(f"dal: note: {visible(text)}\n")) if not args.quiet else None,
        on_denied=denials,
    )


def _is_tty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def _print_loop(loop: dict[str, Any]) -> None:
    from dal.core.visible import visible_data
    from dal.receipts.render import describe_loop

    sys.stderr.write(f"dal: loop receipt: {describe_loop(visible_data(loop))}\n")


_SANDBOX_WARNED = False


def _may_warn(args: argparse.Namespace) -> bool:
    """Whether warn_sandbox() can print anything for these flags (else it does not probe)."""
    return not (args.quiet or args.json or getattr(args, "require_sandbox", False) or _SANDBOX_WARNED)


def warn_sandbox(spec: Any, quiet: bool) -> None:
    """Say once when commands will run without the bubblewrap wall."""
    global _SANDBOX_WARNED
    if quiet or spec.require_sandbox or _SANDBOX_WARNED:
        return  # nothing to say, so no probe: a run() that needs to know probes for itself
    from dal.effects import sandbox_status

    ok, why = sandbox_status()
    if not ok:
        import os

        _SANDBOX_WARNED = True
        if os.geteuid() == 0 and not spec.unsandboxed_as_root:
            sys.stderr.write(f"dal: warning: no sandbox ({why}); running as root, every command will be refused "
                             "(--unsandboxed-as-root runs them without the wall)\n")
        else:
            sys.stderr.write(f"dal: warning: no sandbox ({why}); commands are checked by the policy only\n")


def cmd_run(args: argparse.Namespace) -> int:
    if _may_warn(args):
        # Probe for the warning in the background while the runner is imported (bubblewrap takes 5-10 ms
        # to start); warn_sandbox() collects the result before the script runs, as before.
        from dal.effects.wall.sandbox import start_probe

        start_probe()
    if str(args.script) == "-":  # the script on stdin
        from dal.cli.entry import closed_at_start

        if "stdin" in closed_at_start or sys.stdin is None:
            from dal.cli import hostmode

            return hostmode.error("`dal run -` reads the script from stdin, and stdin is closed: no script", 2)
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            from dal.cli import hostmode

            return hostmode.error(f"the script on stdin is not UTF-8 text (invalid byte at offset {e.start})", 2)
        return run_and_report(args, spec_from_args(args, None, text))
    return run_and_report(args, spec_from_args(args, args.script))


def run_and_report(args: argparse.Namespace, spec: Any) -> int:
    from dal.cli import hostmode
    from dal.cli.denials import DenialReporter
    from dal.core.diagnostics import render, want_color
    from dal.core.visible import visible
    from dal.runner.runner import RunnerError, execute

    warn_sandbox(spec, args.quiet or args.json)
    denials = DenialReporter(sys.stderr, want_color(sys.stderr)) if not args.quiet else None
    output = _Tee(sys.stderr.write) if args.json else None
    try:
        report = execute(spec, hooks_from_args(args, denials, output))
    except RunnerError as e:
        # No run was started, so there is no receipt; a host still gets one JSON object on stdout.
        if e.where is not None and not args.json:
            sys.stderr.write(render(e.where, want_color(sys.stderr)) + "\n")  # stopped at operation("K")
            return e.exit_code
        return hostmode.error(str(e), e.exit_code, json=args.json)
    try:
        (sys.stderr if args.json else sys.stdout).flush()
    except BrokenPipeError:
        pass  # the reader left: the output stopped the run (SIGPIPE), which the receipt records
    if report.signal_name == "SIGPIPE":
        # As a Unix tool whose reader went away: nothing more to say, exit 141 (128 + SIGPIPE).
        silence_stdout()
        return report.exit_code
    receipt = report.receipt
    if report.files_error:
        # The run ended as its receipt says (and as the exit code says); only the files are missing.
        sys.stderr.write(f"dal: error: {visible(report.files_error, lines=True)}\n")
    if report.error is not None and not args.json:
        sys.stderr.write(render(report.error, want_color(sys.stderr)) + "\n")
    if report.store_problem:
        # The run ended but the store did not record it: say so however quiet the output is asked to be.
        sys.stderr.write(f"dal: error: {visible(report.store_problem, lines=True)}\n")
    if args.json:
        # The receipt as stored, with what the script printed (as the Python API's receipt.output).
        hostmode.emit("receipt", {**receipt, "output": {"stdout_tail": output.text()}})
    elif not args.quiet:
        sys.stderr.write(summary_line(receipt, report, denials.count if denials else 0, spec) + "\n")
    return report.exit_code


def plural(n: int, word: str) -> str:
    """`1 effect`, `2 effects`, `1,000 steps`."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def silence_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so that Python's own last flush cannot fail loudly."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def summary_line(receipt: dict[str, Any], report: Any, denied: int = 0, spec: Any = None) -> str:
    """One calm line: what happened, where the receipt is, and what to do next when it matters. `denied`:
    the run() calls the policy denied in this invocation, each reported on stderr as it happened."""
    import os

    from dal.core.visible import visible, visible_data

    receipt = visible_data(receipt)  # the key, the blocker's command: the script's text

    status = receipt["status"]
    where = report.md_path
    if where is not None:
        try:
            where = os.path.relpath(where)
        except ValueError:
            pass
    parts = [f"dal: {status}"]
    if status == "skipped":
        # Quoted, not repr(): the receipt is visible() already, and repr would double its escapes.
        parts.append(f"(operation '{receipt['operation']}' already completed in {receipt['skipped_of']})")
    steps = receipt["steps"]
    effects = plural(receipt["effects"]["count"], "effect")
    if denied:
        effects += f" ({denied:,} denied)"
    parts.append(f"· {plural(steps['used'], 'step')} · {effects}")
    parts.append(f"· receipt {where}" if where else f"· run {receipt['run_id']}")
    parts.append(f"· workspace {_home(receipt['workspace'])} · policy {policy_name(receipt)}")
    store = getattr(spec, "store", None)
    if store is not None and store.origin != "default":
        # Another store than the workspace's: its runs, keys and journal are that store's alone.
        parts.append(f"· store {_home(store.path)}{' ($DAL_STORE)' if store.origin == 'env' else ''}")
    line = " ".join(parts)
    if getattr(report, "next_step", None):
        line += f" (not recorded in the run store)\ndal: next: {visible(report.next_step, lines=True)}"
    elif status in ("waiting", "failed", "exhausted", "interrupted"):
        from dal.receipts.nextstep import run_next

        line += f"\ndal: next: {run_next(receipt)}"
    withheld = (receipt.get("policy") or {}).get("env_withheld") or []
    if withheld:
        names = ", ".join(withheld)
        line += (f"\ndal: note: env() returned null for {names}: the policy does not let scripts read "
                 f"{'it' if len(withheld) == 1 else 'them'} (--allow-env={','.join(withheld)} or [env] allow)")
    return line


def _home(path: str) -> str:
    import os

    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home):]
    return path


def policy_name(receipt: dict[str, Any]) -> str:
    """The policy file in force, for the closing line: relative to the workspace when inside it."""
    import os

    policy = receipt.get("policy") or {}
    if not policy.get("sha256"):
        return "default"
    source = policy.get("source") or ""
    rel = os.path.relpath(source, receipt["workspace"]) if source.startswith("/") else source
    return rel if not rel.startswith("..") else _home(source)
