"""What each console page shows, read from the store through the contract (dal/receipts/contract.py) and
the runner's decision helpers, as plain data for the templates. Nothing here imports the web server, so
the benchmark and the tests can call it directly.

A held effect is shown with a *shown hash*: a digest of the run that holds it, its number, its command,
what kind of decision it waits for and the decisions already recorded about it. The form that decides it
carries the hash back; if the journal changed in between (a resume ran, another person decided, the
operation started over) the hash differs and the decision is refused (app.py answers 409).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from dal.core.readbelow import NotBelow, root_of, stat_below
from dal.receipts.contract import RunStore
from dal.receipts.render import describe_decision, duration_text, render
from dal.runner import journal
from dal.runner.decisions import DecisionRefused, held_effect

# The decisions the console offers, per kind of held effect, as (value, button label).
CHOICES = {
    "approval": (("approved", "Approve"), ("denied", "Deny")),
    "uncertain": (("resolved:done", "It happened"), ("resolved:failed", "It did not"),
                  ("resolved:retry", "Run it again")),
}
# A decision in words, as `dal resolve` says it ("resolved effect 2 of run R as done"), never the stored label.
SAID = {"approved": ("approved", ""), "denied": ("denied", ""),
        "resolved:done": ("resolved", " as done (it happened)"),
        "resolved:failed": ("resolved", " as failed (it did not happen)"),
        "resolved:retry": ("resolved", " as retry (run it again)")}


def said(decision: str) -> str:
    """`resolved as failed (it did not happen)` for `resolved:failed`; the label itself for one unknown."""
    verb, how = SAID.get(decision, (decision, ""))
    return f"{verb}{how}"


KIND_OF = {"approved": "approval", "denied": "approval", "resolved:done": "uncertain",
           "resolved:failed": "uncertain", "resolved:retry": "uncertain"}
_WANT = {"approval": "pending_approval", "uncertain": "uncertain"}

STATUSES = ("completed", "failed", "exhausted", "waiting", "interrupted", "rejected", "skipped", "running", "died",
            "resumed")
RETRY_CLASSES = ("none", "resume", "replay", "inspect", "repair", "escalate")
PAGE = 100  # runs per page of the runs list


def shown_hash(run_id: str, seq: int, command: str, kind: str, decision_ids: list[int]) -> str:
    """The digest a decision form carries: what the page showed about the held effect."""
    text = json.dumps([run_id, seq, command, kind, sorted(decision_ids)], ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def run_label(store: RunStore, row: dict[str, Any]) -> str:
    """The status a person reads: `died` for a run marked running whose process is gone, `resumed` for a
    waiting or interrupted run that a later run continued (as `dal receipts` says)."""
    status = str(row.get("status"))
    if status not in ("running", "waiting", "interrupted"):
        return status
    info = store.run_row(row["run_id"]) or {}
    if status == "running":
        from dal.runner.liveness import run_alive

        return "running" if run_alive(info, store) else "died"
    return "resumed" if info.get("resumed_by") else status


def held(store: RunStore, run_id: str) -> dict[str, Any] | None:
    """The effect the operation of `run_id` waits on a person for, as shown on a page, or None. `run_id`
    must be the operation's newest run (the one a decision is recorded for)."""
    row = store.run_row(run_id)
    if row is None or row.get("status") != "waiting" or row.get("resumed_by"):
        return None
    if journal.newest_of(store, row).get("run_id") != run_id:  # type: ignore[arg-type]
        return None  # the operation moved on (a new attempt): decide about its newest run instead
    return _held_of(store, row)


def _held_of(store: RunStore, row: dict[str, Any]) -> dict[str, Any] | None:
    """held() of a waiting run that is its operation's newest (`row`: its run_row())."""
    for kind, want in _WANT.items():
        try:
            item = held_effect(store, row, None, want)  # type: ignore[arg-type]
        except DecisionRefused:
            continue
        return effect_view(store, row, item.seq, kind, item.command, item.effect_class)
    return None


def _started(store: RunStore, rid: str, seq: int) -> dict[str, Any] | None:
    """The journal entry of the attempt that started effect `seq` (with the run it is in, `by`): a resume
    that holds the effect journals a hold of its own, timed by the resume, not by the killed attempt that
    began the effect; so the runs before `rid` are looked at too, back to the one that journaled the intent."""
    found: dict[str, Any] | None = None
    seen: set[str] = set()
    cur: str | None = rid
    while cur and cur not in seen and len(seen) < 1000:
        seen.add(cur)
        for e in store.journal(cur):
            if e.get("seq") == seq:
                if found is None or not (e.get("detail") or {}).get("uncertain"):
                    found = {**e, "by": cur}
        if found is not None and not (found.get("detail") or {}).get("uncertain"):
            break  # the attempt that began it
        cur = (store.run_row(cur) or {}).get("previous_run")
    return found


def effect_view(store: RunStore, row: dict[str, Any], seq: int, kind: str, command: str,
                effect_class: str | None) -> dict[str, Any]:
    """A held effect with what a person needs to decide it, and the hash its form carries."""
    rid = row["run_id"]
    earlier = journal.load(store, rid).decisions.get(seq, [])  # type: ignore[arg-type]
    group = [d for d in earlier if KIND_OF.get(str(d.get("decision"))) == kind]
    receipt = store.get_run(rid) or {}
    items = (receipt.get("effects") or {}).get("items") or []
    mine = next((i for i in items if i.get("seq") == seq), {})
    before = [i for i in items if isinstance(i.get("seq"), int) and i["seq"] < seq]
    entry = _started(store, rid, seq)
    return {
        "run_id": rid,
        "seq": seq,
        "kind": kind,
        "command": command,
        "effect_class": effect_class or "-",
        "reason": mine.get("reason"),
        "line": mine.get("line"),
        "before": before,
        "decisions": [describe_decision(d) for d in group],
        "journal": entry,
        "files": files_state(receipt.get("workspace"), mine.get("writes") or []) if kind == "uncertain" else [],
        "choices": CHOICES[kind],
        "hash": shown_hash(rid, seq, command, kind, [int(d["id"]) for d in group if "id" in d]),
    }


def current_hash(store: RunStore, run_id: str, seq: int, kind: str) -> str | None:
    """The hash a form about effect `seq` of `run_id` must carry now; None when that run no longer waits
    on that effect for that kind of decision (a resume continued it, or the effect is decided and used)."""
    now = held_for(store, run_id, seq, kind)
    return None if now is None else now["hash"]


def held_for(store: RunStore, run_id: str, seq: int, kind: str) -> dict[str, Any] | None:
    row = store.run_row(run_id)
    if row is None or row.get("status") != "waiting" or row.get("resumed_by"):
        return None
    newest = journal.newest_of(store, row)  # type: ignore[arg-type]
    if newest.get("run_id") != run_id:
        return None
    try:
        item = held_effect(store, row, seq, _WANT[kind])  # type: ignore[arg-type]
    except DecisionRefused:
        return None
    return effect_view(store, row, item.seq, kind, item.command, item.effect_class)


def files_state(workspace: Any, paths: list[str]) -> list[dict[str, Any]]:
    """What the file system shows now for the paths an uncertain effect writes: exists or not, size, age.
    Only paths inside the run's workspace are looked at, by descriptor from the workspace (readbelow): a
    folder on the way that a script swapped for a symlink out is not followed, and a link is reported, not
    followed."""
    out: list[dict[str, Any]] = []
    if not isinstance(workspace, str) or not workspace:
        return out
    for p in paths[:20]:
        if not isinstance(p, str):
            continue
        below = root_of(p, (workspace,)) if os.path.isabs(p) else (workspace, p)
        if below is None:
            out.append({"path": p, "state": "outside the workspace: not looked at"})
            continue
        try:
            st = stat_below(*below)
        except NotBelow as e:
            out.append({"path": p, "state": "outside the workspace: not looked at" if e.leads_out
                        else f"cannot be read ({e.strerror})"})
            continue
        except (FileNotFoundError, NotADirectoryError):
            out.append({"path": p, "state": "does not exist"})
            continue
        except OSError as e:
            out.append({"path": p, "state": f"cannot be read ({e.strerror})"})
            continue
        if stat.S_ISLNK(st.st_mode):
            out.append({"path": p, "state": "a symlink (not followed)"})
            continue
        age = max(0.0, time.time() - st.st_mtime)
        out.append({"path": p, "state": f"exists, {st.st_size} bytes, modified {_ago(age)}"})
    return out


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def waiting(store: RunStore, limit: int = 25) -> dict[str, Any]:
    """The newest `limit` runs that wait for a person, each with the effect it holds (None when the
    script itself asked for a person: its blocker says why), and how many wait in all."""
    rows = store.list_runs(waiting=True, limit=limit)
    total = store.count_runs(waiting=True) if len(rows) == limit else len(rows)
    items = []
    for row in rows:
        full = store.run_row(row["run_id"]) or row
        nid = journal.newest_of(store, full).get("run_id")  # type: ignore[arg-type]
        mine = nid == row["run_id"]
        items.append({"run": row, "held": _held_of(store, full) if mine else None, "newest": None if mine else nid})
    # A job also waits when its script failed asking for a person (retry class escalate): its run is
    # failed, not waiting, and nothing in it is to decide; `dal job retry` once the person has acted.
    shown = {row["run_id"] for row in rows}
    handed = []
    for job in store.jobs().list(state="waiting", limit=limit):
        run = _receipt_of(store, job.get("last_run_id"))
        if job.get("last_run_id") in shown or run.get("status") == "waiting":
            continue
        handed.append({"job": job, "blocker": run.get("blocker") or job.get("note"), "status": run.get("status")})
    return {"items": items, "total": total, "handed": handed}


def _receipt_of(store: RunStore, run_id: str | None) -> dict[str, Any]:
    return (store.get_run(run_id) or {}) if run_id else {}


def blocked(store: RunStore, limit: int = 200) -> list[dict[str, Any]]:
    """Parked jobs (waiting for an operator's `dal job retry`), with the blocker and artifacts of their
    last run and the state each artifact is in now."""
    out = []
    for job in store.jobs().list(state="parked", limit=limit):
        receipt = _receipt_of(store, job.get("last_run_id"))
        ws = receipt.get("workspace")
        artifacts = []
        for a in (receipt.get("artifacts") or [])[:20]:
            now = files_state(ws, [a.get("path")])
            artifacts.append({"path": a.get("path"), "recorded": a.get("state"),
                              "now": now[0]["state"] if now else "-"})
        out.append({"job": job, "blocker": receipt.get("blocker") or job.get("note"), "artifacts": artifacts,
                    "status": receipt.get("status"), "retry": receipt.get("retry")})
    return out


def queue(store: RunStore, limit: int = 100, now: float | None = None) -> dict[str, Any]:
    """The queue by state (ready, running with worker and lease left, scheduled with when, waiting) and
    the workers the store knows."""
    now = time.time() if now is None else now
    jobs = store.jobs()
    sections = {}
    for state in ("ready", "running", "scheduled", "waiting"):
        rows = []
        for j in jobs.list(state=state, limit=limit):
            j = dict(j)
            if state == "running" and j.get("lease_until") is not None:
                j["lease_left"] = f"{j['lease_until'] - now:.0f} s"
            if state == "scheduled":
                j["when"] = f"in {_ago(j['run_at'] - now).removesuffix(' ago')}" if j["run_at"] > now else "now"
            rows.append(j)
        sections[state] = rows
    listing = getattr(jobs, "workers", None)  # not every job store lists workers
    workers = listing(limit=50) if callable(listing) else []
    for w in workers:
        w["beat"] = _ago(max(0.0, now - float(w.get("heartbeat_at") or now)))
    return {"counts": jobs.counts(), "sections": sections, "workers": workers}


def runs(store: RunStore, *, status: str | None = None, retry: str | None = None, operation: str | None = None,
         key: str | None = None, limit: int = PAGE) -> dict[str, Any]:
    """Runs newest first, filtered; each row with the status a person reads (run_label)."""
    stored = {"died": "running", "resumed": None}.get(status or "", status) if status else None
    derived = status in ("died", "resumed", "running", "waiting", "interrupted")
    filters = {"operation": operation or None, "key": key or None, "retry": retry or None}
    exact = not derived
    if exact:
        rows = store.list_runs(status=stored, limit=limit, **filters)
        return {"rows": [_listed(store, r) for r in rows], "total": store.count_runs(status=stored, **filters)}
    # Filters the store does not take (a status read from the process or the next run)
    # are applied here: over the newest runs first, in growing windows, so a common match reads a few
    # hundred rows and only a rare one reads them all.
    out: list[dict[str, Any]] = []
    window, seen = limit * 4, 0
    while True:
        rows = store.list_runs(status=stored, limit=window, **filters)
        for r in rows[seen:]:
            if retry and r.get("retry") != retry:
                continue
            if status == "resumed" and r.get("status") not in ("waiting", "interrupted"):
                continue
            item = _listed(store, r)
            if derived and item["label"] != status:
                continue
            out.append(item)
            if len(out) >= limit:
                return {"rows": out, "total": None}
        if len(rows) < window:
            return {"rows": out, "total": len(out)}
        seen, window = len(rows), window * 4


def _listed(store: RunStore, r: dict[str, Any]) -> dict[str, Any]:
    return {**r, "label": run_label(store, r), "duration": duration_text(r.get("duration_ms"))}


def run_page(store: RunStore, ref: str) -> dict[str, Any]:
    """A run's page: the receipt text exactly as `dal receipt show` prints it (no colour), its journal,
    its decisions, and the effect it holds, if any. Raises RunNotFound."""
    from dal.runner.shown import shown

    row = store.find_run(ref)
    rid = row["run_id"]
    # A died run's receipt is rebuilt from its journal; its artifacts are looked for in its workspace.
    from dal.runner.stored import StoredRun

    spec = StoredRun.of(row).spec
    receipt_ws = Path(spec.workspace) if spec is not None and spec.workspace else None
    view = shown(store, rid, receipt_ws)  # type: ignore[arg-type]
    text = view.running if view.receipt is None else render(view.receipt, colour=False, decisions=view.decisions,
                                                           continued_by=view.continued_by, job=view.job)
    # The operation's journal at this run: its own entries and those of the attempts it continues (a
    # resume replays those rather than running them again), oldest attempt first.
    entries = []
    for attempt in reversed(journal.chain(store, rid)[:20]):  # type: ignore[arg-type]
        for e in store.journal(attempt["run_id"]):
            if e.get("seq", 0) <= 0:
                continue
            result = e.get("result") or {}
            entries.append({**e, "run_id": attempt["run_id"], "outcome": result.get("status") or e.get("status"),
                            "detail_text": json.dumps(e.get("detail") or {}, sort_keys=True)})
    return {"run": store.run_row(rid) or row, "text": text, "journal": entries,
            "decisions": [{**d, "text": describe_decision(d)} for d in view.decisions],
            "held": held(store, rid), "label": run_label(store, row)}
