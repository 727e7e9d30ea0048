"""The human rendering of a run receipt (`dal receipt show`) and the `next:` action shared with markdown.

A receipt is read at 3 a.m. by someone who did not write the script: the first line says how the run
ended, the evidence says why, and `next:` says the one safe thing to do, as a command to type.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from dal.core.jsontext import escape_surrogates
from dal.core.sizes import approx_size

if TYPE_CHECKING:
    from dal.receipts.nextstep import Continuer

MAX_EVIDENCE_LINES = 50
MAX_ARTIFACT_LINES = 20
MAX_OUTCOME_CHARS = 160

_STATUS_COLOUR = {
    "completed": "32",
    "skipped": "32",
    "failed": "31",
    "rejected": "31",
    "waiting": "33",
    "exhausted": "33",
    "interrupted": "33",
    "died": "33",
}

_EXIT_WORDS = {
    "condition": "condition false",
    "end": "went through every item",
    "break": "break",
    "return": "return",
    "error": "an error",
    "finish": "finish()",
    "fail": "fail()",
    "budget": "a budget ran out",
    "waiting": "waiting for a person",
    "interrupted": "interrupted",
}


def use_colour(stream: TextIO) -> bool:
    """Colour as for diagnostics (dal.core.diagnostics.want_color: --color, NO_COLOR, a terminal)."""
    from dal.core.diagnostics import want_color

    return want_color(stream)


# -- what a receipt says, shared by render() and render_markdown() ------------------------------------


def wall_text(receipt: Mapping[str, Any]) -> str | None:
    """A line when not every command ran inside the bubblewrap wall, else None.

    Each effect records the wall that held it (`effects.items[].wall`); the run's `sandbox` says which wall
    was in force and why. Bubblewrap is the default, so a receipt says nothing more when it held every
    command; a Landlock wall (which holds less: see docs/policy.md) or no wall is named, with how many
    commands each held, because the person reading the receipt has to know what stood between them and
    the host."""
    box = receipt.get("sandbox")
    box = box if isinstance(box, Mapping) else {}
    reason = str(box.get("reason") or "")
    held: dict[str, int] = {}
    for e in (receipt.get("effects") or {}).get("items") or []:
        if isinstance(e, Mapping) and e.get("wall") and e.get("status") != "denied":
            held[str(e["wall"])] = held.get(str(e["wall"]), 0) + 1
    if box.get("refused"):
        return f"commands refused: {reason}"
    if box.get("wall") == "none" and set(held) <= {"none"}:
        return f"commands ran without the bubblewrap wall: {reason}"
    if set(held) - {"bubblewrap"}:
        parts = [
            f"{n} command{'' if n == 1 else 's'} {'without a wall' if w == 'none' else f'inside the {w} wall'}"
            for w, n in sorted(held.items(), key=lambda wn: (wn[0] != "bubblewrap", wn[0]))
        ]
        return "; ".join(parts) + (f" ({reason})" if reason else "")
    if box.get("wall") == "bubblewrap" and "no set-user-ID filter" in reason:
        return f"commands ran inside the bubblewrap wall, but {reason.split('; ', 1)[-1]}"
    return None


def args_text(args: Any) -> str:
    """A receipt's script arguments as the command line gives them: `to=ann times=2` (quoted as a shell
    would when a value has blanks or shell characters)."""
    import shlex

    if not isinstance(args, Mapping):
        return str(args)
    words = []
    for k, v in args.items():
        text = ("true" if v else "false") if isinstance(v, bool) else str(v)
        words.append(shlex.quote(f"{k}={text}"))
    return " ".join(words)


def one_line(value: Any, limit: int = MAX_OUTCOME_CHARS) -> str:
    """An outcome as one short line: strings raw, other values as compact JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    lines = text.strip().splitlines() or [""]
    text = lines[0] + (" …" if len(lines) > 1 else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _result_map(receipt: Mapping[str, Any]) -> Mapping[str, Any]:
    result = receipt.get("result")
    return result if isinstance(result, Mapping) else {}


def script_status(receipt: Mapping[str, Any]) -> str | None:
    """The script's own word for its outcome (`verified`, `verification_failed`), from `result.status`."""
    status = _result_map(receipt).get("status")
    return status if isinstance(status, str) and status else None


def _accounts(receipt: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Where the script keeps its own account of the work, most authoritative first: its result map, then
    each loop's snapshot and the maps in it (the article's `state`), last loop first."""
    out: list[Mapping[str, Any]] = []
    result = _result_map(receipt)
    if result and "$elided" not in result:
        out.append(result)
    for loop in reversed(receipt.get("loops") or []):
        snapshot = loop.get("snapshot") or {}
        out.append(snapshot)
        out += [v for v in snapshot.values() if isinstance(v, Mapping) and "$elided" not in v]
    return out


def _items(value: Any) -> tuple[list[tuple[int, Any]], int] | None:
    """A list, or a compacted one (`$elided` with head and tail), as (position, item) pairs and its length."""
    if isinstance(value, list):
        return list(enumerate(value, 1)), len(value)
    if isinstance(value, Mapping) and value.get("$elided") == "list" and isinstance(value.get("length"), int):
        head, tail, n = value.get("head") or [], value.get("tail") or [], value["length"]
        return list(enumerate(head, 1)) + list(enumerate(tail, n - len(tail) + 1)), n
    return None


def attempts_of(receipt: Mapping[str, Any]) -> int | None:
    """Attempts as the script counted them: `result.attempts`, else an `attempt(s)` counter in a loop
    snapshot (the article's `state.attempt`). None when the script kept no count: loop iterations are
    not attempts, so they are not passed off as such."""
    for account in _accounts(receipt):
        for name in ("attempts", "attempt"):
            value = account.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def paths_of(receipt: Mapping[str, Any]) -> list[str]:
    """The paths the run is about: `path`/`paths` where the script keeps them (its result, or the
    article's `state.path`), else the files it wrote (a folder made on the way to a file is left out)."""
    for account in _accounts(receipt):
        if isinstance(account.get("path"), str):
            return [account["path"]]
        if isinstance(account.get("paths"), list):
            return [p for p in account["paths"] if isinstance(p, str)]
    written = [a["path"] for a in receipt.get("artifacts") or []]
    return [p for p in written if not any(q.startswith(p.rstrip("/") + "/") for q in written)]


Evidence = list[tuple[int, str, str]]


def evidence_of(receipt: Mapping[str, Any]) -> tuple[Evidence, int]:
    """Numbered evidence as (number, operation, outcome) and how many entries exist beyond those shown.

    The first source that has any wins: the script's own evidence list (`result.evidence`, or the
    article's `state.evidence` in a loop snapshot), the `record` entries of the loops, every effect.
    Numbers are positions in the source, so a gap shows where a compacted list left entries out.
    """
    for account in _accounts(receipt):
        found = _items(account.get("evidence"))
        if found is None:
            continue
        pairs, total = found
        entries = [(i, e) for i, e in pairs if isinstance(e, Mapping) and "operation" in e]
        if entries and len(entries) == len(pairs):
            shown = [(i, one_line(e["operation"]), one_line(e.get("outcome"))) for i, e in entries]
            return shown, total - len(shown)
    loops = receipt.get("loops") or []
    records = [e for lp in loops for e in lp.get("evidence") or [] if e.get("kind") == "record"]
    if records:
        omitted = sum(lp.get("evidence_omitted") or 0 for lp in loops)
        return [(i, one_line(e["operation"]), one_line(e.get("outcome"))) for i, e in enumerate(records, 1)], omitted
    effects = receipt.get("effects") or {}
    items = effects.get("items") or []
    shown = [(i, one_line(e["command"]), one_line(_effect_outcome(e))) for i, e in enumerate(items, 1)]
    return shown, effects.get("omitted") or 0


def _effect_outcome(item: Mapping[str, Any]) -> str:
    """An effect's outcome as evidence: what DAL saw, or, for one a person resolved, what that person said
    (DAL did not see it happen), and who approved one that needed approval."""
    import re

    reason = str(item.get("reason") or "")
    said = re.search(r"resolved as (done|failed) by (.+)$", reason)
    if said:
        return f"resolved as {said.group(1)} by {said.group(2)}: a person's word, not observed by DAL"
    summary = str(item.get("summary", ""))
    approved = re.search(r"approved by (.+)$", reason)
    return f"{summary} (approved by {approved.group(1)})" if approved else summary


def evidence_lines(receipt: Mapping[str, Any], indent: str = "") -> list[str]:
    """`1. check_destination — missing` lines, at most MAX_EVIDENCE_LINES, with `…` where entries were
    left out and a count of them at the end."""
    evidence, omitted = evidence_of(receipt)
    lines: list[str] = []
    previous = 0
    for n, op, outcome in evidence[:MAX_EVIDENCE_LINES]:
        if n != previous + 1:
            lines.append(f"{indent}…")
        lines.append(f"{indent}{n}. {op} — {outcome}")
        previous = n
    rest = omitted + max(0, len(evidence) - MAX_EVIDENCE_LINES)
    if rest:
        lines.append(f"{indent}… {rest} more not kept in the receipt")
    return lines


def describe_loop(loop: Mapping[str, Any]) -> str:
    """`while … (file:line) ended: condition false at `clause` after N iterations`; for an aggregated
    receipt, how many exits it folds together and how the last one ended."""
    why = _EXIT_WORDS.get(loop.get("exit", ""), str(loop.get("exit")))
    if loop.get("exit") == "condition" and loop.get("clause"):
        why += f" at `{loop['clause']}`"
    n = loop.get("iterations", 0)
    where = f"`{one_line(loop.get('source', ''), 100)}` ({loop.get('file')}:{loop.get('line')})"
    if loop.get("aggregated"):
        exits = loop.get("exits", 0)
        return (
            f"{where}: {exits:,} exit{'' if exits == 1 else 's'} aggregated, {n:,} iteration"
            f"{'' if n == 1 else 's'} in all; the last ended: {why}"
        )
    return f"{where} ended: {why} after {n:,} iteration{'' if n == 1 else 's'}"


def error_place(error: Mapping[str, Any]) -> str:
    """FILE:LINE:COL, or just FILE for an error of the whole script (line 0: e.g. it ended early)."""
    if not error.get("line"):
        return str(error.get("file"))
    return f"{error.get('file')}:{error.get('line')}:{error.get('column')}"


def describe_decision(decision: Mapping[str, Any]) -> str:
    """`effect 4: approved by ana at 2026-…Z (checked the recipients)`, from a row of Store.approvals(). A
    resolution is a person's statement, not something DAL saw, and reads as one."""
    verdict, who, at = decision.get("decision"), decision.get("who"), decision.get("at")
    said = {
        "resolved:done": f"{who} said it took effect (resolved as done; DAL did not observe it)",
        "resolved:failed": f"{who} said it did not take effect (resolved as failed; DAL did not observe it)",
        "resolved:retry": f"{who} said to run it again (resolved as retry)",
    }.get(str(verdict), f"{verdict} by {who}")
    text = f"effect {decision.get('seq')}: {said} at {at}"
    return text + (f" ({one_line(decision['note'], 100)})" if decision.get("note") else "")


def intent_text(receipt: Mapping[str, Any]) -> str | None:
    """What the run set out to do, in the script's words where it gave them: the `path` (or `target`) and
    `status` of the result it finished with (the article's `{"path": ..., "status": ...}`)."""
    result = receipt.get("result")
    if not isinstance(result, Mapping):
        return None
    target = next((result[k] for k in ("path", "target", "destination") if isinstance(result.get(k), str)), None)
    return f"the script's target: {one_line(target, 100)}" if target else None


def boundary_text(receipt: Mapping[str, Any]) -> str | None:
    """What the run could touch: the programs it ran and where it wrote (the effects' own record)."""
    items = (receipt.get("effects") or {}).get("items") or []
    programs: dict[str, None] = {}
    writes: dict[str, None] = {}
    denied = 0
    for e in items:
        if e.get("status") == "denied":
            denied += 1
            continue
        # Every program of every command (a pipeline's `tee` as much as its `cat`); a receipt written before
        # effects recorded them has only its command, whose first word is all it can say.
        named = e.get("programs")
        if named is None:
            named = [str(e.get("command", "")).split(" ", 1)[0]]
        for word in named:
            if word:
                programs.setdefault(str(word), None)
        for w in e.get("writes") or []:
            writes.setdefault(str(w), None)
    if not items:
        return None
    # The policy's reading of each command (what it runs, where it may write), not what was observed.
    # All of them: the one left out could be the gated program an auditor is looking for.
    parts = [f"programs {', '.join(programs)}"] if programs else []
    ws = str(receipt.get("workspace") or "")
    shown = [os.path.relpath(w, ws) if ws and w.startswith(ws + "/") else w for w in writes]
    if shown:
        parts.append(f"writes {', '.join(shown[:3])}{f' and {len(shown) - 3} more' if len(shown) > 3 else ''}")
    else:
        parts.append("writes nothing")
    if denied:
        parts.append(f"{denied} command{'' if denied == 1 else 's'} denied")
    return " · ".join(parts)


# -- the terminal rendering --------------------------------------------------------------------------


def _size(n: int | None) -> str:
    if n is None:
        return ""
    return f"{n} B" if n < 1024 else approx_size(n)


def duration_text(ms: float | None) -> str:
    """`42 ms`, `2.5 s`, `3.1 min`: a duration as a person reads it."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def slept_text(receipt: Mapping[str, Any]) -> str:
    """`` (slept 2.0 s)`` when the script waited in sleep(), else nothing."""
    ms = receipt.get("slept_ms")
    return f" (slept {duration_text(ms)})" if isinstance(ms, int | float) and ms > 0 else ""


def policy_text(receipt: Mapping[str, Any], *, where: bool = False) -> str | None:
    """The policy in force, for a person: its file (relative to the workspace when inside it) and the
    start of its SHA-256, or "default policy"; where it came from when the run continued an operation;
    and the notices (a policy file changed since the operation started). `where`: name the workspace
    too. None for a receipt without."""

    policy = receipt.get("policy")
    if not isinstance(policy, Mapping):
        return None
    if policy.get("sha256"):
        source = str(policy.get("source") or "")
        ws = str(receipt.get("workspace") or "")
        rel = os.path.relpath(source, ws) if ws and source.startswith("/") else source
        text = f"{rel if not rel.startswith('..') else source} (sha256 {str(policy['sha256'])[:12]})"
    else:
        text = "default policy"
    if where and receipt.get("workspace"):
        text += f" in {receipt['workspace']}"
    if policy.get("adopted_from"):
        text += f", fixed when the operation started (stored with {policy['adopted_from']})"
    added = policy.get("added") or {}
    if added:
        text += "; added here: " + " ".join(
            f"--{k.replace('_', '-')}" + ("" if v is True else "=" + ",".join(map(str, v))) for k, v in added.items()
        )
    for note in policy.get("notices") or []:
        text += f"; {note}"
    return text


def render(
    receipt: Mapping[str, Any],
    *,
    colour: bool = False,
    decisions: Sequence[Mapping[str, Any]] = (),
    continued_by: str | None = None,
    job: Mapping[str, Any] | None = None,
    by: Continuer | None = None,
) -> str:
    """`dal receipt show`: status line, facts, numbered evidence, artifacts, external effect, error,
    loops, the decisions people recorded (Store.approvals()), and `next:` (`job`: the queue's job the run
    belongs to, whose worker continues it; `by`: who continues it, dal.receipts.nextstep.Continuer)."""
    from dal.core.visible import visible_data

    # What the script and its programs wrote, shown, never played by the terminal (dal/core/visible.py).
    receipt, decisions = visible_data(receipt), visible_data(decisions)

    def paint(code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if colour else text

    status = receipt["status"]
    out: list[str] = []
    head = f"{paint(_STATUS_COLOUR.get(status, '0') + ';1', status)}  {receipt['run_id']}"
    if receipt.get("retry"):
        head += f"  retry: {receipt['retry']}"
    out.append(head)

    facts: list[tuple[str, str]] = [("operation", receipt.get("operation", ""))]
    if receipt.get("args"):
        facts.append(("args", one_line(args_text(receipt["args"]))))
    if receipt.get("key") and receipt.get("key") != receipt.get("operation"):
        facts.append(("key", receipt["key"]))
    intent = intent_text(receipt)
    if intent:
        facts.append(("intent", intent))
    boundary = boundary_text(receipt)
    if boundary:
        facts.append(("boundary", boundary))
    own = script_status(receipt)
    if own and own != status:
        facts.append(("result", own))
    elif own is None and receipt.get("result") is not None:
        # finish(value) with no `status` word: the value itself, in one line, is what the script said.
        from dal.core.jsontext import dumps

        facts.append(("result", one_line(dumps(receipt["result"]), 100)))
    script = receipt.get("script") or {}
    if script:
        facts.append(("script", f"{script.get('path')}  (sha256 {str(script.get('sha256', ''))[:12]})"))
    steps = receipt.get("steps") or {}
    effects = receipt.get("effects") or {}
    count = effects.get("count", 0)
    if not steps.get("used") and count:
        # A run() costs steps: no steps with effects is a receipt rebuilt from the journal of a run whose
        # process died, which took its time and step count with it (dal/runner/deadrun.py).
        took = (f"at least {duration_text(receipt.get('duration_ms'))} (to its last journaled effect)"
                if receipt.get("duration_ms") else "time not recorded")
        used = f"steps not recorded (its process died), budget {steps.get('budget', 0):,}"
    else:
        took = f"{duration_text(receipt.get('duration_ms'))}{slept_text(receipt)}"
        used = f"{steps.get('used', 0):,} of {steps.get('budget', 0):,} steps"
        if (receipt.get("script") or {}).get("path") == "<repl>":  # the budget is each input's (docs/repl.md)
            used = f"{steps.get('used', 0):,} steps in the session ({steps.get('budget', 0):,} per input)"
    facts.append(("ran", f"{receipt.get('attempted_at')}, {took}, {used}, {count} effect{'' if count == 1 else 's'}"))
    attempts = attempts_of(receipt)
    if attempts is not None:
        facts.append(("attempts", str(attempts)))
    inv = receipt.get("attempts")
    if isinstance(inv, Mapping):
        facts.append(
            (
                "invocations",
                f"{inv['invocations']} ({inv['new']} new, {inv['resumes']} resumed, {inv['duplicates']} duplicate)",
            )
        )
    if receipt.get("previous_run"):
        facts.append(("previous run", receipt["previous_run"]))
    error = receipt.get("error")
    # After a DAL error the blocker is usually its message; the error section below already says it.
    if receipt.get("blocker") and not (isinstance(error, Mapping) and error.get("message") == receipt["blocker"]):
        facts.append(("blocker", paint("1", receipt["blocker"])))
    facts.append(("external", receipt.get("external_effect", "none")))
    if receipt.get("workspace"):
        facts.append(("workspace", str(receipt["workspace"])))
    policy = policy_text(receipt)
    if policy is not None:
        facts.append(("policy", policy))
    wall = wall_text(receipt)
    if wall:
        facts.append(("wall", paint("33", wall)))
    width = max(len(k) for k, _ in facts)
    out += [f"  {k.ljust(width)}  {v}" for k, v in facts]

    evidence = evidence_lines(receipt, "  ")
    if evidence:
        out += ["", "evidence", *evidence]

    artifacts = receipt.get("artifacts") or []
    if artifacts:
        out += ["", "artifacts"]
        for a in artifacts[:MAX_ARTIFACT_LINES]:
            extra = f"  ({_size(a.get('size'))})" if a.get("size") is not None else ""
            state = paint("32" if a["state"] == "exists" else "33", a["state"].ljust(7))
            out.append(f"  {state}  {a['path']}{extra}")
        if len(artifacts) > MAX_ARTIFACT_LINES:
            out.append(f"  … {len(artifacts) - MAX_ARTIFACT_LINES} more (see --json)")

    if isinstance(error, Mapping):
        out += ["", f"error  {error_place(error)}  {error.get('kind')}: {error.get('message')}"]
        if error.get("source_line"):
            src = str(error["source_line"]).rstrip("\n")
            col = max(1, int(error.get("column") or 1))
            span = 1
            if error.get("end_line") == error.get("line") and error.get("end_column", 0) > col:
                span = int(error["end_column"]) - col
            gutter = f"{error.get('line')} | "
            out += [f"  {gutter}{src}", "  " + " " * (len(gutter) + col - 1) + paint("31", "^" * span)]
        for frame in (error.get("call_stack") or [])[-5:]:
            out.append(f"  in {frame.get('function')} at {frame.get('file')}:{frame.get('line')}:{frame.get('column')}")

    loops = receipt.get("loops") or []
    if loops:
        out += ["", "loops"]
        out += [f"  {describe_loop(lp)}" for lp in loops[:10]]
        rest = (receipt.get("loops_omitted") or 0) + max(0, len(loops) - 10)
        if rest:
            out.append(f"  … {rest} more loop receipts not shown")

    if decisions:
        out += ["", "decisions"]
        out += [f"  {describe_decision(d)}" for d in decisions]

    from dal.receipts.nextstep import run_next

    out += ["", f"{paint('1', 'next:')} {run_next(receipt, decisions, continued_by, job=job, by=by)}"]
    return escape_surrogates("\n".join(out) + "\n")  # text for people: a lone surrogate shown escaped
