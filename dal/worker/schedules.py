"""Schedules: a cron expression whose every slot becomes at most one job, cluster-wide.

Each slot's job has the key `schedule:NAME:<slot time, UTC>`, and a schedule's next slot moves on in the
same transaction that makes the slot's job (JobQueue.fire), so two workers never make one slot twice; and
were one made twice, its key would make the second run a duplicate that runs nothing.

Catch-up rule: when workers were away for several slots, only the most recent missed slot runs; the
others are counted (`missed` in `dal schedule list`) and skipped. A paused schedule makes no jobs, and
resuming it starts from the next slot after now.

Cron expressions are read by cronsim (the optional extra `dal-lang[schedule]`), imported only here: five
fields (minute hour day month weekday), or six with seconds first; evaluated in the schedule's time zone
(`--tz`, an IANA name; default UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

CATCH_UP_COUNT_LIMIT = 1000  # missed slots counted one by one up to this many


class ScheduleError(Exception):
    """A cron expression or time zone DAL cannot use; the message names it and says why."""


def _cronsim() -> Any:
    try:
        import cronsim
    except ImportError:
        from dal.core.extras import install_hint

        raise ScheduleError("schedules read cron expressions with cronsim, which is not installed: "
                            f"{install_hint('schedule')}") \
            from None
    return cronsim


def zone(tz: str) -> tzinfo:
    if tz.upper() == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {tz!r} (an IANA name such as Europe/Berlin, or UTC)") from None


def _iter(cron: str, tz: str, t: float, reverse: bool = False) -> Any:
    cs = _cronsim()
    start = datetime.fromtimestamp(t, zone(tz))
    try:
        return cs.CronSim(cron, start, reverse=reverse)
    except cs.CronSimError as e:
        raise ScheduleError(f"the cron expression {cron!r} is not valid: {e}") from None


def check(cron: str, tz: str) -> None:
    """ScheduleError unless `cron` in `tz` is a schedule DAL can run (and has a slot at all)."""
    import time

    if next_after(cron, tz, time.time()) is None:
        raise ScheduleError(f"the cron expression {cron!r} has no slot in the coming years")


def next_after(cron: str, tz: str, t: float) -> float | None:
    """The first slot after `t` (seconds since the epoch), or None."""
    try:
        return next(_iter(cron, tz, t)).timestamp()
    except StopIteration:
        return None


def latest_at(cron: str, tz: str, t: float) -> float | None:
    """The last slot at or before `t`, or None."""
    try:
        return next(_iter(cron, tz, t + 1e-6, reverse=True)).timestamp()
    except StopIteration:
        return None


def slots_between(cron: str, tz: str, start: float, end: float) -> int:
    """How many slots fall in [start, end), counted up to CATCH_UP_COUNT_LIMIT."""
    n = 0
    it = _iter(cron, tz, start - 1e-6)
    for slot in it:
        if slot.timestamp() >= end or n >= CATCH_UP_COUNT_LIMIT:
            break
        n += 1
    return n


def slot_key(name: str, slot: float) -> str:
    when = datetime.fromtimestamp(slot, UTC).replace(microsecond=0)
    return f"schedule:{name}:{when.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def fire_due(queue: Any, now: float) -> list[dict[str, Any]]:
    """Make the job of the most recent slot of every active schedule whose next slot has come (the catch-up
    rule above), and move each one's next slot past `now`. Returns the jobs made."""
    made: list[dict[str, Any]] = []
    for s in queue.schedules(due=now):
        try:
            latest = latest_at(s["cron"], s["tz"], now)
            following = next_after(s["cron"], s["tz"], now)
        except ScheduleError:
            continue  # `dal schedule add` checked it; a cronsim that changed its mind leaves it for the operator
        slot, missed = None, 0
        if latest is not None and latest >= s["next_at"]:
            slot = latest
            missed = slots_between(s["cron"], s["tz"], s["next_at"], latest)
        nxt = following if following is not None else now + timedelta(days=3650).total_seconds()
        job = queue.fire(s["name"], seen_next_at=s["next_at"], slot=slot,
                         key=slot_key(s["name"], slot if slot is not None else now), next_at=nxt, missed=missed,
                         now=now)
        if job is not None:
            made.append(job)
    return made
