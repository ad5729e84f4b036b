"""SVG snapshots of each main screen of the terminal UI (pytest-textual-snapshot).

The app replays a synthetic recording with a frozen clock, so nothing on
screen depends on wall time.  Update with ``pytest --snapshot-update`` after
a deliberate change, and look at the SVGs before committing them.
"""

from __future__ import annotations

from typing import Any

from helpers.tui_helpers import replay_app


def test_tree_at_80x24(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), terminal_size=(80, 24))


def test_tree_at_200x60(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), terminal_size=(200, 60))


def test_operators(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), press=["2"], terminal_size=(100, 30))


def test_operators_filtered_at_80x24(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), press=["slash", *"loop", "enter"], terminal_size=(80, 24))


def test_channels(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), press=["3"], terminal_size=(100, 30))


def test_stuck_view(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), press=["4"], terminal_size=(100, 30))


def test_stuck_view_at_80x24(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), press=["4"], terminal_size=(80, 24))


def test_replay_midway(snap_compare: Any) -> None:
    assert snap_compare(replay_app(done=True, at_end=False), press=["f", "f", "f"], terminal_size=(100, 30))


def test_help(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), press=["question_mark"], terminal_size=(100, 30))


def test_graph_at_80x24(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), press=["5"], terminal_size=(80, 24))


def test_graph_at_200x60(snap_compare: Any) -> None:
    assert snap_compare(replay_app(), press=["5"], terminal_size=(200, 60))
