"""Unattended work (docs/workers.md): jobs submitted to the run store's queue, run by `dal worker`.

A front end, like the CLI: it builds runs and hands them to the runner (dal/runner), and keeps its queue
in the run store (dal/receipts/jobs.py). Modules: spec (what a job runs), keys (the key a script names),
routing (where a finished run sends its job), takeover (a job whose last worker still holds its key),
schedules (cron slots), worker (the warm parent and its loop), pool (its side of the job processes), jobproc
(a job process: many jobs, one at a time), keeper (holds a SQLite store open), log (text or JSON lines).
"""
