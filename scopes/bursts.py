"""How much of its waiting input an operator reads in one run: a burst of records, then it yields.

An operator that read every waiting message in one run would build all its
output before the operators it feeds read any of it, so they would read it from
memory rather than from the CPU's cache.  So one pass over an input reads whole
messages until it has read :data:`BURST` records, asks to run again, and ends;
the operators downstream run in between.

Progress is unaffected: messages not yet read stay counted at the input, so
they hold its frontier back as any message on its way does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final, Protocol

from scopes.channel_protocols import Message
from scopes.exchange import EXCHANGE_BUFFER

BURST: Final = EXCHANGE_BUFFER
"""Records one pass over an operator's input reads before it ends and the operator is scheduled again.

The wordcount with a local combiner before an exchange went from 0.85x to 1.19x
on 2 processes against 1 in BENCHMARKS.md's COST rows when operators began to
yield.  Whole messages are read: a message of more records than this is read
alone.  A fused chain of per-record stages (:class:`~scopes.per_record.Chain`)
counts the records it sends instead (a ``flat_map`` may send many per record
read).  It is the exchange's buffer, and a loop's feedback joins lists up to it
(:data:`scopes.loops.JOIN_LIMIT`), so a loop's messages keep their size.
"""


class Reschedulable(Protocol):
    """An operator that can ask to run again."""

    def activate(self) -> None:
        """Ask to be scheduled again."""
        ...


def burst(pull: Callable[[], Message | None], operator: Reschedulable) -> Iterator[Message]:
    """The messages ``pull`` returns, until none is left or they hold :data:`BURST` records; then ``operator``
    is activated, to read the rest in a later run."""
    taken = 0
    while (message := pull()) is not None:
        yield message
        taken += len(message[1])
        if taken >= BURST:
            operator.activate()
            return
