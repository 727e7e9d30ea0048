"""String literals: a raw tab is a tab; any other raw control character is refused at the character, and
the diagnostic that shows it never passes a control character on to the reader's terminal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what a terminal could act on (not \t or \n)


def test_a_raw_tab_is_part_of_the_string(dal) -> None:
    ran = dal.run('let s = "a\tb"\nprint(len(s), s == "a\\tb")\n')
    assert (ran.status, ran.stdout) == ("completed", "3 true\n")


@pytest.mark.parametrize(("char", "escape"), [("\x01", "\\u0001"), ("\r", "\\r"), ("\x1b", "\\u001b"),
                                               ("\x0b", "\\u000b")])
def test_another_control_character_is_refused_where_it_is(dal, char: str, escape: str) -> None:
    ran = dal.run(f'print("ok")\nlet s = "ab{char}c"\n')
    assert ran.status == "rejected" and ran.stdout == ""
    assert ran.error.message == f"a raw control character (U+{ord(char):04X}) in a string"
    assert (ran.error.span.line, ran.error.span.column) == (2, 12)
    assert ran.error.help == f"write it as an escape: {escape}"


def test_the_diagnostic_shows_no_control_character(dal, tmp_path: Path) -> None:
    # An escape sequence in a script would otherwise be played by the terminal of whoever reads the error.
    (tmp_path / "s.dal").write_text('let s = "\x1b]0;owned\x07\x1b[2J"\n', encoding="utf-8")
    for command in ("check", "run"):
        done = dal.cli(command, "s.dal", cwd=tmp_path)
        assert done.returncode == 2
        assert "a raw control character (U+001B) in a string" in done.stderr
        assert not CONTROL.search(done.stderr), done.stderr
        assert '1 | let s = "\ufffd]0;owned\ufffd\ufffd[2J"' in done.stderr


def test_dal_fmt_writes_a_raw_tab_as_its_escape(dal, tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("a\tb")\n', encoding="utf-8")
    done = dal.cli("fmt", "s.dal", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, 'print("a\\tb")\n')
