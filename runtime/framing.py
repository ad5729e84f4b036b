"""Checksummed frames for files and streams: capture logs and recordings share this framing.

A frame is a 4-byte big-endian payload length, a 4-byte big-endian CRC-32 of
the length bytes followed by the payload, then the payload.  The checksum
covers the length too, so a damaged length is caught like damaged data; a
single flipped bit anywhere in a frame always fails the check.

:class:`FrameBuffer` splits received bytes back into payloads, remembering
the byte offset of each frame from the start of the file or stream, so that
damage can be reported where it is.

A per-frame checksum cannot see whole frames dropped, repeated or swapped.
A :class:`FrameChain` (capture logs of format version 3 on) folds each frame's
position and the previous frame's checksum into its CRC-32, so a frame read
anywhere but right after its predecessor fails its check.
"""

from __future__ import annotations

import struct
import zlib

from runtime.errors import FrameDamage

HEAD = struct.Struct(">II")
"""The frame head: payload length, CRC-32."""

MAX_FRAME_BYTES = 1 << 30
"""Frames declaring a larger payload are treated as damage."""


CAPTURE_MAGIC = b"\x89PTEV\r\n\x1a"
"""The first 8 bytes of a capture log (:mod:`runtime.eventlog`)."""

RECORDING_MAGIC = b"\x89PTRC\r\n\x1a"
"""The first 8 bytes of a recording of format version 2 on (:mod:`runtime.instrument`)."""


def what_file(prefix: bytes) -> str | None:
    """What kind of pytimely file starts with ``prefix`` (its first bytes, 8 are enough), or ``None``."""
    if prefix.startswith(CAPTURE_MAGIC):
        return "a pytimely capture log (written by EventWriter; read it with EventReader / replay_into)"
    if prefix.startswith(RECORDING_MAGIC):
        return "a pytimely recording (written by --log; read it with python -m viz)"
    if len(prefix) >= 8 and 0x81 <= prefix[0] <= 0x8F and prefix[1:8] == b"\xa6format":
        return "a pytimely recording of format version 1 (written by --log; read it with python -m viz)"
    return None


_LINK = struct.Struct(">QI")


class FrameChain:
    """The link between consecutive chained frames: the next frame's number and the previous frame's checksum.

    Frame ``n`` (numbered from 1 after the unchained frame that starts the
    chain) has the checksum ``CRC-32(length bytes + payload)`` computed from
    the seed ``CRC-32(n as 8 bytes + previous checksum as 4 bytes)``.  A writer
    and a reader each keep one, started from the same checksum.
    """

    __slots__ = ("index", "previous")

    def __init__(self, previous: int) -> None:
        """A chain whose first frame follows a frame of checksum ``previous``."""
        self.index = 1
        self.previous = previous

    def checksum(self, length: bytes | bytearray | memoryview, payload: bytes | bytearray | memoryview) -> int:
        """The checksum the next frame must have, given its 4 length bytes and its payload."""
        seed = zlib.crc32(_LINK.pack(self.index, self.previous))
        return zlib.crc32(payload, zlib.crc32(length, seed))

    def advance(self, checksum: int) -> None:
        """The next frame, of checksum ``checksum``, has been written or read."""
        self.index += 1
        self.previous = checksum

    def frame(self, payload: bytes) -> bytes:
        """``payload`` framed as the chain's next frame (and the chain advanced past it)."""
        length = struct.pack(">I", len(payload))
        checksum = self.checksum(length, payload)
        self.advance(checksum)
        return length + struct.pack(">I", checksum) + payload


def frame(payload: bytes) -> bytes:
    """``payload`` with its length and checksum in front."""
    length = struct.pack(">I", len(payload))
    return length + struct.pack(">I", zlib.crc32(payload, zlib.crc32(length))) + payload


class FrameBuffer:
    """Bytes received so far, split into checked frames: :meth:`feed`, then :meth:`take` until ``None``."""

    def __init__(self, start: int = 0, max_frame: int = MAX_FRAME_BYTES) -> None:
        """A buffer whose first byte is at offset ``start`` of its file or stream.

        Frames are checked alone until :attr:`chain` is set; from then on each is
        checked as the chain's next frame.  :attr:`last_checksum` is the checksum
        of the last frame taken (to start a chain from).
        """
        self.buffer = bytearray()
        self.start = start
        self.max_frame = max_frame
        self.chain: FrameChain | None = None
        self.last_checksum = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes."""
        self.buffer += data

    def skip(self, count: int) -> bytes:
        """Remove and return the first ``count`` bytes (a magic number before the frames)."""
        taken = bytes(self.buffer[:count])
        del self.buffer[:count]
        self.start += len(taken)
        return taken

    def needed(self) -> int:
        """How many bytes the next frame needs in all (its head, then its payload once the head is here)."""
        if len(self.buffer) < HEAD.size:
            return HEAD.size
        length, _ = HEAD.unpack_from(self.buffer)
        return HEAD.size + length

    def take(self) -> tuple[int, bytes] | None:
        """The next complete frame as ``(offset, payload)``, or ``None`` if not all of it is here yet.

        Raises :class:`FrameDamage` for a bad checksum or a length beyond ``max_frame``.
        """
        buffer = self.buffer
        if len(buffer) < HEAD.size:
            return None
        length, checksum = HEAD.unpack_from(buffer)
        if length > self.max_frame:
            raise FrameDamage(self.start, f"declares a payload of {length} bytes, more than any frame may have")
        end = HEAD.size + length
        if len(buffer) < end:
            return None
        payload = bytes(buffer[HEAD.size : end])
        chain = self.chain
        if chain is None:
            if zlib.crc32(payload, zlib.crc32(buffer[0:4])) != checksum:
                raise FrameDamage(self.start, "fails its CRC-32 check")
        else:
            if chain.checksum(buffer[0:4], payload) != checksum:
                raise FrameDamage(
                    self.start,
                    f"fails its CRC-32 check as frame {chain.index} of the chain: it is damaged, or frames "
                    "before it were dropped, repeated or reordered, or it belongs to another log",
                )
            chain.advance(checksum)
        self.last_checksum = checksum
        offset = self.start
        del buffer[:end]
        self.start += end
        return offset, payload

    def __len__(self) -> int:
        """Bytes held that do not form a whole frame yet."""
        return len(self.buffer)


__all__ = [
    "CAPTURE_MAGIC",
    "FrameBuffer",
    "FrameChain",
    "FrameDamage",
    "HEAD",
    "MAX_FRAME_BYTES",
    "RECORDING_MAGIC",
    "frame",
    "what_file",
]
