"""`dal receipts` and `dal receipt show`: read-only inspection of the run store.

Neither command writes anything: the store is opened read-only and never created, so running them in
a folder without runs says "no runs yet" and leaves the folder as it was.

Exit codes (docs/cli.md's one table): 0 shown (or nothing to show yet for `dal receipts`); 2 no such run
(or no runs yet for `receipt show`), a store that cannot be read (damaged, locked, not a DAL store: the
message names it and says what to do) or a usage error.

A run still marked `running` whose process is gone (kill -9, power loss, a pid since reused by another
process) is `died`, in the table, in `--json`, in `receipt show` and for `--status`; the next `dal resume`
or run of its key records it as `interrupted`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from dal.receipts.markdown import render_markdown
from dal.receipts.render import duration_text, render, use_colour
from dal.receipts.store import NoStore, RunNotFound, Store, StoreError

STATUSES = ("completed", "failed", "exhausted", "waiting", "interrupted", "rejected", "skipped", "running", "died",
            "resumed")
# The statuses the list shows in place of the stored one (_status_labels), and the stored ones they come from.
_LABELLED = {"running": ("running",), "died": ("running",), "resumed": ("waiting", "interrupted"),
             "waiting": ("waiting",), "interrupted": ("interrupted",)}
EXIT_NOT_FOUND = 2  # an unknown run is a usage error, as for approve, deny, resolve and resume
EXIT_STORE = 2


def _add_store_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", metavar="PATH", help="the run store (default: $DAL_STORE, else WORKSPACE/.dal/dal.db)"
    )
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        type=Path,
        help="the workspace whose store to read (default: the nearest folder, from the current directory up, "
        "with a dal.toml or a .dal/ folder; else the current directory)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def register(subparsers: Any) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """Add `receipts` and `receipt show` to the main CLI's subcommands; each sets `func(args) -> int`."""
    listing = subparsers.add_parser(
        "receipts",
        help="list runs, newest first",
        description="List runs from the run store, newest first. Read-only.",
    )
    _add_store_flags(listing)
    listing.add_argument("--status", choices=STATUSES, help="only runs with this status")
    listing.add_argument(
        "--operation", metavar="OP", help="only runs of this operation or key (globs allowed: 'deploy:*')"
    )
    listing.add_argument(
        "--limit", type=int, default=20, metavar="N", help="show at most N runs (default: 20; 0 for all)"
    )
    listing.add_argument("--waiting", action="store_true", help="only runs waiting for a person or a resume")
    listing.set_defaults(func=cmd_receipts, handler=cmd_receipts)

    receipt = subparsers.add_parser(
        "receipt",
        help="show one run's receipt",
        description="Inspect one run's receipt. Read-only.",
    )
    actions = receipt.add_subparsers(dest="receipt_action", metavar="show")
    show = actions.add_parser(
        "show",
        help="render one receipt: status, evidence, artifacts, external effect and the next safe move",
        description="Render one run's receipt. RUN is a run id, a unique prefix of one, an operation or key "
        "(its newest run), or `latest`.",
    )
    show.add_argument("ref", metavar="RUN|OPERATION|latest", nargs="?", default="latest")
    _add_store_flags(show)
    show.add_argument("--md", action="store_true", help="print the markdown receipt")
    show.set_defaults(func=cmd_receipt_show, handler=cmd_receipt_show)

    def no_action(args: argparse.Namespace) -> int:
        receipt.print_usage(sys.stderr)
        print("dal receipt: say what to do, e.g. `dal receipt show latest`", file=sys.stderr)
        return 2

    receipt.set_defaults(func=no_action, handler=no_action)
    return listing, show


def _open(args: argparse.Namespace) -> Store:
    from dal.receipts.location import StoreLocation, StoreLocationError, open_store
    from dal.runner.workspace import find_workspace  # the workspace found as `dal run` finds it

    workspace = find_workspace(getattr(args, "workspace", None)).path
    try:
        location = StoreLocation.parse(getattr(args, "store", None), workspace)
    except StoreLocationError as e:
        raise StoreError(str(e)) from None
    return open_store(location, readonly=True)


def _fail(message: str, err: TextIO, code: int = EXIT_NOT_FOUND, out: TextIO | None = None,
          json: bool = False) -> int:
    from dal.cli import hostmode

    return hostmode.error(message, code, out=out, err=err, json=json)


def _emit(kind: str, body: dict[str, Any], out: TextIO) -> None:
    from dal.cli import hostmode

    hostmode.emit(kind, body, out)


def _started(ts: str | None) -> str:
    # 2026-11-29T19:12:00.123Z -> 2026-11-29 19:12:00Z: seconds are enough in a table.
    return f"{ts[:10]} {ts[11:19]}Z" if ts and len(ts) >= 19 else (ts or "-")


def cmd_receipts(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`dal receipts`: a table of runs, newest first (or `--json`: {"kind": "runs", "runs": [row, ...]})."""
    out = out or sys.stdout
    err = err or sys.stderr
    limit = None if args.limit is not None and args.limit <= 0 else args.limit
    filters = {"status": args.status, "operation": args.operation, "waiting": args.waiting}
    try:
        with _open(args) as store:
            if args.status in _LABELLED:
                # What the table shows is the filter's word: `died` and `running` are both stored as
                # running (which one depends on the process); `resumed` is a waiting or interrupted run
                # that a later run continued, so `--status waiting` lists only runs still waiting.
                rows = []
                for stored in _LABELLED[args.status]:
                    rows += store.list_runs(**{**filters, "status": stored}, limit=None)
                rows.sort(key=lambda r: r["run_id"], reverse=True)
                shown = _status_labels(store, rows)
                rows = [r for r in rows if shown.get(r["run_id"], r["status"]) == args.status]
                total = len(rows)
                rows = rows[:limit] if limit is not None else rows
            else:
                rows = store.list_runs(limit=limit, **filters)
                total = store.count_runs(**filters) if limit is not None and len(rows) == limit else len(rows)
            labels = _status_labels(store, rows)
            hosts = _hosts(store, rows, labels)
    except NoStore as e:
        if args.json:
            _emit("runs", {"runs": []}, out)
        else:
            print(f"no runs yet (no run store at {e.path})", file=out)
        return 0
    except StoreError as e:
        return _fail(str(e), err, EXIT_STORE, out, args.json)
    for r in rows:
        if labels.get(r["run_id"]) == "died":
            r["status"] = "died"  # the same word in the table, in --json and in `dal receipt show`
        if r["run_id"] in hosts:
            r["host"] = hosts[r["run_id"]]  # running on another machine: which one
    if args.json:
        _emit("runs", {"runs": rows}, out)
        return 0
    if not rows:
        print("no runs match" if any(filters.values()) else "no runs yet", file=out)
        return 0
    colour = use_colour(out)
    from dal.core.visible import visible_data

    rows = visible_data(rows)  # an operation key is the script's text
    header = ("RUN", "OPERATION", "STATUS", "RETRY", "STARTED", "DURATION")
    table = [
        (
            r["run_id"],
            r["operation"],
            labels.get(r["run_id"], r["status"]) + (f" on {hosts[r['run_id']]}" if r["run_id"] in hosts else ""),
            "-" if labels.get(r["run_id"]) == "resumed" else (r["retry"] or "-"),
            _started(r["started_at"]),
            duration_text(r["duration_ms"]),
        )
        for r in rows
    ]
    widths = [max(len(header[i]), *(len(row[i]) for row in table)) for i in range(len(header))]
    widths[1] = min(widths[1], 48)

    def line(cells: tuple[str, ...]) -> str:
        parts = []
        for i, cell in enumerate(cells):
            text = cell if len(cell) <= widths[i] else cell[: widths[i] - 1] + "…"
            parts.append(text.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    print(line(header), file=out)
    for row in table:
        text = line(row)
        if colour and row[2] in ("failed", "rejected", "waiting", "exhausted", "interrupted", "died"):
            text = text.replace(row[2], f"\x1b[{'31' if row[2] in ('failed', 'rejected') else '33'}m{row[2]}\x1b[0m", 1)
        print(text, file=out)
    if total > len(rows):
        print(f"… {len(rows)} of {total} runs shown; use --limit N (0 for all)", file=out)
    return 0


def _state(row: dict[str, Any], info: dict[str, Any], store: Any = None) -> str:
    """The run's state: its stored status, except `died` for a run still marked running whose process is
    gone (`info` is its Store.run_row(), which names the process)."""
    if row.get("status") != "running":
        return str(row.get("status"))
    from dal.runner.liveness import run_alive

    return "running" if run_alive(info, store) else "died"


def _status_labels(store: Store, rows: list[dict[str, Any]]) -> dict[str, str]:
    """What the list shows instead of the stored status: `died` for a run still marked running whose
    process is gone; `resumed` for a waiting or interrupted run that a later run continued."""
    labels: dict[str, str] = {}
    for r in rows:
        status = r.get("status")
        if status not in ("running", "waiting", "interrupted"):
            continue
        info = store.run_row(r["run_id"]) or {}
        if status == "running":
            if _state(r, info, store) == "died":
                labels[r["run_id"]] = "died"
        elif info.get("resumed_by"):
            labels[r["run_id"]] = "resumed"
    return labels


def _hosts(store: Store, rows: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str]:
    """The machine each live running run executes on, where it is not this one (dal.runner.shown.running_on)."""
    from dal.runner.shown import running_on

    out = {}
    for r in rows:
        if r.get("status") == "running" and labels.get(r["run_id"]) != "died":
            host = running_on(store, store.run_row(r["run_id"]) or r)
            if host:
                out[r["run_id"]] = host
    return out


def cmd_receipt_show(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`dal receipt show REF`: render one receipt (`--json` the stored receipt, `--md` the markdown)."""
    out = out or sys.stdout
    err = err or sys.stderr
    from dal.runner.shown import shown

    try:
        with _open(args) as store:
            view = shown(store, args.ref)
    except NoStore as e:
        return _fail(f"no runs yet (no run store at {e.path})", err, out=out, json=args.json)
    except RunNotFound as e:
        return _fail(str(e), err, out=out, json=args.json)
    except StoreError as e:
        return _fail(str(e), err, EXIT_STORE, out, args.json)
    if view.running is not None:  # still running: say so, show nothing as final
        if args.json:
            _emit("running", {"run_id": view.running.split()[1], "message": view.running}, out)
        else:
            out.write(view.running + "\n")
        return 0
    receipt, decisions, continued_by = view.receipt, view.decisions, view.continued_by
    if args.json:
        _emit("receipt", receipt, out)
    elif args.md:
        out.write(render_markdown(receipt, decisions))
    else:
        out.write(render(receipt, colour=use_colour(out), decisions=decisions, continued_by=continued_by,
                         job=view.job))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """A standalone parser with just these commands (tests, and `python -m dal.cli.receipts_cmd`)."""
    parser = argparse.ArgumentParser(prog="dal")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` with build_parser() and run the chosen command."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
