"""Differential test: for every command line the parser accepts, its argv is exactly what bash would pass.

Words are generated from fragments in every quoting style (plain, '...', "...", backslash escapes) with
the characters that trip parsers up; bash itself prints the words it sees, NUL-separated.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dal.effects.plan.shell import ShellDenied, parse_command

BASH = shutil.which("bash", path="/usr/bin:/bin")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash not installed")

TRICKY = " \t'\"\\$`*?[]{}~#!=%,.:@+^-/&|;<>()\n"
plain = st.text(alphabet="abcxyz019" + "*?[]{}~#!=%,.:@+^-/$`", min_size=1, max_size=4)
single = st.text(alphabet="ab" + TRICKY.replace("'", ""), max_size=5).map(lambda s: f"'{s}'")
double = st.text(alphabet="ab" + TRICKY, max_size=5).map(
    lambda s: '"' + "".join("\\" + c if c in '"\\$`' else c for c in s) + '"'
)
raw_double = st.text(alphabet="ab $\\`!", max_size=4).map(lambda s: f'"{s}"')  # unescaped: often denied
escaped = st.sampled_from(list(TRICKY.replace("\n", ""))).map(lambda c: "\\" + c)
word = st.lists(st.one_of(plain, single, double, raw_double, escaped), min_size=1, max_size=3).map("".join)


def bash_argv(words: list[str]) -> list[str]:
    script = "printf '%s\\0' " + " ".join(words)
    out = subprocess.run([BASH, "--norc", "--noprofile", "-c", script], capture_output=True, timeout=10,
                         env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.decode("utf-8", errors="surrogateescape").split("\0")[:-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(word, min_size=1, max_size=4))
def test_accepted_words_mean_what_bash_means(words: list[str]) -> None:
    try:
        plan = parse_command("echo " + " ".join(words))
    except ShellDenied:
        return
    assert len(plan.items) == 1 and len(plan.items[0].commands) == 1
    cmd = plan.items[0].commands[0]
    if cmd.redirects:  # an unquoted < or > in a fragment: a redirection to bash too
        return
    assert list(cmd.argv[1:]) == bash_argv(words)


@pytest.mark.parametrize(
    "words",
    [
        ["'%s\\n'", "'# Draft'"],
        ['"a\\"b"', "c\\ d", "'e\"f'", '"\\$x"'],
        ["--include='*.md'", '--name="a b"', "x\\*"],
        ["'multi\nline'", '"tab\there"', "a#b", "!", "a=b"],
        # bash expands `~` only at the start of a word and after `=`/`:` of an assignment-like word
        ["notes.md~", "a~b", "x:~", "--prefix=~", "1a=~", "\\~", "'~'", '"~"x', "a==b~", "b~/x"],
    ],
)
def test_examples_mean_what_bash_means(words: list[str]) -> None:
    cmd = parse_command("echo " + " ".join(words)).items[0].commands[0]
    assert list(cmd.argv[1:]) == bash_argv(words)


@pytest.mark.parametrize("word", ["~", "~/x", "~root", "a=~", "a=b:~/x", "A_1=x:~", "''~", "~'x'"])
def test_a_tilde_bash_would_expand_is_denied(word: str) -> None:
    with pytest.raises(ShellDenied, match="tilde"):
        parse_command("echo " + word)


# tree-sitter-bash 0.25 segfaults on `{` followed by U+B6220 (about one parse in three); parsing the ASCII
# shadow of a command keeps a script from killing DAL, and its run from losing its receipt.
CRASHER = "{\U000b6220"


def test_characters_that_crash_tree_sitter_do_not_crash_dal() -> None:
    import sys

    code = (
        "from dal.effects.plan.shell import parse_command, ShellDenied\n"
        f"for _ in range(300):\n"
        f"    try: parse_command({CRASHER!r})\n"
        "    except ShellDenied: pass\n"
        f"print(parse_command('echo ' + {CRASHER[1:]!r} + ' x\\u00e9y').simple_commands()[0].argv)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(("echo", CRASHER[1:], "x\u00e9y"))


@given(st.text(alphabet=st.characters(min_codepoint=0x80, exclude_categories=("Cs",)), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None)
def test_non_ascii_characters_are_word_characters_as_bash_sees_them(chars: str) -> None:
    cmd = f"echo {chars}x 'q{chars}'"
    assert parse_command(cmd).simple_commands()[0].argv == ("echo", f"{chars}x", f"q{chars}")
