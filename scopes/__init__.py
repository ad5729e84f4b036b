"""The progress model of timely dataflow, and dataflow graph building.

Pure: no sockets, files or threads.  The pieces, bottom up:

* :mod:`scopes.progress`: the progress model, timely's ``progress/``: partial orders and
  timestamps, antichains and change batches, locations, the reachability tracker, the
  ``Operate`` interface (exported here as :data:`Scope` too: the seed's *Scope* interface) and
  ``Subgraph``, its graph, locations and progress exchange.  It imports nothing of the rest of
  :mod:`scopes` but the channel protocols (:mod:`scopes.channel_protocols`) and the errors.
  The old flat paths (:mod:`scopes.antichain`, :mod:`scopes.subgraph`, ...) still import.
* :mod:`scopes.operator`, :mod:`scopes.operator_builder`: operators, capabilities,
  notifications, and assembling an operator.
* :mod:`scopes.core`: the plain stream and scope the operator families
  (:mod:`scopes.per_record`, :mod:`scopes.routing`, ..., :mod:`scopes.sources`,
  :mod:`scopes.loops`) are written against.
* :mod:`scopes.stream`: ``Stream`` and ``ScopeBuilder``, the facade users call,
  delegating to the families; :mod:`scopes.builder` gathers the building names.

:mod:`scopes.native` runs first: it selects the optional mypyc-compiled build of
the progress, operator and channel path when one is built and matches the sources (else pure Python).
"""

# ruff: noqa: E402 - the compiled build is selected before the modules it may replace are imported
import sys as _sys

from scopes import native as _native

_native.select(_sys.modules[__name__])

from scopes.builder import InputHandle, LoopHandle, ProbeHandle, ScopeBuilder, source, to_stream
from scopes.capability import Capability, CapabilityRef
from scopes.contracts import Broadcast, ChannelContract, Exchange, ExchangeBatch, Pipeline
from scopes.errors import (
    ActivationError,
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
from scopes.handles import OperatorInput, OperatorOutput
from scopes.keyed import KeyedStream
from scopes.keyed_columnar import KeyedBatches
from scopes.notificator import Notificator
from scopes.operator import OperatorInfo
from scopes.progress.antichain import Antichain, MutableAntichain
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.location import Source, Target
from scopes.progress.operate import Operate, Scope
from scopes.progress.order import PartialOrder, less_equal, less_than
from scopes.progress.reachability import Tracker
from scopes.progress.subgraph import Subgraph
from scopes.progress.timestamp import (
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
from scopes.stream import Stream, generic
from scopes.windows import Session, Sliding, Tumbling, Windowed

__all__ = [
    "ActivationError",
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
    "Scope",
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
