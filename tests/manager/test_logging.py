"""Log lines: structured, one per event, levels from -v, stdlib records in the same format."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from controller_manager.manager.logging import configure_logging, get_logger, level_for_verbosity


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    yield out
    structlog.reset_defaults()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line]


@pytest.mark.parametrize(("v", "level"), [(0, logging.INFO), (3, logging.INFO), (4, logging.DEBUG), (9, logging.DEBUG)])
def test_verbosity_levels(v: int, level: int) -> None:
    assert level_for_verbosity(v) == level


def test_json_lines_carry_timestamp_level_and_bound_keys(stream: io.StringIO) -> None:
    configure_logging("json", 0, stream)
    log = get_logger("controller", controller="deployment-controller")
    log.info("synced", key="default/web", replicas=3)
    log.debug("hidden at -v 0")
    (rec,) = records(stream)
    assert list(rec)[:6] == ["timestamp", "level", "logger", "controller", "key", "event"]
    assert rec["level"] == "info"
    assert rec["event"] == "synced"
    assert rec["controller"] == "deployment-controller"
    assert rec["replicas"] == 3
    assert str(rec["timestamp"]).endswith("Z")


def test_debug_at_v4(stream: io.StringIO) -> None:
    configure_logging("json", 4, stream)
    get_logger("manager").debug("shown")
    assert [r["event"] for r in records(stream)] == ["shown"]


def test_stdlib_records_are_structured(stream: io.StringIO) -> None:
    configure_logging("json", 0, stream)
    logging.getLogger("aiohttp.server").error("handler failed")
    (rec,) = records(stream)
    assert rec["event"] == "handler failed"
    assert rec["level"] == "error"
    assert rec["logger"] == "aiohttp.server"


def test_exceptions_stay_inside_the_line(stream: io.StringIO) -> None:
    configure_logging("json", 0, stream)
    try:
        raise ValueError("boom")
    except ValueError:
        get_logger("manager").exception("failed")
    (rec,) = records(stream)
    assert rec["event"] == "failed"
    assert "boom" in json.dumps(rec["exception"])


def test_text_format(stream: io.StringIO) -> None:
    configure_logging("text", 0, stream)
    get_logger("manager").warning("careful", what="x")
    (line,) = stream.getvalue().splitlines()
    assert "[warning" in line
    assert "careful" in line
    assert "what=x" in line
    assert "[manager]" in line


def test_named_loggers_carry_their_name(stream: io.StringIO) -> None:
    configure_logging("json", 0, stream)
    structlog.get_logger("controller_manager.leaderelection").info("acquired")
    (rec,) = records(stream)
    assert rec["logger"] == "controller_manager.leaderelection"
