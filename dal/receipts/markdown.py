"""The compact markdown receipt (`<run_id>.md`, `dal receipt show --md`) in the first article's shape:

    # Tool-loop receipt

    - operation: article-draft:2026-09-02:tool-loop
    - path: COO-FILESYSTEM/articles/drafts/example.md
    - status: verified
    - attempts: 2

    ## Evidence

    1. check_destination — missing
    ...

followed by an `## Outcome` list: the run, external effect, retry, blocker, artifacts, loops and next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dal.core.jsontext import escape_surrogates
from dal.receipts.nextstep import run_next
from dal.receipts.render import (
    MAX_ARTIFACT_LINES,
    args_text,
    attempts_of,
    describe_decision,
    describe_loop,
    duration_text,
    evidence_lines,
    one_line,
    paths_of,
    policy_text,
    script_status,
    slept_text,
    wall_text,
)


def render_markdown(receipt: Mapping[str, Any], decisions: Sequence[Mapping[str, Any]] = (), *,
                    job: Mapping[str, Any] | None = None) -> str:
    """The markdown receipt of a run, ending with a newline. `decisions` (Store.approvals() rows) are
    listed when given: the file written at the end of a run has none yet."""
    from dal.core.visible import visible_data

    # People `cat` it: no control character from the script or its programs reaches their terminal.
    receipt, decisions = visible_data(receipt), visible_data(decisions)
    lines = ["# Tool-loop receipt", "", f"- operation: {receipt['operation']}"]
    if receipt.get("args"):  # the script's arguments: what this run was asked to do
        lines.append(f"- args: {one_line(args_text(receipt['args']))}")
    paths = paths_of(receipt)
    if len(paths) == 1:
        lines.append(f"- path: {paths[0]}")
    elif paths:
        more = f", … {len(paths) - 5} more" if len(paths) > 5 else ""
        lines.append(f"- paths: {', '.join(paths[:5])}{more}")
    # The script's own word (verified, verification_failed) is what the article's reader looks for; the
    # run's status is in the Outcome section below.
    lines.append(f"- status: {script_status(receipt) or receipt['status']}")
    attempts = attempts_of(receipt)
    if attempts is not None:
        lines.append(f"- attempts: {attempts}")

    lines += ["", "## Evidence", ""]
    lines += evidence_lines(receipt) or ["No evidence recorded."]

    run = (
        f"- run: {receipt['run_id']} ({receipt['status']}, {receipt.get('attempted_at')}, "
        f"{duration_text(receipt.get('duration_ms'))}{slept_text(receipt)})"
    )
    lines += ["", "## Outcome", "", run]
    inv = receipt.get("attempts")
    if isinstance(inv, Mapping):
        lines.append(
            f"- invocations: {inv['invocations']} ({inv['new']} new, {inv['resumes']} resumed, "
            f"{inv['duplicates']} duplicate)"
        )
    artifacts = receipt.get("artifacts") or []
    for artifact in artifacts[:MAX_ARTIFACT_LINES]:
        lines.append(f"- artifact: {artifact['path']} — {artifact['state']}")
    if len(artifacts) > MAX_ARTIFACT_LINES:
        lines.append(
            f"- artifacts: … {len(artifacts) - MAX_ARTIFACT_LINES} more (`dal receipt show {receipt['run_id']} --json`)"
        )
    lines.append(f"- external effect: {receipt.get('external_effect', 'none')}")
    policy = policy_text(receipt, where=True)
    if policy is not None:
        lines.append(f"- policy: {policy}")
    lines.append(f"- retry: {receipt.get('retry')}")
    wall = wall_text(receipt)
    if wall:
        lines.append(f"- wall: {wall}")
    if receipt.get("blocker"):
        lines.append(f"- blocker: {receipt['blocker']}")
    error = receipt.get("error")
    if isinstance(error, Mapping):
        lines.append(
            f"- error: {error.get('file')}:{error.get('line')}:{error.get('column')} "
            f"{error.get('kind')}: {one_line(error.get('message'))}"
        )
    for loop in (receipt.get("loops") or [])[:10]:
        lines.append(f"- loop: {describe_loop(loop)}")
    lines += [f"- decision: {describe_decision(d)}" for d in decisions]
    lines.append(f"- next: {run_next(receipt, decisions, job=job)}")
    return escape_surrogates(_inert("\n".join(lines) + "\n"))  # UTF-8 text: a lone surrogate shown escaped


def _inert(text: str) -> str:
    """The markdown with no HTML tag and no inline link a script could have written (a console or viewer
    that renders the receipt must not show `<img onerror=...>` or `[approve](javascript:...)`): `<` before
    a tag's first character is written `&lt;` and the `(` of `](` is backslash-escaped. Shell redirections
    (`> out`, `2>&1`, `< in`) stay as they are, for people who `cat` it. DAL's own text holds neither."""
    import re

    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text).replace("](", "]\\(")
