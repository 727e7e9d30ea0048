"""Host mode: `dal run --json` prints nothing but the final run receipt on stdout, for every exit kind,
so a host in any language gets a machine-readable result and the run id from one process call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dal.receipts.schema import validate

CASES = {
    "completed": ('print("hello")\n', [], 0),
    "failed": ('print("x" + 1)\n', [], 1),
    "fail_value": ('fail({"blocker": "required framing paragraph is missing", "retry": "inspect"})\n', [], 1),
    "rejected": ("let x = \n", [], 2),
    "exhausted": ("let n = 0\nwhile true { n = n + 1 }\n", ["--max-steps", "500"], 4),
    "waiting": ('run("touch out.txt")\n', ["--require-approval", "touch"], 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_stdout_is_one_valid_receipt(name: str, tmp_path: Path) -> None:
    source, args, code = CASES[name]
    (tmp_path / "s.dal").write_text(source)
    proc = subprocess.run(
        [sys.executable, "-m", "dal", "run", "s.dal", "--json", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == code, proc.stderr
    receipt = json.loads(proc.stdout)
    assert receipt["kind"] == "receipt"  # host mode's one field (docs/cli.md#host-mode)
    validate(receipt)  # `kind` and `output` are optional fields of dal.receipt/v1
    output = receipt["output"]["stdout_tail"]  # what the script printed, as the Python API's receipt.output
    assert (tmp_path / ".dal" / "receipts" / f"{receipt['run_id']}.json").exists()
    assert "Traceback" not in proc.stderr
    if name == "completed":
        assert proc.stderr == "hello\n"  # script output goes to stderr in host mode
        assert output == "hello\n"
    if name == "fail_value":
        assert receipt["retry"] == "inspect"
        assert receipt["blocker"] == "required framing paragraph is missing"
        assert receipt["external_effect"] == "none"
    if name == "waiting":
        assert receipt["external_effect"] == "pending_approval"
        assert "touch out.txt" in receipt["blocker"]
