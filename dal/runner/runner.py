"""One run of a script, end to end.

check → (key: lock, skip or resume) → begin the run durably → execute with the effect handler and the
loop recorder → build the run receipt → store it → write `<run_id>.json` and `<run_id>.md`.

Whatever happens inside the script, a receipt is written. Problems outside the script (an unreadable
store, a busy key) raise `RunnerError` with a message naming the file or the key.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dal.core.digest import text_sha256
from dal.core.errors import DalError, DalRuntimeError, DivergenceError
from dal.core.jsontext import surrogate_at
from dal.core.readbelow import UnreadableScript, read_script
from dal.eval.host import PROCEED, OperationVerdict
from dal.eval.interpreter import Engine, Outcome, check_source
from dal.eval.runtime import Runtime
from dal.eval.values import quote
from dal.receipts.oplock import mark_live, unmark_live
from dal.runner import inflight
from dal.runner.effects import EffectHandler
from dal.runner.finish import finish
from dal.runner.host import RunHost
from dal.runner.inforce import (
    unguarded_policy_file,
)
from dal.runner.journal import RunJournal, run_store_limit
from dal.runner.operation import RunState, lock_keyless, resumable
from dal.runner.opkeys import script_key_problem
from dal.runner.recorder import LoopRecorder
from dal.runner.report import RunnerError, RunReport
from dal.runner.spec import RunHooks, RunSpec, effect_context
from dal.runner.stored import StoredRun


def _unreached(handler: EffectHandler, outcome: Outcome, checked: Any) -> Outcome:
    """A resumed script that completes without asking for effects its earlier attempt journaled has
    diverged too: those effects happened (or may have), and the script no longer accounts for them."""
    left = sorted((p for p in handler.replay.values() if p.seq > handler.seq and not p.pending
                   and not handler.forgettable(p)), key=lambda p: p.seq)
    if not left:
        return outcome
    first = left[0]
    line = first.detail.get("line")
    err = DivergenceError(
        f"the script no longer matches the journal: it ended after {handler.seq} effect"
        f"{'s' if handler.seq != 1 else ''}, but the earlier attempt journaled effect {first.seq} "
        f"`{first.command}`" + (f" (line {line})" if line else "") + " that the script no longer asks for",
        None, filename=checked.filename, source=checked.source,
        help="the script or its inputs changed since the interrupted attempt; inspect the journal "
        "(dal receipt show); if the change is intended, start a new attempt of the operation (`dal run --key "
        "KEY --new-attempt`), which runs every effect again",
    )
    return Outcome("failed", err, ended_by="error")


def execute(spec: RunSpec, hooks: RunHooks | None = None) -> RunReport:
    """Run `spec` and return its receipt. Raises RunnerError only for problems outside the script."""
    run = RunState(spec, hooks if hooks is not None else RunHooks())
    mark_live(run.run_id)
    try:
        return _execute(run)
    finally:
        unmark_live(run.run_id)
        run.release()


def _read_source(spec: RunSpec) -> str:
    """The script's text. Below the workspace or a write root a script's programs may have swapped its name
    for a symlink (and its text reaches receipts and diagnostics), so it is read there by descriptor, never
    leaving that root; a script the operator named elsewhere is read as named."""
    try:
        return read_script(spec.script, (spec.workspace, *spec.policy.write_roots), spec.filename)
    except UnreadableScript as e:
        raise RunnerError(str(e)) from None


def _check_pinned(spec: RunSpec, digest: str) -> None:
    """A job, a schedule slot and a resume run only the text their run was specified with
    (dal.runner.build.pin_script): a script rewritten since — by another script of the workspace, say,
    to run under this run's wider policy — is refused before anything runs."""
    pinned = spec.extensions.get("script_sha256")
    if not isinstance(pinned, str) or pinned == digest:
        return
    what = "it was submitted or scheduled" if spec.resume is None else f"run {spec.resume} ran it"
    raise RunnerError(
        f"{spec.filename} changed since {what} (its sha256 was {pinned[:12]}..., now {digest[:12]}...): "
        "nothing ran. This run may only run that text, under the policy given for it. Put the script back, or "
        "start the work over with the changed script (submit it again, or `dal run --key KEY --new-attempt`)")


def _execute(run: RunState) -> RunReport:
    spec, hooks = run.spec, run.hooks
    if spec.key is not None and (at := surrogate_at(spec.key)) is not None:
        raise RunnerError(f"the operation key {quote(spec.key)} is not valid Unicode text "
                          f"(a lone surrogate at character {at})")
    source = _read_source(spec)
    run.sha256 = text_sha256(source)
    _check_pinned(spec, run.sha256)
    try:  # read once before anything runs: an unreadable $DAL_RUN_STORE_LIMIT is not the default
        run_store_limit(spec.max_stored_output)
    except ValueError as e:
        raise RunnerError(f"{e}; nothing ran") from None
    from dal.receipts.files import probe_receipts_dir

    problem = probe_receipts_dir(spec.receipts_dir(), run.workspace, write=hooks.receipt_files)
    if problem is not None:
        raise RunnerError(f"cannot write receipt files in {problem}. Nothing ran.")
    filename = spec.filename
    checked, errors = (hooks.check or check_source)(source, filename)
    bound: dict[str, Any] = {}
    if checked is not None:
        # The script's arguments, checked before anything runs; from here on the spec (stored with the
        # run, restored by a resume, repeated by `rerun`) holds every argument's value, defaults included.
        from dal.eval.args import bind

        bound, errors = bind(checked.program, spec.args, filename=filename, source=source)
        if not errors and (bound or spec.args):
            run.spec = spec = spec.evolve(extensions={**spec.extensions, "args": bound})
    operation = run.operation = spec.key or f"script:{Path(filename).stem}"
    run.policy = run.protect(spec.policy)

    if errors:
        run.open_store()
        run.kind = "rejected"
        run.begin(operation)
        return finish(run, source, operation, Outcome("rejected", errors[0], ended_by="error"),
                       rt=None, handler=None, recorder=None)

    from dal.effects.guard.recover import RecoverRefused, recover

    try:  # what a DAL killed -9 mid-command left: its walls' processes, the checks after its pipeline
        undone = recover(run.policy)
    except RecoverRefused as e:
        raise RunnerError(str(e)) from None
    if undone:
        # Fail closed: this run's policy was loaded from the tree as that command left it (a nested dal.toml
        # it made is the policy of `cd sub && dal run`); the next invocation loads it from the tree put back.
        raise RunnerError("; ".join(undone) + ". Nothing ran: this run's policy was read before that was undone; "
                          "run the command again")
    recorder = LoopRecorder(on_receipt=hooks.on_loop_receipt)
    stopped: list[RunnerError] = []  # operation("K") found the key busy: reported once the script stopped
    got: dict[str, str] = {}  # the signal (or SIGPIPE of a closed output) that stopped the run

    def on_operation(key: str, span: Any) -> OperationVerdict:
        if run.key is not None:
            if key != run.key:
                raise DalRuntimeError(
                    f"operation({json.dumps(key)}) does not match the key this run was started with "
                    f"({run.key!r})"
                )
            return PROCEED
        if (problem := script_key_problem(key)) is not None:
            raise DalRuntimeError(problem)
        try:
            run.enter_key(key, run.handler, by_script=True)
        except RunnerError as e:
            e.where = DalRuntimeError(str(e), span, filename=spec.filename, source=source)
            stopped.append(e)  # not the script's failure: the runner reports it as the run's end
            return OperationVerdict(stop=str(e))
        if run.leaked_env:
            names = ", ".join(run.leaked_env)
            raise DalRuntimeError(
                f"env() read {names} before operation({json.dumps(key)}) under this command line's policy, but "
                f"operation {key!r} runs under the policy it started with, which does not let the script read "
                f"{'it' if len(run.leaked_env) == 1 else 'them'}: call operation() before env(), or add "
                f"--allow-env={','.join(run.leaked_env)}"
            )
        run.operation = key
        if run.kind == "duplicate":
            return OperationVerdict(skip_of=run.skipped_of or "")
        return PROCEED

    on_denied = None
    if hooks.on_denied is not None:
        def on_denied(result: Any, span: Any, call: str | None = None) -> None:
            policy = run.handler.ctx.policy if run.handler is not None else None  # the one in force now
            hooks.on_denied(EffectDenied(result.command, result.decision.reason, span, filename=filename,
                                         source=source, policy=policy, call=call))

    # The writer is the host's before the runtime exists; a closed pipe interrupts the runtime built next.
    write = _stop_on_closed_pipe(hooks.write or sys.stdout.write, got, run.interrupt)
    host = RunHost(write=write, recorder=recorder, getenv=run.getenv, on_operation=on_operation,
                   on_denied=on_denied)
    rt = run.runtime = Runtime(max_steps=spec.max_steps, timeout=spec.timeout, host=host,
                               max_memory=spec.max_memory, args=bound)
    store = run.open_store()
    if (problem := unguarded_policy_file(spec.policy, run.recorded_policy_files())) is not None:
        raise RunnerError(problem)
    ctx = effect_context(spec, run.guarded(run.policy))
    # The run is recorded in the store just before its first journal write (or at its end), so that an
    # operation key set by operation("K") at the top of the script is part of the run's record.
    journal = RunJournal(store, lambda: run.begin_or_fail(run.operation), keyed=lambda: run.key is not None,
                          fence=hooks.fence,
                          # asked at each effect: the policy in force is the operation's once its key is entered
                          limit=lambda: run_store_limit(spec.max_stored_output, run.policy))
    handler = EffectHandler(rt, ctx, journal=journal, run_id=run.run_id, max_effects=spec.max_effects,
                            fake=hooks.fake, simulate_crash=hooks.simulate_crash)
    host.attach(handler)
    run.handler = handler

    if spec.resume:
        prev = resumable(run, store, spec.resume)
        if prev.get("key"):
            operation = run.operation = prev["key"]
            run.previous_by_script = StoredRun.key_by_script(prev)
            run.enter_key(prev["key"], handler, resuming=prev["run_id"])
        else:
            lock_keyless(run, store, prev)
            run.hold_own_lock()
            run.adopt_policy(prev, prev["operation"])
            run.previous = prev
            run.kind = run.continues_as(prev, prev["status"])
            if prev["status"] == "running":
                run._bury(prev)
            operation = run.operation = prev["operation"]
            # Recorded before its journal is read: a run judged dead that still runs (no key lock fences it)
            # journals no intent once this one is recorded (Store: Continued), so the journal read next is whole.
            run.begin(operation)
            run.load_replay(prev["run_id"], handler)
    elif spec.key:
        run.enter_key(spec.key, handler)
    else:
        run.hold_own_lock()

    if run.kind == "duplicate":
        return finish(run, source, operation, Outcome("skipped", ended_by="skip"), rt, handler, recorder)

    restore: dict[int, Any] = {}
    if hooks.handle_signals and threading.current_thread() is threading.main_thread():

        def on_signal(signum: int, frame: Any) -> None:
            name = signal.Signals(signum).name
            got["signal"] = name
            rt.interrupt(name)

        # A closed terminal (SIGHUP) or Ctrl-\ (SIGQUIT) stops the run as SIGTERM does: the command under way
        # ends, and what the wall and the git guard undo after it is undone (killed outright, DAL would leave a
        # program's nested dal.toml in place).
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            restore[s] = signal.signal(s, on_signal)
    inflight.started(rt)  # a host's other thread may stop it (dal/runner/inflight.py)
    try:
        outcome = Engine(rt).execute(checked)  # type: ignore[arg-type]
    finally:
        inflight.ended(rt)
        for s, h in restore.items():
            signal.signal(s, h)
    if outcome.ended_by == "stop" and stopped:
        raise stopped[0]
    operation = run.operation
    if outcome.status == "completed" and run.kind in ("resume", "retry"):
        outcome = _unreached(handler, outcome, checked)
    report = finish(run, source, operation, outcome, rt, handler, recorder)
    report.signal_name = got.get("signal")
    if report.exit_code == 2:
        return report
    if report.receipt["status"] == "interrupted" and got.get("signal") in _SIGNAL_EXIT:
        report.exit_code = _SIGNAL_EXIT[got["signal"]]
    return report


# 128 + the signal's number, as a shell reports a program it stopped; Ctrl-C keeps the runtime's 130.
_SIGNAL_EXIT = {"SIGTERM": 143, "SIGPIPE": 141, "SIGHUP": 129, "SIGQUIT": 131}


def _stop_on_closed_pipe(write: Callable[[str], Any], got: dict[str, str],
                         interrupt: Callable[[str], Any]) -> Callable[[str], Any]:
    """The script's output, where a reader that went away (`dal run x | head -2`) stops the run as SIGPIPE
    stops a Unix tool: at its next step (`interrupt` asks the runtime), `interrupted` with its receipt, and
    later output is dropped. An output that cannot be written (ENOSPC, EIO) stops it the same way."""

    def guarded(text: str) -> Any:
        if got.get("signal") == "SIGPIPE" or "output" in got:
            return None
        try:
            return write(text)
        except BrokenPipeError:
            got["signal"] = "SIGPIPE"
            interrupt("SIGPIPE")
            return None
        except OSError as e:  # a full disk, an I/O error: the run stops resumable, not as a bug
            got["output"] = e.strerror or str(e)
            interrupt(f"a failed write of the script's output ({got['output']})")
            return None

    return guarded


class EffectDenied(DalError):
    """Not raised: what `RunHooks.on_denied` is handed for a denied run() (located, rendered as a warning)."""

    kind = "denied"

    def __init__(self, command: str, reason: str, span: Any, *, filename: str, source: str,
                 policy: Any = None, call: str | None = None) -> None:
        # `call`: how the script asked for it when that was not run("...") (write_file, run([...], {input}))
        said = call or f"run({json.dumps(command, ensure_ascii=False)})"
        super().__init__(f"{said} was denied: {reason}", span, filename=filename, source=source)
        self.command = command
        self.reason = reason
        self.policy = policy  # the dal.effects.Policy that denied it, for a hint that names its roots


