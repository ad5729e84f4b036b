"""Mains for tests of Arrow batches built without validation, run on processes.

Top-level, so that ``execute(main, processes=2)`` can import it in every process.
"""

from __future__ import annotations

from typing import Any


def return_invalid_table(worker: Any) -> Any:
    """Return, as this worker's result, a table whose string column ``w`` holds bytes that are not UTF-8."""
    import pyarrow as pa

    offsets = pa.py_buffer(b"".join(n.to_bytes(4, "little") for n in (0, 2, 4)))
    words = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"ok\xff\xfe")])
    return pa.table({"w": words})


class Point:
    """A value whose codec :func:`return_point_registered_in_main` registers inside ``main``, in its process only."""

    def __init__(self, x: int) -> None:
        self.x = x


def return_point_registered_in_main(worker: Any) -> Any:
    """Register a codec for :class:`Point` here, in the workers' process only, and return a ``Point``: the
    launcher, which never registered it, cannot decode the result."""
    from runtime import register_codec

    register_codec(Point, encode=lambda point: point.x.to_bytes(8, "little"), decode=lambda data: Point(0))
    return Point(worker.index)
