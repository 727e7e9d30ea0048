"""Receipt files land where people look, whole, and never as a half-written file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dal.receipts.files import atomic_write, receipts_dir, write_receipt_files
from dal.receipts.schema import validate


def test_writes_json_and_markdown_under_dal_receipts(tmp_path: Path, receipts: dict) -> None:
    r = receipts["verification_failed"]
    json_path, md_path = write_receipt_files(r, workspace=tmp_path)
    assert json_path == tmp_path / ".dal" / "receipts" / f"{r['run_id']}.json"
    assert md_path == json_path.with_suffix(".md")
    back = json.loads(json_path.read_text("utf-8"))
    assert back == r
    validate(back)
    assert md_path.read_text("utf-8").startswith("# Tool-loop receipt\n")
    assert sorted(p.name for p in json_path.parent.iterdir()) == sorted([json_path.name, md_path.name])


def test_receipts_dir_override(tmp_path: Path, receipts: dict) -> None:
    json_path, _ = write_receipt_files(receipts["completed"], tmp_path / "out")
    assert json_path.parent == tmp_path / "out"
    assert receipts_dir(None, tmp_path) == tmp_path / ".dal" / "receipts"


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    atomic_write(target, "old")
    atomic_write(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_failed_write_leaves_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.json"
    atomic_write(target, "old")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space"):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_persist_saves_to_the_store_then_the_files(tmp_path: Path, receipts: dict, monkeypatch) -> None:
    from dal.receipts.saving import persist
    from dal.receipts.store import Store

    monkeypatch.delenv("DAL_STORE", raising=False)
    r = receipts["article_verified"]
    done = persist(r, workspace=tmp_path)
    assert done.store_error is None and done.store_path == tmp_path / ".dal" / "dal.db"
    assert done.json_path.is_file() and done.md_path.is_file()
    with Store(done.store_path, readonly=True) as store:
        assert store.get_run(r["run_id"]) == r


def test_persist_still_writes_files_when_the_store_is_unusable(tmp_path: Path, receipts: dict) -> None:
    from dal.receipts.saving import persist

    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 100)
    done = persist(receipts["failed"], workspace=tmp_path, store=bad)
    assert "is damaged" in str(done.store_error)
    assert json.loads(done.json_path.read_text("utf-8")) == receipts["failed"]
    assert bad.read_bytes() == b"garbage" * 100


def test_persist_refuses_an_invalid_receipt_before_writing(tmp_path: Path, build) -> None:
    from dal.receipts.saving import persist
    from dal.receipts.schema import ReceiptSchemaError

    with pytest.raises(ReceiptSchemaError):
        persist(build.base(status="ok"), workspace=tmp_path)
    assert list(tmp_path.iterdir()) == []
