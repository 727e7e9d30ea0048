"""The step charge, written once: the lines every compiled template uses to charge steps.

A statement charges its steps when it starts (docs/language.md, "Step accounting"). The compiler's
templates never spell a charge out: they ask this emitter for its lines, so what a charge is (add to
`rt.steps`, compare with `rt.limit`, `rt.over_limit(span)` past it; see dal/eval/runtime.py), how charges
that nothing could tell apart are made at once, and how the steps of statements a failure kept from
running are given back, are written here and nowhere else. With step counting off (the benchmark that
measures what counting costs) every method returns the code without its charge.

The lines are for a body indented four spaces under its `def`; `cost`, `total` and `span` are names (or
constants) of the template that uses them.
"""

from __future__ import annotations


def indent(lines: list[str], k: int) -> list[str]:
    """Indent template lines by `k` spaces. A line may hold several (a global read does): the ones after
    its first are written for a four-space body, and are moved to `k`."""
    out = []
    for line in lines:
        first, *more = line.split("\n")
        out.append(" " * k + first)
        for m in more:
            assert m.startswith("    "), m
            out.append(" " * k + m[4:])
    return out


class Charges:
    """Emits the charge lines of one compiler: `counting` False leaves every charge out."""

    __slots__ = ("counting",)

    def __init__(self, counting: bool) -> None:
        self.counting = counting

    def now(self, cost: str, span: str = "span") -> list[str]:
        """Charge `cost` steps now: past the limit, `rt.over_limit` raises (a budget, an interrupt) or
        looks at the clock and lets the statement go on."""
        if not self.counting:
            return []
        return [f"rt.steps += {cost}", "if rt.steps > rt.limit:", f"    rt.over_limit({span})"]

    def at_once(self, total: str, slow: list[str], fast: list[str]) -> list[str]:
        """Charge `total` steps, the charges of several statements that nothing can tell apart, at once,
        then run `fast`. When the limit falls inside them (a budget, the clock check or an interrupt),
        nothing is charged and `slow` runs instead, charging them one by one."""
        if not self.counting:
            return fast
        return [f"n = rt.steps + {total}", "if n > rt.limit:", *indent(slow, 4), "else:", "    rt.steps = n",
                *indent(fast, 4)]

    def give_back(self, cost: str) -> list[str]:
        """Steps charged at once for statements that did not run after all (a loop test that was false)."""
        if not self.counting:
            return []
        return [f"rt.steps -= {cost}"]

    def unless_raises(self, body: list[str], cost: str) -> list[str]:
        """`body`; when it raises, the `cost` steps charged at once for what comes after it are given back
        before the error goes on, so the count is that of charging each statement when it starts."""
        if not self.counting:
            return body
        return ["try:", *indent(body, 4), "except BaseException:", f"    rt.steps -= {cost}", "    raise"]

    def if_raises(self, body: list[str], cost: str, span: str = "span") -> list[str]:
        """`body`, which runs before a charge of `cost` it was merged with; when it raises, that charge is
        made first, as if it had been made before `body` ran."""
        if not self.counting:
            return body
        return ["try:", *indent(body, 4), "except BaseException:", *indent(self.now(cost, span), 4), "    raise"]
