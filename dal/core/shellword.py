"""One quoting for every command DAL suggests ("next: `dal resume ...`", "`dal run --key K SCRIPT`"): a key,
a path or a name that a script chose may hold `$(...)`, backticks or spaces, and a person pastes the
suggestion into a shell. Run ids, effect numbers and job ids are DAL's own and need none.
tests/cli/test_next_step_quoting.py checks that no suggestion in dal/ interpolates anything else raw."""

from __future__ import annotations

__all__ = ["sh_quote"]


def sh_quote(text: object) -> str:
    """`text` as one shell word (POSIX quoting, shlex.quote): unchanged when it needs none."""
    import shlex  # only a message that names a command quotes: most runs print none

    return shlex.quote(str(text))
