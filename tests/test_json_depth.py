"""runtime.json_depth: the nesting bound on JSON Lines, checked against a byte-by-byte reference."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import json_depth
from runtime.errors import FileSourceError


def states(data: bytes) -> Iterator[tuple[int, int, int, bool]]:
    """``(offset, line, depth, in a string)`` before each byte, then once after the last (offset ``len(data)``),
    one byte at a time with the scan's rules: a newline ends a string, a quote not escaped by an odd run of
    backslashes opens or closes one, brackets outside strings nest, and the depth never falls below zero."""
    depth, in_string, backslashes, line = 0, False, 0, 1
    for offset, byte in enumerate(data):
        yield offset, line, depth, in_string
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
        elif byte in b"]}":
            depth = max(0, depth - 1)
    yield len(data), line, depth, in_string


def reference(data: bytes, limit: int) -> int | None:
    """The line first nested deeper than ``limit``, found one byte at a time with the same rules."""
    return next((line for _, line, depth, _ in states(data) if depth > limit), None)


def scan(path: Path, limit: int) -> int | None:
    try:
        json_depth.check_json_depth(path, "test", limit, objects=False)
    except FileSourceError as error:
        return int(str(error).split(" line ")[1].split(":")[0])
    return None


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


def reference_stray(data: bytes) -> tuple[int, int] | None:
    """The line and byte offset of the first byte outside every record that is neither whitespace nor ``{``, found
    one byte at a time with the depth scan's rules (the state before each byte decides)."""
    for offset, line, depth, in_string in states(data):
        if offset < len(data) and depth == 0 and not in_string and data[offset] not in b" \t\r\n{":
            return line, offset
    return None


def stray(path: Path) -> tuple[int, int] | None:
    try:
        json_depth.check_json_depth(path, "test", 1000)
    except FileSourceError as error:
        assert "not a JSON object" in str(error), error
        line, offset = str(error).split(" line ")[1].split(" (byte offset ")
        return int(line), int(offset.split(")")[0])
    return None


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=200).map(lambda b: bytes(b'[]{}"\\\n an'[x % 10] for x in b)), chunk=st.integers(1, 17))
def test_the_vectorised_scans_agree_with_the_references_across_chunk_boundaries(
    data: bytes, chunk: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The nesting bound, and the first record that is no object, as the byte-by-byte references find them."""
    path = tmp_path_factory.mktemp("scan") / "f.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(json_depth, "CHUNK_BYTES", chunk)
        assert scan(path, 3) == reference(data, 3)
        assert stray(path) == reference_stray(data)


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (b"null\n", (1, 0)),
        (b'  {"a": 1}\n null\n', (2, 12)),
        (b'{"a": "}\\"{"} [1]\n', (1, 14)),
        (b'"s"\n', (1, 0)),
        (b'\xef\xbb\xbf{"a": 1}\r\n\n\t{"b": [{}]}\n', None),  # a byte order mark, CRLF, blank lines
        (b"", None),
    ],
)
def test_records_that_are_no_objects_are_found_with_their_line_and_offset(
    data: bytes, found: tuple[int, int] | None, tmp_path: Path
) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    assert stray(path) == found
