"""Hand-built receipts in the `dal.receipt/v1` shape the interpreter produces, for the receipts tests."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

ARTICLE_PATH = "COO-FILESYSTEM/articles/drafts/example.md"
ARTICLE_KEY = "article-draft:2026-09-02:tool-loop"
WHILE_SOURCE = 'while state.status == "pending" and state.attempt < state.max_attempts'
SHA = "a" * 64
RUN_ID = "run_20260902T101500000Z_4f9a2c"


def effect(
    seq: int,
    command: str,
    summary: str,
    *,
    status: str = "completed",
    cls: str | None = "read",
    code: int | None = 0,
    iteration: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    entry = {
        "seq": seq,
        "command": command,
        "status": status,
        "class": cls,
        "code": code,
        "summary": summary,
        "reason": None,
        "reads": [],
        "writes": [],
        "programs": [command.split(" ", 1)[0]],
        "duration_ms": 3.5,
        "line": 12,
        "column": 17,
        "loop_iteration": iteration,
        "replayed": False,
    }
    entry.update(extra)
    return entry


def record(iteration: int, operation: str, outcome: str) -> dict[str, Any]:
    return {"iteration": iteration, "kind": "record", "operation": operation, "outcome": outcome}


def loop(
    *,
    exit: str = "condition",
    clause: str | None = None,
    iterations: int = 1,
    evidence: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    entry = {
        "kind": "while",
        "file": "article.dal",
        "line": 9,
        "column": 1,
        "source": WHILE_SOURCE,
        "exit": exit,
        "clause": clause,
        "iterations": iterations,
        "steps": 40 * iterations,
        "started_at": "2026-09-02T10:15:00.010Z",
        "duration_ms": 12.0,
        "snapshot": {"state": {"status": "pending", "attempt": iterations, "max_attempts": 3}},
        "evidence": evidence or [],
        "evidence_omitted": 0,
        "exits": 1,
        "aggregated": False,
    }
    entry.update(extra)
    return entry


def base_receipt(**overrides: Any) -> dict[str, Any]:
    """A completed keyless run with no effects; override what a test is about."""
    receipt: dict[str, Any] = {
        "schema": "dal.receipt/v1",
        "run_id": RUN_ID,
        "operation": "script:article",
        "key": None,
        "script": {"path": "article.dal", "sha256": SHA},
        "workspace": "/work/ws",
        "status": "completed",
        "attempted_at": "2026-09-02T10:15:00.000Z",
        "finished_at": "2026-09-02T10:15:00.042Z",
        "duration_ms": 42,
        "steps": {"used": 120, "budget": 1_000_000},
        "effects": {"count": 0, "budget": None, "items": [], "omitted": 0},
        "artifacts": [],
        "external_effect": "none",
        "retry": "none",
        "blocker": None,
        "error": None,
        "result": None,
        "loops": [],
        "loops_omitted": 0,
        "attempts": None,
        "previous_run": None,
        "skipped_of": None,
    }
    receipt.update(overrides)
    return receipt


def article_verified() -> dict[str, Any]:
    """The first article's loop, verified on the second attempt, ending with finish(receipt)."""
    check = "test -e '" + ARTICLE_PATH + "' && echo present || echo missing"
    create = "mkdir -p 'COO-FILESYSTEM/articles/drafts' && printf '%s\\n' '# Draft' > '" + ARTICLE_PATH + "'"
    evidence = [
        record(1, "check_destination", "missing"),
        record(1, "create_destination", "`" + create + "` completed"),  # a run() result, as the receipt keeps it
        record(2, "check_destination", "present"),
    ]
    loop_evidence = [
        {
            "iteration": 1,
            "kind": "effect",
            "operation": "run",
            "outcome": "missing",
            "seq": 1,
            "command": check,
            "status": "completed",
            "code": 0,
        },
        evidence[0],
        {
            "iteration": 1,
            "kind": "effect",
            "operation": "run",
            "outcome": "command completed",
            "seq": 2,
            "command": create,
            "status": "completed",
            "code": 0,
        },
        evidence[1],
        {
            "iteration": 2,
            "kind": "effect",
            "operation": "run",
            "outcome": "present",
            "seq": 3,
            "command": check,
            "status": "completed",
            "code": 0,
        },
        evidence[2],
    ]
    return base_receipt(
        operation=ARTICLE_KEY,
        key=ARTICLE_KEY,
        effects={
            "count": 3,
            "budget": None,
            "omitted": 0,
            "items": [
                effect(1, check, "missing", iteration=1),
                effect(
                    2,
                    create,
                    "command completed",
                    cls="local",
                    iteration=1,
                    writes=["COO-FILESYSTEM/articles/drafts", ARTICLE_PATH],
                ),
                effect(3, check, "present", iteration=2),
            ],
        },
        artifacts=[{"path": ARTICLE_PATH, "state": "exists", "size": 8, "sha256": "b" * 64}],
        result={
            "path": ARTICLE_PATH,
            "status": "verified",
            "attempts": 2,
            "evidence": [
                {"attempt": e["iteration"], "operation": e["operation"], "outcome": e["outcome"]} for e in evidence
            ],
        },
        loops=[loop(clause='state.status == "pending"', iterations=2, evidence=loop_evidence)],
    )


def article_exhausted() -> dict[str, Any]:
    """The first article's loop when the write keeps failing: three attempts, then the script's fail()."""
    ev = []
    for i in (1, 2, 3):
        ev += [
            record(i, "check_destination", "missing"),
            record(i, "create_destination", "command failed (exit 1): Permission denied"),
        ]
    items = []
    for i in (1, 2, 3):
        items += [
            effect(2 * i - 1, "test -e ...", "missing", iteration=i),
            effect(
                2 * i,
                "mkdir -p ...",
                "command failed (exit 1): Permission denied",
                status="failed",
                cls="local",
                code=1,
                iteration=i,
            ),
        ]
    stop = {"attempt": 3, "operation": "stop", "outcome": "attempt budget reached"}
    return base_receipt(
        operation=ARTICLE_KEY,
        key=ARTICLE_KEY,
        status="failed",
        retry="inspect",
        effects={"count": 6, "budget": None, "omitted": 0, "items": items},
        artifacts=[{"path": ARTICLE_PATH, "state": "missing", "size": None, "sha256": None}],
        result={
            "path": ARTICLE_PATH,
            "status": "exhausted",
            "attempts": 3,
            "evidence": [{"attempt": e["iteration"], "operation": e["operation"], "outcome": e["outcome"]} for e in ev]
            + [stop],
        },
        loops=[loop(clause="state.attempt < state.max_attempts", iterations=3, evidence=ev)],
    )


def verification_failed() -> dict[str, Any]:
    """The second article's failure receipt: draft written, verification failed, retry inspect."""
    return base_receipt(
        operation="write_article_draft",
        status="failed",
        retry="inspect",
        blocker="required framing paragraph is missing",
        effects={
            "count": 2,
            "budget": None,
            "omitted": 0,
            "items": [
                effect(
                    1,
                    "printf '%s\\n' '# Draft' > " + ARTICLE_PATH,
                    "command completed",
                    cls="local",
                    writes=[ARTICLE_PATH],
                ),
                effect(2, "grep -q 'framing' " + ARTICLE_PATH, "command failed (exit 1)", status="failed", code=1),
            ],
        },
        artifacts=[{"path": ARTICLE_PATH, "state": "exists", "size": 8, "sha256": "c" * 64}],
        policy={"source": "/work/ws/dal.toml", "sha256": "5d1a0c0ffee0" + "0" * 52, "allowed": ["cat", "grep"],
                "approval": [], "denied": [], "read_roots": ["/work/ws"], "write_roots": ["/work/ws"],
                "network": False, "env": [], "env_withheld": [], "adopted_from": None, "added": {}, "notices": []},
        result={
            "status": "verification_failed",
            "blocker": "required framing paragraph is missing",
            "retry": "inspect",
        },
    )


def script_error() -> dict[str, Any]:
    return base_receipt(
        status="failed",
        retry="repair",
        error={
            "kind": "TypeError",
            "message": "cannot add string and int; use str(...)",
            "file": "article.dal",
            "line": 14,
            "column": 9,
            "end_line": 14,
            "end_column": 27,
            "source_line": '  let msg = "attempt " + state.attempt',
            "call_stack": [{"function": "<script>", "file": "article.dal", "line": 14, "column": 9}],
        },
        loops=[loop(exit="error", iterations=1)],
    )


def waiting_approval() -> dict[str, Any]:
    return base_receipt(
        status="waiting",
        retry="escalate",
        external_effect="pending_approval",
        blocker="approval required for sendmail",
        effects={
            "count": 1,
            "budget": 10,
            "omitted": 0,
            "items": [
                effect(
                    4,
                    "sendmail ops@example.com < report.txt",
                    "waiting for approval",
                    status="pending_approval",
                    cls="external",
                    code=None,
                ),
            ],
        },
    )


def waiting_uncertain() -> dict[str, Any]:
    return base_receipt(
        status="waiting",
        retry="escalate",
        external_effect="uncertain",
        blocker="outcome of `curl -X POST https://api.example.com/publish` is unknown",
        effects={
            "count": 1,
            "budget": None,
            "omitted": 0,
            "items": [
                effect(
                    2,
                    "curl -X POST https://api.example.com/publish",
                    "outcome unknown",
                    status="uncertain",
                    cls="external",
                    code=None,
                ),
            ],
        },
    )


def interrupted() -> dict[str, Any]:
    return base_receipt(status="interrupted", retry="resume", loops=[loop(exit="interrupted", iterations=5)])


def exhausted() -> dict[str, Any]:
    return base_receipt(
        status="exhausted",
        retry="inspect",
        steps={"used": 1000, "budget": 1000},
        error={
            "kind": "BudgetExhausted",
            "message": "step budget of 1000 used up",
            "file": "spin.dal",
            "line": 3,
            "column": 1,
            "end_line": 3,
            "end_column": 6,
            "source_line": "while true {",
            "call_stack": [],
        },
        loops=[loop(exit="budget", iterations=333, source="while true")],
    )


def rejected() -> dict[str, Any]:
    return base_receipt(
        status="rejected",
        retry="repair",
        steps={"used": 0, "budget": 1_000_000},
        error={
            "kind": "SyntaxError",
            "message": "unexpected '}'",
            "file": "broken.dal",
            "line": 7,
            "column": 3,
            "end_line": 7,
            "end_column": 4,
            "source_line": "  }",
            "call_stack": [],
        },
        script={"path": "broken.dal", "sha256": SHA},
    )


def skipped() -> dict[str, Any]:
    return base_receipt(
        run_id="run_20260902T111500000Z_0a0b0c",
        status="skipped",
        key=ARTICLE_KEY,
        operation=ARTICLE_KEY,
        skipped_of=RUN_ID,
        attempts={"invocations": 2, "new": 1, "resumes": 0, "duplicates": 1},
    )


ALL_STATUSES = {
    "completed": article_verified,
    "failed": verification_failed,
    "exhausted": exhausted,
    "waiting": waiting_approval,
    "interrupted": interrupted,
    "rejected": rejected,
    "skipped": skipped,
}


@pytest.fixture
def receipts() -> dict[str, Any]:
    """Fresh copies of every hand-built receipt, by name."""
    builders = {
        **ALL_STATUSES,
        "article_verified": article_verified,
        "article_exhausted": article_exhausted,
        "verification_failed": verification_failed,
        "script_error": script_error,
        "waiting_uncertain": waiting_uncertain,
    }
    return {name: copy.deepcopy(build()) for name, build in builders.items()}


@pytest.fixture
def build() -> SimpleNamespace:
    """The builders themselves, for tests that shape their own receipts (no imports from conftest)."""
    return SimpleNamespace(
        base=base_receipt,
        effect=effect,
        record=record,
        loop=loop,
        article_path=ARTICLE_PATH,
        article_key=ARTICLE_KEY,
        while_source=WHILE_SOURCE,
        run_id=RUN_ID,
        statuses=ALL_STATUSES,
    )


@pytest.fixture
def article_as_printed_top() -> str:
    """The top of the markdown receipt of the first article's script as printed (no finish(): the run is
    `completed`, and path, attempts and evidence come from its `state`), verified on the second attempt."""
    return (
        "# Tool-loop receipt\n\n"
        "- operation: article-draft:2026-09-02:tool-loop\n"
        "- path: COO-FILESYSTEM/articles/drafts/example.md\n"
        "- status: completed\n"
        "- attempts: 2\n\n"
        "## Evidence\n\n"
        "1. check_destination — missing\n"
        # the script recorded the run() result itself: DAL's words about it name the command
        "2. create_destination — `mkdir -p 'COO-FILESYSTEM/articles/drafts' && printf '%s\\n' "
        "'# Draft' > 'COO-FILESYSTEM/articles/drafts/example.md'` completed\n"
        "3. check_destination — present\n"
    )
