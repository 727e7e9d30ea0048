"""Every builtin documents itself with an `Example:` whose code runs and prints what the doc says.

In a docstring, the example is the indented block after `Example:`: DAL code lines, then the expected
standard output as `# ` lines. Examples that call `run()` go through `dal run` in a scratch workspace
(they need the effect runner and its policy); the others run in-process.
"""

from __future__ import annotations

import pytest

from dal.eval.builtins import BUILTINS

NO_EFFECTS = "no effect runner is configured"


def example_of(doc: str) -> tuple[str, str]:
    """(code, expected stdout) of a docstring's `Example:` section."""
    lines = doc.split("\n")
    assert "Example:" in lines, "the docstring has no `Example:` section"
    body = lines[lines.index("Example:") + 1 :]
    code, out = [], []
    for line in body:
        if not line.strip():
            continue
        if not line.startswith("    "):
            break
        text = line[4:]
        if text.startswith("# ") or text == "#":
            out.append(text[2:])
        else:
            assert not out, f"code after the expected output: {text!r}"
            code.append(text)
    assert code, "the example has no code"
    return "\n".join(code) + "\n", "".join(x + "\n" for x in out)


def test_every_builtin_the_brief_asks_for_exists() -> None:
    wanted = {"run", "record", "append", "contains", "len", "keys", "str", "int", "float", "split", "join",
              "trim", "replace", "startswith", "endswith", "range", "print", "now", "env", "operation",
              "finish", "fail", "json", "parse_json"}
    assert wanted <= set(BUILTINS)


def test_example_parser_reads_code_then_output() -> None:
    code, out = example_of("Does x.\n\nExample:\n    let a = 1\n    print(a)\n    # 1\n\nMore text.")
    assert code == "let a = 1\nprint(a)\n" and out == "1\n"


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_has_a_docstring_with_an_example(name: str) -> None:
    doc = BUILTINS[name].doc
    assert len(doc.split("\n", 1)[0]) > 10, f"`{name}` needs a one-line summary"
    example_of(doc)


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_example_runs(name: str, dal, tmp_path) -> None:
    code, expected = example_of(BUILTINS[name].doc)
    if "run(" in code:
        (tmp_path / "example.dal").write_text(code, encoding="utf-8")
        proc = dal.cli("run", "example.dal", cwd=tmp_path)
        if NO_EFFECTS in proc.stderr:
            pytest.skip("run() has no effect runner yet")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == expected
        return
    ran = dal.run(code, "example.dal")
    assert ran.error is None, ran.rendered
    if name == "fail":
        assert ran.status == "failed"
    else:
        assert ran.status == "completed"
    assert ran.stdout == expected
