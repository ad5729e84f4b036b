"""The operator table's filter and order: which rows it shows, sorted by which column, which way."""

from __future__ import annotations

from viz.tui.adapter import OperatorRow

SORT_COLUMNS = ("address", "name", "scope", "records_in", "records_out", "scheduled", "seconds")


class TableOrder:
    """The user's filter text and sort column and direction for the operator table."""

    def __init__(self) -> None:
        """No filter, sorted by address, ascending."""
        self.filter_text = ""
        self.sort_column = "address"
        self.sort_reverse = False

    def apply(self, rows: list[OperatorRow]) -> list[OperatorRow]:
        """The rows the filter lets through, in the chosen order."""
        if self.filter_text:
            rows = [row for row in rows if row.matches(self.filter_text)]
        rows.sort(key=lambda row: row.sort_key(self.sort_column), reverse=self.sort_reverse)
        return rows

    def next_column(self) -> None:
        """Sort by the next column of :data:`SORT_COLUMNS` (after the last, the first)."""
        index = SORT_COLUMNS.index(self.sort_column) if self.sort_column in SORT_COLUMNS else -1
        self.sort_column = SORT_COLUMNS[(index + 1) % len(SORT_COLUMNS)]

    def reverse(self) -> None:
        """Reverse the order."""
        self.sort_reverse = not self.sort_reverse

    def header_clicked(self, column: str) -> bool:
        """Sort by ``column`` (reversing if it already is); return whether the order changed.

        The frontier and capability columns hold text that has no useful order, and are not sorted by.
        """
        if column == "frontiers" or column == "capabilities":
            return False
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, False
        return True
