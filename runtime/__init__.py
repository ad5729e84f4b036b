"""Execution of timely dataflows: workers, scheduling, channels between workers.

The main entry point is :func:`execute`.
"""

from runtime.errors import (
    ConfigurationError,
    DataflowStuck,
    TimelyRuntimeError,
    WorkerAborted,
    WorkerFailed,
)
from runtime.execute import execute
from runtime.worker import Worker

__all__ = [
    "ConfigurationError",
    "DataflowStuck",
    "TimelyRuntimeError",
    "Worker",
    "WorkerAborted",
    "WorkerFailed",
    "execute",
]
