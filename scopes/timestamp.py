"""The old import path of :mod:`scopes.progress.timestamp`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.timestamp import (
    INTEGER,
    UINT64_MAX,
    CheckedSummary,
    IdentityRefinement,
    IntegerSummary,
    IntegerType,
    PathSummary,
    Product,
    ProductRefinement,
    ProductSummary,
    ProductType,
    Refinement,
    TimestampType,
    checked,
    natural_order,
)

__all__ = [
    "CheckedSummary",
    "INTEGER",
    "IdentityRefinement",
    "IntegerSummary",
    "IntegerType",
    "PathSummary",
    "Product",
    "ProductRefinement",
    "ProductSummary",
    "ProductType",
    "Refinement",
    "TimestampType",
    "UINT64_MAX",
    "checked",
    "natural_order",
]
