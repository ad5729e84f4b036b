"""Instrumentation: the event schema, per-worker loggers, batching, and sinks.

Logging is off by default.  Every hook site in ``scopes`` and ``runtime`` is
guarded by ``if observer is not None:``, so a program that does not log pays
one attribute test per hook, nothing more.  Turn it on with
``configure_from("FILE")``, ``configure_from("tcp://HOST:PORT")`` (both what
``--log`` / ``PYTIMELY_LOG`` pass), or in a test or notebook with a
:class:`Recorder` (``with Recorder() as recording: execute(...)``).

The code lives in :mod:`runtime.instrumentation`, one module per job (the
event schema is documented in :mod:`runtime.instrumentation.events`, the file
format in :mod:`runtime.instrumentation.encoding`); this module re-exports
their names.
"""

from __future__ import annotations

from runtime.errors import RecordingCorrupt, RecordingError, RecordingTooLarge, UncheckedRecordingWarning
from runtime.instrumentation.encoding import END_FRAME, FORMAT, FORMAT_V1, VERSION, encode_events, encode_header
from runtime.instrumentation.events import (
    _CLASSES as _CLASSES,  # the kind -> class table, which tests read
)
from runtime.instrumentation.events import (
    K_CAPABILITY,
    K_CHANNEL,
    K_DATAFLOW_DONE,
    K_DROPPED,
    K_FRONTIERS,
    K_INPUT,
    K_LOCAL_POINTSTAMPS,
    K_LOCATIONS,
    K_MARK,
    K_MESSAGES,
    K_OPERATOR,
    K_POINTSTAMPS,
    K_SCHEDULE,
    K_SHUTDOWN,
    CapabilitySite,
    ChannelCreated,
    DataflowCompleted,
    Event,
    EventsDropped,
    FrontiersChanged,
    InputChanged,
    LocalPointstampsChanged,
    LocationsDefined,
    Mark,
    Messages,
    OperatorCreated,
    PointstampsChanged,
    Scheduled,
    WorkerShutdown,
    decode,
)
from runtime.instrumentation.logger import Instrument
from runtime.instrumentation.reader import (
    Recording,
    RecordingStream,
    iter_stream,
    read_events,
    read_raw,
    read_recording,
)
from runtime.instrumentation.recorder import Recorder
from runtime.instrumentation.registry import (
    active_sinks,
    add_sink,
    configure_from,
    log_path,
    log_sink,
    logger_for,
    logging_active,
    recording_active,
    remove_sink,
    stop_logging,
)
from runtime.instrumentation.shipper import EventShipper
from runtime.instrumentation.sinks import FileSink, MemorySink, Sink, TcpSink

__all__ = [
    "CapabilitySite",
    "ChannelCreated",
    "DataflowCompleted",
    "END_FRAME",
    "Event",
    "EventsDropped",
    "FORMAT",
    "FORMAT_V1",
    "FileSink",
    "FrontiersChanged",
    "InputChanged",
    "Instrument",
    "K_CAPABILITY",
    "K_CHANNEL",
    "K_DATAFLOW_DONE",
    "K_DROPPED",
    "K_FRONTIERS",
    "K_INPUT",
    "K_LOCAL_POINTSTAMPS",
    "K_LOCATIONS",
    "K_MARK",
    "K_MESSAGES",
    "K_OPERATOR",
    "K_POINTSTAMPS",
    "K_SCHEDULE",
    "K_SHUTDOWN",
    "LocalPointstampsChanged",
    "LocationsDefined",
    "Mark",
    "MemorySink",
    "Messages",
    "OperatorCreated",
    "EventShipper",
    "PointstampsChanged",
    "Recorder",
    "Recording",
    "RecordingCorrupt",
    "RecordingError",
    "RecordingStream",
    "RecordingTooLarge",
    "UncheckedRecordingWarning",
    "Scheduled",
    "Sink",
    "TcpSink",
    "VERSION",
    "WorkerShutdown",
    "active_sinks",
    "add_sink",
    "configure_from",
    "decode",
    "encode_events",
    "encode_header",
    "iter_stream",
    "log_path",
    "log_sink",
    "logger_for",
    "logging_active",
    "read_events",
    "read_raw",
    "read_recording",
    "recording_active",
    "remove_sink",
    "stop_logging",
]
