"""One quoting for every command DAL suggests ("next: `dal resume ...`", "`dal run --key K SCRIPT`"): a key,
a path or a name that a script chose may hold `$(...)`, backticks or spaces, and a person pastes the
suggestion into a shell. Run ids, effect numbers and job ids are DAL's own and need none.
tests/cli/test_next_step_quoting.py checks that no suggestion in dal/ interpolates anything else raw."""

from __future__ import annotations

__all__ = ["fed_command", "sh_quote"]


def sh_quote(text: object) -> str:
    """`text` as one shell word (POSIX quoting, shlex.quote): unchanged when it needs none."""
    import shlex  # only a message that names a command quotes: most runs print none

    return shlex.quote(str(text))


def fed_command(words: tuple[str, ...] | list[str], given: str | None = None, write_to: str | None = None,
                append: bool = False) -> str:
    """The text of `run([...])` (and `write_file`) as a shell would run it: the words quoted one by one,
    the file its output goes to, and the input fed to it as a `printf %s '...' |` in front. It is what
    receipts and the journal show, what a resume compares and a person approves: the whole input is in it,
    so that approving the command approves the text it feeds."""
    import shlex

    text = shlex.join(words)
    if write_to is not None:
        text += f" {'>>' if append else '>'} {shlex.quote(write_to)}"
    if given is not None:
        text = f"printf %s {shlex.quote(given)} | {text}"
    return text
