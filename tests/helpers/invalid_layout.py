"""A stand-in for an Arrow batch invalid only as a whole, for the tests of the validity checks."""

from __future__ import annotations

from typing import Any


class BadLayout:
    """A table whose columns are each valid Arrow while its own full validation fails: what pyarrow's builders
    never make (they check lengths and schema), standing in for a batch made some other way."""

    def __init__(self, table: Any) -> None:
        self.schema, self.columns, self.num_rows = table.schema, table.columns, table.num_rows

    def validate(self, full: bool = False) -> None:
        """Fail as pyarrow's validation does."""
        import pyarrow as pa  # type: ignore[import-untyped]

        raise pa.ArrowInvalid("column 1 has 3 rows where the table has 2")
