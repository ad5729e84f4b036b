"""Execution of timely dataflows: workers, scheduling, channels between workers.

The main entry point is :func:`execute`.
"""

from runtime.cluster import execute_from_args
from runtime.communication import Communicator, Stop
from runtime.errors import (
    ConfigurationError,
    DataflowMismatch,
    DataflowStuck,
    TimelyRuntimeError,
    WorkerAborted,
    WorkerFailed,
)
from runtime.execute import execute, run_workers
from runtime.wire import register_codec
from runtime.worker import Worker

__all__ = [
    "Communicator",
    "Stop",
    "ConfigurationError",
    "DataflowMismatch",
    "DataflowStuck",
    "TimelyRuntimeError",
    "Worker",
    "WorkerAborted",
    "WorkerFailed",
    "execute",
    "execute_from_args",
    "register_codec",
    "run_workers",
]
