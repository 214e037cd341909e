"""Structured logging for the daemon: one JSON object (or one key=value text line) per event, on stderr.

Guarantees:
- Every line carries ``timestamp`` (UTC, ISO 8601), ``level`` and ``event``, plus whatever is bound:
  ``logger`` for the daemon's parts, ``controller`` (and ``key``) inside controllers.
- ``--log-format=json`` (default) renders with orjson; ``--log-format=text`` renders ``key=value`` lines
  without colours. ``-v`` maps to levels as klog's verbosity roughly does: 0-3 info, 4 and up debug.
- Records from the standard library's ``logging`` (aiohttp, asyncio) come out in the same format, so the
  process never writes an unstructured line. Exceptions are rendered inside the line, never as a bare
  traceback block.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog

DEBUG_VERBOSITY = 4


def level_for_verbosity(verbosity: int) -> int:
    return logging.DEBUG if verbosity >= DEBUG_VERBOSITY else logging.INFO


def _orjson_dumps(obj: Any, **_: Any) -> str:
    # default=str: never fail a log call on a value orjson cannot encode (exceptions, paths, sets).
    return orjson.dumps(obj, default=str).decode()


class _NamedPrintLogger(structlog.PrintLogger):
    """A PrintLogger that remembers the name given to ``structlog.get_logger(name)``."""

    def __init__(self, file: TextIO, name: str | None) -> None:
        super().__init__(file)
        self.name = name


class _NamedPrintLoggerFactory:
    def __init__(self, file: TextIO) -> None:
        self._file = file

    def __call__(self, *args: Any) -> _NamedPrintLogger:
        return _NamedPrintLogger(self._file, str(args[0]) if args and args[0] is not None else None)


def _add_logger_name(logger: Any, _: str, event_dict: Any) -> Any:
    """``logger=<name>`` for loggers made with ``structlog.get_logger("controller_manager.x")``."""
    if "logger" not in event_dict:
        name = getattr(logger, "name", None)
        if name:
            event_dict["logger"] = name
    return event_dict


_FIRST = ("timestamp", "level", "logger", "controller", "key", "event")


def _lead_with_essentials(_: Any, __: str, event_dict: Any) -> Any:
    """Put timestamp, level, logger/controller/key and event first: a JSON line reads left to right."""
    head = {k: event_dict.pop(k) for k in _FIRST if k in event_dict}
    head.update(event_dict)
    return head


def configure_logging(log_format: str = "json", verbosity: int = 0, stream: TextIO | None = None) -> None:
    """Configure structlog and route the standard library's logging through the same renderer."""
    out = stream if stream is not None else sys.stderr
    level = level_for_verbosity(verbosity)
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    renderer: Any
    if log_format == "text":
        renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
        exc_processors: list[Any] = []
    else:
        renderer = structlog.processors.JSONRenderer(serializer=_orjson_dumps)
        exc_processors = [structlog.processors.dict_tracebacks, _lead_with_essentials]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        timestamper,
    ]
    structlog.configure(
        processors=[
            *shared,
            _add_logger_name,
            structlog.processors.StackInfoRenderer(),
            *exc_processors,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_NamedPrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, structlog.stdlib.ExtraAdder()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *exc_processors,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # aiohttp's access log is one line per probe: keep it for debugging only.
    logging.getLogger("aiohttp.access").setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)


def get_logger(name: str, **bound: Any) -> Any:
    """A structlog logger bound with ``logger=name`` (and any other key/values)."""
    return structlog.get_logger().bind(logger=name, **bound)
