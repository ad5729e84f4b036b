"""The flagship pipeline's dataflow without Spark: Arrow batches as messages or as records give networkx's answer."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import pipeline  # noqa: E402
import scc  # noqa: E402

from runtime import execute  # noqa: E402

EDGES = 6_000
BATCH = 1_000


def run_components(worker: Any, edges: list[tuple[str, str]], columnar: bool) -> list[Any]:
    """Feed this worker's share of ``edges`` as Arrow batches; return the output messages' types and rows."""
    produced: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        output = pipeline.components_dataflow(scope, stream)
        return handle, output.inspect_batch(lambda _time, batch: produced.append(batch)).probe()

    handle, probe = worker.dataflow(build)
    mine = edges[worker.index :: worker.peers]
    for start in range(0, len(mine), BATCH):
        part = mine[start : start + BATCH]
        batch = pa.record_batch({"package": [e[0] for e in part], "dependency": [e[1] for e in part]})
        (handle.send_batch if columnar else handle.send)(batch)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return [(type(batch).__name__, batch.to_pylist()) for batch in produced]


@pytest.mark.parametrize("columnar", [True, False])
def test_the_components_dataflow_takes_arrow_batches_as_messages_or_records(columnar: bool) -> None:
    edges = list(scc.read_edges(pipeline.DEFAULT_INPUT, limit=EDGES))
    results = execute(functools.partial(run_components, edges=edges, columnar=columnar), workers=2, stall_timeout=30)
    messages = [message for per_worker in results for message in per_worker]
    assert {kind for kind, _ in messages} == {"RecordBatch"}, "the output leaves as Arrow batches"
    rows = [row for _, batch in messages for row in batch]
    graph = nx.DiGraph(edges)
    assert len(rows) == graph.number_of_nodes()
    components = {node: (min(c), len(c)) for c in nx.strongly_connected_components(graph) for node in c}
    weak = {node: min(c) for c in nx.weakly_connected_components(graph) for node in c}
    for row in rows:
        assert (row["scc"], row["scc_size"]) == components[row["package"]]
        assert row["wcc"] == weak[row["package"]]
