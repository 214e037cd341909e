"""The cron parser and schedules against robfig/cron v3's own tables (spec_test.go TestActivation and TestNext,
parser_test.go TestRange, TestParseScheduleErrors, TestStandardSpecSchedule), in five-field form, plus the
points where Python's croniter would disagree with robfig."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from controller_manager.api.cron import (
    ZERO,
    ConstantDelaySchedule,
    ScheduleError,
    SpecSchedule,
    UnknownTimeZone,
    load_location,
    parse_duration,
    parse_standard,
)


def _t(text: str) -> datetime:
    """"Mon Jul 9 15:00 2012" (UTC) or an ISO time with an offset."""
    if text[0].isdigit():
        return datetime.fromisoformat(text)
    return datetime.strptime(text + " +0000", "%a %b %d %H:%M %Y %z")


@pytest.mark.parametrize(("when", "spec", "expected"), [
    # Every fifteen minutes.
    pytest.param("Mon Jul 9 15:00 2012", "0/15 * * * *", True, id="0/15-at-00"),
    pytest.param("Mon Jul 9 15:45 2012", "0/15 * * * *", True, id="0/15-at-45"),
    pytest.param("Mon Jul 9 15:40 2012", "0/15 * * * *", False, id="0/15-at-40"),
    # Every fifteen minutes, starting at five.
    pytest.param("Mon Jul 9 15:05 2012", "5/15 * * * *", True, id="5/15-at-05"),
    pytest.param("Mon Jul 9 15:20 2012", "5/15 * * * *", True, id="5/15-at-20"),
    pytest.param("Mon Jul 9 15:50 2012", "5/15 * * * *", True, id="5/15-at-50"),
    # Named months.
    pytest.param("Sun Jul 15 15:00 2012", "0/15 * * Jul *", True, id="named-month"),
    pytest.param("Sun Jul 15 15:00 2012", "0/15 * * Jun *", False, id="other-named-month"),
    # Everything set.
    pytest.param("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", True, id="all-set-dow"),
    pytest.param("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", True, id="all-set-dom"),
    pytest.param("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", False, id="all-set-wrong-dow"),
    pytest.param("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", False, id="all-set-wrong-dom"),
    # Predefined schedules.
    pytest.param("Mon Jul 9 15:00 2012", "@hourly", True, id="hourly"),
    pytest.param("Mon Jul 9 15:04 2012", "@hourly", False, id="hourly-off"),
    pytest.param("Mon Jul 9 15:00 2012", "@daily", False, id="daily-off"),
    pytest.param("Mon Jul 9 00:00 2012", "@daily", True, id="daily"),
    pytest.param("Mon Jul 9 00:00 2012", "@midnight", True, id="midnight"),
    pytest.param("Mon Jul 9 00:00 2012", "@weekly", False, id="weekly-off"),
    pytest.param("Sun Jul 8 00:00 2012", "@weekly", True, id="weekly"),
    pytest.param("Sun Jul 8 01:00 2012", "@weekly", False, id="weekly-wrong-hour"),
    pytest.param("Sun Jul 8 00:00 2012", "@monthly", False, id="monthly-off"),
    pytest.param("Sun Jul 1 00:00 2012", "@monthly", True, id="monthly"),
    pytest.param("Sun Jan 1 00:00 2012", "@yearly", True, id="yearly"),
    pytest.param("Sun Jan 1 00:00 2012", "@annually", True, id="annually"),
    pytest.param("Wed Feb 1 00:00 2012", "@yearly", False, id="yearly-off"),
    # Day-of-month and day-of-week: both restricted -> either may match.
    pytest.param("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", True, id="dom-or-dow-both"),
    pytest.param("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", True, id="dom-or-dow-dom"),
    pytest.param("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", True, id="dom-or-dow-dom-1"),
    pytest.param("Sun Jul 15 00:00 2012", "* * */10 * Sun", True, id="dom-step-or-dow"),
    # ... but a star in either -> both must match.
    pytest.param("Sun Jul 15 00:00 2012", "* * * * Mon", False, id="star-dom-and-dow"),
    pytest.param("Mon Jul 9 00:00 2012", "* * 1,15 * *", False, id="dom-and-star-dow"),
    pytest.param("Sun Jul 15 00:00 2012", "* * 1,15 * *", True, id="dom-and-star-dow-match"),
    pytest.param("Sun Jul 15 00:00 2012", "* * */2 * Sun", True, id="dom-step2-or-dow"),
    # Where croniter differs: */1 keeps the star, so only Mondays; a full range does not.
    pytest.param("Tue May 24 00:00 2016", "0 0 */1 * 1", False, id="step1-is-a-star"),
    pytest.param("Mon May 23 00:00 2016", "0 0 */1 * 1", True, id="step1-is-a-star-monday"),
    pytest.param("Tue May 24 00:00 2016", "0 0 1-31 * 1", True, id="full-range-is-no-star"),
    # Names are case-insensitive.
    pytest.param("Mon Jul 9 00:00 2012", "0 0 * JUL mOn", True, id="names-any-case"),
])
def test_activation(when: str, spec: str, expected: bool) -> None:
    t = _t(when)
    assert (parse_standard(spec).next(t - timedelta(seconds=1)) == t) is expected


@pytest.mark.parametrize(("start", "spec", "expected"), [
    pytest.param("Mon Jul 9 14:45 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012", id="simple"),
    pytest.param("Mon Jul 9 14:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012", id="simple-last-minute"),
    pytest.param("Mon Jul 9 15:45 2012", "20-35/15 * * * *", "Mon Jul 9 16:20 2012", id="wrap-hours"),
    pytest.param("Mon Jul 9 23:46 2012", "*/15 * * * *", "Tue Jul 10 00:00 2012", id="wrap-day"),
    pytest.param("Mon Jul 9 23:45 2012", "20-35/15 * * * *", "Tue Jul 10 00:20 2012", id="wrap-day-range"),
    pytest.param("Mon Jul 9 23:35 2012", "0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012", id="wrap-month"),
    pytest.param("Mon Jul 9 23:35 2012", "0 0 9 Apr,Oct ?", "Tue Oct 9 00:00 2012", id="wrap-months-list"),
    pytest.param("Mon Jul 9 23:35 2012", "0 0 9 Jan-Mar ?", "Wed Jan 9 00:00 2013", id="wrap-year"),
    pytest.param("Mon Jul 9 23:35 2012", "0 0 29 Feb ?", "Mon Feb 29 00:00 2016", id="leap-year"),
    pytest.param("Mon Jul 9 23:35 2012", "0 0 * * 5", "Fri Jul 13 00:00 2012", id="weekday"),
    pytest.param("2012-03-11T00:00:00-05:00", "TZ=America/New_York 0 2 11 Mar ?", "2013-03-11T02:00:00-04:00",
                 id="dst-gap-skips-to-next-year"),
    pytest.param("2012-11-04T00:00:00-04:00", "TZ=America/New_York 0 1 4 Nov ?", "2012-11-04T01:00:00-04:00",
                 id="dst-overlap-first"),
    pytest.param("2012-11-04T01:00:00-04:00", "TZ=America/New_York 0 1 4 Nov ?", "2012-11-04T01:00:00-05:00",
                 id="dst-overlap-second"),
    pytest.param("2012-11-04T01:45:00-05:00", "CRON_TZ=America/New_York 0 * * * *", "2012-11-04T02:00:00-05:00",
                 id="cron-tz-prefix"),
    pytest.param("Mon Jul 9 23:35 2012", "TZ=Asia/Kolkata 30 5 * * *", "Tue Jul 10 00:00 2012", id="half-hour-zone"),
])
def test_next(start: str, spec: str, expected: str) -> None:
    assert parse_standard(spec).next(_t(start)) == _t(expected)


@pytest.mark.parametrize("spec", [
    pytest.param("0 0 30 Feb ?", id="feb-30"),
    pytest.param("0 0 31 Apr ?", id="apr-31"),
    pytest.param("59 23 31 2 *", id="feb-31"),
])
def test_unsatisfiable_schedules_have_no_next(spec: str) -> None:
    assert parse_standard(spec).next(_t("Mon Jul 9 23:35 2012")) == ZERO


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param("", "empty spec string", id="empty"),
    pytest.param("* * * *", "expected exactly 5 fields, found 4: [* * * *]", id="four-fields"),
    pytest.param("0 * * * * *", "expected exactly 5 fields, found 6: [0 * * * * *]", id="six-fields"),
    pytest.param("obvious error schedule", "expected exactly 5 fields, found 3: [obvious error schedule]",
                 id="words"),
    pytest.param("5 j * * *", 'failed to parse int from j: strconv.Atoi: parsing "j": invalid syntax', id="not-int"),
    pytest.param("@every Xm", 'failed to parse duration @every Xm: time: invalid duration "Xm"', id="bad-every"),
    pytest.param("@unrecognized", "unrecognized descriptor: @unrecognized", id="descriptor"),
    pytest.param("@hourly ", "unrecognized descriptor: @hourly ", id="descriptor-trailing-space"),
    pytest.param("5-4 * * * *", "beginning of range (5) beyond end of range (4): 5-4", id="reversed"),
    pytest.param("* 6-24 * * *", "end of range (24) above maximum (23): 6-24", id="above-max"),
    pytest.param("* * 0-3 * *", "beginning of range (0) below minimum (1): 0-3", id="below-min"),
    pytest.param("*/0 * * * *", "step of range should be a positive number: */0", id="zero-step"),
    pytest.param("0-2-3 * * * *", "too many hyphens: 0-2-3", id="hyphens"),
    pytest.param("1/2/3 * * * *", "too many slashes: 1/2/3", id="slashes"),
    pytest.param("*/-12 * * * *", "negative number (-12) not allowed: -12", id="negative-step"),
    pytest.param("0 0 * * 7", "end of range (7) above maximum (6): 7", id="dow-7"),
    pytest.param("0 0 L * *", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax', id="L"),
    pytest.param("0 0 * * 1#2", 'failed to parse int from 1#2: strconv.Atoi: parsing "1#2": invalid syntax',
                 id="hash"),
    pytest.param("TZ=Nowhere/Land 0 * * * *", "provided bad location Nowhere/Land: unknown time zone Nowhere/Land",
                 id="bad-zone"),
])
def test_parse_errors(spec: str, message: str) -> None:
    with pytest.raises(ScheduleError) as err:
        parse_standard(spec)
    assert str(err.value) == message


def test_standard_spec_bits() -> None:
    """TestStandardSpecSchedule: "5 * * * *" -> minute 5, every hour/day/month/weekday (with the star bit)."""
    sched = parse_standard("5 * * * *")
    assert isinstance(sched, SpecSchedule)
    star = 1 << 63
    assert sched.minute == 1 << 5
    assert sched.hour == ((1 << 24) - 1) | star
    assert sched.dom == (((1 << 32) - 1) & ~1) | star
    assert sched.month == (((1 << 13) - 1) & ~1) | star
    assert sched.dow == ((1 << 7) - 1) | star
    step1, step2 = parse_standard("*/1 * * * *"), parse_standard("*/2 * * * *")
    assert isinstance(step1, SpecSchedule)
    assert isinstance(step2, SpecSchedule)
    assert step1.minute & star  # a step of one keeps the star
    assert not step2.minute & star


@pytest.mark.parametrize(("spec", "delay"), [
    pytest.param("@every 5m", timedelta(minutes=5), id="minutes"),
    pytest.param("@every 1h30m", timedelta(hours=1, minutes=30), id="compound"),
    pytest.param("@every 1.5s", timedelta(seconds=1), id="rounded-down"),
    pytest.param("@every 500ms", timedelta(seconds=1), id="at-least-a-second"),
    pytest.param("TZ=UTC @every 2m", timedelta(minutes=2), id="zone-ignored"),
])
def test_every(spec: str, delay: timedelta) -> None:
    sched = parse_standard(spec)
    assert sched == ConstantDelaySchedule(delay)
    # Activations are whole seconds after the truncated start.
    start = datetime.fromisoformat("2016-05-19T10:00:00.750+00:00")
    assert sched.next(start) == datetime.fromisoformat("2016-05-19T10:00:00+00:00") + delay


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("0", timedelta(0), id="zero"),
    pytest.param("1h", timedelta(hours=1), id="hour"),
    pytest.param("-1.5h", -timedelta(hours=1, minutes=30), id="negative-fraction"),
    pytest.param("1h2m3s4ms5us6ns", timedelta(hours=1, minutes=2, seconds=3, milliseconds=4, microseconds=5),
                 id="every-unit"),
    pytest.param(".5s", timedelta(milliseconds=500), id="leading-dot"),
])
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("", 'time: invalid duration ""', id="empty"),
    pytest.param("1", 'time: missing unit in duration "1"', id="no-unit"),
    pytest.param("1d", 'time: unknown unit "d" in duration "1d"', id="days"),
    pytest.param("h", 'time: invalid duration "h"', id="no-number"),
])
def test_parse_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^time: ") as err:
        parse_duration(text)
    assert str(err.value) == message


def test_load_location() -> None:
    assert load_location("").utcoffset(None) == timedelta(0)
    assert str(load_location("Europe/Rome")) == "Europe/Rome"
    with pytest.raises(UnknownTimeZone, match="unknown time zone bad timezone"):
        load_location("bad timezone")
    with pytest.raises(UnknownTimeZone, match="invalid location name"):
        load_location("../etc/passwd")
