"""The progress model of timely dataflow, and dataflow graph building.

Pure: no sockets, files or threads.  The pieces, bottom up:

* :mod:`scopes.order`, :mod:`scopes.timestamp`: partial orders, timestamps
  (integers and ``Product``), path summaries, refinements between nested scopes.
* :mod:`scopes.antichain`, :mod:`scopes.change_batch`: frontiers and count updates.
* :mod:`scopes.reachability`, :mod:`scopes.visit_order`: compiled path summaries, the
  pointstamp tracker, and the orders it visits work in.
* :mod:`scopes.operate`, :mod:`scopes.subgraph`: the ``Operate`` interface (how a parent
  sees a child) and ``Subgraph``, built through :mod:`scopes.subgraph_builder`, its
  locations numbered by :mod:`scopes.location_index`, its progress exchanged by
  :mod:`scopes.progcaster`.
* :mod:`scopes.operator`, :mod:`scopes.operator_builder`: operators, capabilities,
  notifications, and assembling an operator.
* :mod:`scopes.core`: the plain stream and scope the operator families
  (:mod:`scopes.per_record`, :mod:`scopes.routing`, ..., :mod:`scopes.sources`,
  :mod:`scopes.loops`) are written against.
* :mod:`scopes.stream`: ``Stream`` and ``ScopeBuilder``, the facade users call,
  delegating to the families; :mod:`scopes.builder` gathers the building names.

:mod:`scopes.native` runs first: it selects the optional mypyc-compiled build of
the progress path when one is built and matches the sources (else pure Python).
"""

# ruff: noqa: E402 - the compiled build is selected before the modules it may replace are imported
import sys as _sys

from scopes import native as _native

_native.select(_sys.modules[__name__])

from scopes.antichain import Antichain, MutableAntichain
from scopes.builder import InputHandle, LoopHandle, ProbeHandle, ScopeBuilder, source, to_stream
from scopes.change_batch import ChangeBatch
from scopes.channels import Broadcast, ChannelContract, Exchange, ExchangeBatch, Pipeline
from scopes.errors import (
    BuildError,
    CapabilityError,
    ConflictingUpdates,
    CycleError,
    GraphError,
    ProgressError,
    ScopeBoundaryError,
    ScopeError,
    SummaryError,
    TimelyError,
    TimestampError,
)
from scopes.keyed import KeyedStream
from scopes.keyed_columnar import KeyedBatches
from scopes.location import Source, Target
from scopes.operate import Operate
from scopes.operator import (
    Capability,
    CapabilityRef,
    Notificator,
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
)
from scopes.order import PartialOrder, less_equal, less_than
from scopes.reachability import Tracker
from scopes.stream import Stream, generic
from scopes.subgraph import Subgraph
from scopes.timestamp import (
    INTEGER,
    UINT64_MAX,
    IntegerSummary,
    IntegerType,
    PathSummary,
    Product,
    ProductSummary,
    ProductType,
    TimestampType,
)
from scopes.windows import Session, Sliding, Tumbling, Windowed

__all__ = [
    "INTEGER",
    "UINT64_MAX",
    "Antichain",
    "Broadcast",
    "BuildError",
    "ConflictingUpdates",
    "Capability",
    "CapabilityError",
    "CapabilityRef",
    "ChangeBatch",
    "ChannelContract",
    "CycleError",
    "Exchange",
    "ExchangeBatch",
    "GraphError",
    "InputHandle",
    "IntegerSummary",
    "IntegerType",
    "KeyedBatches",
    "KeyedStream",
    "LoopHandle",
    "MutableAntichain",
    "Notificator",
    "OperatorInfo",
    "OperatorInput",
    "OperatorOutput",
    "PartialOrder",
    "PathSummary",
    "Pipeline",
    "ProbeHandle",
    "Product",
    "ProductSummary",
    "ProductType",
    "ProgressError",
    "Operate",
    "ScopeBoundaryError",
    "ScopeBuilder",
    "ScopeError",
    "Session",
    "Sliding",
    "Source",
    "Stream",
    "Subgraph",
    "SummaryError",
    "Target",
    "TimelyError",
    "TimestampError",
    "TimestampType",
    "Tracker",
    "Tumbling",
    "Windowed",
    "generic",
    "less_equal",
    "less_than",
    "source",
    "to_stream",
]
