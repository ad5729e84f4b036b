"""The schema a file source reads with, and the files it reads as holding no rows.

A column that holds only nulls in a file has Arrow's ``null`` type there: a CSV
file with a header and no rows (an epoch without records) has only such
columns, and so has a JSON Lines file whose records all lack a field or give it
``null``.  Such a column holds no value any type could refuse, so it is read as
the column's type in the other files.  The source's schema is the first file's,
with each ``null`` column given the type it has in the first later file where
it has another; only a first file with ``null`` columns makes later files be
looked at.  A JSON Lines file holding only whitespace (pyarrow's reader refuses
it as an empty stream) is a file of no rows, an epoch without records.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from runtime.errors import FileSourceError

BLANK_BYTES = 4096
"""The largest JSON Lines file looked at for being blank: larger ones are read as pyarrow reads them."""


def is_blank(path: str, format: str) -> bool:
    """Whether ``path`` is a JSON Lines file that holds only whitespace (no records)."""
    if format != "json":
        return False
    try:
        if os.path.getsize(path) > BLANK_BYTES:
            return False
        with open(path, "rb") as source:
            return not source.read().strip()
    except OSError:
        return False  # reading it fails later, naming the file


def source_schema(
    pa: Any, dataset_module: Any, files: list[str], format: str, where: str, check: Callable[[str], None]
) -> Any:
    """The schema a source of ``files`` reads with: the first file's, its ``null`` columns typed from later files.

    ``None`` when every file is blank (no rows, no columns).  ``check(path)`` is called before a file is parsed for
    its schema (a JSON Lines file's nesting is bounded before pyarrow's parser, which could crash, reads it).
    """
    schema = None
    for path in files:
        if is_blank(path, format):
            continue
        check(path)
        found = _physical_schema(dataset_module, path, format, where)
        if schema is None:
            schema = found
        else:
            for index, field in enumerate(schema):
                other = found.get_field_index(field.name)
                if pa.types.is_null(field.type) and other >= 0 and not pa.types.is_null(found.field(other).type):
                    schema = schema.set(index, field.with_type(found.field(other).type))
        if not any(pa.types.is_null(field.type) for field in schema):
            break
    return schema


def _physical_schema(dataset_module: Any, path: str, format: str, where: str) -> Any:
    try:
        return dataset_module.dataset(path, format=format).schema
    except Exception as error:  # pyarrow raises several kinds while it inspects a file
        raise FileSourceError(f"{where}: cannot open {path!r} as {format}: {error}") from error
