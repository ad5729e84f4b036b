"""Weakly connected components the COST way: components of each worker's edges in C, then only representatives merge.

Run ``python examples/connected_components_cost.py --check`` to label every node
of ``examples/data/debian-bookworm-depends.tsv.gz`` with the smallest id of its
weakly connected component and compare the components with scipy's.  Any
``src<TAB>dst`` file works (gzip or plain): integer ids are used as they are,
other names become 64-bit ids by a hash (:func:`name_ids`).

How it works (McSherry, Isard and Murray's COST lesson: a linear-time
algorithm in C on each core, and as little as possible between cores):

1. **Read.** Every worker reads and parses only its own share of the file's
   lines (:func:`read_share`, :func:`parse_share`).
2. **Local components, in C.** Each worker interns its nodes (integer ids that
   are small enough are used as array indices; spread ones by a mark per id,
   :func:`intern_range`; others by a sort, :func:`intern`)
   and labels the components of its own edges with a vectorised union-find
   (:func:`union_find`; ``--method scipy``: scipy's ``connected_components``
   for small edge sets): each node it saw gets ``rep``, the smallest id of its
   local component.  Small non-negative ids give one *dense label column* per
   owner (:func:`dense_columns`): owner ``w``'s column is every ``peers``-th
   label from node ``w`` on, :data:`NONE` for a node on none of this worker's
   edges, so no node id travels.  Other ids give one pair ``(node, rep)`` per
   node (:func:`local_pairs`).
3. **Representatives.** Columns and pairs go to their owner.  The owner takes
   each node's smallest representative ``m`` (its provisional label), and
   every other representative ``r`` of it becomes an edge ``r - m`` of the
   *contracted graph*, whose nodes are only local representatives.  Dense
   columns need no grouping: one elementwise minimum per column gives ``m``
   (:func:`merge_dense`), and the owner's work shrinks with its share of the
   nodes; pairs are grouped by node (:func:`representatives`), and an owner
   that receives both turns the columns into pairs.
4. **The loop.** The contracted graph goes around a loop scope: each round
   repeats steps 2 and 3 on it (components of each worker's contracted edges,
   exchanged to owners), emitting a pointer ``node -> smaller
   representative`` per node and the next, smaller, contracted graph.  The loop
   ends by itself when no worker has contracted edges left.
5. **Labels.** The pointers (few: only representatives have them) are
   broadcast; each worker labels them with their components' smallest ids (the
   pointers are edges: step 2 again) and maps its nodes' provisional labels
   through them (:func:`relabel`: a table indexed by id for small ids, else a
   binary search).

Every node on an edge gets the smallest id of its weakly connected component,
on the worker that owns it (``node % peers``, or its hash's).

Run ``python examples/connected_components_cost.py --help`` for the options;
``-w``, ``-n``, ``-p``, ``-h`` and ``--log`` are the cluster flags of every example.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing pytimely
    sys.path.insert(0, str(ROOT))

from runtime import execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from runtime.errors import FileSourceError, WorkerFailed  # noqa: E402
from runtime.worker import Worker  # noqa: E402
from scopes import Broadcast, OperatorInfo, OperatorInput, OperatorOutput, Pipeline, ScopeBuilder, Stream  # noqa: E402
from scopes.channels import ChannelContract, ExchangeBatch  # noqa: E402
from scopes.errors import BatchError  # noqa: E402
from scopes.generic_operators import generic  # noqa: E402

DEFAULT_INPUT = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"
EDGES = np.dtype([("src", np.int64), ("dst", np.int64)])
"""An edge batch: ``(src, dst)`` node ids."""
PAIRS = np.dtype([("node", np.int64), ("label", np.int64)])
"""A node and a label: its local representative, a pointer, or its component's smallest id."""
NONE = np.iinfo(np.int32).max
"""In a dense label column: the node is on no edge (larger than every node of a dense column)."""
COLUMN_ROWS = 1 << 24
"""The most labels a dense column carries in one row (64 MiB): longer columns travel in pieces."""
RANGE_SPREAD = 16
"""Non-negative ids below this many times the ids on the edges are interned by a mark per id
(:func:`intern_range`), others by a sort (:func:`intern`)."""
METHODS = ("scipy", "numpy")
"""How local components are found: scipy's ``connected_components``, or :func:`union_find`."""
SCIPY_EDGES = 500_000
"""With scipy (``--method scipy``), larger edge sets go to :func:`union_find` all the same: scipy's one call holds
the GIL for all of its work, where the union-find's NumPy steps each hold it briefly (a process whose threads
cannot run for seconds misses its heartbeats and is taken for dead)."""


def default_method() -> str:
    """``numpy``: the vectorised :func:`union_find`, faster than scipy's ``connected_components`` at every size we
    measured (thread CPU, random graphs with two edges per node: 0.1 against 0.2 ms at 1,000 edges, 1.7 against
    2.8 ms at 50,000, 23 against 40 ms at 500,000), and it needs nothing beyond NumPy.  ``scipy`` stays a choice,
    to compare."""
    return "numpy"


# ---------------------------------------------------------------------- reading and parsing


def read_share(path: str | Path, index: int, peers: int) -> bytes:
    """The whole lines of ``path`` whose first byte lies in byte range ``index`` of ``peers`` equal ranges."""
    return read_share_at(path, index, peers)[1]


def read_share_at(path: str | Path, index: int, peers: int) -> tuple[int, bytes]:
    """:func:`read_share`, with the byte offset of the share's first line (in the decompressed text of a gzip file).

    A plain file is read from its range only; a gzip file is decompressed (it
    cannot be entered in the middle) and its text cut the same way.
    """
    path = str(path)
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as file:
            data: bytes = file.read()
        low, high = len(data) * index // peers, len(data) * (index + 1) // peers
        start, stop = line_start(data, low), line_start(data, high)
        return start, data[start:stop] if start < stop else b""
    size = os.path.getsize(path)
    low, high = size * index // peers, size * (index + 1) // peers
    with open(path, "rb") as file:
        position = 0
        if low > 0:
            file.seek(low - 1)
            file.readline()  # the rest of the line that started before this share
            position = file.tell()
        if position >= high:
            return position, b""
        chunk = file.read(high - position)
        if chunk and not chunk.endswith(b"\n"):
            chunk += file.readline()  # the line that starts in this share ends after it
    return position, chunk


def line_start(data: bytes, position: int) -> int:
    """The first offset at or after ``position`` where a line of ``data`` starts (``len(data)`` if none does).

    A share takes the lines whose first byte lies in its range: the range
    ``[low, high)`` holds the lines from ``line_start(low)`` to ``line_start(high)``.
    (An empty range at offset 0 holds none: ``position - 1`` must not wrap to the end.)
    """
    if position <= 0:
        return 0
    if position >= len(data):
        return len(data)
    return data.find(b"\n", position - 1) + 1 or len(data)


def numeric_file(path: str | Path) -> bool:
    """Whether the first line of ``path`` is two integers (every worker decides the same way)."""
    opener: Callable[..., Any] = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as file:
        fields = file.readline().split(b"\t")[:2]
    return len(fields) == 2 and all(field.strip().lstrip(b"-").isdigit() for field in fields)


def parse_ints(chunk: bytes, path: str | Path = "the edge file", offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` ``int64`` columns of ``src<TAB>dst`` lines of decimal integers (blank lines are skipped).

    ``chunk`` starts at byte ``offset`` of ``path``.  With pyarrow, a
    tab-separated chunk is parsed by Arrow's CSV reader (in C, about 15 times
    faster than splitting it in Python); any other chunk (fields separated by
    spaces, or a line Arrow refuses) is split line by line.  A line that is not
    two 64-bit integers is refused with :class:`~runtime.errors.FileSourceError`
    naming the file, the line's byte offset and the line.
    """
    if ARROW_CSV and not chunk.translate(None, _DECIMAL_TEXT):  # Arrow reads more than decimals (0x1f)
        parsed = _parse_tsv_arrow(chunk)
        if parsed is not None:
            return parsed
    rows = [line.split() for line in chunk.splitlines()]
    if not set(map(len, rows)) <= {0, 2}:
        _refuse_bad_line(chunk, path, offset)
    try:
        pairs = np.array([field for row in rows for field in row], dtype=np.bytes_).astype(np.int64).reshape(-1, 2)
    except (ValueError, OverflowError):
        _refuse_bad_line(chunk, path, offset)
        raise  # not reached: a line that fails the conversion is refused above
    return np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])


ARROW_CSV = importlib.util.find_spec("pyarrow") is not None
"""Whether :func:`parse_ints` tries Arrow's CSV reader first."""
_DECIMAL_TEXT = b"0123456789+-\t \r\n"
"""The bytes of a chunk that Arrow's reader may parse: its integers are then what ``int`` reads (it also reads
hexadecimal, which the line-by-line reading refuses)."""


def _parse_tsv_arrow(chunk: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """``(src, dst)`` of a chunk of ``int<TAB>int`` lines by Arrow's CSV reader; ``None`` if it refuses any line."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.csv as csv  # type: ignore[import-untyped]

    if not chunk.strip():
        return np.empty(0, np.int64), np.empty(0, np.int64)
    try:
        table = csv.read_csv(
            pa.py_buffer(chunk),
            read_options=csv.ReadOptions(column_names=["src", "dst"], use_threads=False),
            parse_options=csv.ParseOptions(delimiter="\t", quote_char=False, ignore_empty_lines=True),
            convert_options=csv.ConvertOptions(
                column_types={"src": pa.int64(), "dst": pa.int64()}, null_values=[], strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid:
        return None
    columns = [table.column(name) for name in ("src", "dst")]
    if any(column.null_count for column in columns):
        return None
    src, dst = (np.ascontiguousarray(column.to_numpy()) for column in columns)
    return src, dst


def _refuse_bad_line(chunk: bytes, path: str | Path, offset: int) -> None:
    """Raise :class:`~runtime.errors.FileSourceError` for the first line of ``chunk`` (at byte ``offset`` of
    ``path``) that is neither blank nor two 64-bit integers; return if there is none."""
    position = 0
    for line in chunk.splitlines(keepends=True):
        fields = line.split()
        if fields and (len(fields) != 2 or not all(map(_is_int64, fields))):
            shown = line.rstrip(b"\r\n")[:80].decode("utf-8", "replace")
            raise FileSourceError(
                f"{path}: the line at byte {offset + position} is not two integers separated by whitespace "
                f"(got {shown!r}); a numeric edge file holds one 'source<TAB>destination' pair of 64-bit "
                "integers per line (a file is read as names only when its first line is not two integers)"
            )
        position += len(line)


def _is_int64(field: bytes) -> bool:
    """Whether ``field`` is a decimal integer that fits in 64 bits."""
    try:
        return -(2**63) <= int(field) < 2**63
    except ValueError:
        return False


def name_ids(names: np.ndarray) -> np.ndarray:
    """A 64-bit FNV-1a hash of each name of a bytes (``S``) array, as ``int64`` ids (the same on every worker).

    Computed a byte column at a time; bytes past a name's end (the array's zero
    padding) leave its hash alone, so names of any width hash alike.
    """
    width = names.dtype.itemsize
    octets = np.ascontiguousarray(names).view(np.uint8).reshape(len(names), width)
    lengths = np.char.str_len(names) if len(names) else np.zeros(0, np.int64)
    hashes = np.full(len(names), 0xCBF29CE484222325, np.uint64)
    prime = np.uint64(0x100000001B3)
    for column in range(width):
        live = lengths > column
        hashes = np.where(live, (hashes ^ octets[:, column].astype(np.uint64)) * prime, hashes)
    return (hashes >> np.uint64(1)).astype(np.int64)  # non-negative, to stay below the "no label" sentinel


def parse_names(chunk: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Lines ``name<TAB>name`` interned locally: ``(src, dst, names, ids)``.

    ``src`` and ``dst`` are local indices into ``names`` (the distinct names,
    ordered by their ids) and ``ids`` (:func:`name_ids`, increasing).  Lines
    without a tab are skipped.
    """
    lines = chunk.split(b"\n")
    if chunk.count(b"\t") == len(lines) - (not lines[-1]):
        flat = chunk.replace(b"\t", b"\n").split()
    else:
        flat = [field for line in lines if b"\t" in line for field in line.split(b"\t")[:2]]
    names, inverse = np.unique(np.array(flat, dtype=np.bytes_), return_inverse=True)
    ids = name_ids(names)
    order = np.argsort(ids, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    local = rank[inverse].reshape(-1, 2)
    return np.ascontiguousarray(local[:, 0]), np.ascontiguousarray(local[:, 1]), names[order], ids[order]


# ---------------------------------------------------------------------- local components in C


def union_find(src: np.ndarray, dst: np.ndarray, nodes: int) -> np.ndarray:
    """Each node's smallest component-mate (its root), by vectorised hooking and pointer jumping.

    The edges are kept as the pair of roots of their ends.  Every round hooks
    the larger root of each edge onto the smaller (``np.minimum.at``), jumps
    the pointers of the roots hooked in the round until each points at a root,
    then replaces each edge's ends by their roots (one read per end) and drops
    the edges whose ends now share a root.  A parent is never larger than its
    node, so each root is its component's smallest node.  Nodes that stopped
    being roots are left pointing at a former root during the rounds; a few
    passes over all nodes at the end (as many as the rounds need to halve the
    longest chain) put every node on its root.  The first round filters
    nothing: an edge from a node to itself hooks nothing.

    The work per round is the edges left plus a copy and a comparison over the nodes:
    about 30% less time than jumping every node each round and filtering the
    original ids beside the roots (0.33 s against 0.47 s on 4 M random edges,
    0.18 s against 0.24 s on 2 M).  Node ids are kept as ``int32`` when they fit
    (half the memory that every random read of ``parent`` touches).  The result
    is ``int32`` or ``int64``.
    """
    kind = np.int32 if nodes <= np.iinfo(np.int32).max else np.int64
    parent = np.arange(nodes, dtype=kind)
    spare = np.empty_like(parent)
    low, high = src.astype(kind, copy=False), dst.astype(kind, copy=False)  # every node is its own root
    first = True
    while len(low):
        if not first:
            apart = low != high
            low, high = low[apart], high[apart]
            if not len(low):
                break
        first = False
        np.copyto(spare, parent)
        np.minimum.at(parent, np.maximum(low, high), np.minimum(low, high))
        hooked = np.flatnonzero(parent != spare)  # the roots hooked this round: only they can form chains
        if not len(hooked):
            break  # every edge is a node to itself
        while True:
            above = parent[hooked]
            jumped = parent[above]
            if np.array_equal(jumped, above):
                break
            parent[hooked] = jumped
        low, high = parent[low], parent[high]  # each former root points at a root now
    while True:  # every chain ends at a root: jump until no pointer moves
        np.take(parent, parent, out=spare)
        if np.array_equal(spare, parent):
            return parent
        parent, spare = spare, parent


def smallest_mates(src: np.ndarray, dst: np.ndarray, nodes: int, method: str) -> np.ndarray:
    """For each node ``0 .. nodes - 1``, the smallest node of its weakly connected component.

    Above :data:`SCIPY_EDGES` edges, ``scipy`` means :func:`union_find` too, whose
    NumPy steps each hold the GIL briefly.
    """
    if method == "numpy" or len(src) > SCIPY_EDGES:
        return union_find(src, dst, nodes)
    from scipy.sparse import csr_matrix  # type: ignore[import-untyped]
    from scipy.sparse.csgraph import connected_components  # type: ignore[import-untyped]

    matrix = csr_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(nodes, nodes))
    count, labels = connected_components(matrix, directed=True, connection="weak")
    # scipy numbers components in the order of their smallest node: a label is new where it exceeds all before
    if nodes:
        seen = np.maximum.accumulate(np.concatenate(([-1], labels[:-1])))
        firsts = np.flatnonzero(labels > seen)
        if len(firsts) != count or not np.array_equal(labels[firsts], np.arange(count)):
            firsts = np.full(count, nodes, np.int64)  # another numbering: the minimum per label
            np.minimum.at(firsts, labels, np.arange(nodes))
        return firsts[labels].astype(np.int64, copy=False)
    return np.zeros(0, np.int64)


def local_pairs(src: np.ndarray, dst: np.ndarray, method: str, ids: np.ndarray | None = None) -> np.ndarray:
    """One :data:`PAIRS` row ``(node, smallest id of its local component)`` per node on an edge, sorted by node.

    ``src`` and ``dst`` are node ids, or with ``ids`` local indices into
    ``ids`` (increasing global ids).  Non-negative ids below about four times
    the number of ids are used as array indices; others are interned with
    :func:`intern`.
    """
    if ids is None:
        if not len(src):
            return np.empty(0, PAIRS)
        low, high = min(int(src.min()), int(dst.min())), max(int(src.max()), int(dst.max()))
        if indexable(low, high, len(src) + len(dst)):
            mates = smallest_mates(src, dst, high + 1, method)
            nodes = np.flatnonzero(on_an_edge(src, dst, high + 1))
            result = np.empty(len(nodes), PAIRS)
            result["node"], result["label"] = nodes, mates[nodes]
            return result
        spread = indexable(low, high, len(src) + len(dst), RANGE_SPREAD)
        values = np.concatenate((src, dst))
        ids, inverse = intern_range(values, high) if spread else intern(values)
        src, dst = inverse[: len(src)], inverse[len(src) :]
    mates = smallest_mates(src, dst, len(ids), method)
    result = np.empty(len(ids), PAIRS)
    result["node"], result["label"] = ids, ids[mates]
    return result


# ---------------------------------------------------------------------- dense label columns


def dense_dtype(width: int) -> np.dtype:
    """Dense label columns: in a row for owner ``dest`` of ``peers``, ``labels[i]`` is node
    ``(start + i) * peers + dest``'s label, :data:`NONE` where the node is on no edge."""
    return np.dtype([("dest", np.int64), ("peers", np.int64), ("start", np.int64), ("labels", np.int32, (width,))])


def is_dense(batch: np.ndarray) -> bool:
    """Whether ``batch`` holds dense label columns (:func:`dense_dtype`) rather than :data:`PAIRS`."""
    names = batch.dtype.names
    return names is not None and names[0] == "dest"


def indexable(low: int, high: int, count: int, spread: int = 4) -> bool:
    """Whether ids from ``low`` to ``high``, ``count`` of them, can index arrays: none negative, and the largest
    below ``spread`` times their count (plus 1,024) and below :data:`NONE`."""
    return low >= 0 and high < min(spread * count + 1024, NONE)


def on_an_edge(src: np.ndarray, dst: np.ndarray, bound: int) -> np.ndarray:
    """A mask of the ids ``0 .. bound - 1``: which are an end of an edge ``src -> dst``."""
    mask = np.zeros(bound, np.bool_)
    mask[src] = True
    mask[dst] = True
    return mask


def dense_bound(src: np.ndarray, dst: np.ndarray) -> int | None:
    """The largest id plus one when the edges' ids can index arrays (:func:`indexable`); ``None`` otherwise."""
    if not len(src):
        return None
    low, high = min(int(src.min()), int(dst.min())), max(int(src.max()), int(dst.max()))
    return high + 1 if indexable(low, high, len(src) + len(dst)) else None


def dense_columns(src: np.ndarray, dst: np.ndarray, bound: int, method: str, peers: int) -> list[np.ndarray]:
    """Each node's smallest local component-mate as dense columns (:func:`dense_dtype`), one per owner.

    Node ``n`` is owned by worker ``n % peers``, so owner ``dest``'s column is
    every ``peers``-th entry of the node-indexed labels from ``dest`` on: no
    node ids travel, and the owner finds a node's labels at one index.  A
    column longer than :data:`COLUMN_ROWS` travels in pieces (each a frame).
    """
    mates = smallest_mates(src, dst, bound, method).astype(np.int32, copy=False)  # a new array, ours to change
    np.putmask(mates, ~on_an_edge(src, dst, bound), NONE)
    found = []
    for dest in range(min(peers, bound)):
        part = mates[dest::peers]
        for start in range(0, len(part), COLUMN_ROWS):
            piece = part[start : start + COLUMN_ROWS]
            column = np.empty(1, dense_dtype(len(piece)))
            column["dest"], column["peers"], column["start"] = dest, peers, start
            column["labels"][0] = piece
            found.append(column)
    return found


def dense_rows(batches: list[np.ndarray]) -> tuple[int, int, list[tuple[int, np.ndarray]]]:
    """``(dest, peers, [(start, labels)])`` of the rows of dense batches, all for one owner."""
    rows = [row for batch in batches for row in batch]
    dest, peers = int(rows[0]["dest"]), int(rows[0]["peers"])
    if any(int(row["dest"]) != dest or int(row["peers"]) != peers for row in rows):
        owners = sorted({(int(row["dest"]), int(row["peers"])) for row in rows})
        raise BatchError(
            f"dense label columns for several owners (worker, of workers) met on one worker: {owners}; each "
            "column must be routed to its owner (a bug in this example's routing, not in the input)"
        )
    return dest, peers, [(int(row["start"]), row["labels"]) for row in rows]


def dense_pairs(batch: np.ndarray, relabelled: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """The :data:`PAIRS` ``(node, label)`` of dense label columns, for the nodes on an edge (each label passed
    through ``relabelled`` if given)."""
    dest, peers, columns = dense_rows([batch])
    parts = []
    for start, column in columns:
        at = np.flatnonzero(column != NONE)
        pairs = np.empty(len(at), PAIRS)
        pairs["node"] = (at + start) * peers + dest
        pairs["label"] = column[at] if relabelled is None else relabelled(column[at])
        parts.append(pairs)
    return concat(parts, PAIRS)


# ---------------------------------------------------------------------- sorting helpers


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D array, sorted (a sort and a comparison of neighbours).

    ``np.unique`` gives the same, but NumPy 2's hash-based path is several times
    slower on a hundred thousand ``int64`` keys than this sort.
    """
    ordered = np.sort(values, kind="stable" if values.dtype.names else "quicksort")
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def intern_range(values: np.ndarray, high: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`intern` of ids in ``0 .. high``, by a mark per id instead of a sort.

    A pass over ``high + 1`` bytes and one over as many ``int32`` ranks costs
    less than sorting ids up to :data:`RANGE_SPREAD` times fewer (the contracted
    graphs and the pointers: representatives spread over all the nodes).
    """
    mark = np.zeros(high + 1, np.bool_)
    mark[values] = True
    ids = np.flatnonzero(mark)
    rank = np.empty(high + 1, np.int32)
    rank[ids] = np.arange(len(ids), dtype=np.int32)
    return ids, rank[values]


def intern(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, inverse)``: the distinct values, sorted, and the index of each value among them (``ids[inverse]``)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.empty(len(ordered), np.bool_)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    inverse = np.empty(len(values), np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse


# ---------------------------------------------------------------------- representatives


def representatives(pairs: np.ndarray, first: bool) -> tuple[np.ndarray, np.ndarray]:
    """Group ``(node, rep)`` pairs by node: ``(labels or pointers, contracted edges)``.

    Each node's label is its smallest representative ``m``; every other
    representative ``r`` gives the contracted edge ``(r, m)`` (duplicates
    dropped).  With ``first``, every node's ``(node, m)`` is returned;
    otherwise only the pointers ``(node, m)`` with ``m < node``.
    """
    nodes, reps = pairs["node"], pairs["label"]
    edges = np.empty((0, 2), np.int64)
    if len(nodes) > 1 and not bool((nodes[1:] > nodes[:-1]).all()):  # else one pair per node: nothing to group
        bound = int(nodes.max()) + 1
        # small ids: index by node.  Both columns must be non-negative: a node's representative is at most the
        # node, but may be negative when the node is not, and the key packing below needs 0 <= rep < bound
        if min(int(nodes.min()), int(reps.min())) >= 0 and bound < min(4 * len(nodes) + 1024, 1 << 31):
            best = np.full(bound, np.iinfo(np.int64).max, np.int64)
            np.minimum.at(best, nodes, reps)
            each = best[nodes]
            apart = reps != each
            nodes = np.flatnonzero(best != np.iinfo(np.int64).max)
            smallest = best[nodes]
            keys = distinct(reps[apart] * bound + each[apart])  # 0 <= each <= rep <= its node < bound
            edges = np.stack((keys // bound, keys % bound), axis=1)
        else:
            order = np.argsort(nodes, kind="stable")
            nodes, reps = nodes[order], reps[order]
            starts = np.concatenate(([0], np.flatnonzero(nodes[1:] != nodes[:-1]) + 1))
            smallest = np.minimum.reduceat(reps, starts)
            each = np.repeat(smallest, np.diff(np.append(starts, len(nodes))))
            apart = reps != each
            pairs_apart = np.empty(int(np.count_nonzero(apart)), EDGES)
            pairs_apart["src"], pairs_apart["dst"] = reps[apart], each[apart]
            unique = distinct(pairs_apart)
            edges = np.stack((unique["src"], unique["dst"]), axis=1)
            nodes = nodes[starts]
    else:
        smallest = reps
    keep = slice(None) if first else smallest < nodes
    labels = np.empty(len(nodes[keep]), PAIRS)
    labels["node"], labels["label"] = nodes[keep], smallest[keep]
    contracted = np.empty(len(edges), EDGES)
    contracted["src"], contracted["dst"] = edges[:, 0], edges[:, 1]
    return labels, contracted


def merge_dense(batches: list[np.ndarray], first: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`representatives` of dense label columns (:func:`dense_dtype`) for one owner.

    Each node's label is the smallest of its columns' entries, found by one
    elementwise minimum per column (no grouping, no node ids); every other
    entry ``r`` gives the contracted edge ``(r, m)``.  With ``first`` the labels
    stay a dense column; otherwise they are the pointers, as :data:`PAIRS`.
    """
    dest, peers, columns = dense_rows(batches)
    best = np.full(max(start + len(column) for start, column in columns), NONE, np.int32)
    for start, column in columns:
        view = best[start : start + len(column)]
        np.minimum(view, column, out=view)
    bound = len(best) * peers  # above every node of the columns
    keys = []
    for start, column in columns:
        view = best[start : start + len(column)]
        apart = np.flatnonzero(column > view)  # an entry is at least the smallest; NONE: not here
        apart = apart[column[apart] != NONE]
        keys.append(column[apart].astype(np.int64) * bound + view[apart])
    unique = distinct(concat(keys, np.dtype(np.int64)))
    contracted = np.empty(len(unique), EDGES)
    contracted["src"], contracted["dst"] = unique // bound, unique % bound
    if first:
        labels = np.empty(1, dense_dtype(len(best)))
        labels["dest"], labels["peers"], labels["start"], labels["labels"][0] = dest, peers, 0, best
        return labels, contracted
    nodes = np.arange(len(best), dtype=np.int64) * peers + dest
    at = np.flatnonzero(best < nodes)  # NONE is above every node
    labels = np.empty(len(at), PAIRS)
    labels["node"], labels["label"] = nodes[at], best[at]
    return labels, contracted


def group(batches: list[np.ndarray], first: bool) -> tuple[np.ndarray, np.ndarray]:
    """Step 3 on one owner's batches: :func:`merge_dense` when all are dense columns, else :func:`representatives`
    (dense columns turned into pairs)."""
    dense = [batch for batch in batches if is_dense(batch)]
    if dense and len(dense) == len(batches):
        return merge_dense(dense, first)
    pairs = [dense_pairs(batch) if is_dense(batch) else batch for batch in batches]
    return representatives(concat(pairs, PAIRS), first)


def relabel(values: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """``values`` (``int32`` or ``int64``) with each node of ``roots`` (:data:`PAIRS` sorted by node) replaced by
    its label.

    Small non-negative ids are looked up in a table indexed by id (one gather);
    others by binary search.
    """
    if not len(roots) or not len(values):
        return values
    nodes, labels = roots["node"], roots["label"]
    low, top = min(int(nodes[0]), int(values.min())), max(int(nodes[-1]), int(values.max()))
    if indexable(low, top, len(values) + len(nodes)):
        table = np.arange(top + 1, dtype=np.int32)
        table[nodes] = labels
        return table[values]
    at = np.searchsorted(nodes, values)
    at[at == len(nodes)] = 0
    hit = nodes[at] == values
    result = values.astype(np.int64)  # a copy
    result[hit] = labels[at[hit]]
    return result


def resolve(labels: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """Step 5 on one worker's labels (:data:`PAIRS` or a dense column): :data:`PAIRS` of every node on an edge,
    each label mapped through ``roots`` (the pointers' smallest ids, :func:`relabel`)."""
    if is_dense(labels):
        return dense_pairs(labels, lambda values: relabel(values, roots))
    result = labels.copy()
    result["label"] = relabel(labels["label"], roots)
    return result


# ---------------------------------------------------------------------- the dataflow


def concat(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """One array of ``parts`` (an empty one of ``dtype`` if there are none)."""
    if not parts:
        return np.empty(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def per_time(
    inputs: Sequence[tuple[Stream, ChannelContract]],
    name: str,
    outputs: int,
    compute: Callable[[list[list[np.ndarray]]], Sequence[np.ndarray | list[np.ndarray]]],
) -> list[Stream]:
    """An operator that gathers each time's batches from every input and, once the time is complete,
    sends ``compute(batches per input)``'s results, one per output (an array, or a list of arrays)."""
    scope = inputs[0][0].scope

    def constructor(capabilities: list[Any], info: OperatorInfo, frontiers: list[Any]) -> Any:
        for capability in capabilities:
            capability.drop()
        pending: dict[Any, tuple[list[Any], list[list[np.ndarray]]]] = {}

        def logic(ins: list[OperatorInput], outs: list[OperatorOutput]) -> None:
            for port, input in enumerate(ins):
                for ref, batch in input:
                    entry = pending.get(ref.time)
                    if entry is None:
                        entry = pending[ref.time] = ([ref.retain(o) for o in range(outputs)], [[] for _ in ins])
                    entry[1][port].append(batch)  # type: ignore[arg-type]
            done = [t for t in pending if not any(frontier.less_equal(t) for frontier in frontiers)]
            for time in sorted(done):
                held, batches = pending.pop(time)
                for output, capability, result in zip(outs, held, compute(batches), strict=True):
                    session = output.session(capability)
                    for part in result if isinstance(result, list) else [result]:
                        session.give_batch(part)  # type: ignore[arg-type]
                    output.flush()
                    capability.drop()

        return logic

    return generic(scope, name, list(inputs), outputs, constructor, notify=True, frontiers=True)


def columns(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ``src`` and ``dst`` columns of an :data:`EDGES` array."""
    return edges["src"], edges["dst"]


def local_labels(edges: np.ndarray, method: str, peers: int) -> list[np.ndarray]:
    """Step 2 on one worker's edges: :func:`dense_columns` for small non-negative ids, else :func:`local_pairs`."""
    src, dst = columns(edges)
    bound = dense_bound(src, dst)
    if bound is None:
        return [local_pairs(src, dst, method)]
    return dense_columns(src, dst, bound, method, peers)


def local_components(edges: Stream, method: str, name: str) -> Stream:
    """Step 2: each time's edges on each worker become the smallest id of each node's local component
    (:func:`local_labels`: dense columns, one per owner, or :data:`PAIRS`)."""
    peers = edges.scope.peers
    return per_time(
        [(edges, Pipeline)], name, 1, lambda batches: [local_labels(concat(batches[0], EDGES), method, peers)]
    )[0]


def owner_key(batch: np.ndarray) -> np.ndarray:
    """What routes a batch's rows to their owner: a dense column's ``dest``, a pair's ``node``."""
    return batch["dest"] if is_dense(batch) else batch["node"]


def grouped(labels: Stream, first: bool, name: str) -> list[Stream]:
    """Step 3: local labels exchanged by owner and grouped (:func:`group`): ``[labels, contracted edges]``."""
    return per_time([(labels, ExchangeBatch(owner_key))], name, 2, lambda batches: group(batches[0], first))


def weak_components(edges: Stream, method: str) -> Stream:
    """``(node, smallest id of its weakly connected component)`` for every node on an edge, on its owner.

    ``edges`` carries :data:`EDGES` arrays on the workers that read them (they never move).
    scipy, when it is the method, is imported here, while the dataflow is built.
    """
    if method == "scipy":
        importlib.import_module("scipy.sparse.csgraph")
    labels, contracted = grouped(local_components(edges, method, "LocalComponents"), True, "Representatives")

    def body(inner: ScopeBuilder) -> Stream:
        handle, again = inner.loop_variable(1, name="Contracted")
        round_edges = contracted.enter(inner).concat(again)
        pairs = local_components(round_edges, method, "RoundComponents")
        pointers, smaller = grouped(pairs, False, "RoundRepresentatives")
        smaller.connect_loop(handle)
        return pointers.leave()

    pointers = edges.scope.iterative(body, name="Contract")
    return per_time(
        [(labels, Pipeline), (pointers, Broadcast)], "Labels", 1, lambda batches: final_labels(batches, method)
    )[0]


def final_labels(batches: list[list[np.ndarray]], method: str) -> list[np.ndarray]:
    """Step 5 on one worker: ``[its labels as PAIRS]`` from ``batches`` (its provisional labels, and every pointer).

    The pointers are edges: their components' smallest ids (step 2 again) are
    the roots that each provisional label is mapped through (:func:`resolve`).
    """
    pointers = concat(batches[1], PAIRS)
    roots = local_pairs(pointers["node"], pointers["label"], method)
    return [concat([resolve(batch, roots) for batch in batches[0]], PAIRS)]


# ---------------------------------------------------------------------- running it


def share_edges(path: str | Path, index: int, peers: int) -> np.ndarray:
    """Worker ``index`` of ``peers``'s share of the file's edges, parsed, as an :data:`EDGES` array."""
    offset, chunk = read_share_at(path, index, peers)
    if numeric_file(path):
        src, dst = parse_ints(chunk, path, offset)
    else:
        local_src, local_dst, _, ids = parse_names(chunk)
        src, dst = ids[local_src], ids[local_dst]
    edges = np.empty(len(src), EDGES)
    edges["src"], edges["dst"] = src, dst
    return edges


def run_edges(worker: Worker, edges: np.ndarray, method: str) -> np.ndarray:
    """Run :func:`weak_components` on this worker's ``edges``; return the :data:`PAIRS` labels it owns."""
    found: list[np.ndarray] = []

    def build(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input("Edges")
        labels = weak_components(stream, method)
        return handle, labels.inspect_batch(lambda time, batch: found.append(batch), name="Collect").probe()

    handle, probe = worker.dataflow(build, name="wcc cost")
    if len(edges):
        handle.send_batch(edges)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return concat(found, PAIRS)


def file_worker(worker: Worker, path: str, method: str) -> tuple[list[int], list[int], float, float]:
    """Read and parse this worker's share of ``path``, label it; return ``(nodes, labels, read s, compute s)``."""
    start = perf_counter()
    edges = share_edges(path, worker.index, worker.peers)
    read = perf_counter() - start
    start = perf_counter()
    labels = run_edges(worker, edges, method)
    return labels["node"].tolist(), labels["label"].tolist(), read, perf_counter() - start


# ---------------------------------------------------------------------- checking and the command line


def scipy_labels(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scipy's answer for edges ``src -> dst`` of any int64 ids: ``(nodes on an edge, smallest id of component)``."""
    pairs = local_pairs(src, dst, "scipy")
    return pairs["node"], pairs["label"]


def whole_file(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """All the file's edges as id columns, read by one process (for the check)."""
    edges = share_edges(path, 0, 1)
    return edges["src"], edges["dst"]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="'src<TAB>dst' lines, plain or gzip")
    parser.add_argument("--method", choices=METHODS, default=default_method(), help="local components by")
    parser.add_argument("--check", action="store_true", help="compare with scipy's connected_components")
    args = parser.parse_args(argv)
    if not args.input.is_file():
        parser.error(f"--input {args.input}: {'not a file' if args.input.exists() else 'no such file'}")

    start = perf_counter()
    try:
        outputs = execute_from_args(partial(file_worker, path=str(args.input), method=args.method), argv)
    except WorkerFailed as error:  # e.g. a bad input line, named with its byte offset: the traceback adds nothing
        print(f"connected_components_cost: {error}", file=sys.stderr)
        return 1
    wall = perf_counter() - start
    nodes = np.concatenate([np.asarray(out[0], np.int64) for out in outputs])
    labels = np.concatenate([np.asarray(out[1], np.int64) for out in outputs])
    count = len(np.unique(labels))
    print(f"Weakly connected components of {args.input.name}, COST style ({args.method} on each worker)")
    print(f"  {len(nodes):,} nodes on an edge; {count:,} components; {args.workers * args.processes} worker(s)")
    reads = ", ".join(f"{out[2]:.3f}" for out in outputs)
    computes = ", ".join(f"{out[3]:.3f}" for out in outputs)
    print(f"  wall {wall:.3f} s; per worker: read {reads} s, compute {computes} s")
    if not args.check:
        return 0
    src, dst = whole_file(args.input)
    start = perf_counter()
    expected_nodes, expected = scipy_labels(src, dst)
    print(f"  scipy (one process, file already parsed): {perf_counter() - start:.3f} s")
    order = np.argsort(nodes)
    ok = np.array_equal(nodes[order], expected_nodes) and np.array_equal(labels[order], expected)
    print(f"  check against scipy.sparse.csgraph.connected_components: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
