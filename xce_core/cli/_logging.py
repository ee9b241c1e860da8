"""Logging and exit statuses shared by the ``xce`` commands.

Every command logs through the standard :mod:`logging` package, to stderr only,
so a log line can never mix with decisions (``xce run``'s stdout) or a summary
(``xce simulate``'s). ``-v`` shows INFO (``-vv`` DEBUG), ``-q`` only errors;
the default shows warnings. ``--log-format`` (``xce run``) chooses the line
format:

- ``text``: ``xce.run: WARNING: message`` (and a traceback when there is one);
- ``kv``: ``time=2024-05-01T12:00:00.123Z level=warning logger=xce.run
  msg="message"``, values with spaces or quotes quoted, a traceback as
  ``exc="..."`` on the same line;
- ``json``: one JSON object a line, with the keys ``time``, ``level``,
  ``logger``, ``msg`` and ``exc`` (when there is a traceback).

Exit statuses, the same for every command:

==== =====================================================================
0    success (``xce run``: end of input)
1    a failure: unreadable or malformed input (``xce simulate``'s trace or
     cluster file), an I/O error, an output that could not be written
2    a usage error: a bad option or option value, an output path, format
     or optional extra that cannot work; ``xce run --strict`` stopping at
     a malformed event
130  interrupted by SIGINT (Ctrl-C) after what was decided was written
143  terminated by SIGTERM, likewise
==== =====================================================================
"""

from __future__ import annotations

import datetime
import logging
import sys
from collections.abc import Callable
from typing import Final, Literal, TypeVar

import click
import msgspec

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "LOG_FORMATS",
    "LogFormat",
    "configure_logging",
    "log_format_option",
    "verbosity_options",
]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT
EXIT_TERMINATED: Final = 143  # 128 + SIGTERM

LogFormat = Literal["text", "kv", "json"]
LOG_FORMATS: Final[tuple[LogFormat, ...]] = ("text", "kv", "json")

F = TypeVar("F", bound=Callable[..., object])


def verbosity_options(command: F) -> F:
    """``-v/--verbose`` (repeatable) and ``-q/--quiet``."""
    command = click.option(
        "-q",
        "--quiet",
        is_flag=True,
        help="Log errors only (and, for xce simulate, no progress).",
    )(command)
    return click.option(
        "-v",
        "--verbose",
        count=True,
        help="Log more to stderr: -v what is done (INFO), -vv DEBUG.",
    )(command)


def log_format_option(command: F) -> F:
    """``--log-format text|kv|json``."""
    return click.option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="text",
        show_default=True,
        help="Log lines on stderr: text, key=value pairs, or JSON objects.",
    )(command)


def _level(verbose: int, quiet: bool) -> int:
    if quiet:
        return logging.ERROR
    return {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)


def _time(record: logging.LogRecord) -> str:
    when = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _KeyValueFormatter(logging.Formatter):
    """``key=value`` pairs on one line (logfmt)."""

    def format(self, record: logging.LogRecord) -> str:
        pairs = [
            ("time", _time(record)),
            ("level", record.levelname.lower()),
            ("logger", record.name),
            ("msg", record.getMessage()),
        ]
        if record.exc_info:
            pairs.append(("exc", self.formatException(record.exc_info)))
        return " ".join(f"{key}={_kv_value(value)}" for key, value in pairs)


def _kv_value(value: str) -> str:
    if value and not any(c in value for c in ' "=\\') and value.isprintable():
        return value
    return msgspec.json.encode(value).decode()


class _JsonFormatter(logging.Formatter):
    """One JSON object a line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return msgspec.json.encode(entry).decode()


def configure_logging(verbose: int = 0, quiet: bool = False, fmt: LogFormat = "text") -> None:
    """Send the ``xce`` loggers to stderr at the level ``-v``/``-q`` ask for, in
    ``fmt``. Replaces a handler an earlier call installed; idempotent."""
    root = logging.getLogger("xce")
    for handler in list(root.handlers):
        if getattr(handler, "_xce", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler._xce = True  # type: ignore[attr-defined]  # ours, to replace
    if fmt == "kv":
        handler.setFormatter(_KeyValueFormatter())
    elif fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(_level(verbose, quiet))
