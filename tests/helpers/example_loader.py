"""Import the scripts under ``examples/`` as modules, once per test session.

``examples/`` is not a package, so tests load ``examples/NAME.py`` by path, as a
module named ``example_NAME``.  Every test module shares that one name per
example, so an example's module-level state (codecs it registers, caches) exists
once, whichever test loaded it first.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"


def load_example(name: str) -> ModuleType:
    """Return ``examples/NAME.py`` imported as ``example_NAME`` (loaded on first use)."""
    module_name = f"example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
