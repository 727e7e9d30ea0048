"""The Python embedding API: `import dal` and drive runs, receipts and approvals from a host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import dal
from dal.receipts.schema import validate

ARTICLE = Path(__file__).resolve().parents[2] / "examples" / "article_loop.dal"


def test_run_returns_the_receipt_and_captures_output(tmp_path: Path) -> None:
    r = dal.run(ARTICLE, workspace=tmp_path)
    assert r.status == "completed" and r.retry == "none"
    assert r.output == "verified after 2 attempts\n"
    assert r.result["status"] == "verified"
    assert (tmp_path / "COO-FILESYSTEM/articles/drafts/example.md").exists()
    validate(r.to_dict())
    assert "# Tool-loop receipt" in r.to_markdown()
    assert "status: verified" in r.to_markdown()


def test_script_failure_is_a_receipt_not_an_exception(tmp_path: Path) -> None:
    r = dal.run('let xs = [1]\nprint(xs[3])\n', workspace=tmp_path)
    assert r.status == "failed"
    assert r.retry == "repair"
    assert r.error["line"] == 2 and "out of range" in r.error["message"]


def test_rejected_script_runs_nothing(tmp_path: Path) -> None:
    r = dal.run('run("touch made")\nlet y = undefined_name\n', workspace=tmp_path)
    assert r.status == "rejected"
    assert not (tmp_path / "made").exists()
    assert r.effects["count"] == 0


def test_key_skips_a_completed_operation(tmp_path: Path) -> None:
    first = dal.run(ARTICLE, workspace=tmp_path)  # the script names its key: operation(operation_key)
    second = dal.run(ARTICLE, workspace=tmp_path, key="article-draft:2026-09-02:tool-loop")
    assert second.status == "skipped" and second.skipped_of == first.run_id
    assert second.output == ""  # nothing ran
    assert second.attempts["duplicates"] == 1


def test_receipts_lists_newest_first_and_receipt_matches_cli(tmp_path: Path) -> None:
    a = dal.run('print("a")', workspace=tmp_path)
    b = dal.run('print("b")', workspace=tmp_path)
    listed = dal.list_receipts(workspace=tmp_path)
    assert [r.run_id for r in listed] == [b.run_id, a.run_id]
    shown = subprocess.run(
        [sys.executable, "-m", "dal", "receipt", "show", a.run_id, "--json", "--workspace", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"kind": "receipt", **a.to_dict()}


def test_the_old_listing_name_warns_and_the_package_is_not_callable(tmp_path: Path) -> None:
    probe = """
import sys, warnings
import dal
warnings.simplefilter("error", DeprecationWarning)
try:
    dal.receipts
except DeprecationWarning as w:
    print("warned:", w)
warnings.simplefilter("ignore", DeprecationWarning)
print("lists:", dal.receipts(workspace=sys.argv[1]) == [])
import dal.receipts.store
print("package:", type(dal.receipts).__name__, callable(dal.receipts))
"""
    p = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["warned: dal.receipts(...) is deprecated: use dal.list_receipts(...)",
                                     "lists: True", "package: module False"]


def test_check_reports_errors_and_warnings() -> None:
    diags = dal.check("while true { }\nlet x = y\n", filename="t.dal")
    kinds = [(d.severity, d.line) for d in diags]
    assert ("error", 2) in kinds and ("warning", 1) in kinds
    assert dal.check("let n = 0\nwhile true { n = n + 1 }\n")[0].severity == "warning"
    assert dal.check("let ok = 1") == []


def test_misuse_raises_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(dal.DalUsageError, match="no such script"):
        dal.run(tmp_path / "nope.dal", workspace=tmp_path)
    with pytest.raises(dal.DalUsageError, match="not a directory"):
        dal.run('print(1)', workspace=tmp_path / "missing")
    with pytest.raises(dal.DalUsageError):
        dal.run('print(1)', workspace=tmp_path, max_steps=0)
    with pytest.raises(dal.DalUsageError):
        dal.check(42)  # type: ignore[arg-type]
    bad_store = tmp_path / "store.db"
    bad_store.write_text("this is not a database")
    with pytest.raises(dal.DalStoreError, match="store.db"):
        dal.run('print(1)', workspace=tmp_path, store=bad_store)
    assert bad_store.read_text() == "this is not a database"  # nothing lost


def test_approve_and_resume_an_approval_gated_effect(tmp_path: Path) -> None:
    script = tmp_path / "send.dal"
    script.write_text('let r = run("touch sent.txt")\nprint("send:", r.status)\n')
    policy = {"require_approval": ["touch"]}
    waiting = dal.run(script, workspace=tmp_path, policy=policy, key="send:1")
    assert waiting.status == "waiting" and waiting.external_effect == "pending_approval"
    assert not (tmp_path / "sent.txt").exists()
    with pytest.raises(dal.DalUsageError, match="not waiting"):
        dal.approve(dal.run('print(1)', workspace=tmp_path).run_id, workspace=tmp_path)
    dal.approve(waiting.run_id, workspace=tmp_path, note="checked the draft")
    done = dal.resume(waiting.run_id, workspace=tmp_path)  # the run's own policy flags are kept
    assert done.status == "completed", done.blocker
    assert done.output == "send: completed\n"
    assert (tmp_path / "sent.txt").exists()


def test_deny_hands_the_script_a_denied_result(tmp_path: Path) -> None:
    script = tmp_path / "send.dal"
    script.write_text('let r = run("touch sent.txt")\nprint("send:", r.status)\n')
    policy = {"require_approval": ["touch"]}
    waiting = dal.run(script, workspace=tmp_path, policy=policy, key="send:2")
    dal.deny(waiting.run_id, workspace=tmp_path, note="not today")
    done = dal.resume(waiting.run_id, workspace=tmp_path, policy=policy)
    assert done.output == "send: denied\n"
    assert not (tmp_path / "sent.txt").exists()


def test_resolve_an_uncertain_effect(tmp_path: Path) -> None:
    with pytest.raises(dal.DalUsageError, match="done, failed or retry"):
        dal.resolve_effect("latest", "maybe", workspace=tmp_path)
    r = dal.run('print("x")', workspace=tmp_path)
    with pytest.raises(dal.DalUsageError, match="not waiting"):
        dal.resolve_effect(r.run_id, "done", workspace=tmp_path)


def test_error_in_receipt_carries_the_hint(tmp_path: Path) -> None:
    r = dal.run('print("attempt " + 3)\n', workspace=tmp_path)
    assert r.error["kind"] == "type"
    assert "str(" in r.error["help"]
    validate(r.to_dict())
