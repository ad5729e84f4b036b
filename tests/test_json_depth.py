"""runtime.json_depth: the nesting bound on JSON Lines, checked against a byte-by-byte reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import json_depth
from runtime.errors import FileSourceError


def reference(data: bytes, limit: int) -> int | None:
    """The line first nested deeper than ``limit``, found one byte at a time with the same rules."""
    depth, in_string, backslashes, line = 0, False, 0, 1
    for byte in data:
        escaped = backslashes % 2 == 1
        backslashes = backslashes + 1 if byte == 0x5C else 0
        if byte == 0x0A:
            in_string, line = False, line + 1
        elif byte == 0x22 and not escaped:
            in_string = not in_string
        elif in_string:
            continue
        elif byte in b"[{":
            depth += 1
            if depth > limit:
                return line
        elif byte in b"]}":
            depth = max(0, depth - 1)
    return None


def scan(path: Path, limit: int) -> int | None:
    try:
        json_depth.check_json_depth(path, "test", limit)
    except FileSourceError as error:
        return int(str(error).split(" line ")[1].split(":")[0])
    return None


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=200).map(lambda b: bytes(b'[]{}"\\\n a'[x % 9] for x in b)), chunk=st.integers(1, 17))
def test_the_vectorised_scan_agrees_with_the_reference_across_chunk_boundaries(
    data: bytes, chunk: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("scan") / "f.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(json_depth, "CHUNK_BYTES", chunk)
        assert scan(path, 3) == reference(data, 3)


def test_stray_closers_cannot_hide_openers_and_a_newline_ends_a_string(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"]" * 50 + b"\n" + b"[" * 5 + b"\n")
    assert scan(path, 4) == 2
    path.write_bytes(b'{"s": "open\n' + b"[" * 5 + b"\n")
    assert scan(path, 4) == 2
    path.write_bytes(b'{"s": "\\"[[[[[[["}\n')
    assert scan(path, 4) is None


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8])
def test_state_carried_between_chunks_ends_at_a_newline(tmp_path: Path, chunk: int, monkeypatch) -> None:
    """An unclosed string or a trailing backslash ends at a newline that starts the next chunk."""
    monkeypatch.setattr(json_depth, "CHUNK_BYTES", chunk)
    path = tmp_path / "f.jsonl"
    for data in (b'"ab\n[[[[[\n', b'"a\\\n[[[[[\n', b'"a\\"\n"[[[[[["\n', b'\\\n"[[[[[["\n'):
        path.write_bytes(data)
        assert scan(path, 4) == reference(data, 4), data
