"""The templates of `format(template, values...)`: read once, by `dal check` for a literal template and by the
builtin when it runs, so that both say the same about the same text.

A template is text with placeholders: `{}` takes the next value, `{0}`, `{1}`... take the value at that
position (a template uses one kind or the other), and `{{` and `}}` are a brace. Anything else between
braces is an error, and so is a value the template never uses: a template that does not fit its values is
almost always a mistake, and DAL says so instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MAX_INDEX_DIGITS = 4  # `{9999}`: far more values than a call passes, and no large number to read


class TemplateError(Exception):
    """What is wrong with a template; `at` is the character where it is (None: the template as a whole)."""

    def __init__(self, message: str, at: int | None = None, help: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.at = at
        self.help = help


_BRACE_HELP = "write `{{` or `}}` for a brace; a placeholder is `{}` or `{0}`, `{1}`..."


_BRACE = re.compile(r"[{}]")
POLL_EVERY = 1 << 16  # characters of template read between two calls of `poll`


def parse_template(text: str, poll: Callable[[], None] | None = None) -> tuple[list[str | int], int]:
    """The template's pieces (literal text, or the position of a value) and how many values it takes.

    One pass: every search starts where the last one ended, so the time is linear in the length of the
    text (a template of `{{` is a million pieces, not a million scans to its end). `poll` is called every
    POLL_EVERY characters (the builtin passes Ctrl-C and the time budget; `dal check` none)."""
    pieces: list[str | int] = []
    literal: list[str] = []
    auto = explicit = 0
    used: set[int] = set()
    i, n = 0, len(text)
    next_poll = POLL_EVERY
    search = _BRACE.search
    while i < n:
        if poll is not None and i >= next_poll:
            poll()
            next_poll = i + POLL_EVERY
        m = search(text, i)
        j = m.start() if m is not None else n
        if j > i:
            literal.append(text[i:j])
        if j == n:
            break
        ch = text[j]
        if text.startswith(ch * 2, j):
            literal.append(ch)
            i = j + 2
            continue
        if ch == "}":
            raise TemplateError(f"a lone `}}` in the template, at character {j}", j, _BRACE_HELP)
        m = search(text, j + 1)  # the brace after this one: it must close it
        if m is None or m.group() == "{":
            raise TemplateError(f"a `{{` that no `}}` closes in the template, at character {j}", j, _BRACE_HELP)
        close = m.start()
        inner = text[j + 1 : close]
        if inner == "":
            index = auto
            auto += 1
        elif inner.isascii() and inner.isdigit() and len(inner) <= MAX_INDEX_DIGITS:
            index = int(inner)
            explicit += 1
        else:
            shown = inner if len(inner) <= 20 else inner[:20] + "…"
            raise TemplateError(f"`{{{shown}}}` is not a placeholder, at character {j}", j,
                                "DAL's format takes `{}` for the next value or `{0}`, `{1}`... for a value by "
                                "position; format numbers first, e.g. with round(x, 2)")
        if auto and explicit:
            raise TemplateError(f"the template mixes `{{}}` and numbered placeholders, at character {j}", j,
                                "number them all (`{0} {1}`) or none (`{} {}`)")
        if literal:
            pieces.append("".join(literal))
            literal = []
        pieces.append(index)
        if explicit:
            used.add(index)  # `{}` uses every value up to `auto`: nothing to remember
        i = close + 1
    if literal:
        pieces.append("".join(literal))
    count = auto if auto else (max(used) + 1 if used else 0)
    unused = sorted(set(range(count)) - used) if explicit else []
    if unused:
        raise TemplateError(f"the template never uses value {{{unused[0]}}}", None,
                            "every value given to format must appear in the template")
    return pieces, count


def count_mismatch(placeholders: int, values: int) -> str:
    """The message for a template that takes `placeholders` values, given `values`."""
    takes = f"{placeholders} value{'s' if placeholders != 1 else ''}"
    given = f"{values} {'was' if values == 1 else 'were'} given"
    return f"the template takes {takes}, but {given}"
