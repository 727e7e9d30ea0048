"""Golden-file tests: every script in examples/ runs as a user would run it, and its stdout, stderr,
exit code and markdown receipt match the file kept in tests/golden/.

Regenerate after an intended change with `pytest tests/test_examples.py --update-goldens` and review
the diff. Run ids, times, durations and the temporary workspace are normalised.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.dal"))
GOLDEN = REPO / "tests" / "golden"

# Extra arguments an example needs, as its header comment says.
ARGS = {"budget_exhausted.dal": ["--max-steps", "5000"], "archive_reports.dal": ["keep=2", "label=Q3 reports"]}


def normalise(text: str, workspace: Path) -> str:
    text = text.replace(str(workspace), "WORKSPACE")
    text = re.sub(r"run_\d{8}T\d{9}Z_[0-9a-f]{6}", "run_ID", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "TIME", text)
    text = re.sub(r"\b\d+(\.\d+)? ?ms\b", "N ms", text)
    text = re.sub(r"\b\d+(\.\d+)? s\b(?= \(slept|\))", "N ms", text)  # a run over a second, on a loaded machine
    return text


def run_example(script: Path, workspace: Path) -> tuple[int, str, str, Path]:
    target = workspace / script.name
    shutil.copy(script, target)
    args = list(ARGS.get(script.name, []))
    policy = script.with_suffix(".toml")  # an example's own policy sits beside it
    if policy.exists():
        shutil.copy(policy, workspace / "dal.toml")  # as its header says: a --policy file inside is refused
    env = dict(os.environ, NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "dal", "run", script.name, *args],
        cwd=workspace,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return proc.returncode, proc.stdout, proc.stderr, workspace / ".dal" / "receipts"


def render_golden(script: Path, code: int, out: str, err: str, receipt_md: str) -> str:
    return (
        f"# Golden output of examples/{script.name}: exit code, stdout, stderr, markdown receipt.\n"
        "# Regenerate with `pytest tests/test_examples.py --update-goldens` and review the diff.\n"
        f"## exit\n{code}\n## stdout\n{out}## stderr\n{err}## receipt.md\n{receipt_md}"
    )


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_matches_golden(script: Path, tmp_path: Path, update_goldens: bool) -> None:
    code, out, err, receipts = run_example(script, tmp_path)
    assert "Traceback" not in err
    mds = sorted(receipts.glob("*.md"))
    assert len(mds) == 1, f"expected one receipt, found {mds}"
    # every receipt an example writes is valid against the shipped schema
    from dal.receipts.schema import validate

    validate(json.loads(mds[0].with_suffix(".json").read_text()))
    actual = render_golden(
        script, code, normalise(out, tmp_path), normalise(err, tmp_path), normalise(mds[0].read_text(), tmp_path)
    )
    golden = GOLDEN / f"{script.stem}.golden"
    if update_goldens or not golden.exists():
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(actual)
        if not update_goldens:
            pytest.fail(f"wrote missing golden file {golden}; review it and commit it")
    assert actual == golden.read_text()


def test_article_verifies_on_second_attempt_then_is_skipped(tmp_path: Path) -> None:
    """The article's loop creates the draft on attempt 1 and verifies it on attempt 2; run again, its
    operation key says the work is done (the README's promise: a second invocation does not repeat it);
    started over with --new-attempt, it verifies at once, after 1 attempt."""
    script = REPO / "examples" / "article_loop.dal"
    code, out, _, receipts = run_example(script, tmp_path)
    assert code == 0
    assert out.strip() == "verified after 2 attempts"
    draft = tmp_path / "COO-FILESYSTEM/articles/drafts/example.md"
    assert draft.read_text() == "# Draft\n"
    code, out, err, _ = run_example(script, tmp_path)
    assert code == 0 and out == ""
    assert "dal: skipped (operation 'article-draft:2026-09-02:tool-loop' already completed" in err
    again = subprocess.run([sys.executable, "-m", "dal", "run", "--key", "article-draft:2026-09-02:tool-loop",
                            "--new-attempt", script.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout == "verified after 1 attempt\n", again.stderr
    runs = sorted(receipts.glob("*.json"))
    assert len(runs) == 3
    first = json.loads(runs[0].read_text())
    assert [e["status"] for e in first["effects"]["items"]] == ["completed"] * 3
    assert first["result"]["status"] == "verified"
    loop = first["loops"][0]
    assert loop["exit"] == "condition" and loop["clause"] == 'state.status == "pending"'
    assert loop["iterations"] == 2


def test_article_exhausted_names_the_bound(tmp_path: Path) -> None:
    script = REPO / "examples" / "article_exhausted.dal"
    code, out, _, receipts = run_example(script, tmp_path)
    assert code == 1
    receipt = json.loads(next(receipts.glob("*.json")).read_text())
    assert receipt["status"] == "failed" and receipt["retry"] == "inspect"
    assert receipt["external_effect"] == "none"
    loop = receipt["loops"][0]
    assert loop["clause"] == "state.attempt < state.max_attempts"
    assert loop["iterations"] == 3
    items = receipt["effects"]["items"]
    creates = [e for e in items if e["command"].startswith("mkdir -p COO-FILESYSTEM/articles/drafts")]
    assert len(creates) == 3 and all(e["status"] == "failed" for e in creates)


def test_examples_pass_dal_check() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dal", "check", *map(str, EXAMPLES)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    # only the deliberately unbounded loop: the article's example passes its operation key (issue 30)
    assert proc.stderr.count("warning[") == 1 and "budget_exhausted.dal" in proc.stderr


def test_the_readme_example_is_laid_out_as_dal_fmt_lays_it_out() -> None:
    proc = subprocess.run([sys.executable, "-m", "dal", "fmt", "--check", str(REPO / "examples" / "article_loop.dal")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_second_article_failure_receipt(tmp_path: Path) -> None:
    """A draft written, verification failed: retry inspect, the artifact exists, nothing external."""
    script = REPO / "examples" / "verification_failed.dal"
    code, _, _, receipts = run_example(script, tmp_path)
    assert code == 1
    receipt = json.loads(next(receipts.glob("*.json")).read_text())
    assert receipt["operation"] == "write_article_draft"
    assert receipt["status"] == "failed"
    assert receipt["result"]["status"] == "verification_failed"
    assert receipt["retry"] == "inspect"
    assert receipt["blocker"] == "required framing paragraph is missing"
    assert receipt["external_effect"] == "none"
    draft = {a["path"]: a for a in receipt["artifacts"]}["COO-FILESYSTEM/articles/drafts/example.md"]
    assert draft["state"] == "exists" and draft["size"] == len("# Draft\nBody text.\n")
