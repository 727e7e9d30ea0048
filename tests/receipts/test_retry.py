"""The retry table: how a run ended decides the next safe move when the script did not say."""

from __future__ import annotations

import pytest

from dal.receipts.retry import RETRY_CLASSES, derive_retry, derive_retry_for


@pytest.mark.parametrize(
    ("status", "external", "error_kind", "expected"),
    [
        ("completed", "none", None, "none"),
        ("completed", "performed", None, "none"),
        ("completed", "uncertain", None, "escalate"),
        ("skipped", "none", None, "none"),
        ("rejected", "none", "SyntaxError", "repair"),
        ("failed", "none", "TypeError", "repair"),
        ("failed", "none", None, "inspect"),  # the script's own fail(value)
        ("failed", "none", "divergence", "inspect"),
        ("failed", "none", "internal", "inspect"),
        ("failed", "performed", "type", "repair"),
        ("failed", "uncertain", "runtime", "escalate"),
        ("exhausted", "none", "BudgetExhausted", "inspect"),
        ("exhausted", "uncertain", None, "escalate"),
        ("waiting", "pending_approval", None, "escalate"),
        ("waiting", "uncertain", None, "escalate"),
        ("waiting", "none", None, "resume"),
        ("interrupted", "none", None, "resume"),
        ("interrupted", "performed", None, "resume"),
        ("interrupted", "uncertain", None, "escalate"),
    ],
)
def test_retry_table(status: str, external: str, error_kind: str | None, expected: str) -> None:
    assert derive_retry(status, external_effect=external, error_kind=error_kind) == expected
    assert expected in RETRY_CLASSES


def test_unknown_status_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown run status"):
        derive_retry("verified")


@pytest.mark.parametrize(
    "name",
    [
        "completed",
        "exhausted",
        "waiting",
        "interrupted",
        "rejected",
        "skipped",
        "script_error",
        "waiting_uncertain",
    ],
)
def test_fixture_receipts_carry_the_derived_class(receipts: dict, name: str) -> None:
    assert derive_retry_for(receipts[name]) == receipts[name]["retry"]
