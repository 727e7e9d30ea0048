"""The Python API with `store=` a PostgreSQL URL: a run, a second invocation skipped, a held effect approved
and resumed once, the receipts listed; and what the tests do without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

import dal
from tests.pg import server


def test_the_api_runs_decides_and_lists_on_a_postgresql_store(pg_url: str, tmp_path: Path) -> None:
    (tmp_path / "dal.toml").write_text('[programs.tee]\nclass = "external"\napproval = true\n')
    src = 'operation("send:1")\nrun("echo sent | tee -a outbox.txt")\n'
    first = dal.run(src, workspace=tmp_path, store=pg_url)
    assert first.status == "waiting" and not (tmp_path / "outbox.txt").exists()  # held for a person
    dal.approve("send:1", workspace=tmp_path, store=pg_url, note="ok")
    done = dal.resume("send:1", workspace=tmp_path, store=pg_url)
    assert done.status == "completed"
    again = dal.run(src, workspace=tmp_path, store=pg_url)
    assert again.status == "skipped"
    assert (tmp_path / "outbox.txt").read_text().splitlines() == ["sent"]
    assert [r.status for r in dal.list_receipts(workspace=tmp_path, store=pg_url)] == ["skipped", "completed",
                                                                                     "waiting"]


def test_without_a_server_the_tests_skip_saying_why_and_fail_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in server.REQUIRE:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(pytest.skip.Exception, match="PostgreSQL tests need a server: no pg_ctl"):
        server.unavailable("no pg_ctl")
    monkeypatch.setenv("DAL_REQUIRE_PG", "1")
    with pytest.raises(pytest.fail.Exception, match="required here"):
        server.unavailable("no pg_ctl")
