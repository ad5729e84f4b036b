"""The flagship pipeline's dataflow without Spark: Arrow batches of int edges give networkx's components."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import pipeline  # noqa: E402
from connected_components_columnar import intern, read_names  # noqa: E402

from runtime import execute  # noqa: E402

EDGES = 20_000
BATCH = 4_000


def run_components(worker: Any, src: np.ndarray, dst: np.ndarray, nodes: int, columnar: bool) -> list[Any]:
    """Feed this worker's share of the edges as Arrow batches; return the output messages' types and rows."""
    produced: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        output = pipeline.components_dataflow(scope, stream, nodes)
        return handle, output.inspect_batch(lambda _time, batch: produced.append(batch)).probe()

    handle, probe = worker.dataflow(build)
    mine_src, mine_dst = src[worker.index :: worker.peers], dst[worker.index :: worker.peers]
    for start in range(0, len(mine_src), BATCH):
        if columnar:  # one Arrow batch per message, as run_dataflow(columnar=True) hands them over
            handle.send_batch(
                pa.record_batch({"src": mine_src[start : start + BATCH], "dst": mine_dst[start : start + BATCH]})
            )
        else:  # row mode: (src, dst) tuples
            handle.send_batch(
                list(
                    zip(mine_src[start : start + BATCH].tolist(), mine_dst[start : start + BATCH].tolist(), strict=True)
                )
            )
    handle.close()
    worker.step_while(lambda: not probe.done())
    return [(type(batch).__name__, batch.to_pylist()) for batch in produced]


@pytest.mark.parametrize(("columnar", "workers"), [(True, 2), (False, 2), (True, 3)])
def test_the_components_dataflow_on_int_edges_equals_networkx(columnar: bool, workers: int) -> None:
    graph = intern(read_names(pipeline.DEFAULT_INPUT, EDGES))
    results = execute(
        functools.partial(run_components, src=graph.src, dst=graph.dst, nodes=graph.nodes, columnar=columnar),
        workers=workers,
        stall_timeout=30,
    )
    messages = [message for per_worker in results for message in per_worker]
    assert {kind for kind, _ in messages} == {"RecordBatch"}, "the output leaves as Arrow batches"
    rows = [row for _, batch in messages for row in batch]
    reference = nx.DiGraph(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    assert len(rows) == reference.number_of_nodes() == len({row["id"] for row in rows})
    strong = {node: (min(c), len(c)) for c in nx.strongly_connected_components(reference) for node in c}
    weak = {node: min(c) for c in nx.weakly_connected_components(reference) for node in c}
    assert any(size > 1 for _, size in strong.values()), "the sample has cycles"
    for row in rows:
        assert (row["scc"], row["scc_size"]) == strong[row["id"]]
        assert row["wcc"] == weak[row["id"]]


def test_ids_in_name_order_make_the_smallest_id_the_smallest_name() -> None:
    graph = intern(read_names(pipeline.DEFAULT_INPUT, EDGES))
    names = graph.names.tolist()
    assert names == sorted(names), "the dataflow names a component by its smallest id: ids must follow the names"


def test_an_arrow_batch_becomes_an_edge_array_column_by_column() -> None:
    batch = pa.record_batch({"src": pa.array([3, 1], pa.int32()), "dst": pa.array([0, 2], pa.int32())})
    edges = pipeline.edge_array(batch)
    assert edges.dtype == pipeline.EDGE and edges.tolist() == [(3, 0), (1, 2)]
    rows = pipeline.edge_array([(3, 0), (1, 2)])
    assert rows.dtype == pipeline.EDGE and rows.tolist() == [(3, 0), (1, 2)]
    assert pipeline.edge_array([]).dtype == pipeline.EDGE
