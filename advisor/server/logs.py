"""uvicorn's own log lines (start-up, shutdown, worker supervision) in the app's JSON format.

The app logs through structlog (``advisor.server.app``); uvicorn logs through the standard library
before the app exists and in its supervisor process. With ``ADVISOR_LOG_FORMAT=json``,
``advisor serve`` hands uvicorn :func:`uvicorn_log_config`, whose formatter renders each record as
the app's lines are rendered (``event``, ``level``, ``timestamp``, ``logger``), so that a log
shipper reads one format. The formatter is named by import path, because uvicorn's workers are
spawned and configure their logging from a pickled copy of the configuration.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["JsonFormatter", "uvicorn_log_config"]


class JsonFormatter(structlog.stdlib.ProcessorFormatter):
    """A standard-library formatter that renders records as one JSON object per line."""

    def __init__(self) -> None:
        super().__init__(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(),
            ],
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
        )


def uvicorn_log_config(level: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn's loggers, in JSON."""
    level_name = logging.getLevelName(logging.getLevelNamesMapping()[level.upper()])
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "advisor.server.logs.JsonFormatter"}},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "loggers": {
            "uvicorn": {"handlers": ["json"], "level": level_name, "propagate": False},
            "uvicorn.error": {"level": level_name},
            "uvicorn.access": {"handlers": ["json"], "level": level_name, "propagate": False},
        },
    }
