"""Every default budget and limit of a run, written once (docs/cli.md lists them).

The CLI's help, the API's keywords, the REPL, `dal test` and the runner all take them from here."""

from __future__ import annotations

MAX_STEPS = 1_000_000  # the step budget: every statement and expression costs one step (--max-steps)
MAX_MEMORY = 1 << 30  # bytes the run may hold (--max-memory)
MAX_DEPTH = 1000  # nested DAL calls
EFFECT_TIMEOUT = 30.0  # seconds per command, unless a flag or the policy's [limits] says otherwise
MAX_OUTPUT = 1 << 20  # bytes kept of a command's stdout and of its stderr

# `dal worker`'s job processes (dal/worker/pool.py): replaced after this many jobs (--recycle-after), or once
# their resident memory passed this many bytes after a job (--recycle-memory).
WORKER_RECYCLE_AFTER = 1000
WORKER_RECYCLE_MEMORY = 512 << 20
