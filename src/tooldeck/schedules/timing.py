"""When a schedule fires: cron expressions, intervals and one-off times, in an IANA zone.

A :class:`Timing` yields *slots*: the instants a schedule is due, as UTC datetimes,
strictly after a given instant and in order. Slots are exact and the same in every
process (the database's unique (schedule, slot) key depends on it):

- ``cron``: a five-field expression evaluated in the schedule's zone by ``cronsim`` (a
  maintained library, the ``cron`` extra; nothing is parsed by hand). Daylight saving time
  is handled as cron does: a local time skipped by the spring-forward gap runs once right
  after it (``30 2 * * *`` on the day Europe/Berlin jumps from 02:00 to 03:00 fires at 03:00), a
  local time that occurs twice on the fall-back day runs once (at its first occurrence),
  and an hourly schedule still fires in both of the repeated hours;
- ``interval``: every ``seconds`` from an ``anchor`` instant (slot *k* is ``anchor + k *
  seconds``, computed in whole microseconds, so no drift and no disagreement between
  processes); zones do not matter to it;
- ``once``: one instant (a local time in the zone, or an explicit offset).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .._extras import LazyModule
from ..errors import TooldeckError

if TYPE_CHECKING:
    import cronsim
else:  # the cron extra: only cron timings need it
    cronsim = LazyModule("cronsim", "cron")

__all__ = ["WALK_LIMIT", "zone"]

WALK_LIMIT = 200_000
"""Slots walked one by one at most when looking for the due ones (a long downtime of a
frequent cron); past it, the last ones are found walking backwards from now."""


class TimingError(TooldeckError, ValueError):
    """A schedule's time specification is invalid; the message says what to fix."""


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (e.g. ``Europe/Berlin``)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise TimingError(
            f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"
        ) from exc


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise TimingError("an instant needs a time zone")
    return value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Timing:
    """One schedule's timing (see the module docstring); build it with the class methods."""

    kind: Literal["cron", "interval", "once"]
    tz: str = "UTC"
    expr: str | None = None
    micros: int | None = None  # interval length, microseconds
    anchor: datetime | None = None  # interval start (UTC)
    at: datetime | None = None  # the one time (UTC)

    # -- building -----------------------------------------------------------------------
    @classmethod
    def cron(cls, expr: str, tz: str = "UTC") -> Timing:
        expr = " ".join(expr.split())
        zone(tz)
        if len(expr.split(" ")) != 5:
            raise TimingError(
                f"cron expression {expr!r} must have five fields: minute hour day month weekday"
            )
        try:
            cronsim.CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
        except cronsim.CronSimError as exc:
            raise TimingError(f"cron expression {expr!r} is invalid: {exc}") from exc
        return cls("cron", tz, expr=expr)

    @classmethod
    def interval(cls, seconds: float, anchor: datetime, tz: str = "UTC") -> Timing:
        zone(tz)
        if not seconds or seconds < 0.001 or seconds > 366 * 86400:
            raise TimingError("an interval must be between 0.001 seconds and a year")
        return cls("interval", tz, micros=round(seconds * 1_000_000), anchor=_utc(anchor))

    @classmethod
    def once(cls, at: datetime | str, tz: str = "UTC") -> Timing:
        where = zone(tz)
        if isinstance(at, str):
            try:
                at = datetime.fromisoformat(at)
            except ValueError as exc:
                raise TimingError(
                    f"{at!r} is not an ISO date and time such as 2026-03-29T08:00"
                ) from exc
        if at.tzinfo is None:
            at = at.replace(tzinfo=where)
        return cls("once", tz, at=_utc(at))

    # -- JSON, as stored ---------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        if self.kind == "cron":
            return {"kind": "cron", "expr": self.expr}
        if self.kind == "interval":
            assert self.anchor is not None
            return {"kind": "interval", "micros": self.micros, "anchor": self.anchor.isoformat()}
        assert self.at is not None
        return {"kind": "once", "at": self.at.isoformat()}

    @classmethod
    def from_json(cls, data: dict[str, Any], tz: str) -> Timing:
        kind = data.get("kind")
        if kind == "cron":
            return cls.cron(str(data["expr"]), tz)
        if kind == "interval":
            anchor = datetime.fromisoformat(str(data["anchor"]))
            return cls("interval", tz, micros=int(data["micros"]), anchor=_utc(anchor))
        if kind == "once":
            return cls("once", tz, at=_utc(datetime.fromisoformat(str(data["at"]))))
        raise TimingError(f"unknown timing {data!r}")

    def describe(self) -> str:
        if self.kind == "cron":
            return f"cron '{self.expr}' ({self.tz})"
        if self.kind == "interval":
            assert self.micros is not None
            return f"every {self.micros / 1_000_000:g}s"
        assert self.at is not None
        return f"once at {self.at.astimezone(zone(self.tz)).isoformat()} ({self.tz})"

    # -- slots ------------------------------------------------------------------------
    def after(self, instant: datetime) -> Iterator[datetime]:
        """Every slot strictly after ``instant``, in order, as UTC datetimes."""
        instant = _utc(instant)
        if self.kind == "once":
            assert self.at is not None
            if self.at > instant:
                yield self.at
            return
        if self.kind == "interval":
            assert self.micros is not None and self.anchor is not None
            elapsed = (instant - self.anchor) // timedelta(microseconds=1)
            k = max(0, elapsed // self.micros + 1)
            for i in itertools.count(k):
                yield self.anchor + timedelta(microseconds=i * self.micros)
        assert self.expr is not None
        where = zone(self.tz)
        for local in cronsim.CronSim(self.expr, instant.astimezone(where)):
            yield local.astimezone(UTC)

    def before(self, instant: datetime) -> Iterator[datetime]:
        """Every slot at or before ``instant``, newest first (for a long downtime)."""
        instant = _utc(instant)
        if self.kind == "once":
            assert self.at is not None
            if self.at <= instant:
                yield self.at
            return
        if self.kind == "interval":
            assert self.micros is not None and self.anchor is not None
            elapsed = (instant - self.anchor) // timedelta(microseconds=1)
            for i in range(elapsed // self.micros, -1, -1):
                yield self.anchor + timedelta(microseconds=i * self.micros)
            return
        assert self.expr is not None
        where = zone(self.tz)
        start = (instant + timedelta(minutes=1)).astimezone(where)
        for local in cronsim.CronSim(self.expr, start, reverse=True):
            slot = local.astimezone(UTC)
            if slot <= instant:
                yield slot

    def next_times(self, instant: datetime, count: int = 3) -> list[datetime]:
        """The next ``count`` slots after ``instant``, as local times of the zone."""
        where = zone(self.tz)
        return [s.astimezone(where) for s in itertools.islice(self.after(instant), count)]

    def between(self, start: datetime, end: datetime, limit: int) -> list[datetime]:
        """The first ``limit`` slots in ``(start, end]``, oldest first."""
        end = _utc(end)
        return list(
            itertools.islice(itertools.takewhile(lambda s: s <= end, self.after(start)), limit)
        )

    def due(self, cursor: datetime, now: datetime, keep: int) -> tuple[list[datetime], int]:
        """Slots in ``(cursor, now]``: the last ``keep`` of them (oldest first) and how many
        there are (at least :data:`WALK_LIMIT` when there were too many to count)."""
        cursor, now = _utc(cursor), _utc(now)
        keep = max(1, keep)
        if now <= cursor:
            return [], 0
        if self.kind == "interval":
            assert self.micros is not None and self.anchor is not None
            step = timedelta(microseconds=1)
            last = (now - self.anchor) // step // self.micros
            first = max(0, (cursor - self.anchor) // step // self.micros + 1)
            if last < first:
                return [], 0
            total = last - first + 1
            kept = range(max(first, last - keep + 1), last + 1)
            return [self.anchor + timedelta(microseconds=i * self.micros) for i in kept], total
        window: deque[datetime] = deque(maxlen=keep)
        total = 0
        for slot in self.after(cursor):
            if slot > now:
                return list(window), total
            window.append(slot)
            total += 1
            if total >= WALK_LIMIT:
                break
        newest = [s for s in itertools.islice(self.before(now), keep) if s > cursor]
        return sorted(newest), total
