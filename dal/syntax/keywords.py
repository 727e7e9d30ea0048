"""The reserved words of DAL, shared by the parser's diagnostics, the formatter and the REPL."""

KEYWORDS: tuple[str, ...] = (
    "let", "fn", "if", "else", "while", "for", "in", "break", "continue", "return",
    "and", "or", "not", "true", "false", "null", "param",
)
