"""Cron schedules exactly as the CronJob controller reads them: robfig/cron v3's ``ParseStandard``.

kube-controller-manager parses ``spec.schedule`` with ``cron.ParseStandard`` and asks the result for
``Next(t)``. This module re-expresses that parser and both schedule kinds, because the cron libraries
Python offers disagree with robfig in ways a user would notice (croniter treats ``*/1`` in the day-of-month
field as a restriction, so ``0 0 */1 * 1`` fires daily instead of on Mondays; it accepts ``7`` for Sunday,
``L``, ``#`` and six-field specs, all of which robfig rejects).

Guarantees (each as robfig/cron v3 behaves):
- Five fields ``minute hour day-of-month month day-of-week`` separated by whitespace; each a comma list of
  ``*``/``?``, ``N``, ``N-M``, with an optional ``/step`` (``N/step`` means ``N-max/step``); month and weekday
  names (``jan``, ``MON``) case-insensitively; weekdays 0-6 with 0 = Sunday. Errors carry robfig's messages
  ("expected exactly 5 fields, found 3: [a b c]", "end of range (7) above maximum (6): 7", ...).
- ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``, ``@hourly`` and
  ``@every <Go duration>`` (rounded down to whole seconds, at least one second).
- A ``TZ=<zone>`` or ``CRON_TZ=<zone>`` prefix evaluates the schedule in that IANA zone; without one the
  schedule runs in UTC (robfig uses the process's local zone; kube-controller-manager runs in UTC).
- Day-of-month and day-of-week combine as robfig does: if either field is a bare ``*``/``?`` (``*/1``
  included), both must match; otherwise either may.
- ``next(t)`` is the first matching whole second strictly after ``t`` (an aware datetime; the result is
  UTC), or :data:`ZERO` (Go's zero time) when nothing matches within five years. Wall-clock steps across
  DST transitions follow Go's ``time.Date`` normalisation.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Protocol

__all__ = [
    "ZERO",
    "ConstantDelaySchedule",
    "Schedule",
    "ScheduleError",
    "SpecSchedule",
    "UnknownTimeZone",
    "load_location",
    "parse_duration",
    "parse_standard",
]

# Go's zero time.Time, which robfig returns when no time matches.
ZERO = datetime(1, 1, 1, tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1)
_STAR_BIT = 1 << 63
_YEARS_TO_SEARCH = 5


class ScheduleError(ValueError):
    """A schedule robfig/cron would refuse; the message is robfig's."""


class UnknownTimeZone(ValueError):
    """``time.LoadLocation`` failed; the message is Go's."""


class Schedule(Protocol):
    def next(self, t: datetime) -> datetime:
        """The first activation strictly after ``t`` (UTC), or :data:`ZERO` if there is none."""
        ...


def load_location(name: str) -> tzinfo:
    """Go's ``time.LoadLocation``: "" and "UTC" are UTC, "Local" is our (UTC) local zone, else IANA."""
    if name in ("", "UTC", "Local"):
        return UTC
    if ".." in name or name.startswith(("/", "\\")):
        raise UnknownTimeZone("time: invalid location name")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise UnknownTimeZone(f"unknown time zone {name}") from None


# --- parsing ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] | None = None


_MINUTES = _Bounds(0, 59)
_HOURS = _Bounds(0, 23)
_DOM = _Bounds(1, 31)
_MONTHS = _Bounds(1, 12, {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))})
_DOW = _Bounds(0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))})
_INT = re.compile(r"[+-]?[0-9]+")


def _bits(low: int, high: int, step: int) -> int:
    if step == 1:
        return ((1 << (high + 1)) - 1) & ~((1 << low) - 1)
    bits = 0
    for i in range(low, high + 1, step):
        bits |= 1 << i
    return bits


def _all(b: _Bounds) -> int:
    return _bits(b.low, b.high, 1) | _STAR_BIT


def _must_parse_int(expr: str) -> int:
    if not _INT.fullmatch(expr):
        raise ScheduleError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    value = int(expr)
    if value < 0:
        raise ScheduleError(f"negative number ({value}) not allowed: {expr}")
    return value


def _int_or_name(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _must_parse_int(expr)


def _range(expr: str, b: _Bounds) -> int:
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    single = len(low_high) == 1
    extra = 0
    if low_high[0] in ("*", "?"):
        start, end, extra = b.low, b.high, _STAR_BIT
    else:
        start = _int_or_name(low_high[0], b.names)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], b.names)
        else:
            raise ScheduleError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _must_parse_int(range_and_step[1])
        if single:  # "N/step" runs from N to the field's maximum
            end = b.high
        if step > 1:
            extra = 0
    else:
        raise ScheduleError(f"too many slashes: {expr}")
    if start < b.low:
        raise ScheduleError(f"beginning of range ({start}) below minimum ({b.low}): {expr}")
    if end > b.high:
        raise ScheduleError(f"end of range ({end}) above maximum ({b.high}): {expr}")
    if start > end:
        raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ScheduleError(f"step of range should be a positive number: {expr}")
    return _bits(start, end, step) | extra


def _field(text: str, b: _Bounds) -> int:
    bits = 0
    for part in text.split(","):
        if part:  # strings.FieldsFunc drops empty pieces
            bits |= _range(part, b)
    return bits


def parse_standard(spec: str) -> Schedule:
    """``cron.ParseStandard``: raises :class:`ScheduleError` with robfig's message."""
    if not spec:
        raise ScheduleError("empty spec string")
    loc: tzinfo = UTC
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        eq = spec.find("=")
        name = spec[eq + 1:space] if space >= 0 else spec[eq + 1:]
        try:
            loc = load_location(name)
        except UnknownTimeZone as err:
            raise ScheduleError(f"provided bad location {name}: {err}") from None
        spec = spec[space:].strip() if space >= 0 else ""
    if spec.startswith("@"):
        return _descriptor(spec, loc)
    fields = spec.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    return SpecSchedule(
        minute=_field(fields[0], _MINUTES),
        hour=_field(fields[1], _HOURS),
        dom=_field(fields[2], _DOM),
        month=_field(fields[3], _MONTHS),
        dow=_field(fields[4], _DOW),
        location=loc,
    )


def _descriptor(spec: str, loc: tzinfo) -> Schedule:
    one_of = {
        "@yearly": (1 << 0, 1 << 0, 1 << 1, 1 << 1, _all(_DOW)),
        "@annually": (1 << 0, 1 << 0, 1 << 1, 1 << 1, _all(_DOW)),
        "@monthly": (1 << 0, 1 << 0, 1 << 1, _all(_MONTHS), _all(_DOW)),
        "@weekly": (1 << 0, 1 << 0, _all(_DOM), _all(_MONTHS), 1 << 0),
        "@daily": (1 << 0, 1 << 0, _all(_DOM), _all(_MONTHS), _all(_DOW)),
        "@midnight": (1 << 0, 1 << 0, _all(_DOM), _all(_MONTHS), _all(_DOW)),
        "@hourly": (1 << 0, _all(_HOURS), _all(_DOM), _all(_MONTHS), _all(_DOW)),
    }
    if spec in one_of:
        minute, hour, dom, month, dow = one_of[spec]
        return SpecSchedule(minute, hour, dom, month, dow, loc)
    every = "@every "
    if spec.startswith(every):
        try:
            delay = parse_duration(spec[len(every):])
        except ValueError as err:
            raise ScheduleError(f"failed to parse duration {spec}: {err}") from None
        return ConstantDelaySchedule.every(delay)
    raise ScheduleError(f"unrecognized descriptor: {spec}")


_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
             "m": 60_000_000_000, "h": 3_600_000_000_000}
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_duration(text: str) -> timedelta:
    """Go's ``time.ParseDuration`` ("1h30m", "1.5s", "-2m"), to microsecond precision."""
    quoted = f'"{text}"'
    s = text
    negative = False
    if s and s[0] in "+-":
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return timedelta(0)
    if not s:
        raise ValueError(f"time: invalid duration {quoted}")
    total_ns = 0
    while s:
        m = _DURATION_PART.match(s)
        whole, frac, unit = (m.group(1), m.group(2), m.group(3)) if m else ("", None, "")
        if not whole and not frac:
            raise ValueError(f"time: invalid duration {quoted}")
        if not unit:
            raise ValueError(f"time: missing unit in duration {quoted}")
        if unit not in _UNITS_NS:
            raise ValueError(f'time: unknown unit "{unit}" in duration {quoted}')
        scale = _UNITS_NS[unit]
        total_ns += int(whole or "0") * scale
        if frac:
            total_ns += int(frac) * scale // 10 ** len(frac)
        assert m is not None
        s = s[m.end():]
    if total_ns > (1 << 63) - 1:
        raise ValueError(f"time: invalid duration {quoted}")
    return timedelta(microseconds=(-total_ns if negative else total_ns) // 1000)


# --- schedules ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConstantDelaySchedule:
    """``@every``: activates ``delay`` after the given time, truncated to the second."""

    delay: timedelta

    @classmethod
    def every(cls, delay: timedelta) -> ConstantDelaySchedule:
        if delay < timedelta(seconds=1):
            delay = timedelta(seconds=1)
        return cls(timedelta(seconds=int(delay.total_seconds())))

    def next(self, t: datetime) -> datetime:
        return t.astimezone(UTC).replace(microsecond=0) + self.delay


def _offset(unix: int, loc: tzinfo) -> int:
    """Seconds east of UTC in ``loc`` at the instant ``unix``."""
    off = datetime.fromtimestamp(unix, loc).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def _wall(u: datetime, loc: tzinfo) -> datetime:
    return u.astimezone(loc).replace(tzinfo=None)


def _date(year: int, month: int, day: int, hour: int, minute: int, second: int, loc: tzinfo) -> datetime:
    """Go's ``time.Date``: out-of-range parts normalise; a wall time in a DST gap or overlap resolves as Go's."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    wall = datetime(year, month, 1) + timedelta(days=day - 1, hours=hour, minutes=minute, seconds=second)
    unix = (wall - _EPOCH) // timedelta(seconds=1)
    if loc is not UTC:
        first = _offset(unix, loc)
        if first != 0:
            # Go looks the offset up at the wall time read as UTC, then re-checks at the corrected instant.
            unix -= _offset(unix - first, loc)
    return datetime.fromtimestamp(unix, UTC)


@dataclass(frozen=True, slots=True)
class SpecSchedule:
    """A cron spec as bit sets per field (bit 63: the field was ``*``/``?``), evaluated in ``location``."""

    minute: int
    hour: int
    dom: int
    month: int
    dow: int
    location: tzinfo = UTC

    def _day_matches(self, w: datetime) -> bool:
        dom_match = bool((1 << w.day) & self.dom)
        dow_match = bool((1 << ((w.weekday() + 1) % 7)) & self.dow)
        if self.dom & _STAR_BIT or self.dow & _STAR_BIT:
            return dom_match and dow_match
        return dom_match or dow_match

    def next(self, t: datetime) -> datetime:
        try:
            return self._next(t)
        except (OverflowError, ValueError):
            return ZERO  # only for instants near year 1, which Go would search in vain too

    def _next(self, t: datetime) -> datetime:
        loc = self.location
        u = t.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
        added = False
        year_limit = _wall(u, loc).year + _YEARS_TO_SEARCH
        while True:  # robfig's WRAP label: a field wrapped, so the larger fields must be checked again
            w = _wall(u, loc)
            if w.year > year_limit:
                return ZERO
            wrapped = False
            while not (1 << w.month) & self.month:
                if not added:
                    added = True
                    u = _date(w.year, w.month, 1, 0, 0, 0, loc)
                    w = _wall(u, loc)
                u = _date(w.year, w.month + 1, w.day, w.hour, w.minute, w.second, loc)
                w = _wall(u, loc)
                if w.month == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self._day_matches(w):
                if not added:
                    added = True
                    u = _date(w.year, w.month, w.day, 0, 0, 0, loc)
                    w = _wall(u, loc)
                u = _date(w.year, w.month, w.day + 1, w.hour, w.minute, w.second, loc)
                w = _wall(u, loc)
                if w.hour != 0:  # a DST change moved midnight: step back onto it
                    u += timedelta(hours=24 - w.hour) if w.hour > 12 else -timedelta(hours=w.hour)
                    w = _wall(u, loc)
                if w.day == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not (1 << w.hour) & self.hour:
                if not added:
                    added = True
                    u = _date(w.year, w.month, w.day, w.hour, 0, 0, loc)
                u += timedelta(hours=1)
                w = _wall(u, loc)
                if w.hour == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not (1 << w.minute) & self.minute:
                if not added:
                    added = True
                    u = u.replace(second=0)
                u += timedelta(minutes=1)
                w = _wall(u, loc)
                if w.minute == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            # Standard specs fire at second 0 only.
            while w.second != 0:
                if not added:
                    added = True
                u += timedelta(seconds=1)
                w = _wall(u, loc)
                if w.second == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            return u
