"""Every ```dal block in docs/*.md that is followed by an ```output block runs and prints that output.

The output block holds the script's standard output, then (when the run ends with an error) the error
exactly as `dal run` renders it, the script being called `example.dal`. Blocks that call `run()` go
through `dal run` in a scratch workspace with the default policy; they are skipped while no effect
runner is wired. A first line `# run with: dal run FLAGS example.dal NAME=VALUE...` runs the block with those flags and
script arguments
(through `dal run`, except for a lone `--max-steps N`, which runs in-process). A ```dal block with no
```output block after it is not run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
NO_EFFECTS = "no effect runner is configured"


def fenced_blocks(text: str) -> list[tuple[str, str, int, int]]:
    """Every fenced block: (language, content, first line, line after the closing fence)."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang, start = lines[i][3:].strip(), i
            i += 1
            while i < len(lines) and lines[i].rstrip() != "```":
                i += 1
            blocks.append((lang, "".join(x + "\n" for x in lines[start + 1 : i]), start + 1, i + 1))
        i += 1
    return blocks


def pairs(text: str) -> list[tuple[int, str, str]]:
    """(line, code, expected) for each ```dal block whose next block is ```output, with only blank lines
    between them."""
    blocks = fenced_blocks(text)
    lines = text.split("\n")
    found = []
    for (lang, code, line, end), (lang2, out, line2, _) in zip(blocks, blocks[1:], strict=False):
        if lang == "dal" and lang2 == "output" and not "".join(lines[end : line2 - 1]).strip():
            found.append((line, code, out))
    return found


def examples() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        for line, code, out in pairs(path.read_text(encoding="utf-8")):
            found.append((f"{path.name}:{line}", code, out))
    return found


EXAMPLES = examples()


def test_language_reference_has_tested_examples() -> None:
    assert sum(1 for where, _, _ in EXAMPLES if where.startswith("language.md")) >= 40


def test_only_an_output_block_right_after_a_dal_block_counts() -> None:
    text = (
        "```dal\nprint(1)\n```\n\n```output\n1\n```\n\n"
        "```dal\nprint(2)\n```\nprose\n```output\n2\n```\n"
        "```dal\nprint(3)\n```\n```\n3\n```\n"
    )
    assert [(code, out) for _, code, out in pairs(text)] == [("print(1)\n", "1\n")]


@pytest.mark.parametrize(("where", "code", "expected"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_doc_example(where: str, code: str, expected: str, dal, tmp_path: Path) -> None:
    how = re.match(r"# run with: dal run (.*?)\s*example\.dal(.*)\n", code)
    flags = shlex.split(how.group(1)) if how else []
    script_args = shlex.split(how.group(2)) if how else []  # the script's NAME=VALUE arguments
    budget_only = len(flags) == 2 and flags[0] == "--max-steps" and not script_args
    if "run(" in code or script_args or (flags and not budget_only):
        (tmp_path / "example.dal").write_text(code, encoding="utf-8")
        p = dal.cli("run", *flags, "example.dal", *script_args, cwd=tmp_path)
        if NO_EFFECTS in p.stderr:
            pytest.skip("run() has no effect runner yet")
        diagnostic = "\n".join(line for line in p.stderr.split("\n") if not line.startswith("dal: ")).strip()
        got = p.stdout + (diagnostic + "\n" if diagnostic else "")
    else:
        ran = dal.run(code, "example.dal", max_steps=int(flags[1]) if budget_only else 1_000_000)
        got = ran.stdout + (ran.rendered + "\n" if ran.rendered else "")
    assert got == expected, f"{where}: the example prints something else"


def test_language_reference_documents_every_builtin() -> None:
    from dal.eval.builtins import BUILTINS

    headings = [line for line in (DOCS / "language.md").read_text(encoding="utf-8").split("\n")
                if line.startswith("### ")]
    missing = [name for name in BUILTINS if not any(f"{name}(" in h for h in headings)]
    assert not missing, f"builtins without a section in docs/language.md: {missing}"
