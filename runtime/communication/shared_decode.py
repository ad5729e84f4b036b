"""A message that several workers of one process receive: decoded once, by the first of them to pull it.

A frame from another process may name several receivers in this process (a
progress batch goes to every worker).  Each receiver's mailbox holds the same
:class:`SharedPayload`; the first to pull it decodes the payload, and every
receiver gets its own batch: a copy of the decoded one
(:func:`~runtime.communication.wire.copy_decoded`, a list's pointers, not its
records' bytes), except the last, which takes the decoded batch itself.
"""

from __future__ import annotations

import _thread
from typing import Any

from runtime.communication.wire import WireError, copy_decoded, decode_batch


class SharedPayload:
    """The encoded batch of a frame for ``receivers`` workers of this process (see the module docstring)."""

    __slots__ = ("_path", "_payload", "_left", "_batch", "_error", "_lock")

    def __init__(self, path: int, payload: bytes | memoryview, receivers: int) -> None:
        """A payload encoded on ``path``, to be pulled ``receivers`` times."""
        self._path = path
        self._payload: bytes | memoryview | None = payload
        self._left = receivers
        self._batch: Any = None
        self._error: WireError | None = None
        self._lock = _thread.allocate_lock()

    def take(self) -> Any:
        """This receiver's batch; raises :class:`WireError` if the payload does not decode."""
        with self._lock:
            payload = self._payload
            if payload is not None:
                self._payload = None
                try:
                    self._batch = decode_batch(self._path, payload)
                except WireError as error:
                    self._error = error
            if self._error is not None:
                raise self._error
            self._left -= 1
            if self._left <= 0:
                batch, self._batch = self._batch, None
                return batch
            return copy_decoded(self._path, self._batch)
