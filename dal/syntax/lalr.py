"""A table-driven LALR(1) parser and lexer: runs the tables `dal.syntax.tablegen` extracts from Lark.

It behaves as Lark's LALR parser with its basic lexer, `keep_all_tokens=True` and a `transformer=`:
the same tokens with the same positions, the same callbacks called with the same children, the
same errors at the same places. Lark itself is not imported, which is most of a cold start's
saving. The tests check the shipped tables against the grammar and this parser against Lark.
Given `nesting` and `max_depth` it also refuses text nested deeper than that (`NestedTooDeeply`),
an error of DAL's that Lark does not have (tests/language/test_nesting.py checks it against
the depth of Lark's own tree).
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Collection


class Token:
    """A terminal with its text and where it is: 1-based lines and columns, 0-based offsets."""

    __slots__ = ("type", "value", "start_pos", "line", "column", "end_line", "end_column", "end_pos")

    def __init__(self, type: str, value: str, start_pos: int, line: int, column: int,
                 end_line: int | None, end_column: int | None, end_pos: int | None) -> None:
        self.type = type
        self.value = value
        self.start_pos = start_pos
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column
        self.end_pos = end_pos

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r}, line={self.line}, column={self.column})"


class UnexpectedInput(Exception):
    """The text is not in the grammar. `pos_in_stream`, `line` and `column` say where."""

    pos_in_stream: int
    line: int
    column: int


class UnexpectedCharacters(UnexpectedInput):
    """No terminal matches at this point of the text."""

    def __init__(self, text: str, pos: int, line: int, column: int, allowed: set[str]) -> None:
        self.pos_in_stream, self.line, self.column = pos, line, column
        self.char = text[pos]
        self.allowed = allowed
        super().__init__(f"no terminal matches {self.char!r} at line {line}, column {column}")


class NestedTooDeeply(UnexpectedInput):
    """The token that opens a level of nesting past `max_depth` (see `Parser.parse`)."""

    def __init__(self, token: Token, max_depth: int) -> None:
        self.token, self.max_depth = token, max_depth
        self.pos_in_stream, self.line, self.column = token.start_pos, token.line, token.column
        super().__init__(f"nested more than {max_depth} deep at line {token.line}, column {token.column}")


class UnexpectedToken(UnexpectedInput):
    """A token the grammar does not allow here; `expected` names the terminals it would take."""

    def __init__(self, token: Token, expected: set[str], state: int) -> None:
        self.token, self.expected, self.state = token, expected, state
        self.pos_in_stream, self.line, self.column = token.start_pos, token.line, token.column
        super().__init__(f"unexpected {token.type} {token.value!r} at line {token.line}, column {token.column}")


def shipped_tables() -> dict[str, Any]:
    """The tables in dal/syntax/lalr_tables.py, as generated."""
    from dal.syntax import lalr_tables

    return {k: v for k, v in vars(lalr_tables).items() if k.isupper()}


def load_tables() -> dict[str, Any]:
    """The shipped tables, or tables built now (with Lark) if the grammar changed since they were made."""
    from dal.core.paths import grammar_path

    shipped = shipped_tables()
    try:
        grammar = grammar_path().read_text(encoding="utf-8")
    except OSError:
        return shipped  # an install without the grammar file: the tables are all the parser needs
    if grammar == shipped["GRAMMAR"]:
        return shipped
    # A grammar edited in a checkout: never parse with stale tables. Slower, and said once.
    from dal.syntax.tablegen import build_tables

    print("dal: grammar/dal.lark changed since dal/syntax/lalr_tables.py was generated; building the parser "
          "now (regenerate it with `python -m dal.syntax.tablegen`)", file=sys.stderr)
    return build_tables(grammar)


class Parser:
    """Parses text from a start rule, calling `callbacks.<rule name>(children)` as each rule is reduced.

    With `callbacks=None` it only recognises: every rule's value is None, and errors are the same.
    """

    def __init__(self, tables: dict[str, Any], callbacks: Any = None, *, nesting: Collection[str] = (),
                 max_depth: int | None = None) -> None:
        self._scan = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in tables["TERMINALS"])).match
        self._keywords = tables["KEYWORDS"]
        self._ignore = frozenset(tables["IGNORE"])
        self._newline_types = frozenset(tables["NEWLINE_TYPES"])
        self._allowed = {name for name, _ in tables["TERMINALS"]} - self._ignore
        self._states = tables["STATES"]
        self._start_states = tables["START_STATES"]
        self._end_states = tables["END_STATES"]
        self.starts = tuple(self._start_states)

        def nothing(children: list[Any]) -> None:
            return None

        rules = []
        for origin, size, name, expand1, splice in tables["RULES"]:
            if name is None:
                fn = None
            elif callbacks is None:
                fn, expand1 = nothing, False
            else:
                fn = getattr(callbacks, name, None)
                if fn is None:
                    # `?rule: one_symbol` always has its one child: its callback is never called.
                    if not (expand1 and size == 1 and not splice):
                        raise TypeError(f"the parser's callbacks have no method for rule {name!r}")
                    fn = nothing
            rules.append((origin, size, fn, expand1, frozenset(splice), 1 if name in nesting else 0))
        self._rules = rules
        self.max_depth = max_depth
        # 1 for a state just past the first terminal of a nesting rule (the `(` of a call, the `+` of a
        # sum): the parse is inside one more level until that rule is reduced.
        opens = tables.get("OPENS", {})
        self._opens = [1 if opens.get(i) in nesting else 0 for i in range(len(self._states))]

    def parse(self, text: str, start: str = "start") -> Any:
        """The value of the start rule for `text`. Raises UnexpectedCharacters / UnexpectedToken, and
        NestedTooDeeply when `max_depth` is set and the text nests deeper.

        The depth of a token is the number of nesting rules (`nesting`) whose text holds it. Two
        counts bound it from below as the parse goes, and the first to pass `max_depth` is the error:
        - `levels[i]`: the nesting rules open at state i of the stack, each a state just past the
          rule's first terminal; they will hold every token still to come until they are reduced;
        - `heights[i]`: how many nesting rules deep value i is, which with the levels below it
          covers a left-recursive chain (`a + b + c` is reduced link by link, opening nothing).
        Neither can pass the depth, and at the end the start rule's height is the deepest one, so
        source within the limit is never refused and source beyond it is always; the error names
        the token that opened the level past it (a bracket, an operator, a `{`)."""
        scan, states, rules = self._scan, self._states, self._rules
        keywords, ignore, newline_types = self._keywords, self._ignore, self._newline_types
        end_state = self._end_states[start]
        state_stack = [self._start_states[start]]
        value_stack: list[Any] = []
        pos, line, line_start, n = 0, 1, 0, len(text)
        last: Token | None = None
        max_depth = self.max_depth
        deep = max_depth is not None
        opens = self._opens
        levels = [0]
        heights: list[int] = []

        while True:
            # The next token that is not ignored, or the end of the text.
            tok = None
            while pos < n:
                m = scan(text, pos)
                if m is None:
                    raise UnexpectedCharacters(text, pos, line, pos - line_start + 1, set(self._allowed))
                type_ = m.lastgroup
                value = m.group()
                start_line, column = line, pos - line_start + 1
                if type_ in newline_types:
                    newlines = value.count("\n")
                    if newlines:
                        line += newlines
                        line_start = pos + value.rindex("\n") + 1
                end = m.end()
                if type_ not in ignore:
                    kinds = keywords.get(type_)
                    if kinds is not None:
                        type_ = kinds.get(value, type_)
                    tok = Token(type_, value, pos, start_line, column, line, end - line_start + 1, end)
                    pos = end
                    break
                pos = end
            is_end = tok is None
            if is_end:
                if last is None:  # an empty text: the end has a start but no end (as in Lark)
                    tok = Token("$END", "", 0, 1, 1, None, None, None)
                else:
                    tok = Token("$END", "", last.start_pos, last.line, last.column, last.end_line,
                                last.end_column, last.end_pos)
            else:
                last = tok
            ttype = tok.type

            # Reduce as long as the table says so, then shift the token (or accept at the end).
            while True:
                state = state_stack[-1]
                action = states[state].get(ttype)
                if action is None:
                    raise UnexpectedToken(tok, {s for s in states[state] if s.isupper()}, state)
                if action >= 0:
                    state_stack.append(action)
                    value_stack.append(tok)
                    if deep:
                        if opens[action]:
                            level = levels[-1] + 1
                            if level > max_depth:  # type: ignore[operator]
                                raise NestedTooDeeply(tok, max_depth)  # type: ignore[arg-type]
                            levels.append(level)
                        else:
                            levels.append(levels[-1])
                        heights.append(0)
                    break
                origin, size, fn, expand1, splice, nests = rules[-1 - action]
                if size:
                    children = value_stack[-size:]
                    del value_stack[-size:]
                    del state_stack[-size:]
                else:
                    children = []
                if deep:
                    if size == 1:
                        height = heights[-1] + nests
                        level = levels[-2]
                        heights[-1] = height
                        levels[-1] = level  # the state after a rule opens nothing
                    else:
                        if size:
                            height = max(heights[-size:]) + nests
                            del heights[1 - size:]
                            del levels[1 - size:]
                            heights[-1] = height
                        else:
                            height = nests
                            heights.append(height)
                            levels.append(0)
                        level = levels[-1] = levels[-2]
                    if nests and level + height > max_depth:  # type: ignore[operator]
                        anchor = next((c for c in children if isinstance(c, Token)), tok)
                        raise NestedTooDeeply(anchor, max_depth)  # type: ignore[arg-type]
                if splice:
                    children = _spliced(children, splice)
                if fn is None:
                    value = children
                elif expand1 and len(children) == 1:
                    value = children[0]
                else:
                    value = fn(children)
                state_stack.append(states[state_stack[-1]][origin])
                value_stack.append(value)
                if is_end and state_stack[-1] == end_state:
                    return value_stack[-1]


def _spliced(children: list[Any], splice: frozenset[int]) -> list[Any]:
    """`children` with the lists of the inline rules at `splice` spread in place.

    An inline rule's list is built here and read only by its parent, so the first one is extended in
    place rather than copied (as Lark does): `x*` reduces as `_star: _star x`, and copying the list
    at each reduction made a script of n statements cost n**2 / 2 copies."""
    if 0 in splice:
        flat = children[0]
        rest = children[1:]
        first = 1
    else:
        flat, rest, first = [], children, 0
    for i, child in enumerate(rest, first):
        if i in splice:
            flat += child
        else:
            flat.append(child)
    return flat
