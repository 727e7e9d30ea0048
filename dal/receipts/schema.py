"""The shipped JSON Schema of `dal.receipt/v1` and the one function that checks a receipt against it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema costs ~50 ms to import: only runs that validate pay for it
    import jsonschema

VALIDATE_ENV = "DAL_VALIDATE_RECEIPTS"
# A store checks this many entries (plus the last) of each long list of a receipt it saves.
VALIDATE_SAMPLE = 8


def validation_on() -> bool:
    """Whether stored receipts are checked against the schema: always in the test suite (which sets
    DAL_VALIDATE_RECEIPTS=1), on request elsewhere. Receipts are built by DAL itself, so a production run
    does not pay the check on every start."""
    return os.environ.get(VALIDATE_ENV, "") not in ("", "0")

def checked(receipts: Iterable[dict[str, Any]], on: bool | None = None) -> list[dict[str, Any]]:
    """The receipts a store is about to save, as a list, each checked against the schema first when `on` says
    so (a store's `validate`; default: validation_on()): every field, and the first few and the last entry of
    each long list (VALIDATE_SAMPLE), so that the check stays in milliseconds for thousands of evidence
    entries."""
    batch = list(receipts)
    if batch and (validation_on() if on is None else on):
        for receipt in batch:
            validate(receipt, sample=VALIDATE_SAMPLE)
    return batch


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
    from importlib import resources  # ~2 ms to import; a run that does not validate never reads the schema

    text = resources.files("dal.receipts").joinpath("schema", "receipt-v1.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    import jsonschema

    schema = load_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _where(error: jsonschema.ValidationError, original: Any = None, checked: Any = None) -> str:
    # `effects.items[3].status` reads better than deque(['effects', 'items', 3, 'status']). A sampled
    # list keeps its last entry at a new index: walk the original beside it to name the real one.
    out = ""
    for part in error.absolute_path:
        real = part
        if isinstance(part, int):
            cut = isinstance(original, list) and isinstance(checked, list) and len(checked) < len(original)
            if cut and part == len(checked) - 1:
                real = len(original) - 1
            out += f"[{real}]"
        else:
            out += f".{part}" if out else str(part)
        original, checked = _step(original, real), _step(checked, part)
    return out or "(receipt)"


def _step(node: Any, part: Any) -> Any:
    try:
        return node[part]
    except (KeyError, IndexError, TypeError):
        return None


def _what(error: jsonschema.ValidationError) -> str:
    # For oneOf/anyOf the generic message repeats the whole value; the best sub-error says more.
    import jsonschema

    if error.context:
        best = jsonschema.exceptions.best_match(error.context)
        if best is not None:
            return best.message
    return error.message


def _ends(items: Any, keep: int) -> Any:
    # The first `keep` items and the last one: where a producer's mistakes show first.
    if not isinstance(items, list) or len(items) <= keep + 1:
        return items
    return [*items[:keep], items[-1]]


def _sample(receipt: Any, keep: int) -> Any:
    """A copy of the receipt with its long lists (loops, their evidence, effects, artifacts) cut to
    their ends; each kind of entry is built by one piece of code, so its ends show any shape mistake."""
    if not isinstance(receipt, dict):
        return receipt
    out = dict(receipt)
    loops = _ends(receipt.get("loops"), keep)
    if isinstance(loops, list):
        out["loops"] = [
            {**lp, "evidence": _ends(lp.get("evidence"), keep)} if isinstance(lp, dict) else lp for lp in loops
        ]
    effects = receipt.get("effects")
    if isinstance(effects, dict):
        out["effects"] = {**effects, "items": _ends(effects.get("items"), keep)}
    out["artifacts"] = _ends(receipt.get("artifacts"), keep)
    return out


def problems(receipt: Any, *, sample: int | None = None) -> list[str]:
    """Return the receipt's mismatches with the schema (empty when it is valid), at most five.

    With `sample`, only the first `sample` and the last entry of each long list are checked, which keeps
    the check cheap for big receipts (jsonschema costs about 0.1 ms per evidence entry).
    """
    checked = receipt if sample is None else _sample(receipt, sample)
    errors = sorted(_validator().iter_errors(checked), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_where(e, receipt, checked)}: {_what(e)}" for e in errors[:_MAX_REPORTED]]


def validate(receipt: Any, *, sample: int | None = None) -> None:
    """Raise ReceiptSchemaError naming each field that does not match `dal.receipt/v1`.

    The whole receipt is checked unless `sample` is given (see problems()); tests check it whole.
    """
    found = problems(receipt, sample=sample)
    if found:
        raise ReceiptSchemaError(found)


def is_valid(receipt: Any) -> bool:
    """True when the receipt matches `dal.receipt/v1`."""
    return _validator().is_valid(receipt)
