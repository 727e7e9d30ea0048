"""Syntax: source text to a typed AST (grammar, transformer, spans, unparser)."""
