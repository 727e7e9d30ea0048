"""Run every `tests/language/*.dal` file and check its inline expectations (see README.md here).

Each `#---` section is one case, run on its own in-process with the other sections blanked out, so
that every line number an error reports is the line number in the file.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from dal.core.diagnostics import render

HERE = Path(__file__).resolve().parent
FILES = sorted(HERE.glob("*.dal"))


@attrs.define
class Case:
    file: Path
    name: str
    first: int  # 1-based line of the section's first line
    lines: list[str]  # the whole file, sections other than this one blanked out
    stdout: list[str] = attrs.field(factory=list)
    errors: list[tuple[int, str]] = attrs.field(factory=list)  # (line, regex)
    status: str | None = None
    max_steps: int = 1_000_000


def comment_of(line: str) -> str | None:
    """The `#` comment of a line, outside string literals, or None."""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == '"':
            i += 1
            while i < n and line[i] != '"':
                i += 2 if line[i] == "\\" else 1
        elif ch == "#":
            return line[i:]
        i += 1
    return None


def parse_cases(path: Path) -> list[Case]:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("#---")]
    preamble = lines[: starts[0]] if starts else lines
    if any(x.strip() and not x.lstrip().startswith("#") for x in preamble):
        starts = [0, *starts]  # code before the first `#---` is a case of its own
    cases = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        header = lines[start]
        name = header[4:].strip() if header.startswith("#---") else "(top)"
        own = [line if start <= i < end else "" for i, line in enumerate(lines)]
        case = Case(path, name or f"line {start + 1}", start + 1, own)
        for i in range(start, end):
            c = comment_of(lines[i])
            if c is None and "###" in lines[i]:  # a line whose string never closes
                c = lines[i][lines[i].rindex("###"):]
            if c is None:
                continue
            if c.startswith("# =>"):
                case.stdout.append(c[5:] if c.startswith("# => ") else c[4:])
            elif c.startswith("###"):
                m = re.fullmatch(r'###\s*"(.*)"\s*', c)
                assert m, f"{path.name}:{i + 1}: write an expected error as ### \"regex\""
                case.errors.append((i + 1, m.group(1)))
            elif c.startswith("#! status "):
                case.status = c.split(None, 2)[2].strip()
            elif c.startswith("#! max_steps "):
                case.max_steps = int(c.split(None, 2)[2])
            elif c.startswith("#!"):
                raise AssertionError(f"{path.name}:{i + 1}: unknown directive {c!r}")
        cases.append(case)
    return cases


def render_without_source(err) -> str:
    saved, err.source = err.source, None
    try:
        return render(err)
    finally:
        err.source = saved


CASES = [c for f in FILES for c in parse_cases(f)]


def test_there_are_cases() -> None:
    assert len(FILES) >= 5 and len(CASES) >= 100


@pytest.mark.parametrize("case", CASES, ids=[f"{c.file.stem}:{c.first}:{c.name}" for c in CASES])
def test_dal_case(case: Case, dal) -> None:
    ran = dal.run("\n".join(case.lines), filename=case.file.name, max_steps=case.max_steps)
    where = f"{case.file.name}:{case.first} ({case.name})"
    expected_out = "".join(line + "\n" for line in case.stdout)
    if not case.errors:
        assert ran.error is None, f"{where}: unexpected error:\n{ran.rendered}"
    else:
        assert ran.errors, f"{where}: expected an error, the run ended {ran.status}; stdout:\n{ran.stdout}"
        assert len(ran.errors) == len(case.errors), f"{where}: expected {len(case.errors)} errors, got:\n{ran.rendered}"
        for (line, regex), err in zip(case.errors, ran.errors, strict=True):
            text = render(err)
            message = render_without_source(err)  # the regex must not match the `###` comment itself
            assert re.search(regex, message), f"{where}: /{regex}/ does not match the error:\n{text}"
            assert err.span.line == line, f"{where}: expected the error on line {line}:\n{text}"
            # located and drawn: ` --> file:line:col`, then the source line, then carets under the span
            assert f" --> {case.file.name}:{line}:{err.span.column}" in text, text
            src = case.lines[line - 1].expandtabs(1)
            rows = text.split("\n")
            shown = next(x for x in rows if x.startswith(f"{line} | "))[len(f"{line} | "):]
            caret = next(x for x in rows if x.strip().startswith("|") and "^" in x)
            at = caret.index("^") - caret.index("|") - 2
            # the carets stand under the error's own text (a long line may be cut down around it)
            if err.span.column > len(src):  # the end of the script: the caret stands just after the line
                assert at == len(shown), text
            else:
                piece = shown[at:].removesuffix("...")[:12]
                assert piece and src[err.span.column - 1 :].startswith(piece), text
            assert shown == src or shown.strip(".") in src, text
    assert ran.stdout == expected_out, f"{where}: stdout differs"
    if case.status is not None:
        assert ran.status == case.status, f"{where}: status {ran.status}, expected {case.status}"
    elif not case.errors:
        assert ran.status == "completed", where
