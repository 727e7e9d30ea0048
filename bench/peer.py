"""Time one peer interpreter on one program, and CPython on the same text. Runs in the peer's venv.

    python bench/peer.py asteval|starlark PROGRAM SIZE REPEAT

Prints one JSON line: {"peer": [seconds...], "cpython": [seconds...]} (CPU time of this process),
or {"error": "..."}. Does not import `dal`: the peer's venv has only the peer.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import programs  # noqa: E402 - found through the path set just above


def _asteval(src: str) -> Any:
    import asteval

    def run() -> None:
        interp = asteval.Interpreter(max_statement_length=10**7)
        interp(src, raise_errors=True)

    return run


def _starlark(src: str) -> Any:
    import starlark

    compiled = starlark.compile(src, filename="bench.star", mode="file")

    def run() -> None:
        compiled.exec()

    return run


def main() -> None:
    peer, name, size, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    try:
        src = programs.python(name, size) if peer == "asteval" else programs.starlark(name, size)
        run = _asteval(src) if peer == "asteval" else _starlark(src)
        code = compile(src, "bench.py", "exec")
        peer_t, py_t = [], []
        for _ in range(repeat):  # interleaved, so a change of load on the machine hits both alike
            t = time.process_time()
            run()
            peer_t.append(time.process_time() - t)
            t = time.process_time()
            exec(code, {})  # noqa: S102 - our own benchmark program
            py_t.append(time.process_time() - t)
        print(json.dumps({"peer": peer_t, "cpython": py_t}))
    except Exception as e:  # noqa: BLE001 - reported by run.py as a skipped peer
        print(json.dumps({"error": f"{type(e).__name__}: {e}"[:300]}))


if __name__ == "__main__":
    main()
