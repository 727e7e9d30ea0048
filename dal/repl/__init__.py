"""The interactive REPL (`dal repl`) and the Pygments lexer for DAL.

Kept import-free: Pygments loads `dal.repl.lexer` through its entry point, and that must not pull
in prompt-toolkit or the interpreter.
"""
