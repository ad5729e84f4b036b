"""Modules imported when first used, so that ``import runtime`` does not pay for NumPy.

A program that never makes a columnar batch never imports NumPy (about 0.1 s)
or Arrow.  ``np = lazy_module("numpy")`` at the top of a module stands for
``import numpy as np``: the first attribute read imports NumPy, and afterwards
attributes are read from a copy of its namespace.  Code that only needs to know
whether a value is a NumPy array asks :func:`loaded` first: when NumPy has not
been imported by anyone, no value can be one.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class LazyModule(types.ModuleType):
    """A stand-in for a module that imports it on the first attribute read."""

    def __init__(self, name: str) -> None:
        """Stand in for the module called ``name`` (not imported yet)."""
        super().__init__(name)

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)  # later reads find them here, without this call
        return getattr(module, attribute)


def lazy_module(name: str) -> Any:
    """A stand-in for ``import name`` that imports it on first use."""
    return LazyModule(name)


def loaded(name: str) -> Any:
    """The module ``name`` if some code has imported it already, else ``None`` (never imports)."""
    return sys.modules.get(name)
