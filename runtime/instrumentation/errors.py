"""Why a recording cannot be read."""

from __future__ import annotations

from runtime.errors import DecodeError, TimelyRuntimeError


class RecordingError(TimelyRuntimeError):
    """A recording cannot be read: missing, not a recording, a newer version, or corrupted."""


class RecordingCorrupt(RecordingError, DecodeError):
    """A recording is damaged: a frame fails its checksum, or holds something that is not events.

    Attributes:
        where: the file (or stream) name.
        offset: the byte offset of the damage from its start.
    """

    def __init__(self, message: str, where: str, offset: int) -> None:
        super().__init__(message)
        self.where = where
        self.offset = offset


class RecordingTooLarge(RecordingError):
    """A reader's bound on unfinished data was passed: one event (or frame) needs more bytes than it may hold.

    Attributes:
        limit: the bound, in bytes.
    """

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


# ---------------------------------------------------------------------- decoded events
