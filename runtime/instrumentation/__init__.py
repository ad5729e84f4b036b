"""Instrumentation: the events a running dataflow logs for the viewers, and where they go.

One module per job, each importing only those above it in this list:

- :mod:`~runtime.instrumentation.events`: the event schema, the ``K_*`` kinds and their dataclasses.
- :mod:`~runtime.instrumentation.encoding`: the recording format as written (header, event frames, end frame).
- :mod:`~runtime.instrumentation.reader`: reading recordings, from files or as their bytes arrive.
- :mod:`~runtime.instrumentation.logger`: :class:`Instrument`, a worker's logger.
- :mod:`~runtime.instrumentation.sinks`: memory, file and TCP sinks.
- :mod:`~runtime.instrumentation.shipper`: :class:`EventShipper`, the background thread that ships events to the sinks.
- :mod:`~runtime.instrumentation.registry`: the process's active pipeline, ``configure_from`` and ``logger_for``.
- :mod:`~runtime.instrumentation.recorder`: :class:`Recorder`, in-memory recording for tests and notebooks.

:mod:`runtime.instrument` re-exports the public names of all of them.
"""
