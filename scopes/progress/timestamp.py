"""Timestamps, path summaries, and the refinement between nested scopes.

A timestamp type is described by a :class:`TimestampType` object: it knows the
minimum time, the identity path summary, and how to validate a value.  Two
families are built in:

* :data:`INTEGER`: unsigned 64-bit integers, stored as plain Python ``int``.
  Their summaries are :class:`IntegerSummary` (advance by ``step``, optionally
  only up to a ``limit``; past it the time cannot travel the path).
* :class:`ProductType`: pairs ``Product(outer, inner)`` ordered coordinate-wise,
  nestable to any depth; the timestamps of a loop nested in a scope.  Their
  summaries are :class:`ProductSummary`.

A :class:`ProductType` also describes the *refinement* between a scope and its
parent: :meth:`ProductType.to_inner`, :meth:`ProductType.to_outer` and
:meth:`ProductType.summarize`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from scopes.errors import SummaryError, TimestampError
from scopes.progress.order import less_equal, natural_order

UINT64_MAX = 2**64 - 1
"""The largest integer timestamp; a summary that would pass it yields ``None``."""


class Product(tuple):
    """A pair of timestamps ordered coordinate-wise: ``(a, b) <= (c, d)`` iff ``a <= c and b <= d``.

    ``Product`` is immutable and hashable.  The partial order is available as
    :meth:`less_equal` and :meth:`less_than`; Python's ``<`` and ``sorted`` order
    products lexicographically, a total order that extends the partial order.
    """

    __slots__ = ()

    def __new__(cls, outer: Any, inner: Any) -> Product:
        """Create the product of an ``outer`` and an ``inner`` timestamp."""
        return tuple.__new__(cls, (outer, inner))

    def __getnewargs__(self) -> tuple[Any, Any]:
        """Support pickling and copying."""
        return (self[0], self[1])

    outer = property(itemgetter(0), doc="The timestamp of the enclosing scope.")
    inner = property(itemgetter(1), doc="The timestamp coordinate added by the nested scope.")

    def less_equal(self, other: Product) -> bool:
        """Return whether every coordinate of ``self`` is ``<=`` that of ``other``."""
        a, b = self
        c, d = other
        if a.__class__ is int:
            if not a <= c:
                return False
        elif not a.less_equal(c):
            return False
        if b.__class__ is int:
            return bool(b <= d)
        return bool(b.less_equal(d))

    def less_than(self, other: Product) -> bool:
        """Return whether ``self`` is ``<=`` ``other`` and differs from it."""
        return self.less_equal(other) and tuple.__ne__(self, other)

    def __repr__(self) -> str:
        return f"Product({self[0]!r}, {self[1]!r})"


class PathSummary(ABC):
    """What must happen to a timestamp as it travels along a path.

    Summaries are partially ordered: ``s <= u`` when, for every time, ``s``
    produces a time no later than ``u`` does.
    """

    __slots__ = ()

    @abstractmethod
    def results_in(self, time: Any) -> Any | None:
        """Return the time that ``time`` becomes along the path, or ``None`` if it cannot travel it.

        The result must never be earlier than ``time``.
        """

    @abstractmethod
    def followed_by(self, other: PathSummary) -> PathSummary | None:
        """Return the summary of this path followed by ``other``, or ``None`` if nothing passes both."""

    @abstractmethod
    def less_equal(self, other: PathSummary) -> bool:
        """Return whether this summary yields times no later than ``other`` for every time."""

    def less_than(self, other: PathSummary) -> bool:
        """Return whether ``self <= other`` in the partial order and the two differ."""
        return self.less_equal(other) and self != other

    @abstractmethod
    def advances(self) -> bool:
        """Return whether every time that travels the path comes out strictly later.

        Every cycle in a dataflow graph must contain a summary that advances.
        """


class IntegerSummary(PathSummary):
    """Advance an integer time by ``step``; times that would pass ``limit`` cannot travel.

    ``IntegerSummary()`` is the identity.  ``IntegerSummary(1)`` is the summary of a
    feedback edge.  ``IntegerSummary(1, limit=9)`` is a loop bounded at 9 iterations.
    """

    __slots__ = ("step", "limit", "_identity")

    def __init__(self, step: int = 0, limit: int = UINT64_MAX) -> None:
        """Create a summary that adds ``step`` and discards results above ``limit``."""
        if step.__class__ is not int or step < 0:
            raise SummaryError(
                f"an integer path summary needs a step that is an int >= 0, got {step!r}; "
                "a path may never move a timestamp backwards"
            )
        if limit.__class__ is not int or not 0 <= limit <= UINT64_MAX:
            raise SummaryError(f"an integer summary limit must be an int in [0, 2**64 - 1], got {limit!r}")
        self.step = step
        self.limit = limit
        self._identity = step == 0 and limit == UINT64_MAX

    def results_in(self, time: int) -> int | None:
        """Return ``time + step``, or ``None`` if that exceeds the limit."""
        if self._identity:
            return time
        result = time + self.step
        return result if result <= self.limit else None

    def followed_by(self, other: PathSummary) -> IntegerSummary | None:
        """Compose two integer summaries; ``None`` when no time can pass both."""
        if not isinstance(other, IntegerSummary):
            raise SummaryError(f"cannot compose {self!r} with {other!r}: different timestamp types")
        step = self.step + other.step
        limit = min(self.limit + other.step, other.limit)
        if limit < step:
            return None
        return IntegerSummary(step, min(limit, UINT64_MAX))

    def less_equal(self, other: PathSummary) -> bool:
        """``self <= other`` iff wherever ``other`` passes a time, ``self`` does so to an earlier one."""
        if not isinstance(other, IntegerSummary):
            return False
        if other.limit < other.step:
            return True
        return self.step <= other.step and other.limit - other.step <= self.limit - self.step

    def advances(self) -> bool:
        """An integer summary advances iff its step is positive."""
        return self.step > 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IntegerSummary) and self.step == other.step and self.limit == other.limit

    def __hash__(self) -> int:
        return hash((IntegerSummary, self.step, self.limit))

    def __repr__(self) -> str:
        if self.limit == UINT64_MAX:
            return f"IntegerSummary({self.step})"
        return f"IntegerSummary({self.step}, limit={self.limit})"


class ProductSummary(PathSummary):
    """A summary for :class:`Product` times: one summary per coordinate."""

    __slots__ = ("outer", "inner", "_identity")

    def __init__(self, outer: PathSummary, inner: PathSummary) -> None:
        """Combine a summary of the outer coordinate with one of the inner coordinate."""
        self.outer = outer
        self.inner = inner
        self._identity = _is_identity(outer) and _is_identity(inner)

    def results_in(self, time: Product) -> Product | None:
        """Apply each coordinate's summary; ``None`` if either coordinate cannot pass."""
        if self._identity:
            return time
        outer = self.outer.results_in(time[0])
        if outer is None:
            return None
        inner = self.inner.results_in(time[1])
        if inner is None:
            return None
        return Product(outer, inner)

    def followed_by(self, other: PathSummary) -> ProductSummary | None:
        """Compose coordinate-wise; ``None`` if either coordinate composes to ``None``."""
        if not isinstance(other, ProductSummary):
            raise SummaryError(f"cannot compose {self!r} with {other!r}: different timestamp types")
        outer = self.outer.followed_by(other.outer)
        if outer is None:
            return None
        inner = self.inner.followed_by(other.inner)
        if inner is None:
            return None
        return ProductSummary(outer, inner)

    def less_equal(self, other: PathSummary) -> bool:
        """Coordinate-wise order."""
        return (
            isinstance(other, ProductSummary)
            and self.outer.less_equal(other.outer)
            and self.inner.less_equal(other.inner)
        )

    def advances(self) -> bool:
        """A product summary advances if either coordinate does."""
        return self.outer.advances() or self.inner.advances()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProductSummary) and self.outer == other.outer and self.inner == other.inner

    def __hash__(self) -> int:
        return hash((ProductSummary, self.outer, self.inner))

    def __repr__(self) -> str:
        return f"ProductSummary({self.outer!r}, {self.inner!r})"


def _is_identity(summary: PathSummary) -> bool:
    return bool(getattr(summary, "_identity", False))


class CheckedSummary(PathSummary):
    """Wraps a user-defined summary and checks that it never moves a time backwards."""

    __slots__ = ("wrapped", "where")

    def __init__(self, wrapped: PathSummary, where: str = "") -> None:
        """Wrap ``wrapped``; ``where`` names the operator and ports for error messages."""
        self.wrapped = wrapped
        self.where = where

    def results_in(self, time: Any) -> Any | None:
        """Apply the wrapped summary, raising :class:`SummaryError` if it moves time backwards."""
        result = self.wrapped.results_in(time)
        if result is not None and not less_equal(time, result):
            where = f" on {self.where}" if self.where else ""
            raise SummaryError(
                f"path summary {self.wrapped!r}{where} moved time {time!r} backwards to "
                f"{result!r}; results_in must return a time >= its argument, or None"
            )
        return result

    def followed_by(self, other: PathSummary) -> PathSummary | None:
        """Compose the wrapped summaries and keep checking the result."""
        inner_other = other.wrapped if isinstance(other, CheckedSummary) else other
        composed = self.wrapped.followed_by(inner_other)
        return None if composed is None else CheckedSummary(composed, self.where)

    def less_equal(self, other: PathSummary) -> bool:
        """Compare the wrapped summaries."""
        inner_other = other.wrapped if isinstance(other, CheckedSummary) else other
        return bool(self.wrapped.less_equal(inner_other))

    def advances(self) -> bool:
        """Whether the wrapped summary advances."""
        return bool(self.wrapped.advances())

    def __eq__(self, other: object) -> bool:
        inner_other = other.wrapped if isinstance(other, CheckedSummary) else other
        return bool(self.wrapped == inner_other)

    def __hash__(self) -> int:
        return hash(self.wrapped)

    def __repr__(self) -> str:
        return repr(self.wrapped)


_BUILTIN_SUMMARIES = (IntegerSummary, ProductSummary, CheckedSummary)


def checked(summary: PathSummary, where: str = "", identity: PathSummary | None = None) -> PathSummary:
    """Return ``summary``, wrapped in a :class:`CheckedSummary` if it is user-defined.

    With ``identity`` (the identity summary of the scope's times), a summary that does not
    :func:`fit <fits>` those times is refused.
    """
    if identity is not None and not fits(summary, identity):
        raise SummaryError(
            f"{where}: summary {summary!r} does not fit this scope's timestamps, whose identity summary is "
            f"{identity!r}: give a summary of that shape"
        )
    if isinstance(summary, _BUILTIN_SUMMARIES):
        return summary
    if not isinstance(summary, PathSummary):
        raise SummaryError(
            f"{summary!r}{' on ' + where if where else ''} is not a PathSummary; "
            "subclass scopes.PathSummary and implement results_in, followed_by, less_equal, advances"
        )
    return CheckedSummary(summary, where)


def fits(summary: Any, identity: PathSummary) -> bool:
    """Whether ``summary`` can summarize paths between the times whose identity summary is ``identity``.

    Only the built-in summaries are told apart: an :class:`IntegerSummary` where times are
    :class:`Product`, or a :class:`ProductSummary` nested to another depth than the times, does not fit
    (it would fail when composed, or move a time into garbage, only once progress reached it).  Anything
    else fits: a user-defined summary, or any summary of a user-defined timestamp type, is its author's.
    """
    if isinstance(summary, ProductSummary):
        if isinstance(identity, ProductSummary):
            return fits(summary.outer, identity.outer) and fits(summary.inner, identity.inner)
        return not isinstance(identity, IntegerSummary)
    if isinstance(summary, IntegerSummary):
        return not isinstance(identity, ProductSummary)
    return True


class TimestampType(ABC):
    """Describes a timestamp type: its minimum, its identity summary, and which values belong."""

    name: str = "timestamp"

    @abstractmethod
    def minimum(self) -> Any:
        """Return the least timestamp of this type."""

    @abstractmethod
    def identity(self) -> PathSummary:
        """Return the summary of a path that leaves times unchanged."""

    @abstractmethod
    def contains(self, value: Any) -> bool:
        """Return whether ``value`` is a timestamp of this type."""

    def validate(self, value: Any, what: str = "time") -> Any:
        """Return ``value`` if it is a timestamp of this type, else raise :class:`TimestampError`."""
        if not self.contains(value):
            raise TimestampError(
                f"{what} {value!r} is not a {self.name} timestamp (the minimum of this type is {self.minimum()!r})"
            )
        return value

    def depth(self) -> int:
        """Return how many nested scopes this type refines (0 for a root type)."""
        return 0

    def sort_key(self) -> Callable[[Any], Any] | None:
        """A key whose ``<`` extends the partial order, for the progress tracker's work list (and the order in
        which notificators, ``count``/``accumulate`` and the keyed operators handle times that complete together).

        A timestamp type only has to implement the partial order (``less_equal``,
        ``less_than``), equality and hashing.  The tracker must handle changes in an
        order that never goes back (no change at a time strictly earlier than one
        already handled), or it may chase changes around a loop forever.  It gets
        that order from this method:

        * :func:`natural_order` (the default when the values support ``<``): the
          times' own ``<`` is a total order that extends the partial order, as for
          ``int`` and ``Product``'s lexicographic order.
        * another function ``key``: ``a.less_than(b)`` implies ``key(a) < key(b)``
          (for example the sum of the coordinates of a pair).
        * ``None`` (the default when the values have no ``<``): the tracker picks
          minimal times with ``less_than`` itself; correct, but quadratic in the
          number of distinct times it handles at once.
        """
        minimum = self.minimum()
        try:
            _ = minimum < minimum
        except TypeError:
            return None
        return natural_order


class IntegerType(TimestampType):
    """Unsigned 64-bit integer timestamps, represented as Python ``int``."""

    name = "integer"

    def minimum(self) -> int:
        """Zero."""
        return 0

    def identity(self) -> IntegerSummary:
        """The summary that adds nothing."""
        return _INTEGER_IDENTITY

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is an ``int`` (not a ``bool``) in ``[0, 2**64 - 1]``."""
        return value.__class__ is int and 0 <= value <= UINT64_MAX

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IntegerType)

    def __hash__(self) -> int:
        return hash(IntegerType)

    def __repr__(self) -> str:
        return "INTEGER"


_INTEGER_IDENTITY = IntegerSummary()
INTEGER = IntegerType()
"""The integer timestamp type: epochs, sequence numbers, loop counters."""


class ProductType(TimestampType):
    """Timestamps ``Product(outer, inner)`` of a scope nested in a scope with ``outer`` times.

    Besides describing the type, this object is the refinement between the two
    scopes: :meth:`to_inner`, :meth:`to_outer` and :meth:`summarize`.
    """

    def __init__(self, outer: TimestampType, inner: TimestampType = INTEGER) -> None:
        """Describe products of ``outer`` and ``inner`` timestamps."""
        self.outer = outer
        self.inner = inner
        self.name = f"Product[{outer.name}, {inner.name}]"
        self._minimum = Product(outer.minimum(), inner.minimum())
        self._identity = ProductSummary(outer.identity(), inner.identity())
        self._inner_minimum = inner.minimum()

    def minimum(self) -> Product:
        """The product of the two minima."""
        return self._minimum

    def identity(self) -> ProductSummary:
        """The product of the two identities."""
        return self._identity

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a :class:`Product` whose coordinates belong to their types."""
        return isinstance(value, Product) and self.outer.contains(value[0]) and self.inner.contains(value[1])

    def depth(self) -> int:
        """One more than the outer type's depth."""
        return self.outer.depth() + 1

    def sort_key(self) -> Callable[[Any], Any] | None:
        """Lexicographic products when both coordinates have a key; ``None`` if either has none."""
        outer, inner = self.outer.sort_key(), self.inner.sort_key()
        if outer is None or inner is None:
            return None
        if outer is natural_order and inner is natural_order:
            return natural_order
        return lambda time: (outer(time[0]), inner(time[1]))

    def to_inner(self, time: Any) -> Product:
        """Enter the nested scope: ``t`` becomes ``Product(t, inner minimum)``."""
        return Product(time, self._inner_minimum)

    def to_outer(self, time: Product) -> Any:
        """Leave the nested scope: drop the inner coordinate."""
        return time[0]

    def summarize(self, summary: PathSummary) -> PathSummary:
        """Express an inner path summary as a summary of the outer scope."""
        if isinstance(summary, CheckedSummary):
            summary = summary.wrapped
        if not isinstance(summary, ProductSummary):
            raise SummaryError(f"cannot summarize {summary!r} for the outer scope: not a ProductSummary")
        return summary.outer

    def feedback(self, step: int = 1, limit: int = UINT64_MAX) -> ProductSummary:
        """The summary of a feedback edge: the outer time unchanged, the inner one advanced."""
        if not isinstance(self.inner, IntegerType):
            raise SummaryError(f"feedback needs integer inner timestamps, not {self.inner!r}")
        return ProductSummary(self.outer.identity(), IntegerSummary(step, limit))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProductType) and self.outer == other.outer and self.inner == other.inner

    def __hash__(self) -> int:
        return hash((ProductType, self.outer, self.inner))

    def __repr__(self) -> str:
        return f"ProductType({self.outer!r}, {self.inner!r})"


class Refinement(ABC):
    """How the timestamps of a nested scope relate to those of its parent."""

    outer: TimestampType
    inner: TimestampType

    @abstractmethod
    def to_inner(self, time: Any) -> Any:
        """The time a parent time becomes on entering the nested scope."""

    @abstractmethod
    def to_outer(self, time: Any) -> Any:
        """The time an inner time becomes on leaving the nested scope."""

    @abstractmethod
    def summarize(self, summary: PathSummary) -> PathSummary:
        """An inner path summary as seen by the parent."""


class ProductRefinement(Refinement):
    """The refinement of a loop scope: times gain an inner integer coordinate."""

    def __init__(self, product: ProductType) -> None:
        """Refine ``product.outer`` into ``product``."""
        self.outer = product.outer
        self.inner = product
        self._product = product

    def to_inner(self, time: Any) -> Product:
        """``t`` becomes ``Product(t, 0)``."""
        return self._product.to_inner(time)

    def to_outer(self, time: Any) -> Any:
        """``Product(t, i)`` becomes ``t``."""
        return time[0]

    def summarize(self, summary: PathSummary) -> PathSummary:
        """Keep the outer coordinate's summary."""
        return self._product.summarize(summary)


class IdentityRefinement(Refinement):
    """The refinement of a region: the nested scope uses its parent's timestamps."""

    def __init__(self, timestamp_type: TimestampType) -> None:
        """Refine ``timestamp_type`` into itself."""
        self.outer = timestamp_type
        self.inner = timestamp_type

    def to_inner(self, time: Any) -> Any:
        """Unchanged."""
        return time

    def to_outer(self, time: Any) -> Any:
        """Unchanged."""
        return time

    def summarize(self, summary: PathSummary) -> PathSummary:
        """Unchanged."""
        return summary
