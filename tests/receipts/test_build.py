"""One receipt builder (dal/receipts/build.py): a finished run, a run rebuilt from its journal after its
process died, and a REPL session all produce receipts of one shape, the schema's, keys in its order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dal as dalapi
from dal.receipts.build import effect_item
from dal.receipts.schema import validate
from dal.receipts.store import Store

SCHEMA = json.loads((Path(dalapi.__file__).parent / "receipts" / "schema" / "receipt-v1.json").read_text())
ORDER = list(SCHEMA["properties"])
EFFECT_KEYS = list(SCHEMA["$defs"]["effect"]["properties"])


def _in_schema_order(receipt: dict[str, Any]) -> bool:
    keys = list(receipt)
    return keys == [k for k in ORDER if k in receipt] and set(SCHEMA["required"]) <= set(keys)


def test_an_effect_item_has_exactly_the_schemas_keys_in_its_order() -> None:
    item = effect_item(seq=1, command="true", status="completed", effect_class="read", code=0, summary="ok",
                       reason=None, reads=[], writes=[], programs=["true"], duration_ms=1.0, line=1, column=1,
                       loop_iteration=None, replayed=False)
    assert list(item) == EFFECT_KEYS


def test_finished_crashed_and_repl_receipts_share_one_shape(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    finished = dalapi.run('run("echo one")\nlet i = 0\nwhile i < 2 { i = i + 1 }\n', workspace=ws).to_dict()
    assert finished["status"] == "completed" and len(finished["effects"]["items"]) == 1

    # A run whose process died after journaling one effect's intent: its receipt is rebuilt from the journal.
    from dal.runner.deadrun import crashed_receipt

    store_path = ws / ".dal" / "dal.db"
    dead = "run_20260902T101500000Z_dead01"
    with Store(store_path) as store:
        store.begin_run(dead, operation="script:dead", script_path="dead.dal", pid=2**22 + 1)
        store.journal_intent(dead, 1, "echo two", "read", detail={"line": 3})
        crashed = crashed_receipt(store, store.run_row(dead) or {}, workspace=ws, blocker="the process died")
    assert crashed["status"] == "interrupted" and crashed["effects"]["items"][0]["status"] == "uncertain"

    # A REPL session that ran one effect.
    from dal.effects import EffectContext, Policy
    from dal.repl.session import Session
    from dal.repl.wiring import SessionWiring, save_session_receipt
    from dal.runner.build import build_spec

    spec = build_spec(None, workspace=str(ws))
    session = Session(workspace=ws, write=lambda s: None)
    wiring = SessionWiring(session, EffectContext(policy=Policy.load(ws)))
    wiring.attach()
    session.execute('run("echo three")')
    save_session_receipt(session, wiring, spec)
    with Store(store_path, readonly=True) as store:
        repl = store.get_run(store.list_runs(operation="repl")[0]["run_id"])
    assert repl is not None and repl["effects"]["items"][0]["command"] == "echo three"

    for receipt in (finished, crashed, repl):
        validate(receipt)
        assert _in_schema_order(receipt), list(receipt)
        assert [list(i) for i in receipt["effects"]["items"]] == [EFFECT_KEYS]
