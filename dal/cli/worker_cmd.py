"""`dal submit`, `dal worker`, `dal jobs`, `dal job show|retry|cancel`, `dal workers` and `dal schedule`:
the job queue in the run store (docs/workers.md).

Exit codes: 0 done (for `dal submit` also: the key already has an open job, or its operation already
completed, and nothing was submitted), 1 no such job or schedule, 2 a usage error, a script that does not
parse, a store that cannot be used, or a move the job's state does not allow (the message says why).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dal.core import defaults
from dal.core.visible import visible
from dal.runner.options import add_policy_flags, add_script_args, byte_size, memory_size, positive_int, seconds

EXIT_NOT_FOUND, EXIT_USAGE = 2, 2  # an unknown job is a usage error, as an unknown run
DEFAULT_MAX_ATTEMPTS = 5
MAX_DURATION = 100 * 365 * 86400.0  # seconds: a longer wait is a typo, and past what a time stamp can show
JOB_STATES = ("ready", "scheduled", "running", "waiting", "parked", "done", "dead", "cancelled")


def duration(text: str) -> float:
    """Seconds, or a number with a unit: `90`, `90s`, `5m`, `2h`, `1d`."""
    t = text.strip().lower()
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(t[-1:], None)
    number = t[:-1] if unit else t
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90, 90s, 5m, 2h or 1d, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite duration, got {text!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    if value > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"at most {MAX_DURATION / 86400 / 365:.0f} years, got {text}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def moment(text: str) -> float:
    """A time: ISO 8601 (`2026-12-01T09:30`, `...Z`, `...+01:00`; without an offset, local time)."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a time such as 2026-12-01T09:30 or 2026-12-01T08:30Z, "
                                         f"got {text!r}") from None
    return when.timestamp() if when.tzinfo else when.astimezone().timestamp()


def _store_flags(p: argparse.ArgumentParser, *, workspace: bool = True, json_flag: bool = True) -> None:
    p.add_argument("--store", default=None, metavar="PATH",
                   help="the run store holding the queue (default: $DAL_STORE, else WORKSPACE/.dal/dal.db)")
    if workspace:
        p.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                       help="the workspace whose store to use (default: the nearest folder, from the current "
                       "directory up, with a dal.toml or a .dal/ folder; else the current directory)")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _job_flags(p: argparse.ArgumentParser) -> None:
    """What `dal submit` and `dal schedule add` share: where the job goes, its budgets, its policy."""
    p.add_argument("--queue", default="default", metavar="Q", help="the queue (default: default)")
    p.add_argument("--priority", type=int, default=0, metavar="N", help="higher runs first (default 0)")
    p.add_argument("--max-attempts", type=positive_int, default=DEFAULT_MAX_ATTEMPTS, metavar="N",
                   help=f"a run that ends with retry replay is tried again up to N attempts in all "
                   f"(default {DEFAULT_MAX_ATTEMPTS}); then the job is dead")
    p.add_argument("--movable", action="store_true",
                   help="its workspace is reachable from every worker's machine: any host may run it (default: "
                   "only workers on the machine it was submitted on)")
    b = p.add_argument_group("budgets (of each run)")
    b.add_argument("--max-steps", type=positive_int, default=None, metavar="N",
                   help=f"step budget (default {defaults.MAX_STEPS:,})")
    b.add_argument("--max-effects", type=positive_int, default=None, metavar="N", help="effect budget")
    b.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS", help="wall-clock budget")
    b.add_argument("--max-memory", type=memory_size, default=None, metavar="SIZE", help="memory budget (default 1G)")
    b.add_argument("--max-stored-output", type=byte_size, default=None, metavar="SIZE",
                   help="command output a run may journal (as dal run)")
    p.add_argument("--receipts", type=Path, default=None, metavar="DIR",
                   help="also copy each run's receipt to <run_id>.json and .md in DIR (default: none; the store "
                   "keeps every job's receipt: dal receipt show RUN)")
    p.add_argument("--store", default=None, metavar="PATH",
                   help="the run store holding the queue (default: $DAL_STORE, else WORKSPACE/.dal/dal.db)")
    p.add_argument("--json", action="store_true", help="print the job (or schedule) as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    add_policy_flags(p)


def register(sub: Any) -> None:
    s = sub.add_parser(
        "submit",
        help="put a script on the job queue",
        description="Put a run of SCRIPT on the run store's job queue, for `dal worker` to run, under the policy "
        "and budgets given here (the policy is fixed now: every run of the job uses it). The job's key is --key, "
        "else the script's literal operation(\"...\"), else job:<id>. A key that has an open job returns that "
        "job; a key whose operation completed submits nothing unless --new-attempt. Exit 0 (also when nothing "
        "was submitted, saying why), 2 a usage error or a script that does not parse.",
    )
    s.add_argument("script", type=Path, metavar="SCRIPT")
    add_script_args(s)
    s.add_argument("--key", metavar="KEY", help="the operation key (default: the script's own, else job:<id>)")
    when = s.add_mutually_exclusive_group()
    when.add_argument("--at", type=moment, default=None, metavar="TIME", help="run at this time (ISO 8601)")
    when.add_argument("--in", dest="delay", type=duration, default=None, metavar="DURATION",
                      help="run after this long (90, 5m, 2h, 1d)")
    s.add_argument("--new-attempt", action="store_true",
                   help="start the key's operation over (as dal run --new-attempt), also when it completed")
    _job_flags(s)
    s.set_defaults(func=cmd_submit)

    w = sub.add_parser(
        "worker",
        help="run jobs from the queue",
        description="Claim jobs from the run store's queue and run them in job processes forked from this one "
        "(each runs many jobs, one at a time), holding a lease on each; route each finished run by its receipt's "
        "retry class (docs/workers.md). "
        "SIGTERM, Ctrl-C or SIGHUP (a closed terminal) drains: no new claims, running jobs stop as resumable "
        "and go back to ready, exit 0.",
    )
    w.add_argument("--queue", action="append", default=None, metavar="Q",
                   help="a queue to take jobs from (repeatable; default: default)")
    w.add_argument("--concurrency", type=positive_int, default=None, metavar="N",
                   help="jobs run at once (default: the number of CPUs)")
    w.add_argument("--lease", type=seconds, default=30.0, metavar="SECONDS",
                   help="how long a claim holds without renewal (default 30); renewed every third of it")
    w.add_argument("--poll", type=seconds, default=1.0, metavar="SECONDS",
                   help="how often to look for jobs when there is nothing to do (default 1)")
    w.add_argument("--backoff", type=seconds, default=5.0, metavar="SECONDS",
                   help="the first wait before a replay is tried again; doubled each time (default 5)")
    w.add_argument("--until-idle", action="store_true",
                   help="exit once no job of its queues is ready, scheduled or running (a schedule's next "
                   "slot is not waited for: it is named if due within a minute)")
    w.add_argument("--max-jobs", type=positive_int, default=None, metavar="N", help="claim at most N jobs, then exit")
    w.add_argument("--recycle-after", type=positive_int, default=defaults.WORKER_RECYCLE_AFTER, metavar="N",
                   help=f"a job process is replaced after N jobs (default {defaults.WORKER_RECYCLE_AFTER})")
    w.add_argument("--recycle-memory", type=memory_size, default=defaults.WORKER_RECYCLE_MEMORY, metavar="SIZE",
                   help=f"a job process whose resident memory passed SIZE after a job is replaced (default "
                   f"{defaults.WORKER_RECYCLE_MEMORY >> 20}M)")
    w.add_argument("--metrics-port", type=_port, default=None, metavar="PORT",
                   help="serve Prometheus metrics on this port (0: one the system picks; the log's first line says "
                   "which); needs prometheus-client, the `metrics` extra")
    w.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                   help="the address the metrics are served on (default 127.0.0.1: this machine only)")
    w.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="text (default): lines for a person; json: one JSON object per line, on stderr for the "
                   "worker's events and on stdout for the scripts' output (docs/workers.md)")
    _store_flags(w, json_flag=False)
    w.set_defaults(func=cmd_worker)

    j = sub.add_parser("jobs", help="list jobs, newest first",
                       description="List the queue's jobs, newest first. Read-only.")
    j.add_argument("--state", choices=JOB_STATES, default=None, help="only jobs in this state")
    j.add_argument("--queue", default=None, metavar="Q", help="only jobs of this queue")
    j.add_argument("--key", default=None, metavar="KEY", help="only jobs of this key")
    j.add_argument("--limit", type=int, default=50, metavar="N", help="at most N jobs (default 50; 0 for all)")
    _store_flags(j)
    j.set_defaults(func=cmd_jobs)

    job = sub.add_parser("job", help="show, retry or cancel one job")
    jsub = job.add_subparsers(dest="job_command", metavar="SUBCOMMAND")
    jsub.required = True
    for name, helptext in (("show", "show a job and its next step"),
                           ("retry", "make a parked, waiting, scheduled, dead or cancelled job ready again"),
                           ("cancel", "cancel a job (a running one stops at its next effect)")):
        p = jsub.add_parser(name, help=helptext, description=helptext[0].upper() + helptext[1:] + ".")
        p.add_argument("job_id", type=int, metavar="ID")
        if name != "show":
            p.add_argument("--note", default=None, metavar="TEXT", help="why; kept in the job's note")
        _store_flags(p)
        p.set_defaults(func={"show": cmd_job_show, "retry": cmd_job_move, "cancel": cmd_job_move}[name], verb=name)

    ws = sub.add_parser("workers", help="list the workers of the queue",
                        description="List the workers that have used this run store's queue. Read-only.")
    _store_flags(ws)
    ws.set_defaults(func=cmd_workers)

    sc = sub.add_parser("schedule", help="run a script on a cron schedule",
                        description="Schedules: each slot of a cron expression becomes at most one job (key "
                        "schedule:NAME:<slot>); workers make the jobs. Missed slots: only the most recent runs.")
    ssub = sc.add_subparsers(dest="schedule_command", metavar="SUBCOMMAND")
    ssub.required = True
    add = ssub.add_parser("add", help="add a schedule",
                          description="Add a schedule: SCRIPT runs at every slot of --cron (5 fields, or 6 with "
                          "seconds first), in --tz (default UTC), under the policy and budgets given here.")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--cron", required=True, metavar="EXPR", help='e.g. "*/15 * * * *"')
    add.add_argument("--tz", default="UTC", metavar="ZONE", help="an IANA time zone (default UTC)")
    add.add_argument("script", type=Path, metavar="SCRIPT")
    add_script_args(add)
    _job_flags(add)
    add.set_defaults(func=cmd_schedule_add)
    lst = ssub.add_parser("list", help="list schedules")
    _store_flags(lst)
    lst.set_defaults(func=cmd_schedule_list)
    for name in ("pause", "resume", "remove"):
        p = ssub.add_parser(name, help=f"{name} a schedule")
        p.add_argument("name", metavar="NAME")
        _store_flags(p)
        p.set_defaults(func=cmd_schedule_set, verb=name)


# -- helpers ---------------------------------------------------------------------------------------------

def _die(message: str, code: int = EXIT_USAGE) -> int:
    from dal.cli import hostmode

    return hostmode.error(message, code)


def _emit(kind: str, body: dict[str, Any]) -> None:
    from dal.cli import hostmode

    hostmode.emit(kind, body)


def _path(args: argparse.Namespace) -> Any:
    """The store's location (dal.receipts.location.StoreLocation: a SQLite file or a PostgreSQL URL)."""
    from dal.receipts.location import StoreLocation, StoreLocationError
    from dal.runner.workspace import find_workspace

    try:
        workspace = find_workspace(getattr(args, "workspace", None)).path
        return StoreLocation.parse(getattr(args, "store", None), workspace)
    except StoreLocationError as e:
        raise SystemExit(_die(str(e))) from None


def _missing(where: Any) -> bool:
    """A SQLite store that does not exist yet (a database server's store is the server's to refuse)."""
    return where.is_file and not where.file.exists()


def _when(t: float | None) -> str:
    if t is None:
        return "-"
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):  # a time stored by an older DAL that accepted `--in inf`
        return f"{t!r} s since the epoch"


def _ago(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    d = now - t
    if d < 0:
        return f"in {-d:.0f} s" if -d < 120 else f"in {-d / 60:.0f} min"
    return f"{d:.0f} s ago" if d < 120 else f"{d / 60:.0f} min ago" if d < 7200 else f"{d / 3600:.0f} h ago"


def _public(job: dict[str, Any]) -> dict[str, Any]:
    out = dict(job)
    for k in ("spec", "holder", "took_over", "waits_on"):
        if isinstance(out.get(k), str):
            try:
                out[k] = json.loads(out[k])
            except ValueError:
                pass
    out["movable"] = bool(out.get("movable"))
    return out


def _read_queue(args: argparse.Namespace) -> Any:
    """(store, queue) read-only; None when there is no store yet (after saying so)."""
    from dal.receipts.location import open_store
    from dal.receipts.store import NoStore

    try:
        store = open_store(_path(args), readonly=True)
    except NoStore:
        return None
    return store, store.jobs()


# -- dal submit ------------------------------------------------------------------------------------------

def _prepare(args: argparse.Namespace, *, schedule: bool = False) -> tuple[dict[str, Any], str | None, Any, Any]:
    """The job's spec, its key (None: job:<id>), the store path and the policy, from the flags; SystemExit(2)
    for a bad flag, a policy error or a script that does not parse (nothing is recorded then). The run is
    specified by the same builder as `dal run`'s (dal/runner/build.py)."""
    from dal.cli.main import read_script
    from dal.core.diagnostics import render, want_color
    from dal.eval.interpreter import check_source
    from dal.runner.build import SpecError, build_spec, pin_script
    from dal.runner.opkeys import script_key_problem
    from dal.runner.options import spec_options
    from dal.worker.keys import KeyProblem, literal_key
    from dal.worker.spec import make_spec

    notes: list[str] = []
    options = {k: v for k, v in spec_options(args).items() if k != "key"}
    try:
        run = build_spec(args.script, **options, notes=notes)
    except SpecError as e:
        raise SystemExit(_die(str(e))) from None
    if not (args.quiet or args.json):
        for note in notes:
            sys.stderr.write(f"dal: note: {note}\n")
    source = read_script(args.script)
    checked, errors = check_source(source, str(args.script))
    if errors:
        for e in errors:
            sys.stderr.write(render(e, want_color(sys.stderr)) + "\n")
        nothing = "nothing scheduled" if schedule else "nothing submitted"
        raise SystemExit(_die(f"{args.script} does not parse or resolve: {nothing}"))
    from dal.core.shellword import sh_quote
    from dal.eval.args import bind

    given_to = f"dal schedule add {sh_quote(args.name)} --cron {sh_quote(args.cron)}" if schedule else "dal submit"
    bound, errors = bind(checked.program, run.args, filename=str(args.script), source=source, command=given_to)
    if errors:  # the job would be rejected: say so now, as `dal run` would
        for e in errors:
            sys.stderr.write(render(e, want_color(sys.stderr)) + "\n")
        nothing = "nothing scheduled" if schedule else "nothing submitted"
        raise SystemExit(_die(f"{args.script}: bad script arguments: {nothing}"))
    if bound:  # the job stores every argument's value, as a run's spec does
        run = run.evolve(extensions={**run.extensions, "args": bound})
    key = getattr(args, "key", None)
    if key is not None and (problem := script_key_problem(key)) is not None:
        raise SystemExit(_die(f"--key: {problem}"))
    try:
        own = literal_key(checked.program, bound)
    except KeyProblem as e:
        if e.span is not None:  # a key no script may choose: the run would stop there
            from dal.core.errors import DalRuntimeError

            err = DalRuntimeError(str(e), e.span, filename=str(args.script), source=source)
            sys.stderr.write(render(err, want_color(sys.stderr)) + "\n")
            nothing = "nothing scheduled" if schedule else "nothing submitted"
            raise SystemExit(_die(f"{args.script}: its operation key is refused: {nothing}")) from None
        if key is None and not schedule:
            raise SystemExit(_die(f"{args.script}: {e}")) from None
        own = None
    if key is not None and own is not None and own != key:
        raise SystemExit(_die(f"--key {key!r} differs from the script's own operation({json.dumps(own)}): the run "
                              "would stop at that call; give the same key or none"))
    if schedule and own is not None:
        raise SystemExit(_die(f"{args.script} names its own operation key ({own!r}); a schedule gives each slot a key "
                              "of its own (schedule:NAME:<slot>), so its script must not call operation()"))
    # The job runs the text checked here, whatever the file holds later (docs/workers.md).
    return make_spec(pin_script(run, source)), key or own, run.store, run.policy


def cmd_submit(args: argparse.Namespace) -> int:
    from dal.core.liveness import host_name
    from dal.receipts.location import open_store
    from dal.receipts.store import StoreError

    spec, key, path, _ = _prepare(args)
    try:
        with open_store(path) as store:
            q = store.jobs()
            now = q.clock()  # `--in D` from the store's clock, which decides when it is due
            run_at = args.at if args.at is not None else now + args.delay if args.delay is not None else now
            if key is not None:
                have = q.open_job(key)
                theirs = _job_args(have) if have is not None else None
                if theirs is not None and theirs != (spec.get("extensions") or {}).get("args", {}):
                    return _die(f"key {key!r} already has job {have['job_id']} ({have['state']}) with other "
                                f"script arguments ({_shown(theirs)}): nothing submitted; arguments are part of "
                                "an operation, give other values their own key")
                if have is not None:
                    return _said(args, have, f"key {key!r} already has job {have['job_id']} ({have['state']}): "
                                 "nothing submitted")
                newest = store.newest_run_of_key(key)
                done = newest is not None and (newest["status"] == "completed" or (
                    newest["status"] == "skipped" and newest.get("skipped_of")))
                mine = (spec.get("extensions") or {}).get("args", {})
                if newest is not None and not args.new_attempt and (ran := _run_args(store, newest)) != mine \
                        and ran is not None:
                    return _die(f"operation {key!r} was started with other script arguments ({_shown(ran)}, run "
                                f"{newest['run_id']}): nothing submitted; arguments are part of an operation, "
                                "give other values their own key (or --new-attempt)")
                if done and not args.new_attempt:
                    done_in = newest.get("skipped_of") or newest["run_id"]
                    return _said(args, None, f"operation {key!r} already completed in run {done_in}: nothing "
                                 "submitted (`dal submit --new-attempt` starts it over)")
                if args.new_attempt:
                    spec["new_attempt"] = True
                    spec["extensions"]["new_attempt_of"] = newest["run_id"] if newest is not None else None
            job, made = q.submit(spec=spec, key=key, queue=args.queue, priority=args.priority, run_at=run_at,
                                 max_attempts=args.max_attempts, host=host_name(), movable=args.movable, now=now)
    except StoreError as e:
        return _die(str(e))
    if not made:
        return _said(args, job, f"key {job['key']!r} already has job {job['job_id']} ({job['state']}): "
                     "nothing submitted")
    when = "ready" if job["state"] == "ready" else f"scheduled for {_when(job['run_at'])}"
    line = f"submitted job {job['job_id']} (key {job['key']}, queue {job['queue']}, {when})"
    if key is None:
        # No key anywhere: the job's own id is its key, so submitting the same script again is new work.
        line += ("; without --key (or an operation(\"...\") in the script) each submit is a job of its own, "
                 "and the same script submitted again runs again: give it --key KEY to make a second submit "
                 "find this job instead")
    return _said(args, job, line)


def _job_args(job: dict[str, Any]) -> dict[str, Any] | None:
    """The script arguments a job stores (None: its spec cannot be read)."""
    try:
        data = json.loads(job["spec"]) if isinstance(job.get("spec"), str) else job.get("spec")
        return dict((data.get("extensions") or {}).get("args") or {})
    except (ValueError, TypeError, AttributeError):
        return None


def _run_args(store: Any, row: dict[str, Any]) -> dict[str, Any] | None:
    """The script arguments a run was started with (None: its row cannot be read; the run says why)."""
    from dal.effects.policy import PolicyError
    from dal.receipts.store import StoreError
    from dal.runner.spec import SpecError
    from dal.runner.stored import StoredRun

    try:
        stored = StoredRun.of(store.run_row(row["run_id"]) or {})
    except (PolicyError, SpecError, StoreError):  # a damaged row: the job's run reports it, in its own words
        return None
    return stored.spec.args if stored.spec is not None else {}


def _shown(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) or "none"


def _said(args: argparse.Namespace, job: dict[str, Any] | None, line: str) -> int:
    if args.json:
        _emit("job", {"job": _public(job) if job else None, "message": line})
    elif not getattr(args, "quiet", False):
        sys.stdout.write(f"dal: {visible(line)}\n")  # the key is the script's: no terminal control raw
    return 0


# -- dal worker ------------------------------------------------------------------------------------------

def cmd_worker(args: argparse.Namespace) -> int:
    import os

    from dal.receipts.store import StoreError
    from dal.worker.metrics import MetricsUnavailable
    from dal.worker.worker import Worker

    worker = Worker(
        _path(args), queues=tuple(args.queue or ("default",)), concurrency=args.concurrency or os.cpu_count() or 1,
        lease=args.lease, poll=args.poll, backoff=args.backoff, until_idle=args.until_idle, max_jobs=args.max_jobs,
        log_format=args.log_format, recycle_after=args.recycle_after, recycle_memory=args.recycle_memory,
        metrics_port=args.metrics_port, metrics_host=args.metrics_host,
    )
    try:
        return worker.run()
    except (StoreError, MetricsUnavailable) as e:
        if args.log_format == "json":  # one object, as every line of this log
            worker.say(str(e), level="error")
            return EXIT_USAGE
        return _die(str(e))


# -- dal jobs, dal job ... -------------------------------------------------------------------------------

def cmd_jobs(args: argparse.Namespace) -> int:
    from dal.receipts.store import StoreError

    try:
        got = _read_queue(args)
        if got is None:
            rows: list[dict[str, Any]] = []
        else:
            store, q = got
            with store:
                rows = q.list(state=args.state, queue=args.queue, key=args.key, limit=args.limit or None)
    except StoreError as e:
        return _die(str(e))
    if args.json:
        _emit("jobs", {"jobs": [_public(r) for r in rows]})
        return 0
    if not rows:
        sys.stdout.write("no jobs yet\n" if got is None or not (args.state or args.queue or args.key)
                         else "no such jobs\n")
        return 0
    now = time.time()
    table = [("JOB", "STATE", "QUEUE", "KEY", "TRIES", "WHEN", "LAST RUN", "NOTE")]
    for r in rows:
        when = _ago(r["run_at"], now) if r["state"] == "scheduled" else _ago(r["updated_at"], now)
        last = f"{r['last_status'] or '-'}/{r['last_retry'] or '-'}" if r["last_run_id"] else "-"
        note = (r["note"] or "").replace("\n", " ")
        lead = f"run {r['last_run_id']} "
        if r["last_run_id"] and note.startswith(lead):
            note = note[len(lead):]  # the run is `dal job show ID`'s; the room goes to what comes next
        table.append((str(r["job_id"]), r["state"], r["queue"], visible(r["key"]), str(r["attempts"]), when, last,
                      visible(note)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    room = None
    if sys.stdout.isatty():  # on a terminal each row fits its width; piped, a note is whole (a `next:` in it)
        import shutil

        room = max(40, shutil.get_terminal_size().columns - sum(w + 2 for w in widths))
    for row in table:
        note = row[-1] if room is None or len(row[-1]) <= room else row[-1][: room - 1] + "…"
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + note + "\n")
    return 0


def cmd_job_show(args: argparse.Namespace) -> int:
    from dal.receipts.store import StoreError

    try:
        got = _read_queue(args)
        if got is None:
            return _die(f"no job {args.job_id}: there is no run store at {_path(args)}", EXIT_NOT_FOUND)
        store, q = got
        with store:
            job = q.get(args.job_id)
            receipt = store.get_run(job["last_run_id"]) if job and job["last_run_id"] else None
    except StoreError as e:
        return _die(str(e))
    if job is None:
        return _die(f"no job {args.job_id} (list jobs with `dal jobs`)", EXIT_NOT_FOUND)
    from dal.receipts.nextstep import job_next

    nxt = job_next(job, receipt, when=_when)
    if args.json:
        _emit("job", {"job": _public(job), "next": nxt})
        return 0
    spec = _public(job)["spec"]
    lines = [
        f"{job['state']}  job {job['job_id']}  key {job['key']}",
        f"  queue         {job['queue']} (priority {job['priority']})",
        f"  script        {spec.get('script') if isinstance(spec, dict) else '?'}",
        f"  workspace     {spec.get('workspace') if isinstance(spec, dict) else '?'}",
        f"  host          {job['host']}{' (movable: any host)' if job['movable'] else ' (only this host)'}",
        f"  attempts      {job['attempts']} claims, {job['failures']} failed of {job['max_attempts']}"
        + (f", {job['streak']} resumes in a row" if job["streak"] else ""),
        f"  submitted     {_when(job['created_at'])}" + (f" by schedule {job['schedule']}" if job["schedule"] else ""),
        f"  updated       {_when(job['updated_at'])}",
    ]
    if job["last_run_id"]:
        lines.append(f"  last run      {job['last_run_id']} ({job['last_status']}, retry {job['last_retry']})")
    if job["note"]:
        lines.append(f"  note          {job['note']}")
    lines.append(f"\nnext: {nxt}")
    sys.stdout.write(visible("\n".join(lines), lines=True) + "\n")  # the key and the note are the script's
    return 0


def cmd_job_move(args: argparse.Namespace) -> int:
    from dal.receipts.location import open_store
    from dal.receipts.store import NoStore, StoreError

    path = _path(args)
    if _missing(path):
        return _die(f"no job {args.job_id}: there is no run store at {path}", EXIT_NOT_FOUND)
    try:
        with open_store(path) as store:
            q = store.jobs()
            if q.get(args.job_id) is None:
                return _die(f"no job {args.job_id} (list jobs with `dal jobs`)", EXIT_NOT_FOUND)
            note = args.note or ("retried by an operator" if args.verb == "retry" else "cancelled by an operator")
            job = q.retry(args.job_id, note=note) if args.verb == "retry" else q.cancel(args.job_id, note=note)
    except (NoStore, StoreError) as e:
        return _die(str(e))
    said = "is ready again" if args.verb == "retry" else "is cancelled" + (
        " (its run stops at its next effect; its journal stays the operation's)" if job["lease_epoch"] else "")
    return _said(args, job, f"job {job['job_id']} ({job['key']}) {said}")


def cmd_workers(args: argparse.Namespace) -> int:
    from dal.receipts.store import StoreError

    try:
        got = _read_queue(args)
        rows: list[dict[str, Any]] = []
        if got is not None:
            store, q = got
            with store:
                rows = q.workers()
    except StoreError as e:
        return _die(str(e))
    now = time.time()
    for r in rows:
        r["queues"] = json.loads(r["queues"])
        if r["state"] != "stopped" and r["heartbeat_at"] < now - 3 * max(r["lease"], 1.0):
            r["state"] = "gone"  # no heartbeat for three leases: killed, or its machine is
    if args.json:
        _emit("workers", {"workers": rows})
        return 0
    if not rows:
        sys.stdout.write("no workers yet\n")
        return 0
    table = [("WORKER", "HOST", "PID", "STATE", "QUEUES", "RUNNING", "DONE", "HEARTBEAT")]
    for r in rows:
        table.append((r["worker_id"], r["host"], str(r["pid"]), r["state"], ",".join(r["queues"]),
                      f"{r['running']}/{r['concurrency']}", str(r["done"]), _ago(r["heartbeat_at"], now)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return 0


# -- dal schedule ----------------------------------------------------------------------------------------

def cmd_schedule_add(args: argparse.Namespace) -> int:
    from dal.core.liveness import host_name
    from dal.receipts.location import open_store
    from dal.receipts.store import StoreError
    from dal.worker import schedules

    try:
        schedules.check(args.cron, args.tz)
    except schedules.ScheduleError as e:
        return _die(str(e))
    if not args.name or ":" in args.name or args.name != args.name.strip():
        return _die(f"a schedule's name must be non-empty, without ':' or surrounding spaces: {args.name!r}")
    spec, _, path, _ = _prepare(args, schedule=True)
    try:
        with open_store(path) as store:
            q = store.jobs()
            now = q.clock()  # the first slot after the store's now, by which every worker fires it
            first = schedules.next_after(args.cron, args.tz, now)
            row = {"name": args.name, "cron": args.cron, "tz": args.tz, "state": "active", "spec": json.dumps(spec),
                   "queue": args.queue, "priority": args.priority, "max_attempts": args.max_attempts,
                   "host": host_name(), "movable": int(args.movable), "next_at": first, "missed": 0,
                   "created_at": now, "updated_at": now}
            q.add_schedule(row)
    except StoreError as e:
        return _die(str(e))
    return _said_schedule(args, row, f"schedule {args.name} added: {args.cron} ({args.tz}), first slot {_when(first)}")


def _said_schedule(args: argparse.Namespace, row: dict[str, Any] | None, line: str) -> int:
    if args.json:
        out = dict(row or {})
        if isinstance(out.get("spec"), str):
            out["spec"] = json.loads(out["spec"])
        _emit("schedule", {"schedule": out or None, "message": line})
    elif not getattr(args, "quiet", False):
        sys.stdout.write(f"dal: {line}\n")
    return 0


def cmd_schedule_list(args: argparse.Namespace) -> int:
    from dal.receipts.store import StoreError

    try:
        got = _read_queue(args)
        rows: list[dict[str, Any]] = []
        if got is not None:
            store, q = got
            with store:
                rows = q.schedules()
    except StoreError as e:
        return _die(str(e))
    if args.json:
        for r in rows:
            r["spec"] = json.loads(r["spec"])
        _emit("schedules", {"schedules": rows})
        return 0
    if not rows:
        sys.stdout.write("no schedules yet\n")
        return 0
    table = [("NAME", "STATE", "CRON", "TZ", "NEXT SLOT", "LAST SLOT", "LAST JOB", "MISSED", "SCRIPT")]
    for r in rows:
        table.append((r["name"], r["state"], r["cron"], r["tz"], _when(r["next_at"]), _when(r["last_slot"]),
                      str(r["last_job"] or "-"), str(r["missed"]), json.loads(r["spec"]).get("script", "?")))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return 0


def cmd_schedule_set(args: argparse.Namespace) -> int:
    from dal.receipts.location import open_store
    from dal.receipts.store import StoreError
    from dal.worker import schedules

    path = _path(args)
    if _missing(path):
        return _die(f"no schedule {args.name!r}: there is no run store at {path}", EXIT_NOT_FOUND)
    try:
        with open_store(path) as store:
            q = store.jobs()
            have = {r["name"]: r for r in q.schedules()}
            if args.name not in have:
                return _die(f"no schedule {args.name!r} (list them with `dal schedule list`)", EXIT_NOT_FOUND)
            if args.verb == "remove":
                q.set_schedule(args.name, remove=True)
                line = f"schedule {args.name} removed (its jobs stay)"
            elif args.verb == "pause":
                q.set_schedule(args.name, state="paused")
                line = f"schedule {args.name} paused"
            else:
                s = have[args.name]
                first = schedules.next_after(s["cron"], s["tz"], q.clock())
                q.set_schedule(args.name, state="active", next_at=first)
                line = f"schedule {args.name} resumed: next slot {_when(first)}"
    except (StoreError, schedules.ScheduleError) as e:
        return _die(str(e))
    return _said_schedule(args, None, line)
