"""Build DAL's parser tables from `grammar/dal.lark` with Lark, and write them as a Python module.

`dal run` must start fast, and importing Lark and loading its grammar machinery costs more than the
rest of a one-line run. So Lark stays the grammar's compiler and its checker (LALR, strict: no
conflicts, no terminal collisions), but it runs here, when the grammar changes, instead of in every
process: this module extracts what Lark's LALR parser and basic lexer use at parse time — the
terminals in match order, the keywords a NAME turns into, the action table, the tree-building
rules and the states that open a rule (for the nesting limit) — and `python -m dal.syntax.tablegen`
writes them to `dal/syntax/lalr_tables.py`, which
`dal.syntax.lalr` drives. The tests rebuild the tables and compare them with the shipped module.

States are renumbered breadth-first from the start rules, and rules are sorted, so the same grammar
always yields the same file whatever order Lark's sets iterate in.
"""

from __future__ import annotations

import pprint
import sys
from pathlib import Path
from typing import Any

from dal.core.paths import grammar_path

TABLES_PATH = Path(__file__).resolve().parent / "lalr_tables.py"
STARTS = ("start", "repl_expr")


POSSESSIVE = ")*+"


def greedy_twin(grammar: str) -> str:
    """`grammar` with its possessive groups `(...)*+` made greedy `(...)*`."""
    return grammar.replace(POSSESSIVE, ")*")


def build_tables(grammar: str) -> dict[str, Any]:
    """The parse-time data of `grammar`: plain lists, dicts and strings, ready to be written as Python."""
    from lark import Lark
    from lark.lexer import PatternStr, _create_unless
    from lark.parsers.lalr_analysis import LALR_Analyzer, Shift

    lark = Lark(
        grammar,
        parser="lalr",
        lexer="basic",
        strict=True,  # conflicts and colliding terminals are errors, here rather than at run time
        keep_all_tokens=True,
        maybe_placeholders=False,
        start=list(STARTS),
    )
    # Strict mode finds colliding terminals with interegular, which cannot read a possessive quantifier
    # (STRING's `*+`: a greedy group keeps a backtracking entry per character, some 200 bytes each, so
    # a 10 MB string literal took 2 GB) and skips such a terminal with only a logged warning. Its greedy
    # twin matches the same texts (tests/language/test_parser_tables.py), so the check runs on that.
    if POSSESSIVE in grammar:
        Lark(greedy_twin(grammar), parser="lalr", lexer="basic", strict=True, start=list(STARTS))
    lexer = lark.parser.lexer
    if lexer.g_regex_flags or any(t.pattern.flags for t in lexer.terminals):
        raise ValueError("the table generator does not support regex flags on terminals")

    # The lexer: Lark's basic lexer tries the terminals in this order and keeps the first that
    # matches; a string terminal that a regex terminal also matches (a keyword and NAME) is found
    # by matching the regex and looking the text up.
    scanned, unless = _create_unless(lexer.terminals, 0, lexer.re, False)
    terminals = [(str(t.name), t.pattern.to_regexp()) for t in scanned]
    keywords = {
        str(name): {t.pattern.value: str(t.name) for t in cb.scanner.terminals if isinstance(t.pattern, PatternStr)}
        for name, cb in sorted(unless.items())
    }

    # The table again, with each state as its LR(0) items (Lark's debug form), to see what it opens.
    analyzer = LALR_Analyzer(lark.parser.parser.parser_conf, debug=True, strict=True)
    analyzer.compute_lalr()
    table = analyzer.parse_table
    rule_objs = sorted(
        {arg for actions in table.states.values() for action, arg in actions.values() if action is not Shift},
        key=lambda r: (r.origin.name, [s.name for s in r.expansion], r.alias or ""),
    )
    rule_index = {r: i for i, r in enumerate(rule_objs)}
    # A rule is (origin, number of symbols, callback name, expand1, indices of children to splice):
    # - callback None: an inline `_rule`, whose children Lark splices into its parent's;
    # - expand1: a `?rule` without an alias, replaced by its only child when it has one.
    rules = []
    for r in rule_objs:
        origin = str(r.origin.name)
        inline = origin.startswith("_")
        callback = None if inline else str(r.alias or r.options.template_source or origin)
        splice = [i for i, s in enumerate(r.expansion) if not s.is_term and s.name.startswith("_")]
        rules.append((origin, len(r.expansion), callback, bool(r.options.expand1 and not r.alias), splice))

    # Renumber states breadth-first from the start states, following sorted symbols.
    order: list[Any] = []
    seen: dict[Any, int] = {}
    queue = [table.start_states[s] for s in STARTS]
    for state in queue:
        if state in seen:
            continue
        seen[state] = len(order)
        order.append(state)
        for sym in sorted(table.states[state]):
            action, arg = table.states[state][sym]
            if action is Shift:
                queue.append(arg)
    if len(order) != len(table.states):
        raise ValueError("unreachable parser states")
    # An action is an int: a shift to state n is n, a reduce by rule i is -1 - i.
    states = []
    for state in order:
        actions = {}
        for sym in sorted(table.states[state]):
            action, arg = table.states[state][sym]
            actions[str(sym)] = seen[arg] if action is Shift else -1 - rule_index[arg]
        states.append(actions)

    # The states a rule's first terminal was just shifted into (`(` of a call, `+` of a sum, `{` of a
    # block...), each with the rule's callback: the parse is then inside that rule until it is reduced.
    # A state whose items are of different callbacks, or further along a rule, opens nothing.
    opens = {}
    for number, state in enumerate(order):
        kernel = [item for item in state if item.index > 0]
        names = set()
        for item in kernel:
            first = next((i for i, sym in enumerate(item.rule.expansion) if sym.is_term), None)
            names.add(str(item.rule.alias or item.rule.origin.name) if item.index == (first or 0) + 1
                      and first is not None and not item.rule.origin.name.startswith("_") else None)
        if len(names) == 1 and None not in names:
            opens[number] = names.pop()

    return {
        "GRAMMAR": grammar,
        "TERMINALS": terminals,
        "KEYWORDS": keywords,
        "IGNORE": sorted(map(str, lexer.ignore_types)),
        "NEWLINE_TYPES": sorted(map(str, lexer.newline_types)),
        "RULES": rules,
        "STATES": states,
        "OPENS": opens,
        "START_STATES": {s: seen[table.start_states[s]] for s in STARTS},
        "END_STATES": {s: seen[table.end_states[s]] for s in STARTS},
    }


def render(tables: dict[str, Any]) -> str:
    """The tables as the source of a Python module."""
    out = [
        '"""DAL\'s LALR parser tables. Generated from grammar/dal.lark by `python -m dal.syntax.tablegen`:',
        "do not edit by hand; regenerate after changing the grammar (a test fails until you do).",
        '"""',
        "",
    ]
    for name, value in tables.items():
        out.append(f"{name} = {pprint.pformat(value, width=110, sort_dicts=False)}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print("usage: python -m dal.syntax.tablegen [--check]\n\n"
              f"Regenerate {TABLES_PATH.name} from {grammar_path()}; --check only reports whether it is current.")
        return 0
    source = render(build_tables(grammar_path().read_text(encoding="utf-8")))
    current = TABLES_PATH.read_text(encoding="utf-8") if TABLES_PATH.exists() else ""
    if args[:1] == ["--check"]:
        if current != source:
            print(f"{TABLES_PATH} is out of date: run python -m dal.syntax.tablegen", file=sys.stderr)
            return 1
        print(f"{TABLES_PATH.name} is current")
        return 0
    if current != source:
        TABLES_PATH.write_text(source, encoding="utf-8")
        print(f"wrote {TABLES_PATH}")
    else:
        print(f"{TABLES_PATH.name} is already current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
