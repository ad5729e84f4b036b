"""Pane 3, the channel table: records carried, in flight, and a sparkline of their rate."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from viz.model import View
from viz.tui.adapter import TuiState, channel_rows
from viz.tui.sources import Replay

CHANNEL_COLUMNS = (
    ("source", "From"),
    ("target", "To"),
    ("contract", "Contract"),
    ("records", "Records"),
    ("in_flight", "In flight"),
    ("spark", "Records/s"),
    ("scope", "Scope"),
)


def compose_channels() -> ComposeResult:
    """The caption and the table."""
    yield Static(id="channel-caption", classes="caption")
    yield DataTable(id="channel-table", cursor_type="row", zebra_stripes=True)


def add_channel_columns(table: DataTable[object]) -> None:
    """Give the table its columns."""
    for key, title in CHANNEL_COLUMNS:
        table.add_column(title, key=key)


def refresh_channels(
    table: DataTable[object], caption: Static, state: TuiState, view: View, replay: Replay | None
) -> None:
    """Refill the table, with rates up to the replay's position (or the latest event, live)."""
    end = None
    if replay is not None:
        end = replay.events[replay.position - 1].t if replay.position else replay.start
    rows = channel_rows(state, view, 20, end)
    table.clear()
    for row in rows:
        table.add_row(
            row.source,
            row.target,
            row.contract,
            f"{row.records:,}",
            "n/a" if row.in_flight is None else f"{row.in_flight:,}" if row.in_flight else "",
            Text(row.spark, style="cyan"),
            row.scope,
            key=row.key,
        )
    bucket = state.rates.bucket
    note = " · in flight n/a: records in flight belong to the channel, see all workers (w)"
    caption.update(
        f"{len(rows)} channels · records/s over the last {20 * bucket:.3g} s of program time "
        f"({bucket:.3g} s per bar){note if any(row.in_flight is None for row in rows) else ''}"
    )
