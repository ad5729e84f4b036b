"""What the file source and sink share: pyarrow's import, the format names and the files' name endings."""

from __future__ import annotations

from typing import Any

from runtime.errors import ConfigurationError

FORMATS = {"parquet": "parquet", "csv": "csv", "jsonl": "json", "json": "json"}
"""The formats by the name a user gives, and the ``pyarrow.dataset`` format each one reads as."""

SUFFIXES = {"parquet": ".parquet", "csv": ".csv", "json": ".jsonl"}
"""The file name ending the sink writes for each ``pyarrow.dataset`` format."""


def pyarrow_module() -> Any:
    """``pyarrow`` alone (the sink does without ``pyarrow.dataset``, which imports pandas)."""
    try:
        import pyarrow  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigurationError(
            "file sources and sinks read and write through pyarrow.dataset; install it with `pip install pyarrow`"
        ) from None
    return pyarrow


def pyarrow_modules() -> tuple[Any, Any]:
    """``pyarrow`` and ``pyarrow.dataset``, or a :class:`ConfigurationError` saying how to install them."""
    pyarrow_module()
    import pyarrow.dataset  # type: ignore[import-untyped]

    return pyarrow_module(), pyarrow.dataset


def arrow_format(format: str) -> str:
    """The ``pyarrow.dataset`` format of the user's ``format`` name, or a :class:`ConfigurationError`."""
    try:
        return FORMATS[format]
    except KeyError:
        raise ConfigurationError(f"unknown file format {format!r}; use one of {sorted(FORMATS)}") from None
