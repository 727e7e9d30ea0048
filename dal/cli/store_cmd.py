"""`dal store migrate` and `dal store check`: an operator's look at the run store itself, for either kind (a
SQLite file or a PostgreSQL database, docs/scale.md): its schema version, whether it is sound, what it holds.

`migrate` brings the store to this DAL's schema (every store opened for writing is migrated anyway; this does
it on purpose, once, before the workers of a new version start). `check` never writes: exit 0 when the store is
sound, 1 when it has problems (listed), 2 when it cannot be opened (unreachable, damaged, no store yet).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_PROBLEMS = 1
EXIT_STORE = 2
RUN_STATUSES = ("running", "completed", "failed", "exhausted", "waiting", "interrupted", "rejected", "skipped")


def register(sub: Any) -> None:
    s = sub.add_parser("store", help="check or migrate the run store",
                       description="Look at the run store itself: `dal store check` (health, schema version, "
                       "counts; never writes) and `dal store migrate` (bring it to this DAL's schema).")
    verbs = s.add_subparsers(dest="verb", metavar="VERB")
    for verb, text in (("check", "say whether the store is sound: schema version, counts, server (exit 0 sound, "
                                  "1 problems, 2 unusable)"),
                       ("migrate", "bring the store to this DAL's schema (under the store's lock)")):
        v = verbs.add_parser(verb, help=text, description=text)
        v.add_argument("--store", metavar="PATH|URL",
                       help="the run store (default: $DAL_STORE, else WORKSPACE/.dal/dal.db); a postgresql:// URL "
                       "names a PostgreSQL database")
        v.add_argument("--workspace", type=Path, default=None, metavar="DIR", help="the workspace")
        v.add_argument("--json", action="store_true", help="one JSON object on stdout")
        v.set_defaults(func=cmd_check if verb == "check" else cmd_migrate)

    def no_verb(args: argparse.Namespace) -> int:
        s.print_usage(sys.stderr)
        print("dal store: say what to do: `dal store check` or `dal store migrate`", file=sys.stderr)
        return 2

    s.set_defaults(func=no_verb)


def _location(args: argparse.Namespace) -> Any:
    from dal.receipts.location import StoreLocation, StoreLocationError
    from dal.runner.workspace import find_workspace

    try:
        return StoreLocation.parse(args.store, find_workspace(args.workspace).path)
    except StoreLocationError as e:
        raise SystemExit(_die(str(e), args)) from None


def _die(message: str, args: argparse.Namespace, code: int = EXIT_STORE) -> int:
    from dal.cli import hostmode

    return hostmode.error(message, code, json=args.json)


def _version_of(location: Any) -> int:
    """The schema version the store has now, without writing (0: none yet)."""
    from dal.receipts.location import open_store
    from dal.receipts.store import NoStore

    if location.is_file and not location.file.exists():
        return 0
    try:
        with open_store(location, readonly=True) as s:
            return int(s.version)
    except NoStore:
        return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from dal.receipts.location import open_store
    from dal.receipts.store import StoreError

    location = _location(args)
    try:
        before = _version_of(location)
        with open_store(location) as s:
            after = int(s.version)
    except StoreError as e:
        return _die(str(e), args)
    said = (f"store {location}: schema version {after} (migrated from {before})" if after != before
            else f"store {location}: schema version {after}, already current")
    if args.json:
        from dal.cli import hostmode

        hostmode.emit("store_migrate", {"store": location.to_json(), "from_version": before, "version": after})
    else:
        print(said)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from dal.receipts.location import open_store
    from dal.receipts.store import NoStore, StoreError

    location = _location(args)
    if location.is_file and not location.file.exists():
        return _die(f"no runs yet: there is no run store at {location}", args)
    try:
        with open_store(location, readonly=True) as s:
            report = _report(s, location)
    except NoStore as e:
        if location.kind == "postgresql":  # an empty database: the one command that makes the tables
            from dal.core.shellword import sh_quote

            return _die(f"{e}: `dal store migrate --store {sh_quote(location.shown)}` makes them (so does the "
                        "first `dal run` or `dal worker` on it)", args)
        return _die(str(e), args)
    except StoreError as e:
        return _die(str(e), args)
    if args.json:
        from dal.cli import hostmode

        hostmode.emit("store_check", report)
    else:
        _print(report)
    return EXIT_PROBLEMS if report["problems"] else 0


def _report(s: Any, location: Any) -> dict[str, Any]:
    runs = {st: s.count_runs(status=st) for st in RUN_STATUSES}
    runs = {k: v for k, v in runs.items() if v}
    jobs = s.jobs()
    report: dict[str, Any] = {
        "store": location.to_json(),
        "version": int(s.version),
        "problems": s.integrity_check(),
        "runs": {"total": s.count_runs(), "by_status": runs, "waiting": s.count_runs(waiting=True)},
        "jobs": {"by_state": dict(sorted(jobs.counts().items()))},
        "workers": len([w for w in jobs.workers(limit=None) if w.get("state") != "stopped"]),
    }
    if hasattr(s, "server"):
        report["server"] = s.server()
    return report


def _print(r: dict[str, Any]) -> None:
    ok = "sound" if not r["problems"] else f"{len(r['problems'])} problem{'s' if len(r['problems']) != 1 else ''}"
    lines = [f"store    {r['store']['path']} ({r['store']['kind']}): {ok}", f"schema   version {r['version']}"]
    if "server" in r:
        sv = r["server"]
        lines.append(f"server   PostgreSQL {sv['server_version']}, database {sv['database']}, round trip "
                     f"{sv['round_trip_ms']:g} ms, clock {sv['clock_skew_s']:+.3f} s from this machine's")
    by = ", ".join(f"{n} {st}" for st, n in r["runs"]["by_status"].items()) or "none"
    lines.append(f"runs     {r['runs']['total']} ({by}); {r['runs']['waiting']} waiting for a person or a resume")
    js = ", ".join(f"{n} {st}" for st, n in r["jobs"]["by_state"].items()) or "none"
    lines.append(f"jobs     {js}; {r['workers']} worker{'s' if r['workers'] != 1 else ''} not stopped")
    lines += [f"problem  {p}" for p in r["problems"]]
    print("\n".join(lines))
