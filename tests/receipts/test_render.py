"""`dal receipt show` for a person: the status first, the evidence, and a `next:` they can type."""

from __future__ import annotations

import io

import pytest

from dal.receipts.nextstep import run_next as next_action
from dal.receipts.render import render, use_colour

RID = "run_20260902T101500000Z_4f9a2c"

NEXT = {
    "completed": "nothing to do",
    "failed": "inspect COO-FILESYSTEM/articles/drafts/example.md (exists): required framing paragraph is missing",
    "exhausted": "inspect the evidence (step budget of 1000 used up at spin.dal:3:1); if the work is legitimate, "
    f"`dal resume {RID} --max-steps N` continues it from its journal with a bigger budget; else fix the loop, "
    "then `dal run article.dal`",
    "waiting": f"review `sendmail ops@example.com < report.txt`, then `dal approve {RID} --effect 4` "
    f"(or `dal deny {RID} --effect 4`) and `dal resume {RID}`",
    "interrupted": f"`dal resume {RID}`",
    "rejected": "nothing ran; fix the script at broken.dal:7:3 (SyntaxError: unexpected '}'), "
    "then `dal run broken.dal`",
    "skipped": f"nothing to do: the operation already completed in {RID} (`dal receipt show {RID}`)",
    "script_error": "fix the script at article.dal:14:9 (TypeError: cannot add string and int; use str(...)), "
    "then `dal run article.dal`",
    "waiting_uncertain": "check whether `curl -X POST https://api.example.com/publish` took effect, then "
    f"`dal resolve {RID} --effect 2 --as done|failed|retry` and `dal resume {RID}`",
}


@pytest.mark.parametrize("name", sorted(NEXT))
def test_next_action_for_each_kind_of_ending(receipts: dict, name: str) -> None:
    assert next_action(receipts[name]) == NEXT[name]
    assert render(receipts[name]).endswith(f"\nnext: {NEXT[name]}\n")


def test_replay_names_the_key(build) -> None:
    r = build.base(status="failed", retry="replay", key="nightly:2026-09-02", operation="nightly:2026-09-02")
    assert next_action(r) == "`dal run --key nightly:2026-09-02 article.dal` (same operation, same key)"


def test_inspect_without_artifacts_names_the_receipt_not_what_stands_above(build) -> None:
    # The same line is a worker's log line and `dal jobs`' note, where nothing stands above it.
    r = build.base(status="failed", retry="inspect", blocker="the totals disagree", artifacts=[])
    said = next_action(r)
    assert "above" not in said
    shown = f"`dal receipt show {r['run_id']} --json`"
    assert said == f"inspect the run's receipt and effects ({shown}): the totals disagree"


def test_script_chosen_escalate_shows_the_blocker(build) -> None:
    r = build.base(status="failed", retry="escalate", blocker="provider status unknown")
    assert next_action(r) == "a person must decide: provider status unknown"


def test_divergence_says_inspect_the_journal(receipts: dict) -> None:
    r = receipts["script_error"]
    r["retry"] = "inspect"
    r["error"]["kind"] = "divergence"
    r["error"]["message"] = "effect 2 was `touch a` in the journal, the script now asks for `touch b`"
    assert next_action(r).startswith("inspect: the script no longer matches the journal at article.dal:14:9")


def test_internal_error_asks_for_a_bug_report(receipts: dict) -> None:
    r = receipts["script_error"]
    r["retry"] = "inspect"
    r["error"]["kind"] = "internal"
    r["error"]["message"] = "KeyError: 'x'"
    assert next_action(r) == (
        "DAL itself failed (KeyError: 'x'); inspect the evidence and report the bug with "
        f"`dal receipt show {RID} --json`"
    )


def test_show_has_status_line_facts_evidence_artifacts_and_external_effect(receipts: dict) -> None:
    text = render(receipts["verification_failed"])
    lines = text.splitlines()
    assert lines[0] == f"failed  {RID}  retry: inspect"
    assert "  operation  write_article_draft" in lines
    assert "  result     verification_failed" in lines
    assert "  blocker    required framing paragraph is missing" in lines
    assert "  external   none" in lines
    assert "  1. printf '%s\\n' '# Draft' > COO-FILESYSTEM/articles/drafts/example.md — command completed" in lines
    assert "  exists   COO-FILESYSTEM/articles/drafts/example.md  (8 B)" in lines


def test_show_article_attempts_and_loop_clause(receipts: dict) -> None:
    text = render(receipts["article_exhausted"])
    assert "  attempts   3\n" in text
    assert "condition false at `state.attempt < state.max_attempts` after 3 iterations" in text
    assert "  7. stop — attempt budget reached" in text


def test_error_is_shown_with_its_source_line_and_caret(receipts: dict) -> None:
    text = render(receipts["script_error"])
    assert "error  article.dal:14:9  TypeError: cannot add string and int; use str(...)" in text
    assert '  14 |   let msg = "attempt " + state.attempt\n' in text
    assert "\n" + " " * 15 + "^" * 18 + "\n" in text


def test_invocations_of_a_keyed_operation(receipts: dict) -> None:
    assert "invocations  2 (1 new, 0 resumed, 1 duplicate)" in render(receipts["skipped"])


def test_no_colour_unless_asked(receipts: dict) -> None:
    assert "\x1b[" not in render(receipts["failed"])
    assert "\x1b[31;1mfailed\x1b[0m" in render(receipts["failed"], colour=True)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_colour(Tty()) is True
    assert use_colour(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_colour(Tty()) is False


def test_many_loops_are_summarised(build) -> None:
    r = build.base(loops=[build.loop(iterations=i) for i in range(1, 15)], loops_omitted=100)
    assert "  … 104 more loop receipts not shown" in render(r)


def test_aggregated_loop_site_says_so(build) -> None:
    r = build.base(loops=[build.loop(exit="end", iterations=300_000, exits=99_995, aggregated=True, snapshot={})])
    assert ": 99,995 exits aggregated, 300,000 iterations in all; the last ended: went through every item" in render(r)


def test_docs_show_what_dal_prints(receipts: dict) -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "receipts.md").read_text("utf-8")
    assert render(receipts["verification_failed"]) in docs


def test_blocker_that_repeats_the_error_is_said_once(receipts: dict) -> None:
    r = receipts["script_error"]
    r["blocker"] = r["error"]["message"]
    assert render(r).count("cannot add string and int") == 2  # the error line and `next:`
    r["blocker"] = "the input file is missing"
    assert "  blocker    the input file is missing" in render(r)


def test_after_a_decision_the_next_move_is_resume(receipts: dict) -> None:
    decision = {"seq": 4, "decision": "approved", "who": "ana", "at": "2026-09-02T11:00:00.000Z", "note": "ok"}
    r = receipts["waiting"]
    text = render(r, decisions=[decision])
    assert "decisions\n  effect 4: approved by ana at 2026-09-02T11:00:00.000Z (ok)\n" in text
    assert text.endswith(f"next: `dal resume {RID}` (effect 4 was approved by ana)\n")
    # A decision about another effect does not answer this one.
    assert "dal approve" in next_action(r, [dict(decision, seq=3)])


def test_after_a_resolution_an_uncertain_effect_resumes(receipts: dict) -> None:
    decision = {"seq": 2, "decision": "done", "who": "bo", "at": "2026-09-02T11:00:00.000Z", "note": None}
    assert next_action(receipts["waiting_uncertain"], [decision]) == f"`dal resume {RID}` (effect 2 was done by bo)"


def test_the_wall_line_counts_the_commands_each_wall_held() -> None:
    from dal.receipts.render import wall_text

    def receipt(*walls: str, box: str = "bubblewrap", reason: str = "bwrap works") -> dict:
        items = [{"command": "true", "status": "completed", "wall": w} for w in walls]
        items.append({"command": "sh", "status": "denied", "wall": None})
        return {"sandbox": {"wall": box, "reason": reason, "refused": False}, "effects": {"items": items}}

    assert wall_text(receipt("bubblewrap", "bubblewrap")) is None  # the default: nothing to say
    assert wall_text(receipt("landlock", box="landlock", reason="Landlock ABI 7")) == (
        "1 command inside the landlock wall (Landlock ABI 7)"
    )
    # A run resumed on another host: the journal's effects keep the wall that held them then.
    assert wall_text(receipt("bubblewrap", "none", "none", box="none", reason="no wall here")) == (
        "1 command inside the bubblewrap wall; 2 commands without a wall (no wall here)"
    )
