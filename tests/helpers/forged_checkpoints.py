"""Checkpoint files changed under a right checksum, for the tests that a changed file is refused naming the file."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.checkpoints import MAGIC, VERSION
from runtime.communication.wire import decode_value, encode_value


def rewrite_latest(root: Path, peers: int, change: Callable[[str, Any], Any]) -> int:
    """Apply ``change(operator key, state)`` to every state in each worker's latest file under ``root``, the
    checksums recomputed; return that latest epoch."""
    latest = max(int(path.name[6:26]) for path in (root / f"workers-{peers}" / "worker-0").glob("epoch-*.ckpt"))
    for worker in range(peers):
        path = root / f"workers-{peers}" / f"worker-{worker}" / f"epoch-{latest:020d}.ckpt"
        data = path.read_bytes()
        (length,) = struct.unpack_from(">I", data, len(MAGIC) + 2)
        header = data[len(MAGIC) + 6 : len(MAGIC) + 6 + length]
        states = decode_value(data[len(MAGIC) + 6 + length + 8 : -32])
        changed = {key: encode_value(change(key, decode_value(state))) for key, state in states.items()}
        body = encode_value(changed)
        whole = MAGIC + struct.pack(">HI", VERSION, len(header)) + header + struct.pack(">Q", len(body)) + body
        path.write_bytes(whole + hashlib.blake2b(whole, digest_size=32).digest())
    return latest
