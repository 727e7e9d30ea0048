"""`dal approve`, `dal deny`, `dal resolve` and `dal resume`: a person's decisions about a waiting run, and
continuing it.

RUN is what `dal receipt show` accepts: a run id, a unique prefix of one, an operation key (its newest
run) or `latest`. `--effect N` defaults to the effect the run waits on.

Exit codes of approve, deny and resolve: 0 recorded, 2 the run or effect cannot take that decision (not
waiting, not pending, unknown run) or a usage error. `dal resume` exits like `dal run`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from dal.receipts.store import Store, StoreError
from dal.runner.decisions import DecisionRefused, decide

EXIT_USAGE = 2
VERBS = {"approve": "approved", "deny": "denied"}
RESOLUTIONS = ("done", "failed", "retry")


def _store_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, metavar="PATH",
                   help="the run store (default: $DAL_STORE, else WORKSPACE/.dal/dal.db)")
    p.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                   help="the workspace whose store to use (default: the nearest folder, from the current "
                   "directory up, with a dal.toml or a .dal/ folder; else the current directory)")


def register(sub: Any) -> None:
    for name, verb in (("approve", "approve"), ("deny", "deny")):
        p = sub.add_parser(
            name,
            help=f"{verb} an effect that waits for approval",
            description=f"Record that a person {'approves' if name == 'approve' else 'denies'} the effect a "
            "waiting run proposed. Nothing runs now: `dal resume RUN` (or the same --key) then "
            + ("executes the approved effect once." if name == "approve"
               else "hands the script a `denied` result for it.")
            + " Exit 0 recorded, 2 when the run is not waiting for approval of that effect.",
        )
        p.add_argument("ref", metavar="RUN", help="run id, unique prefix, operation key, or `latest`")
        p.add_argument("--effect", type=int, default=None, metavar="N",
                       help="the effect's sequence number (default: the one the run waits on)")
        p.add_argument("--note", default=None, metavar="TEXT", help="why; kept with the decision")
        _store_flags(p)
        p.add_argument("--json", action="store_true", help="print the recorded decision as JSON")
        p.set_defaults(func=cmd_decide, decision=VERBS[name])

    r = sub.add_parser(
        "resolve",
        help="say what happened to an effect whose outcome is unknown",
        description="An effect that was started but whose result was never recorded (the process died) "
        "and that is not safe to run again holds its run as waiting. After checking, record what happened: "
        "`done` (it took effect: resume returns a completed result without running it), `failed` (it did "
        "not: resume returns a failed result), `retry` (run it again on resume). Exit 0 recorded, 2 when "
        "the effect's outcome is not in question.",
    )
    r.add_argument("ref", metavar="RUN", help="run id, unique prefix, operation key, or `latest`")
    r.add_argument("--effect", type=int, default=None, metavar="N",
                   help="the effect's sequence number (default: the one the run waits on)")
    r.add_argument("--as", dest="outcome", required=True, choices=RESOLUTIONS, help="what happened")
    r.add_argument("--note", default=None, metavar="TEXT", help="what you checked; kept with the decision")
    r.add_argument("--old-run-gone", action="store_true",
                   help="you made sure the run that lost its key lock while executing the effect no longer runs "
                   "(its host is down or restarted, its process ended): needed for --as retry or failed of such "
                   "an effect")
    _store_flags(r)
    r.add_argument("--json", action="store_true", help="print the recorded decision as JSON")
    r.set_defaults(func=cmd_decide, decision=None)

    from dal.runner.options import add_policy_flags, add_run_flags

    s = sub.add_parser(
        "resume",
        help="continue a waiting or interrupted run",
        description="Continue a waiting or interrupted run (or one whose process died): run its script "
        "again in its workspace, under the policy stored with its operation and with its key, replaying "
        "the effect journal. The policy file is not read again (a note says when it changed); policy flags "
        "given here add to the stored policy. Effects with a recorded result are not executed again; "
        "approved effects execute once; effects whose outcome is unknown run again only when safe (read, "
        "idempotent local) or when resolved as retry. Budgets default to the run's own. Exit codes as "
        "`dal run`.",
    )
    s.add_argument("ref", metavar="RUN", help="run id, unique prefix, operation key, or `latest`")
    s.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                   help="the workspace whose store to use (default: the nearest folder, from the current "
                   "directory up, with a dal.toml or a .dal/ folder; else the current directory); the run "
                   "continues in the workspace it started in")
    add_run_flags(s)
    add_policy_flags(s, additive=True)
    s.set_defaults(func=cmd_resume)


def _die(message: str, code: int = EXIT_USAGE) -> int:
    from dal.cli import hostmode

    return hostmode.error(message, code)


def _workspace(args: argparse.Namespace) -> Path:
    from dal.runner.workspace import find_workspace

    return find_workspace(args.workspace).path


def _open(args: argparse.Namespace) -> Store:
    from dal.receipts.location import StoreLocation, StoreLocationError, open_store

    try:
        location = StoreLocation.parse(args.store, _workspace(args))
    except StoreLocationError as e:
        raise DecisionRefused(str(e)) from None
    if location.is_file and not location.file.exists():
        raise DecisionRefused(f"no runs yet: there is no run store at {location}")
    return open_store(location)


def _shown_path(path: str) -> str:
    """`path` relative to the current folder when it is below it, else as it is."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def cmd_decide(args: argparse.Namespace) -> int:
    decision = args.decision or f"resolved:{args.outcome}"
    try:
        with _open(args) as store:
            done = decide(store, args.ref, decision, effect=args.effect, note=args.note,
                          old_run_gone=getattr(args, "old_run_gone", False))
    except (DecisionRefused, StoreError) as e:
        return _die(str(e))
    row, rid, seq = done.row, done.row["run_id"], done.row["seq"]
    if args.json:
        from dal.cli import hostmode

        hostmode.emit("decision", {**row, "command": done.command, "applies": done.applies})
        return 0
    whose = f"{rid} ({_shown_path(done.script)})" if done.script else rid  # whose script: another may share a key
    if args.decision:
        line = f"dal: {decision} effect {seq} of {whose}: `{done.command}`"
    else:
        line = f"dal: resolved effect {seq} of {whose} as {args.outcome}: `{done.command}`"
    if done.replaced:
        line += f" (replaces the earlier decision `{done.replaced['decision']}` by {done.replaced['who']})"
    from dal.core.visible import visible

    sys.stdout.write(visible(line) + f"\ndal: {visible(done.applies)}\n")  # the command is the script's text
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from dal.cli.run_cmd import run_and_report
    from dal.receipts.location import StoreLocation, StoreLocationError, open_store
    from dal.runner.build import SpecError, resume_spec
    from dal.runner.options import spec_options

    try:
        location = StoreLocation.parse(args.store, _workspace(args))
    except StoreLocationError as e:
        return _die(str(e))
    if location.is_file and not location.file.exists():
        return _die(f"no runs yet: there is no run store at {location.path}")
    try:
        with open_store(location, readonly=True) as store:
            run = store.find_run(args.ref)
    except StoreError as e:
        return _die(str(e))
    given = {k: v for k, v in spec_options(args).items() if k not in ("workspace", "store", "key", "policy_file")}
    try:
        spec = resume_spec(run, store=location, **given)
    except SpecError as e:
        return _die(str(e))
    if not spec.script:
        return _die(f"run {run['run_id']} does not say which script it ran")
    if not Path(spec.script).is_file():
        # A keyless operation is its script: moved or deleted, it cannot be continued under another name.
        rid = run["run_id"]
        return _die(f"run {rid} ran {spec.script}, which is no longer there (moved or deleted?). Put the script "
                    f"back there and `dal resume {rid}`; or run it where it is now as a new operation "
                    "(`dal run PATH`, which runs every effect again: check first what the journal says ran, "
                    f"`dal receipt show {rid}`)")
    return run_and_report(args, spec)
