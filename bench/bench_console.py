"""What each console page costs the server with 10,000 runs in the store (target: under 50 ms). Prints
figures; asserts nothing.

    python bench/bench_console.py [RUNS]      # default 10,000 runs

The store holds RUNS runs (receipts of a few KB, three journal rows each; statuses and retry classes
mixed), 40 of them waiting for approval of a send (a held external effect each), and a few jobs. Each
page is requested through the whole ASGI app in this process (Host and Origin walls, session, Starlette
routing, the store opened read-only for the request, the template rendered), without a socket: the
median of 21 requests, warm page cache. Needs the console extra.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dal.console.app import build_app
from dal.console.security import Sessions
from dal.receipts.location import StoreLocation
from dal.receipts.store import Store

sys.path.insert(0, str(Path(__file__).parent))
from bench_store import receipt  # noqa: E402  the same receipts bench_store fills its store with

WAITING = 40
MIX = [("completed", "none"), ("failed", "replay"), ("failed", "inspect"), ("exhausted", "repair"),
       ("completed", "none"), ("completed", "none"), ("rejected", "repair"), ("interrupted", "resume")]


def fill(db: Path, runs: int) -> list[str]:
    """RUNS runs; returns the ids of the waiting ones."""
    waiting: list[str] = []
    with Store(db) as store:
        store.set_synchronous("NORMAL")
        for start in range(0, runs, 500):
            batch = []
            for i in range(start, min(runs, start + 500)):
                r = receipt(i)
                r["status"], r["retry"] = MIX[i % len(MIX)]
                if i >= runs - WAITING:  # the newest runs wait for a person
                    items = r["effects"]["items"][:2]
                    items[1] = {**items[1], "command": f"mail -s report team-{i}@example.com",
                                "status": "pending_approval", "class": "external", "code": None,
                                "summary": "waiting for approval"}
                    r["effects"] = {"count": 2, "budget": None, "items": items, "omitted": 0}
                    r.update(status="waiting", retry="escalate", external_effect="pending_approval",
                             blocker=f"effect 2 waits for approval: `{items[1]['command']}`")
                    waiting.append(r["run_id"])
                batch.append(r)
            store.save_receipts(batch, validate=False)
            for r in batch:
                for item in r["effects"]["items"]:
                    if item["status"] == "pending_approval":
                        store.journal_intent(r["run_id"], item["seq"], item["command"], "external",
                                             detail={"line": item["line"], "idempotent": False, "pending": "approval"})
                        continue
                    store.journal_intent(r["run_id"], item["seq"], item["command"], "read",
                                         detail={"line": item["line"], "idempotent": True})
                    store.journal_result(r["run_id"], item["seq"], item)
        jobs = store.jobs()
        for k in range(20):
            jobs.submit(spec={"version": 1}, key=f"job:{k}", queue="default", priority=0, run_at=time.time() + k * 60,
                        max_attempts=5, host="bench", movable=False)
    return waiting


async def _get(app: Any, path: str, cookie: str, host: str) -> tuple[int, int]:
    raw, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": raw, "raw_path": raw.encode(), "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", host.encode()), (b"cookie", f"dal_console={cookie}".encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8470)}
    status, size = 0, 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, size
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            size += len(message.get("body", b""))

    await app(scope, receive, send)
    return status, size


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "dal.db"
        waiting = fill(db, runs)
        sessions = Sessions()
        app = build_app(StoreLocation("sqlite", str(db)), sessions, host="127.0.0.1", port=8470, name="bench")
        session = sessions.login(sessions.token or "", "127.0.0.1")
        assert session is not None
        host = "127.0.0.1:8470"
        # retry=escalate: a rare class (the 40 waiting runs), so the filter reads every run: the worst case.
        pages = ["/waiting", "/runs", "/runs?status=failed", "/runs?retry=inspect", "/runs?retry=escalate",
                 "/runs?operation=deploy:9*",
                 f"/runs/{waiting[-1]}", "/queue", "/blocked"]
        results = {}
        loop = asyncio.new_event_loop()
        for path in pages:
            status, size = loop.run_until_complete(_get(app, path, session.sid, host))
            assert status == 200, (path, status)
            xs = []
            for _ in range(21):
                t = time.perf_counter()
                loop.run_until_complete(_get(app, path, session.sid, host))
                xs.append(time.perf_counter() - t)
            ms = statistics.median(xs) * 1000
            results["/runs/RUN" if path.startswith("/runs/run_") else path] = round(ms, 2)
            print(f"- {path[:40]:<40} {ms:7.2f} ms  ({size / 1024:.0f} KiB)")
        loop.close()
        print(json.dumps({"runs": runs, "waiting": WAITING, "pages_ms": results}))


if __name__ == "__main__":
    main()
