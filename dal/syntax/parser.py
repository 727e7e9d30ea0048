"""Source text to AST: the LALR parser of grammar/dal.lark, one builder, and friendly syntax errors.

The builder's methods run as the parser reduces each rule, so no parse tree is built; every token
is kept so that each node's span comes straight from its first and last token. The parser runs
tables generated from the grammar by Lark (`dal.syntax.tablegen`), so a run never imports Lark.
The parser's exceptions become `DalSyntaxError` here and nowhere else.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from typing import Any

from dal.core.errors import DalSyntaxError
from dal.core.gcpause import gc_paused
from dal.syntax import ast
from dal.syntax.keywords import KEYWORDS
from dal.syntax.lalr import (
    NestedTooDeeply,
    Parser,
    Token,
    UnexpectedCharacters,
    UnexpectedInput,
    UnexpectedToken,
    load_tables,
)

Span = ast.Span

# DAL integers have arbitrary precision: they convert to and from text at any length.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)


def _tok_span(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line, tok.end_column, tok.start_pos, tok.end_pos)


def _span_of(item: Any) -> Span:
    if isinstance(item, Token):
        return _tok_span(item)
    return item.span


def _join(first: Any, last: Any) -> Span:
    a, b = _span_of(first), _span_of(last)
    return Span(a.line, a.column, b.end_line, b.end_column, a.start, b.end)


def _is_tok(item: Any, text: str | None = None) -> bool:
    return isinstance(item, Token) and (text is None or str(item) == text)


class _Bounds:
    """The `a:b` of a slice, on its way to the `index` rule that holds it."""

    __slots__ = ("start", "stop")

    def __init__(self, start: Any, stop: Any) -> None:
        self.start, self.stop = start, stop


_TYPE_WORD: dict[Any, str] = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
                              str: "a string", int: "an integer", float: "a float", bool: "a boolean"}
_DEFAULT_TYPES = {"str": (str,), "int": (int,), "float": (float, int), "bool": (bool,)}


class _Builder:
    """Builds AST nodes from all-token children lists. Punctuation is filtered where it is noise."""

    def _error(self, message: str, span: Span, help: str | None = None) -> DalSyntaxError:
        return DalSyntaxError(message, span, help=help)

    # --- statements ---------------------------------------------------------------------------

    def start(self, ch: list[Any]) -> ast.Program:
        body = tuple(c for c in ch if c is not None)
        if body:
            span = _join(body[0], body[-1])
        else:
            span = Span(1, 1, 1, 1, 0, 0)
        return ast.Program(body, span=span)

    def block(self, ch: list[Any]) -> ast.Block:
        return ast.Block(tuple(c for c in ch[1:-1] if c is not None), span=_join(ch[0], ch[-1]))

    def param_decl(self, ch: list[Any]) -> ast.Param:
        name, kind = str(ch[1]), str(ch[3])
        if kind not in ast.PARAM_TYPES:
            raise self._error(f"unknown argument type `{kind}`", _tok_span(ch[3]),
                              help="an argument is a str, an int, a float or a bool")
        if len(ch) < 6:
            return ast.Param(name, kind, None, span=_join(ch[0], ch[3]))
        value = ch[5]
        if (isinstance(value, ast.Unary) and value.op == "-" and isinstance(value.operand, ast.Literal)
                and type(value.operand.value) in (int, float)):
            default = -value.operand.value
        elif isinstance(value, ast.Literal) and value.value is not None:
            default = value.value
        else:
            raise self._error("an argument's default must be a literal: a string, a number, true or false",
                              value.span, help="compute other values from the argument after the `param` lines")
        if type(default) not in _DEFAULT_TYPES[kind]:
            raise self._error(f"the default of `{name}` must be {_TYPE_WORD[kind]}, got {_TYPE_WORD[type(default)]}",
                              value.span)
        if kind == "float":
            default = float(default)
        return ast.Param(name, kind, default, span=_join(ch[0], value), has_default=True)

    def let_stmt(self, ch: list[Any]) -> ast.Let:
        return ast.Let(str(ch[1]), ch[3], span=_join(ch[0], ch[3]))

    def assign_stmt(self, ch: list[Any]) -> ast.Assign:
        target, value = ch[0], ch[2]
        if isinstance(target, ast.Slice):
            raise self._error(
                "cannot assign to a slice",
                target.span,
                help="a slice is a new list or string; assign its items one by one (`xs[i] = e`)",
            )
        if not isinstance(target, ast.Name | ast.Field | ast.Index):
            raise self._error(
                "cannot assign to a call",
                target.span,
                help="assign to a name, a field (`m.k = e`) or an index (`xs[0] = e`)",
            )
        return ast.Assign(target, value, span=_join(target, value))

    def expr_stmt(self, ch: list[Any]) -> ast.ExprStmt:
        expr = ch[0]
        if not isinstance(expr, ast.Call):
            raise self._error(
                "this expression does nothing on its own: only a call can be a statement",
                expr.span,
                help="use `let name = ...` to keep a value, or `print(...)` to show it",
            )
        return ast.ExprStmt(expr, span=expr.span)

    def if_stmt(self, ch: list[Any]) -> ast.If:
        branches = [(ch[1], ch[2])]
        orelse = None
        for part in ch[3:]:
            if part is None:
                continue
            if isinstance(part, tuple):
                branches.append(part)
            else:
                orelse = part
        last = orelse if orelse is not None else branches[-1][1]
        return ast.If(tuple(branches), orelse, span=_join(ch[0], last))

    def elif_(self, ch: list[Any]) -> tuple[Any, ast.Block]:
        return (ch[2], ch[3])

    def else_clause(self, ch: list[Any]) -> ast.Block:
        return ch[1]

    def while_stmt(self, ch: list[Any]) -> ast.While:
        return ast.While(ch[1], ch[2], span=_join(ch[0], ch[2]))

    def for_stmt(self, ch: list[Any]) -> ast.For:
        return ast.For(str(ch[1]), ch[3], ch[4], span=_join(ch[0], ch[4]))

    def _params(self, items: Any) -> tuple[str, ...]:
        if items is None:
            return ()
        names = [t for t in items if _is_tok(t) and t.type == "NAME"]
        return tuple(str(t) for t in names)

    def fn_def(self, ch: list[Any]) -> ast.FnDef:
        params = self._params(ch[3]) if len(ch) == 6 else ()
        return ast.FnDef(str(ch[1]), params, ch[-1], span=_join(ch[0], ch[-1]))

    def params(self, ch: list[Any]) -> list[Any]:
        return ch

    def break_stmt(self, ch: list[Any]) -> ast.Break:
        return ast.Break(span=_tok_span(ch[0]))

    def continue_stmt(self, ch: list[Any]) -> ast.Continue:
        return ast.Continue(span=_tok_span(ch[0]))

    def empty_stmt(self, ch: list[Any]) -> None:
        return None

    def return_stmt(self, ch: list[Any]) -> ast.Return:
        rest = [c for c in ch[1:] if not _is_tok(c, ";") and c is not None]
        value = rest[0] if rest else None
        return ast.Return(value, span=_join(ch[0], value if value is not None else ch[0]))

    # --- expressions --------------------------------------------------------------------------

    def repl_expr(self, ch: list[Any]) -> Any:
        return ch[0]

    def name(self, ch: list[Any]) -> ast.Name:
        return ast.Name(str(ch[0]), span=_tok_span(ch[0]))

    def call(self, ch: list[Any]) -> ast.Call:
        args = ch[2] if len(ch) == 4 else []
        return ast.Call(ch[0], tuple(args), span=_join(ch[0], ch[-1]))

    def args(self, ch: list[Any]) -> list[Any]:
        return [c for c in ch if not _is_tok(c, ",")]

    def field(self, ch: list[Any]) -> ast.Field:
        return ast.Field(ch[0], str(ch[2]), span=_join(ch[0], ch[2]))

    def index(self, ch: list[Any]) -> ast.Index | ast.Slice:
        sub = ch[2]
        if type(sub) is _Bounds:
            return ast.Slice(ch[0], sub.start, sub.stop, span=_join(ch[0], ch[3]))
        return ast.Index(ch[0], sub, span=_join(ch[0], ch[3]))

    def slice_bounds(self, ch: list[Any]) -> _Bounds:
        colon = next(i for i, c in enumerate(ch) if _is_tok(c, ":"))
        return _Bounds(ch[colon - 1] if colon > 0 else None, ch[colon + 1] if colon + 1 < len(ch) else None)

    def or_op(self, ch: list[Any]) -> ast.Logical:
        return ast.Logical("or", ch[0], ch[2], span=_join(ch[0], ch[2]))

    def and_op(self, ch: list[Any]) -> ast.Logical:
        return ast.Logical("and", ch[0], ch[2], span=_join(ch[0], ch[2]))

    def not_op(self, ch: list[Any]) -> ast.Unary:
        return ast.Unary("not", ch[1], span=_join(ch[0], ch[1]))

    def neg(self, ch: list[Any]) -> ast.Unary:
        return ast.Unary("-", ch[1], span=_join(ch[0], ch[1]))

    def compare(self, ch: list[Any]) -> ast.Binary:
        return ast.Binary(str(ch[1]), ch[0], ch[2], span=_join(ch[0], ch[2]))

    binary = compare

    def paren(self, ch: list[Any]) -> Any:
        return ch[1]

    def int_lit(self, ch: list[Any]) -> ast.Literal:
        tok = ch[0]
        try:
            value = int(str(tok))
        except ValueError:
            raise self._error("integer literal has too many digits", _tok_span(tok)) from None
        return ast.Literal(value, span=_tok_span(tok))

    def float_lit(self, ch: list[Any]) -> ast.Literal:
        tok = ch[0]
        value = float(str(tok))
        if value in (float("inf"), float("-inf")):
            raise self._error("float literal is out of range", _tok_span(tok))
        return ast.Literal(value, span=_tok_span(tok))

    def string_lit(self, ch: list[Any]) -> ast.Literal:
        # strict=False: the lexer let a raw tab through (and no other control character)
        return ast.Literal(json.loads(str(ch[0]), strict=False), span=_tok_span(ch[0]))

    def true_lit(self, ch: list[Any]) -> ast.Literal:
        return ast.Literal(True, span=_tok_span(ch[0]))

    def false_lit(self, ch: list[Any]) -> ast.Literal:
        return ast.Literal(False, span=_tok_span(ch[0]))

    def null_lit(self, ch: list[Any]) -> ast.Literal:
        return ast.Literal(None, span=_tok_span(ch[0]))

    def list_lit(self, ch: list[Any]) -> ast.ListLit:
        items = [c for c in ch[1:-1] if c is not None and not _is_tok(c)]
        return ast.ListLit(tuple(items), span=_join(ch[0], ch[-1]))

    def map_lit(self, ch: list[Any]) -> ast.MapLit:
        entries = [c for c in ch[1:-1] if isinstance(c, tuple)]
        seen: set[str] = set()
        for key, _value, key_span in entries:
            if key in seen:
                raise self._error(f"duplicate key {json.dumps(key)} in map literal", key_span)
            seen.add(key)
        return ast.MapLit(tuple((k, v) for k, v, _ in entries), span=_join(ch[0], ch[-1]))

    def entry(self, ch: list[Any]) -> tuple[str, Any, Span]:
        return (json.loads(str(ch[0]), strict=False), ch[2], _tok_span(ch[0]))

    def fn_expr(self, ch: list[Any]) -> ast.FnExpr:
        params = self._params(ch[2]) if len(ch) == 5 else ()
        return ast.FnExpr(params, ch[-1], span=_join(ch[0], ch[-1]))


# The parser calls the callback of rule `elif` by its name; `elif` is fine as a method name via setattr.
setattr(_Builder, "elif", _Builder.elif_)  # noqa: B010


@lru_cache(maxsize=1)
def _tables() -> dict[str, Any]:
    return load_tables()


# How deeply source may nest. Every later stage walks the tree recursively, and so does running it, so
# the limit is applied here, once, for `dal check`, `dal run`, `dal fmt`, the REPL and the API alike:
# source nested deeper is a syntax error before anything runs. At this depth resolving, compiling and
# running take well under a tenth of the worker thread's recursion limit (dal/core/stack.py); see
# docs/language.md ("Limits").
MAX_NESTING = 1000
# The rules that are a level of nesting: each block, parenthesis, list, map, call, index, field, unary
# and binary operator. A left-associative chain (`a + b + c`, `x.a.b`, `f()()`) is one level per link,
# as its tree is.
NESTING_RULES = frozenset({
    "block", "paren", "list_lit", "map_lit", "call", "index", "field", "neg", "not_op", "binary", "compare",
    "and_op", "or_op",
})


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(_tables(), _Builder(), nesting=NESTING_RULES, max_depth=MAX_NESTING)


@lru_cache(maxsize=1)
def recognizer() -> Parser:
    """A parser that only checks syntax (no AST, no AST-level errors): the REPL asks it whether an
    input is complete. It raises the same `UnexpectedInput` errors as the real parser."""
    return Parser(_tables(), None)


def parse_expression(source: str, filename: str = "<string>") -> ast.Expr:
    """Parse a single expression (the REPL echoes its value)."""
    return parse(source, filename, start="repl_expr")  # type: ignore[return-value]


def parse(source: str, filename: str = "<string>", *, start: str = "start") -> ast.Program:
    """Parse a whole script. Raises DalSyntaxError, located, for any malformed input."""
    # A byte-order mark (some editors save one) reads as a space: offsets and columns stay the same.
    text = " " + source[1:] if source.startswith("\ufeff") else source
    try:
        with gc_paused():
            return _parser().parse(text, start=start)
    except DalSyntaxError as e:
        e.filename, e.source = filename, source
        raise
    except UnexpectedInput as e:
        raise _friendly(e, source, filename) from None
    except RecursionError:
        raise DalSyntaxError(
            "the script is nested too deeply to parse", Span(1, 1, 1, 2, 0, 1),
            filename=filename, source=source,
        ) from None


_PUNCT = {
    "LBRACE": "{", "RBRACE": "}", "LPAR": "(", "RPAR": ")", "LSQB": "[", "RSQB": "]",
    "COMMA": ",", "COLON": ":", "SEMICOLON": ";", "DOT": ".", "EQUAL": "=", "MINUS": "-",
    "COMP_OP": "a comparison", "PLUS": "+", "MUL_OP": "* / %", "NAME": "a name",
    "INT": "a number", "FLOAT": "a number", "STRING": "a string", "$END": "the end of the script",
}
_EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LSQB", "LBRACE", "LPAR", "MINUS", "NOT", "TRUE", "FALSE",
               "NULL", "FN"}


def _describe_expected(expected: set[str]) -> str:
    if expected & _EXPR_START and len(expected & _EXPR_START) >= 5:
        rest = sorted(_PUNCT.get(t, t.lower()) for t in expected - _EXPR_START)
        return "an expression" + (" or " + ", ".join(f"`{r}`" if len(r) <= 2 else r for r in rest) if rest and
                                  len(rest) <= 3 else "")
    names = []
    for t in sorted(expected):
        text = _PUNCT.get(t)
        if text is None:
            text = t.lower()
        names.append(f"`{text}`" if len(text) <= 2 or text in KEYWORDS else text)
    if len(names) > 6:
        names = names[:6] + ["..."]
    return ", ".join(names)


_CLOSERS = {"{": "}", "[": "]", "(": ")"}
# Tokens that can only begin a new item: after a complete expression inside `(` or `[`, a comma is missing.
_ITEM_START = {"INT", "FLOAT", "STRING", "NAME", "LBRACE", "TRUE", "FALSE", "NULL", "FN", "NOT"}


def _unclosed(source: str, upto: int) -> tuple[str, Span] | None:
    """Find the innermost bracket left open before offset `upto`, skipping strings and comments."""
    stack: list[tuple[str, int, int, int]] = []
    line, col, i, n = 1, 1, 0, min(upto, len(source))
    while i < n:
        ch = source[i]
        if ch == "#":
            while i < n and source[i] != "\n":
                i += 1
            continue
        if ch == '"':
            j = i + 1
            while j < n and source[j] not in '"\n':
                j += 2 if source[j] == "\\" else 1
            col += j - i + 1
            i = j + 1
            continue
        if ch in _CLOSERS:
            stack.append((ch, line, col, i))
        elif ch in ")]}" and stack:
            stack.pop()
        if ch == "\n":
            line, col = line + 1, 1
        else:
            col += 1
        i += 1
    if not stack:
        return None
    ch, l, c, off = stack[-1]
    return ch, Span(l, c, l, c + 1, off, off + 1)


def _end_span(source: str) -> Span:
    """Just after the script's last character that is not whitespace (not on a blank line past it)."""
    text = source.rstrip()
    line = text.count("\n") + 1
    last = text.rsplit("\n", 1)[-1]
    col = len(last) + 1
    return Span(line, col, line, col + 1, len(text), len(text))


_JSON_ESCAPES = {"b": "\b", "f": "\f", "r": "\r"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _bad_string(source: str, off: int, err: Any) -> DalSyntaxError:
    """A string literal (opening at `off`, closed on its line) that the lexer refused: point at the escape
    or the control character that is wrong."""
    line = source.count("\n", 0, off) + 1
    col = off - source.rfind("\n", 0, off)
    i = off + 1
    while i < len(source) and source[i] not in '"\n':
        ch = source[i]
        at = Span(line, col + i - off, line, col + i - off + 1, i, i + 1)
        if ch == "\\":
            nxt = source[i + 1 : i + 2]
            if nxt == "u" and len(source) >= i + 6 and set(source[i + 2 : i + 6]) <= _HEX:
                i += 6
                continue
            if nxt and nxt in '"\\/bfnrt':
                i += 2
                continue
            shown = "\\" + nxt if nxt and nxt.isprintable() else "\\"
            return err(f"invalid string escape `{shown}`", at,
                       help=r'strings use JSON escapes: \n \t \" \\ \/ \b \f \r \uXXXX')
        if ord(ch) < 0x20 and ch != "\t":
            names = {v: k for k, v in _JSON_ESCAPES.items()}
            escape = "\\" + names[ch] if ch in names else f"\\u{ord(ch):04x}"
            return err(f"a raw control character (U+{ord(ch):04X}) in a string", at,
                       help=f"write it as an escape: {escape}")
        i += 1
    return err("invalid string literal", Span(line, col, line, col + 1, off, off + 1),  # pragma: no cover
               help=r'strings use JSON escapes: \n \t \" \\ \/ \b \f \r \uXXXX')


def _friendly(e: UnexpectedInput, source: str, filename: str) -> DalSyntaxError:
    """Turn a parser exception into a located DAL syntax error that says what to do."""

    def err(message: str, span: Span, help: str | None = None) -> DalSyntaxError:
        return DalSyntaxError(message, span, filename=filename, source=source, help=help)

    if isinstance(e, NestedTooDeeply):
        return err(
            f"nested too deeply: this is level {e.max_depth + 1:,} of nesting, and DAL allows {e.max_depth:,}",
            _tok_span(e.token),
            help="each block, parenthesis, list, map, call, index, field and operator is a level (`a + b + c` "
            "is two); move the inner part into a variable or a function",
        )
    if isinstance(e, UnexpectedCharacters):
        off = e.pos_in_stream
        span = Span(e.line, e.column, e.line, e.column + 1, off, off + 1)
        ch = source[off] if off < len(source) else ""
        if ch == '"':
            rest = source[off + 1:].split("\n", 1)[0]
            if '"' not in rest:
                return err("unterminated string", span, help='close the string with `"` on the same line')
            return _bad_string(source, off, err)
        if ch == "'":
            return err("strings use double quotes", span, help="write \"text\" instead of 'text'")
        if ch == "&" or ch == "|":
            return err(f"unexpected character {ch!r}", span, help="use `and` / `or` for logic")
        if ch == "!":
            return err("unexpected character '!'", span, help="use `not x` for negation and `!=` to compare")
        return err(f"unexpected character {ch!r}", span)

    expected = set(getattr(e, "expected", ()) or ())
    if isinstance(e, UnexpectedToken) and e.token.type == "$END":
        span = _end_span(source)
        found = _unclosed(source, len(source))
        if found is not None:
            opener, opened = found
            closer = _CLOSERS[opener]
            what = {"{": "block or map", "[": "list or index", "(": "parenthesis or call"}[opener]
            return DalSyntaxError(
                f"missing `{closer}`: the {what} opened at line {opened.line}, column {opened.column} "
                "is never closed",
                opened, filename=filename, source=source,
                help=f"add `{closer}` where it should end",
            )
        return err(f"unexpected end of the script; expected {_describe_expected(expected)}", span)

    assert isinstance(e, UnexpectedToken)
    tok = e.token
    span = _tok_span(tok)
    text = str(tok)
    if text == "=" and "COMP_OP" in expected:
        return err("`=` assigns a value; to compare, use `==`", span, help="write `a == b` in a condition")
    if text == "param" and "LET" in expected:  # where a statement could start
        return err("`param` declarations come before the script's first statement", span,
                   help="move every `param` line to the top of the script")
    if tok.type in {"PLUS", "MINUS", "MUL_OP"} and source[tok.end_pos : tok.end_pos + 1] == "=":
        return err(f"DAL has no `{text}=`", Span(tok.line, tok.column, tok.line, tok.column + 2, tok.start_pos,
                                                   tok.end_pos + 1), help=f"write `x = x {text} ...`")
    opened = _unclosed(source, tok.start_pos)
    if opened is not None and opened[0] in "([" and tok.type in _ITEM_START and "COMMA" in expected:
        closer = _CLOSERS[opened[0]]
        return err(f"expected `,` or `{closer}` before `{text}`", span,
                   help="separate items and arguments with commas")
    if tok.type in {"PLUS", "MINUS", "MUL_OP", "COMP_OP", "AND", "OR"} and "EQUAL" in expected:
        # a statement that began with a name went on as an expression: `total + 1`, `x == 1`
        return err(
            "this expression does nothing on its own: only a call can be a statement",
            span,
            help="use `let name = ...` to keep a value, `name = ...` to assign, or `print(...)` to show it",
        )
    word = re.search(r"\b(elif|elsif|elseif)\s*$", source[: tok.start_pos])
    if word:
        at = word.start(1)
        line, col = source.count("\n", 0, at) + 1, at - source.rfind("\n", 0, at)
        where = Span(line, col, line, col + len(word.group(1)), at, word.end(1))
        return err(f"DAL writes `else if`, not `{word.group(1)}`", where, help="write `} else if condition {`")
    if text == "else" and "LET" in expected:
        return err("`else` without `if`: `else` follows the `}` of an `if` block", span)
    if text in KEYWORDS and "NAME" in expected and "LET" not in expected:
        return err(f"`{text}` is a keyword and cannot be used as a name", span,
                   help=f"choose another name, e.g. `{text}_`")
    if text == "}" and "LET" in expected and "RBRACE" not in expected:
        return err("unexpected `}`: there is no open block to close", span)
    if text == "}" and expected & _EXPR_START:
        return err("expected an expression before `}`", span)
    if "RBRACE" in expected and (expected <= {"RBRACE", "SEMICOLON"} or expected <= {"RBRACE", "SEMICOLON", "$END"}):
        return err(f"unexpected `{text}` after `return`: `return` must be the last statement of its block", span)
    if tok.type == "COMP_OP" and expected & {"RBRACE", "LBRACE", "AND", "OR", "RPAR", "COMMA"}:
        return err("comparisons cannot be chained", span, help="write `a < b and b < c`")
    if tok.type in {"INT", "FLOAT", "STRING", "LPAR", "LSQB", "MINUS"} and "LET" in expected:
        return err(
            f"unexpected `{text}`: a statement must begin with a keyword or a name",
            span,
            help="an expression on its own is not a statement; did the previous line end too early?",
        )
    return err(f"unexpected `{text}`; expected {_describe_expected(expected)}", span)
