"""Recordings of format version 1 have no checksums: they are read only on request, with a warning.

A flipped bit in a version 1 file usually reads as other data (373 of 500 in a
review), so every reader refuses one unless asked (``allow_format_1=True``, or
``--allow-format-1`` on the command line), saying how to ask.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pytest
from helpers.recording_v1 import header as v1_header
from helpers.recording_v1 import pack as v1_pack

from runtime.instrument import (
    InputChanged,
    RecordingError,
    RecordingStream,
    UncheckedRecordingWarning,
    iter_stream,
    read_events,
    read_recording,
)
from viz.__main__ import _parser
from viz.tui.cli import _build
from viz.tui.sources import TuiError, load_recording

RAWS = [(8, 0, 1, 1.25, (0, 1), "input", "advanced", 3), (8, 0, 2, 1.5, (0, 1), "input", "advanced", 4)]


def v1_file(tmp_path: Path) -> Path:
    path = tmp_path / "old.msgpack"
    path.write_bytes(v1_header() + b"".join(v1_pack(raw) for raw in RAWS))
    return path


def refused(message: str, path: object) -> None:
    assert str(path) in message and "format version 1" in message and "no checksums" in message
    assert "allow_format_1=True" in message and "--allow-format-1" in message


def test_every_reader_refuses_format_1_unless_asked_saying_how_to_ask(tmp_path: Path) -> None:
    path = v1_file(tmp_path)
    for read in (
        lambda: read_recording(path),
        lambda: read_events(path),
        lambda: list(iter_stream(io.BytesIO(path.read_bytes()), str(path))),
        lambda: RecordingStream(str(path)).feed(path.read_bytes()),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # refused before anything is read: no warning either
            with pytest.raises(RecordingError) as failure:
                read()
        refused(str(failure.value), path)
    with pytest.raises(TuiError) as failure:
        load_recording([path])
    refused(str(failure.value), path)


def test_format_1_is_read_when_asked_with_a_warning(tmp_path: Path) -> None:
    path = v1_file(tmp_path)
    expected = [
        InputChanged(0, 1, 1.25, (0, 1), "input", "advanced", 3),
        InputChanged(0, 2, 1.5, (0, 1), "input", "advanced", 4),
    ]
    with pytest.warns(UncheckedRecordingWarning, match="format version 1, read without checksums"):
        recording = read_recording(path, allow_format_1=True)
    assert recording.events == expected and recording.unchecked is not None and str(path) in recording.unchecked
    with pytest.warns(UncheckedRecordingWarning):
        assert read_events(path, allow_format_1=True) == expected
    with pytest.warns(UncheckedRecordingWarning):
        assert list(iter_stream(io.BytesIO(path.read_bytes()), "old", allow_format_1=True)) == expected
    with pytest.warns(UncheckedRecordingWarning):
        assert load_recording([path], allow_format_1=True)[0] == expected


def test_the_viewer_replays_format_1_only_with_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = v1_file(tmp_path)
    args = _parser().parse_args(["tui", "--replay", str(path)])
    with pytest.raises(Exception) as failure:
        _build(args)
    refused(str(failure.value), path)
    args = _parser().parse_args(["tui", "--replay", str(path), "--allow-format-1"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the command says it in its own words, not as a Python warning
        app, program = _build(args)
    assert program is None and app is not None
    err = capsys.readouterr().err
    assert err.startswith("python -m viz tui: warning:") and "without checksums" in err


@pytest.mark.filterwarnings("ignore::runtime.errors.UncheckedRecordingWarning")
def test_a_format_1_file_cut_in_an_event_is_truncated_and_damage_after_a_long_event_is_at_its_offset(
    tmp_path: Path,
) -> None:
    """msgpack's ``tell()`` counts the bytes of a value cut short as read: a file ending in an event read as whole,
    and an event spanning two reads was reported damaged at the byte where the second read began."""
    path = v1_file(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole + v1_pack(RAWS[0])[:5])
    recording = read_recording(path, allow_format_1=True)
    assert recording.truncated == f"{path} is truncated: it ends in the middle of an event, after 2 events"
    long_mark = v1_pack((12, 0, 3, 1.75, "x" * (1 << 20)))  # longer than one read of the file
    path.write_bytes(whole + long_mark + b"\xc1")
    with pytest.raises(RecordingError, match=rf"after 3 events, at byte offset {len(whole + long_mark)} "):
        read_recording(path, allow_format_1=True)
    path.write_bytes(whole + v1_pack((12, 0, 3, 1.75, ["x" * (1 << 20)], "spare")))
    with pytest.raises(RecordingError, match=rf"after 2 events, at byte offset {len(whole)}\b"):
        read_recording(path, allow_format_1=True)
