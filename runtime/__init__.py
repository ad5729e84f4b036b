"""Execution of timely dataflows: workers, scheduling, channels between workers.

The main entry point is :func:`execute`.
"""

from runtime.barrier import Barrier, SynchronizationTimeout
from runtime.cluster import execute_from_args
from runtime.communication import Communicator, Stop
from runtime.communication.wire import register_codec
from runtime.errors import (
    ConfigurationError,
    DataflowMismatch,
    DataflowStuck,
    DecodeError,
    TimelyError,
    TimelyRuntimeError,
    WorkerAborted,
    WorkerFailed,
)
from runtime.eventlog import EventLogError, EventReader, EventWriter, LogFile
from runtime.execute import execute, run_workers
from runtime.instrument import Recorder
from runtime.sequencer import Sequencer
from runtime.worker import Worker
from scopes.native import compiled_modules

__all__ = [
    "Barrier",
    "EventLogError",
    "EventReader",
    "EventWriter",
    "LogFile",
    "Recorder",
    "Sequencer",
    "SynchronizationTimeout",
    "Communicator",
    "compiled_modules",
    "Stop",
    "ConfigurationError",
    "DataflowMismatch",
    "DataflowStuck",
    "DecodeError",
    "TimelyError",
    "TimelyRuntimeError",
    "Worker",
    "WorkerAborted",
    "WorkerFailed",
    "execute",
    "execute_from_args",
    "register_codec",
    "run_workers",
]
