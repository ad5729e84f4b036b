"""What ``probe.frontier`` gives: :class:`ProbeFrontier`, an antichain to call, that warns when used as one.

It lives apart from :mod:`scopes.probes` so that it stays a Python class when
the compiled build (:mod:`scopes.native`) compiles the probes: it subclasses
the compiled :class:`~scopes.progress.antichain.Antichain`, which allows
interpreted subclasses.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from scopes.progress.antichain import Antichain


class ProbeFrontier(Antichain[Any]):
    """What ``probe.frontier`` gives: call it for the frontier; used as the frontier directly, it warns."""

    __slots__ = ()

    def __call__(self) -> Antichain[Any]:
        """The probe's current frontier."""
        return Antichain(self._elements)

    def _deprecated(self) -> None:
        warnings.warn(
            "probe.frontier is a method, like probe.less_than() and probe.done(): call probe.frontier()",
            DeprecationWarning,
            stacklevel=3,
        )

    @property
    def elements(self) -> tuple[Any, ...]:
        """The frontier's elements (deprecated: use ``probe.frontier().elements``)."""
        self._deprecated()
        return tuple(self._elements)

    def __iter__(self) -> Iterator[Any]:
        self._deprecated()
        return iter(tuple(self._elements))
