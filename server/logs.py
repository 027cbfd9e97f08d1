"""How a node logs: structlog to standard error, JSON lines or readable lines."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

__all__ = ["configure_logging"]


def configure_logging(log_format: str, level: str) -> None:
    """structlog with JSON lines, or readable lines on a terminal."""
    as_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        # Plain tracebacks: a rich one shows local variables, and a shoe's seed must never
        # reach a log line before its reveal (docs/fairness.md).
        else structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
