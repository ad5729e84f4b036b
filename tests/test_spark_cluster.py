"""run_dataflow on ``local-cluster[2,1,1024]``: two executor JVMs, so the two tasks are two separate processes.

A SparkContext is one per process and the other Spark tests share theirs, so
this test drives its own session in a child process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.spark_home import private_spark_home

pytest.importorskip("pyspark", reason="the Spark tests need the spark extra: pip install -e '.[spark]'")

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, os, sys
from collections import Counter
sys.path.insert(0, {root!r})
sys.path.insert(0, {examples!r})
import pyarrow as pa
from pyspark import cloudpickle
import pipeline, scc
from runtime.spark import spark_session
pipeline.ship_by_value(cloudpickle)
spark = spark_session("local-cluster[2,1,1024]", "pytimely local-cluster test",
                      {{"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                        "spark.executor.memory": "512m", "spark.sql.shuffle.partitions": "2"}})
spark.sparkContext.setLogLevel("ERROR")
edges = list(scc.read_edges(pipeline.DEFAULT_INPUT, limit=5000))
frame = spark.createDataFrame(pa.table({{"package": [e[0] for e in edges], "dependency": [e[1] for e in edges]}}))
pids = []
result = pipeline.find_components(frame, workers=2, slot_wait=60,
                                  on_progress=lambda e: e["event"] == "joined" and pids.append(e["address"]))
table = result.toArrow()
print(json.dumps({{"rows": table.to_pylist(), "edges": edges, "joined": pids}}))
spark.stop()
"""


def test_two_executor_jvms_compute_the_components_networkx_finds(tmp_path: Path) -> None:
    import networkx as nx

    script = SCRIPT.format(root=str(ROOT), examples=str(ROOT / "examples"))
    env = {**os.environ, "SPARK_HOME": str(private_spark_home(tmp_path / "spark"))}  # executors' directories
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=280, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    graph = nx.DiGraph([tuple(edge) for edge in found["edges"]])
    rows = {row["package"]: row for row in found["rows"]}
    assert len(rows) == len(found["rows"]) == graph.number_of_nodes()
    for component in nx.strongly_connected_components(graph):
        for node in component:
            assert (rows[node]["scc"], rows[node]["scc_size"]) == (min(component), len(component))
    for component in nx.weakly_connected_components(graph):
        for node in component:
            assert rows[node]["wcc"] == min(component)
    assert len(found["joined"]) == 2
