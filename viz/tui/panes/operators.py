"""Pane 2, the operator table: one row per operator, filtered and sorted as the user asks."""

from __future__ import annotations

import contextlib

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Input, Static

from viz.model import Model, View
from viz.tui.adapter import address_text, operator_rows
from viz.tui.table_order import TableOrder

OPERATOR_COLUMNS = (
    ("name", "Operator"),
    ("frontiers", "Input frontiers"),
    ("capabilities", "Capabilities"),
    ("records_in", "In"),
    ("records_out", "Out"),
    ("scheduled", "Runs"),
    ("seconds", "ms"),
    ("scope", "Scope"),
    ("address", "Address"),
)


def compose_operators() -> ComposeResult:
    """The filter box (hidden until asked for), the caption and the table."""
    yield Input(placeholder="filter by name, scope or address; enter or escape to close", id="filter")
    yield Static(id="op-caption", classes="caption")
    yield DataTable(id="op-table", cursor_type="row", zebra_stripes=True)


def add_operator_columns(table: DataTable[object]) -> None:
    """Give the table its columns, keyed by what :class:`~viz.tui.table_order.TableOrder` sorts by."""
    for key, title in OPERATOR_COLUMNS:
        table.add_column(title, key=key)


def refresh_operators(
    table: DataTable[object], caption_widget: Static, model: Model, view: View, order: TableOrder, worker: int | None
) -> None:
    """Refill the table in ``order``, keeping the cursor on its operator, and say what it shows in the caption."""
    rows = operator_rows(model, view)
    total = len(rows)
    rows = order.apply(rows)
    keep = None
    if table.row_count:
        keep = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    table.clear()
    for row in rows:
        name = Text(("● " if row.busy else "✓ ") + row.name, style="yellow" if row.busy else "")
        table.add_row(
            name,
            row.frontiers,
            row.capabilities,
            f"{row.records_in:,}",
            f"{row.records_out:,}",
            f"{row.scheduled:,}",
            f"{row.seconds * 1000:,.1f}",
            row.scope,
            address_text(row.address),
            key=address_text(row.address),
        )
    if keep is not None:
        with contextlib.suppress(Exception):  # the row may have been filtered out
            table.move_cursor(row=table.get_row_index(keep))
    arrow = "↓" if order.sort_reverse else "↑"
    caption = f"{len(rows)} of {total} operators · sorted by {order.sort_column} {arrow} (s, r, click a header)"
    if worker is not None and worker in model.workers:
        caption = f"worker {worker} (its own capabilities, records and runs; w: next) · {caption}"
    if order.filter_text:
        caption = f"filter '{order.filter_text}' · {caption}"
    caption_widget.update(caption)
