"""``mypyc_attr``, the class decorator that tells mypyc how to compile a class, or a stand-in that changes nothing.

The compiled build (:mod:`scopes.native`) needs ``mypy_extensions``, which comes
with mypy; pure Python needs neither, and a user may have neither installed.
Classes that Python code subclasses are marked
``@mypyc_attr(allow_interpreted_subclasses=True)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:
    try:  # mypyc reads the decorator as it compiles
        from mypy_extensions import mypyc_attr
    except ImportError:

        def mypyc_attr(*attrs, **kwattrs):
            """Stands in for ``mypy_extensions.mypyc_attr``: a class decorator that changes nothing."""
            return lambda cls: cls


__all__ = ["mypyc_attr"]
