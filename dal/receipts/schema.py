"""The shipped JSON Schema of `dal.receipt/v1` and the one function that checks a receipt against it."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema

SCHEMA_ID = "dal.receipt/v1"
_MAX_REPORTED = 5


class ReceiptSchemaError(ValueError):
    """A receipt does not match `dal.receipt/v1`; `problems` lists each mismatch as `where: what`."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"receipt does not match {SCHEMA_ID}:\n{lines}")


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """Return the JSON Schema document shipped as `dal/receipts/schema/receipt-v1.json`."""
    text = resources.files("dal.receipts").joinpath("schema", "receipt-v1.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    schema = load_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _where(error: jsonschema.ValidationError) -> str:
    # `effects.items[3].status` reads better than deque(['effects', 'items', 3, 'status']).
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(receipt)"


def _what(error: jsonschema.ValidationError) -> str:
    # For oneOf/anyOf the generic message repeats the whole value; the best sub-error says more.
    if error.context:
        best = jsonschema.exceptions.best_match(error.context)
        if best is not None:
            return best.message
    return error.message


def problems(receipt: Any) -> list[str]:
    """Return the receipt's mismatches with the schema (empty when it is valid), at most five."""
    errors = sorted(_validator().iter_errors(receipt), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_where(e)}: {_what(e)}" for e in errors[:_MAX_REPORTED]]


def validate(receipt: Any) -> None:
    """Raise ReceiptSchemaError naming each field that does not match `dal.receipt/v1`."""
    found = problems(receipt)
    if found:
        raise ReceiptSchemaError(found)


def is_valid(receipt: Any) -> bool:
    """True when the receipt matches `dal.receipt/v1`."""
    return _validator().is_valid(receipt)
