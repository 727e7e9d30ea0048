"""The markdown receipt has the first article's shape: title, operation/path/status/attempts, numbered
evidence, then the outcome (run, artifacts, external effect, retry, blocker, loops, next).

Golden texts are inline; ids and times in the fixtures are fixed, so nothing needs normalising.
"""

from __future__ import annotations

from dal.receipts.markdown import render_markdown

VERIFIED = """\
# Tool-loop receipt

- operation: article-draft:2026-09-02:tool-loop
- path: COO-FILESYSTEM/articles/drafts/example.md
- status: verified
- attempts: 2

## Evidence

1. check_destination — missing
""" + (
    "2. create_destination — `mkdir -p 'COO-FILESYSTEM/articles/drafts' && printf '%s\\n' '# Draft' > "
    "'COO-FILESYSTEM/articles/drafts/example.md'` completed\n"
) + """\
3. check_destination — present

## Outcome

- run: run_20260902T101500000Z_4f9a2c (completed, 2026-09-02T10:15:00.000Z, 42 ms)
- artifact: COO-FILESYSTEM/articles/drafts/example.md — exists
- external effect: none
- retry: none
- loop: `while state.status == "pending" and state.attempt < state.max_attempts` (article.dal:9) ended: \
condition false at `state.status == "pending"` after 2 iterations
- next: nothing to do
"""

EXHAUSTED = """\
# Tool-loop receipt

- operation: article-draft:2026-09-02:tool-loop
- path: COO-FILESYSTEM/articles/drafts/example.md
- status: exhausted
- attempts: 3

## Evidence

1. check_destination — missing
2. create_destination — command failed (exit 1): Permission denied
3. check_destination — missing
4. create_destination — command failed (exit 1): Permission denied
5. check_destination — missing
6. create_destination — command failed (exit 1): Permission denied
7. stop — attempt budget reached

## Outcome

- run: run_20260902T101500000Z_4f9a2c (failed, 2026-09-02T10:15:00.000Z, 42 ms)
- artifact: COO-FILESYSTEM/articles/drafts/example.md — missing
- external effect: none
- retry: inspect
- loop: `while state.status == "pending" and state.attempt < state.max_attempts` (article.dal:9) ended: \
condition false at `state.attempt < state.max_attempts` after 3 iterations
- next: inspect COO-FILESYSTEM/articles/drafts/example.md (missing)
"""

VERIFICATION_FAILED = """\
# Tool-loop receipt

- operation: write_article_draft
- path: COO-FILESYSTEM/articles/drafts/example.md
- status: verification_failed

## Evidence

1. printf '%s\\n' '# Draft' > COO-FILESYSTEM/articles/drafts/example.md — command completed
2. grep -q 'framing' COO-FILESYSTEM/articles/drafts/example.md — command failed (exit 1)

## Outcome

- run: run_20260902T101500000Z_4f9a2c (failed, 2026-09-02T10:15:00.000Z, 42 ms)
- artifact: COO-FILESYSTEM/articles/drafts/example.md — exists
- external effect: none
- policy: dal.toml (sha256 5d1a0c0ffee0) in /work/ws
- retry: inspect
- blocker: required framing paragraph is missing
- next: inspect COO-FILESYSTEM/articles/drafts/example.md (exists): required framing paragraph is missing
"""


def test_article_verified_receipt(receipts: dict) -> None:
    assert render_markdown(receipts["article_verified"]) == VERIFIED


def test_article_exhausted_receipt_names_the_clause(receipts: dict) -> None:
    text = render_markdown(receipts["article_exhausted"])
    assert text == EXHAUSTED
    assert "`state.attempt < state.max_attempts`" in text


def test_second_article_failure_receipt(receipts: dict) -> None:
    assert render_markdown(receipts["verification_failed"]) == VERIFICATION_FAILED


def test_evidence_from_loop_records_when_the_script_returns_nothing(receipts: dict) -> None:
    # The article's script as written ends without finish(receipt): evidence comes from the loop's
    # record() entries, attempts from the snapshot's state.attempt, the path from the artifacts.
    r = receipts["article_verified"]
    r["result"] = None
    text = render_markdown(r)
    assert "- status: completed\n- attempts: 2\n" in text
    assert "- path: COO-FILESYSTEM/articles/drafts/example.md\n" in text
    assert (
        "1. check_destination — missing\n2. create_destination — `mkdir -p 'COO-FILESYSTEM/articles/drafts' "
        "&& printf '%s\\n' '# Draft' > 'COO-FILESYSTEM/articles/drafts/example.md'` completed\n"
        "3. check_destination — present\n" in text
    )


def test_effects_are_the_evidence_when_nothing_was_recorded(receipts: dict) -> None:
    text = render_markdown(receipts["waiting"])
    assert "1. sendmail ops@example.com < report.txt — waiting for approval" in text
    assert "- external effect: pending_approval" in text
    assert "`dal approve run_20260902T101500000Z_4f9a2c --effect 4`" in text


def test_long_evidence_is_capped_with_a_count(build) -> None:
    evidence = [build.record(i, "poll", "not yet") for i in range(1, 81)]
    r = build.base(loops=[build.loop(iterations=80, evidence=evidence, evidence_omitted=920)])
    text = render_markdown(r)
    assert "50. poll — not yet" in text and "51. poll" not in text
    assert "… 950 more not kept in the receipt" in text


def test_multiline_outcomes_stay_on_one_line(build) -> None:
    r = build.base(result={"evidence": [{"operation": "list", "outcome": "a.md\nb.md\nc.md"}]})
    assert "1. list — a.md\\nb.md\\nc.md\n" in render_markdown(r)  # shown on one line, escaped


def test_docs_show_the_same_receipts() -> None:
    # docs/receipts.md quotes these receipts; keep the docs true to what DAL prints.
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "receipts.md").read_text("utf-8")
    assert VERIFIED in docs
    assert EXHAUSTED in docs


def test_the_article_script_as_written_uses_its_own_state(build, article_as_printed_top: str) -> None:
    # The article defines its own `fn record` and never calls finish(): its account of the work is
    # `state`, which the loop's snapshot holds (the condition reads it).
    state = {
        "attempt": 2,
        "max_attempts": 3,
        "path": build.article_path,
        "status": "verified",
        "evidence": [
            {"attempt": 1, "operation": "check_destination", "outcome": "missing"},
            {"attempt": 1, "operation": "create_destination", "outcome": "`mkdir -p 'COO-FILESYSTEM/articles/drafts' "
             "&& printf '%s\\n' '# Draft' > 'COO-FILESYSTEM/articles/drafts/example.md'` completed"},
            {"attempt": 2, "operation": "check_destination", "outcome": "present"},
        ],
    }
    r = build.base(
        operation=build.article_key,
        artifacts=[
            {"path": "COO-FILESYSTEM/articles/drafts", "state": "exists", "size": None, "sha256": None},
            {"path": build.article_path, "state": "exists", "size": 8, "sha256": "b" * 64},
        ],
        loops=[build.loop(iterations=2, snapshot={"state": state})],
    )
    assert render_markdown(r).startswith(article_as_printed_top)


def test_compacted_evidence_keeps_its_numbers(build) -> None:
    head = [{"operation": "poll", "outcome": f"try {i}"} for i in (1, 2)]
    tail = [{"operation": "poll", "outcome": f"try {i}"} for i in (99, 100)]
    evidence = {"$elided": "list", "length": 100, "head": head, "tail": tail}
    text = render_markdown(build.base(result={"evidence": evidence}))
    assert "1. poll — try 1\n2. poll — try 2\n…\n99. poll — try 99\n100. poll — try 100\n" in text
    assert "… 96 more not kept in the receipt" in text


def test_folders_made_on_the_way_are_not_the_path(build) -> None:
    r = build.base(
        artifacts=[
            {"path": "out", "state": "exists", "size": None, "sha256": None},
            {"path": "out/a.md", "state": "exists", "size": 1, "sha256": "b" * 64},
            {"path": "out/b.md", "state": "missing", "size": None, "sha256": None},
        ]
    )
    assert "- paths: out/a.md, out/b.md\n" in render_markdown(r)


def test_many_artifacts_are_capped(build) -> None:
    artifacts = [{"path": f"out/{i}.md", "state": "exists", "size": 1, "sha256": "b" * 64} for i in range(30)]
    text = render_markdown(build.base(artifacts=artifacts))
    assert "- artifact: out/19.md — exists\n" in text and "out/20.md — exists" not in text
    assert "- paths: out/0.md, out/1.md, out/2.md, out/3.md, out/4.md, … 25 more\n" in text
    assert f"- artifacts: … 10 more (`dal receipt show {build.run_id} --json`)\n" in text
