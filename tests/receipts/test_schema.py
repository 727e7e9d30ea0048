"""The shipped JSON Schema accepts every kind of run receipt and rejects broken ones with a useful message."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from dal.receipts.ids import RUN_ID_RE, new_run_id, run_id_time, utc_timestamp
from dal.receipts.schema import ReceiptSchemaError, is_valid, load_schema, validate


def test_schema_file_ships_inside_the_package() -> None:
    text = resources.files("dal.receipts").joinpath("schema", "receipt-v1.json").read_text("utf-8")
    assert json.loads(text)["properties"]["schema"] == {"const": "dal.receipt/v1"}
    assert load_schema()["title"].startswith("DAL run receipt")


@pytest.mark.parametrize(
    "name",
    [
        "completed",
        "failed",
        "exhausted",
        "waiting",
        "interrupted",
        "rejected",
        "skipped",
        "article_verified",
        "article_exhausted",
        "verification_failed",
        "script_error",
        "waiting_uncertain",
    ],
)
def test_every_kind_of_receipt_validates(receipts: dict, name: str) -> None:
    validate(receipts[name])


def test_receipts_cover_every_status(receipts: dict) -> None:
    statuses = {r["status"] for r in receipts.values()}
    assert statuses == {"completed", "failed", "exhausted", "waiting", "interrupted", "rejected", "skipped"}


def test_optional_output_tail_is_allowed(build) -> None:
    validate(build.base(output={"stdout_tail": "done\n"}))


def problems_of(receipt: dict) -> str:
    with pytest.raises(ReceiptSchemaError) as info:
        validate(receipt)
    return str(info.value)


def test_unknown_status_is_named_with_its_place(build) -> None:
    message = problems_of(build.base(status="verification_failed"))
    assert "status" in message and "verification_failed" in message


def test_bad_effect_entry_points_at_the_item(build) -> None:
    bad = build.effect(1, "echo hi", "hi", status="exploded")
    message = problems_of(build.base(effects={"count": 1, "budget": None, "items": [bad], "omitted": 0}))
    assert "effects.items[0].status" in message and "exploded" in message


def test_missing_field_is_named(build) -> None:
    receipt = build.base()
    del receipt["retry"]
    assert "'retry' is a required property" in problems_of(receipt)


def test_typo_field_is_rejected(build) -> None:
    assert "attempted" in problems_of(build.base(attempted="2026-09-02T10:15:00.000Z"))


def test_wrong_schema_version_is_rejected(build) -> None:
    assert "dal.receipt/v1" in problems_of(build.base(schema="dal.receipt/v2"))


def test_timestamp_must_be_utc_with_milliseconds(build) -> None:
    assert "attempted_at" in problems_of(build.base(attempted_at="2026-09-02 10:15:00"))


def test_skipped_run_must_point_at_the_completed_one(build) -> None:
    assert "skipped_of" in problems_of(build.base(status="skipped", skipped_of=None))


def test_pending_approval_only_while_waiting(build) -> None:
    assert not is_valid(build.base(status="completed", external_effect="pending_approval"))


def test_completed_run_has_no_error(receipts: dict) -> None:
    bad = dict(receipts["script_error"], status="completed")
    assert "error" in problems_of(bad)


def test_loop_exit_reason_is_checked(build) -> None:
    assert "loops[0].exit" in problems_of(build.base(loops=[build.loop(exit="gave_up")]))


def test_run_ids_sort_by_time_and_are_unique() -> None:
    ids = [new_run_id() for _ in range(2000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(RUN_ID_RE.match(i) for i in ids)
    assert run_id_time(ids[0]) is not None and run_id_time("latest") is None


def test_fresh_ids_and_timestamps_validate(build) -> None:
    validate(build.base(run_id=new_run_id(), attempted_at=utc_timestamp(), finished_at=utc_timestamp()))


def test_sampled_check_is_fast_and_names_the_real_entry(build) -> None:
    import time

    def big() -> dict:
        evidence = [build.record(i, "poll", "not yet") for i in range(50)]
        loops = [build.loop(evidence=[dict(e) for e in evidence]) for _ in range(100)]
        items = [build.effect(i, "echo hi", "hi") for i in range(100)]
        return build.base(loops=loops, effects={"count": 100, "budget": None, "items": items, "omitted": 0})

    receipt = big()
    start = time.perf_counter()
    validate(receipt, sample=8)
    assert time.perf_counter() - start < 0.2  # the whole check takes about a second

    receipt["loops"][99]["evidence"][49]["kind"] = "bad"
    receipt["effects"]["items"][99]["status"] = "bad"
    receipt["loops"][2]["evidence"][3]["kind"] = "bad"
    with pytest.raises(ReceiptSchemaError) as info:
        validate(receipt, sample=8)
    assert info.value.problems == [
        "effects.items[99].status: 'bad' is not one of ['completed', 'failed', 'denied', 'timeout', "
        "'pending_approval', 'uncertain']",
        "loops[2].evidence[3].kind: 'bad' is not one of ['effect', 'record']",
        "loops[99].evidence[49].kind: 'bad' is not one of ['effect', 'record']",
    ]
