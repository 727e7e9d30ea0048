"""Every command DAL suggests quotes what a script chose (dal/core/shellword.py).
Executed: a script's operation("K") key holds a command substitution; the suggestions `dal resume` of the
completed run and a second run under another policy print are pasted into bash (with `dal` stubbed), and
the marker the substitution would create does not appear. And no suggestion in dal/ interpolates a value
raw other than DAL's own run ids, effect numbers and job ids."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

DAL_SRC = Path(__file__).resolve().parents[2] / "dal"
# What DAL makes itself (run ids, effect numbers, job ids, a flag name, a parameter's identifier).
SAFE = {"rid", "nid", "run.run_id", "prev['run_id']", "other['run_id']", "run.previous['run_id']",
        "receipt['run_id']", "r['run_id']", "continued_by", "done", "run", "seq", "e['seq']", "jid", "flag", "p.name"}


def _paste(suggestion: str) -> None:
    subprocess.run(["bash", "-c", f"dal() {{ :; }}; {suggestion}"], capture_output=True, timeout=30)


def test_a_pasted_suggestion_runs_nothing_the_script_chose(durable, tmp_path: Path) -> None:
    d = durable
    mark = tmp_path / "MARKER"
    d.write("s.dal", f'operation("nightly`touch {mark}`")\nprint("done")\n')
    assert d.cli("run", "s.dal").code == 0
    msg = d.cli("resume", "latest").err
    found = re.search(r"\(start the work again with `(.*)`\)$", msg.strip())
    assert found, msg
    assert found.group(1) == f"dal run --key 'nightly`touch {mark}`' --new-attempt SCRIPT"
    _paste(found.group(1))
    assert not mark.exists()
    d.write("t.dal", f'operation("job`touch {mark}`")\nfail({{"blocker": "b", "retry": "resume"}})\n')
    d.cli("run", "t.dal")
    msg = d.cli("run", "--allow-env=FOO", "t.dal").err
    found = re.search(r"`(dal run --key '[^']*' SCRIPT)`", msg)
    assert found, msg
    _paste(found.group(1))
    assert not mark.exists()
    # the control: the same text unquoted does run the substitution
    _paste(f"dal run --key job`touch {mark}` SCRIPT")
    assert mark.exists()


def test_no_suggestion_in_dal_interpolates_a_raw_value() -> None:
    raw = []
    for path in sorted(DAL_SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"`dal [^`\n]*`|dal run --key \{[^}]*\}", text):
            for expr in re.findall(r"\{([^{}]+)\}", m.group()):
                expr = expr.split("!")[0].split(":")[0].strip()
                if expr in SAFE or expr.startswith(("sh_quote(", "_q(")):
                    continue
                raw.append(f"{path.relative_to(DAL_SRC.parent)}: {m.group()}")
    assert raw == [], "quote these with dal.core.shellword.sh_quote:\n" + "\n".join(raw)
