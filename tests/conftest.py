"""Make the repository root importable when the tests run without an installed package."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from conftest_spark import spark  # noqa: E402, F401  (the shared SparkSession fixture)
