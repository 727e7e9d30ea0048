"""The four benchmark programs, written once per language at a given size.

Imported by `bench/run.py` (DAL, CPython) and by `bench/peer.py` inside a peer's own venv, so it must
not import `dal`. Sizes are parameters: the peers are slow enough that `run.py` measures them at a
fraction of the full size, and always against CPython running the same text at the same size.

The CPython reference is the DAL script's own shape: module-level code run with `exec`, as
`python script.py` runs it (module-level names live in a dict, as DAL's top-level names do).
"""

from __future__ import annotations

FULL = {"fib": 24, "while": 1_000_000, "article": 200_000, "strings": 100_000}

TITLES = {
    "fib": "recursive fib({n})",
    "while": "while loop to {n:,}",
    "article": "article loop, {n:,} updates",
    "strings": "{n:,} string concatenations",
}


def fib_calls(n: int) -> int:
    """How many calls the recursive fib(n) makes (the Starlark variant makes as many)."""
    a, b = 1, 1  # calls(0), calls(1)
    for _ in range(n - 1):
        a, b = b, a + b + 1
    return b if n >= 1 else a


def dal(name: str, n: int) -> str:
    if name == "fib":
        return f"""
fn fib(n) {{
    if n < 2 {{ return n }}
    return fib(n - 1) + fib(n - 2)
}}
let r = fib({n})
"""
    if name == "while":
        return f"""
let total = 0
let i = 0
while i < {n} {{
    total = total + i % 7
    i = i + 1
}}
"""
    if name == "article":
        # the first article's state and its own `fn record`, the check repeated n times
        return f"""
let state = {{"attempt": 0, "max_attempts": {n}, "status": "pending", "evidence": []}}
fn record(state, operation, outcome) {{
    state.evidence = append(state.evidence, {{"attempt": state.attempt, "operation": operation, "outcome": outcome}})
    return state
}}
while state.status == "pending" and state.attempt < state.max_attempts {{
    state.attempt = state.attempt + 1
    state = record(state, "check_destination", "missing")
}}
"""
    if name == "strings":
        return f"""
let s = ""
let i = 0
while i < {n} {{
    s = s + "x"
    i = i + 1
}}
"""
    raise KeyError(name)


def python(name: str, n: int) -> str:
    """The same program in Python (also what asteval runs)."""
    if name == "fib":
        return f"""
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
r = fib({n})
"""
    if name == "while":
        return f"""
total = 0
i = 0
while i < {n}:
    total = total + i % 7
    i = i + 1
"""
    if name == "article":
        return f"""
state = {{"attempt": 0, "max_attempts": {n}, "status": "pending", "evidence": []}}
def record(state, operation, outcome):
    state["evidence"].append({{"attempt": state["attempt"], "operation": operation, "outcome": outcome}})
    return state
while state["status"] == "pending" and state["attempt"] < state["max_attempts"]:
    state["attempt"] = state["attempt"] + 1
    state = record(state, "check_destination", "missing")
"""
    if name == "strings":
        return f"""
s = ""
i = 0
while i < {n}:
    s = s + "x"
    i = i + 1
"""
    raise KeyError(name)


def python_in_function(name: str, n: int) -> str:
    """The Python program as the body of a function: locals instead of module globals, CPython's best."""
    body = "".join(f"    {line}\n" if line else "\n" for line in python(name, n).splitlines())
    return f"def main():\n{body}\nmain()\n"


def starlark(name: str, n: int) -> str:
    """The same work in Starlark, which has no `while` and forbids recursion.

    fib: as many calls as fib(n) makes, to a non-recursive function with fib's body; the loops are
    `for` over a range. The text is also valid Python: CPython runs it for the ratio.
    """
    if name == "fib":
        return f"""
def fib(n):
    if n < 2:
        return n
    return (n - 1) + (n - 2)
r = 0
for k in range({fib_calls(n)}):
    r = fib(k % {n + 1})
"""
    if name == "while":
        return f"""
total = 0
for i in range({n}):
    total = total + i % 7
"""
    if name == "article":
        return f"""
state = {{"attempt": 0, "max_attempts": {n}, "status": "pending", "evidence": []}}
def record(state, operation, outcome):
    state["evidence"].append({{"attempt": state["attempt"], "operation": operation, "outcome": outcome}})
    return state
for _ in range({n}):
    if not (state["status"] == "pending" and state["attempt"] < state["max_attempts"]):
        break
    state["attempt"] = state["attempt"] + 1
    state = record(state, "check_destination", "missing")
"""
    if name == "strings":
        return f"""
s = ""
for i in range({n}):
    s = s + "x"
"""
    raise KeyError(name)
