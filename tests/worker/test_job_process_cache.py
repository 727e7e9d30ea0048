"""What a job process keeps between jobs (dal/worker/jobproc.py): the checked script, by the digest of its
text, and the job's specification with its policy, by the stored text. A kept script serves every run of
that text, each with its own arguments and state; a changed text is checked afresh (its errors reported as
they are); runs through the runner with the kept script and the lent store behave as runs that check and
open everything themselves."""

from __future__ import annotations

import json
from pathlib import Path

from dal.receipts.store import Store
from dal.runner.build import build_spec
from dal.runner.runner import execute
from dal.runner.spec import RunHooks
from dal.worker.jobproc import JobProcessMain
from dal.worker.spec import make_spec

SCRIPT = """param who: str = "nobody"
let seen = []
for i in range(3) { append(seen, i) }
print(who + " " + str(len(seen)))
"""


def test_a_checked_script_is_kept_by_its_text_and_a_changed_text_is_checked_again() -> None:
    p = JobProcessMain(None, None, 0)  # type: ignore[arg-type]
    first, errors = p._check(SCRIPT, "s.dal")
    assert errors == [] and first is not None
    again, _ = p._check(SCRIPT, "s.dal")
    assert again is first and p.scripts.hits == 1
    other, _ = p._check(SCRIPT.replace("3", "4"), "s.dal")
    assert other is not first  # another text: checked, not taken from the cache
    bad, errors = p._check("let x = \n", "s.dal")
    assert bad is None and errors  # the check's own errors, for the run to report
    assert p._check("let x = \n", "s.dal")[0] is None and len(p.scripts.items) == 2  # errors are never kept


def test_a_stored_spec_is_parsed_once_per_text(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text(SCRIPT, encoding="utf-8")
    text = json.dumps(make_spec(build_spec(tmp_path / "s.dal", workspace=tmp_path)))
    p = JobProcessMain(None, None, 0)  # type: ignore[arg-type]
    one = p._spec(text)
    assert p._spec(text) is one and one.policy is p._spec(text).policy
    assert p._spec(text.replace('"max_steps": 1000000', '"max_steps": 999')) is not one


def test_runs_that_share_a_kept_script_and_a_lent_store_each_get_their_own_arguments_and_state(
        tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text(SCRIPT, encoding="utf-8")
    db = tmp_path / ".dal" / "dal.db"
    p = JobProcessMain(None, None, 0)  # type: ignore[arg-type]
    out: list[str] = []
    with Store(db) as store:
        for i, who in enumerate(("ada", "bob", "cy")):
            spec = build_spec(tmp_path / "s.dal", workspace=tmp_path, store=db, key=f"k{i}", args={"who": who})
            report = execute(spec, RunHooks(write=out.append, handle_signals=False, store=store, check=p._check))
            assert report.receipt["status"] == "completed", report.receipt
        assert len(store.list_runs(limit=None)) == 3  # each run recorded through the lent store ...
        assert store.integrity_check() == []  # ... which every run left open and sound
    assert "".join(out) == "ada 3\nbob 3\ncy 3\n"  # no list carried over, each its own argument
    assert p.scripts.misses == 1 and p.scripts.hits == 2
