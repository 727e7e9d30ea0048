"""`dal receipts` and `dal receipt show`, through the same argparse wiring the main CLI uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.cli import receipts_cmd
from dal.receipts.markdown import render_markdown
from dal.receipts.store import Store

RID = "run_20260902T101500000Z_4f9a2c"


def dal(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = receipts_cmd.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("DAL_STORE", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


@pytest.fixture
def filled(ws: Path, receipts: dict, build) -> Path:
    with Store(ws / ".dal" / "dal.db") as store:
        store.save_receipts(
            [receipts["article_verified"], receipts["skipped"]]
            + [
                build.base(
                    run_id="run_20260903T000000000Z_000001",
                    status="waiting",
                    retry="escalate",
                    external_effect="pending_approval",
                    operation="deploy:web",
                    duration_ms=2500,
                    effects=receipts["waiting"]["effects"],
                )
            ]
        )
    return ws


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_no_runs_yet_creates_nothing(ws: Path, capsys) -> None:
    assert dal(capsys, "receipts", "--workspace", str(ws)) == (
        0,
        f"no runs yet (no run store at {ws}/.dal/dal.db)\n",
        "",
    )
    code, out, err = dal(capsys, "receipts", "--workspace", str(ws), "--json")
    assert (code, json.loads(out), err) == (0, {"kind": "runs", "runs": []}, "")
    code, out, err = dal(capsys, "receipt", "show", "latest", "--workspace", str(ws))
    assert code == 2 and out == "" and "no runs yet" in err
    assert files_under(ws) == []


def test_list_newest_first_with_columns(filled: Path, capsys) -> None:
    code, out, err = dal(capsys, "receipts", "--workspace", str(filled))
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert lines[0].split() == ["RUN", "OPERATION", "STATUS", "RETRY", "STARTED", "DURATION"]
    assert [line.split()[0] for line in lines[1:]] == [
        "run_20260903T000000000Z_000001",
        "run_20260902T111500000Z_0a0b0c",
        RID,
    ]
    assert lines[1].split()[1:6] == ["deploy:web", "waiting", "escalate", "2026-09-02", "10:15:00Z"]
    assert lines[1].endswith("  2.5 s") and lines[3].endswith("  42 ms")


def test_list_filters_limit_and_json(filled: Path, capsys) -> None:
    w = ("--workspace", str(filled))
    _, out, _ = dal(capsys, "receipts", *w, "--waiting")
    assert "deploy:web" in out and "article-draft" not in out
    _, out, _ = dal(capsys, "receipts", *w, "--status", "skipped")
    assert len(out.splitlines()) == 2 and "skipped" in out
    _, out, _ = dal(capsys, "receipts", *w, "--operation", "article-*")
    assert len(out.splitlines()) == 3
    _, out, _ = dal(capsys, "receipts", *w, "--limit", "1")
    assert out.splitlines()[-1] == "… 1 of 3 runs shown; use --limit N (0 for all)"
    _, out, _ = dal(capsys, "receipts", *w, "--json", "--operation", "nothing-like-it")
    assert json.loads(out) == {"kind": "runs", "runs": []}
    _, out, _ = dal(capsys, "receipts", *w, "--json")
    rows = json.loads(out)["runs"]
    assert [r["status"] for r in rows] == ["waiting", "skipped", "completed"]
    assert {"run_id", "operation", "status", "retry", "started_at", "duration_ms"} <= set(rows[0])


def test_show_by_prefix_key_and_latest(filled: Path, receipts: dict, capsys) -> None:
    w = ("--workspace", str(filled))
    code, out, _ = dal(capsys, "receipt", "show", "run_20260902T10", *w)
    assert code == 0 and out.startswith(f"completed  {RID}  retry: none\n")
    _, out, _ = dal(capsys, "receipt", "show", "article-draft:2026-09-02:tool-loop", *w)
    assert out.startswith("skipped  run_20260902T111500000Z_0a0b0c")
    _, out, _ = dal(capsys, "receipt", "show", *w)  # latest by default
    assert out.startswith("waiting  run_20260903T000000000Z_000001")
    assert "next: review `sendmail ops@example.com < report.txt`, then `dal approve" in out


def test_show_json_is_the_stored_receipt_and_md_the_markdown(filled: Path, receipts: dict, capsys) -> None:
    w = ("--workspace", str(filled))
    _, out, _ = dal(capsys, "receipt", "show", RID, "--json", *w)
    assert json.loads(out) == {"kind": "receipt", **receipts["article_verified"]}
    _, out, _ = dal(capsys, "receipt", "show", RID, "--md", *w)
    assert out == render_markdown(receipts["article_verified"])


def test_unknown_run_is_a_clear_error(filled: Path, capsys) -> None:
    code, out, err = dal(capsys, "receipt", "show", "nope", "--workspace", str(filled))
    assert code == 2 and out == ""
    assert err.startswith("dal: error: no run, operation or key matches 'nope'") and "Traceback" not in err


def test_inspection_writes_nothing(filled: Path, capsys) -> None:
    before = files_under(filled)
    w = ("--workspace", str(filled))
    dal(capsys, "receipts", *w)
    dal(capsys, "receipt", "show", "latest", *w)
    dal(capsys, "receipt", "show", RID, "--md", *w)
    # dal.db-seal: the writer that filled the store sealed it when it closed it (dal.receipts.storefile);
    # dal.db-reserve: the room the writer keeps for recording a run's end on a full disk
    # .dal/.gitignore: `*`, so that git never sees the store (dal.core.gitignored)
    assert files_under(filled) == before == [".dal", ".dal/.gitignore", ".dal/dal.db", ".dal/dal.db-reserve",
                                             ".dal/dal.db-seal"]


def test_store_flag_and_env(filled: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    db = str(filled / ".dal" / "dal.db")
    code, out, _ = dal(capsys, "receipts", "--workspace", str(elsewhere), "--store", db)
    assert code == 0 and RID in out
    monkeypatch.setenv("DAL_STORE", db)
    code, out, _ = dal(capsys, "receipt", "show", RID, "--workspace", str(elsewhere))
    assert code == 0 and RID in out


def test_corrupt_store_is_reported_without_traceback(ws: Path, capsys) -> None:
    (ws / ".dal").mkdir()
    (ws / ".dal" / "dal.db").write_bytes(b"garbage" * 1000)
    for argv in (["receipts"], ["receipt", "show", "latest"]):
        code, out, err = dal(capsys, *argv, "--workspace", str(ws))
        assert code == 2 and "is damaged" in err and "Traceback" not in err


def test_receipt_without_action_is_a_usage_error(capsys) -> None:
    code, _, err = dal(capsys, "receipt")
    assert code == 2 and "dal receipt show latest" in err


def _main_registers_receipts() -> bool:
    main = Path(__file__).resolve().parents[2] / "dal" / "cli" / "main.py"
    return main.is_file() and "receipts_cmd" in main.read_text("utf-8")


@pytest.mark.skipif(not _main_registers_receipts(), reason="dal/cli/main.py does not register receipts_cmd yet")
def test_real_dal_command(filled: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "dal", "receipt", "show", "latest", "--workspace", str(filled)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("waiting  run_20260903T000000000Z_000001")
    proc = subprocess.run(
        [sys.executable, "-m", "dal", "receipts", "--json", "--workspace", str(filled)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["runs"]) == 3


def test_show_includes_decisions_from_the_store(filled: Path, capsys) -> None:
    with Store(filled / ".dal" / "dal.db") as store:
        store.record_approval("run_20260903T000000000Z_000001", 4, "approved", who="ana", note="recipients ok")
    w = ("--workspace", str(filled))
    _, out, _ = dal(capsys, "receipt", "show", "latest", *w)
    assert "  effect 4: approved by ana at " in out and "(recipients ok)" in out
    assert out.endswith("next: `dal resume run_20260903T000000000Z_000001` (effect 4 was approved by ana)\n")
    _, out, _ = dal(capsys, "receipt", "show", "latest", "--md", *w)
    assert "- decision: effect 4: approved by ana at " in out
