"""docs/spark.md, followed literally: every shell block is run by a test or marked as needing a multi-host cluster.

Each ```sh block of the page is preceded by ``<!-- docs-test: NAME -->``.
The blocks named in :data:`RUN` start and stop real Spark daemons (a master
and workers on loopback, about 25 s): they run wherever PySpark is installed,
as ``make test`` does; ``tests/test_spark_archives.py`` runs the blocks that
pack a virtual environment and ship it (:data:`RUN_ELSEWHERE`). The checks
that the page is marked, uses the venv's Python, and that the pins and
defaults it states hold, run always.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest
from helpers import eventually
from helpers.ports import free_ports

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "spark.md"
RUN = ("standalone-module", "manual-start", "manual-stop")
"""The blocks this module runs."""
RUN_ELSEWHERE = {"packed-env": "test_spark_archives.py", "packed-env-submit": "test_spark_archives.py"}
"""Blocks another test module runs (by name, with :func:`block`): packing a virtual environment, shipping it."""
MULTI_HOST = "needs a multi-host cluster"


def needs_pyspark() -> None:
    """Skip (naming the package) where PySpark is not installed: the daemons come with it."""
    pytest.importorskip("pyspark")


def shell_blocks() -> list[tuple[str, str]]:
    """``(marker, text)`` of every ```sh block of the page, in order (marker ``""`` when missing)."""
    blocks = []
    pattern = r"(?:<!-- docs-test: ([^>]+?) -->\s*\n)?[ \t]*```sh\n(.*?)\n[ \t]*```"
    for match in re.finditer(pattern, PAGE.read_text(), re.S):
        text = "\n".join(line.strip() for line in match.group(2).splitlines())
        blocks.append((match.group(1) or "", text))
    return blocks


def block(name: str) -> str:
    """The text of the block marked ``name``."""
    [found] = [text for marker, text in shell_blocks() if marker == name]
    return found


def test_every_shell_block_is_run_by_a_test_or_marked_as_needing_a_multi_host_cluster() -> None:
    markers = [marker for marker, _ in shell_blocks()]
    assert markers and all(marker in (*RUN, *RUN_ELSEWHERE, MULTI_HOST) for marker in markers), markers
    assert sorted(set(markers) & {*RUN, *RUN_ELSEWHERE}) == sorted({*RUN, *RUN_ELSEWHERE})
    for name, module in RUN_ELSEWHERE.items():
        assert f'block("{name}")' in (ROOT / "tests" / module).read_text(), (name, module)


def test_the_page_runs_python_from_the_venv_and_starts_workers_with_a_host_and_memory() -> None:
    text = PAGE.read_text()
    assert not re.search(r"(\$\(|^\s*|\s)python3? -", text, re.M), "a bare python in docs/spark.md"
    start = block("manual-start")
    assert "SPARK_HOME=$(.venv/bin/python -c" in start and "export SPARK_LOCAL_IP=" in start
    worker = start[start.index("deploy.worker.Worker") :]
    assert "--host" in worker and "--memory" in worker
    assert "SPARK_PID_DIR=" in start and "SPARK_WORKER_DIR=" in start
    for words in ("spark.executor.memoryOverhead", "spark.executor.pyspark.memory", "NetworkPolicy", "venv-pack"):
        assert words in text
    assert "dynamicAllocation" in text and "pytimely:NAME" in text


def test_the_spark_extra_pins_pandas_to_what_pyspark_supports() -> None:
    from importlib.metadata import requires

    from packaging.requirements import Requirement
    from packaging.version import Version

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    [pandas] = [Requirement(text) for text in extras["spark"] if text.startswith("pandas")]
    assert Version("3.0.0") not in pandas.specifier and Version("2.2.3") in pandas.specifier
    if any("pyspark" in text for text in extras["spark"]):
        try:
            theirs = [Requirement(text) for text in requires("pyspark") or [] if text.startswith("pandas")]
        except Exception:  # noqa: BLE001 - pyspark not installed: the pin's upper bound is still checked
            theirs = []
        for requirement in theirs:
            minimum = next(spec.version for spec in requirement.specifier if spec.operator == ">=")
            assert Version(minimum) in pandas.specifier, (str(requirement), str(pandas))


def test_each_directory_gets_its_own_cluster_state_and_workers_a_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyspark")
    from runtime.spark import standalone

    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    monkeypatch.chdir(tmp_path / "one")
    first = standalone.default_directory()
    monkeypatch.chdir(tmp_path / "two")
    assert standalone.default_directory() != first and standalone.default_directory().name.startswith("pytimely-spark-")
    environment = standalone._environment(tmp_path / "state")
    assert environment["SPARK_WORKER_DIR"] == str(tmp_path / "state" / "work")
    assert environment["SPARK_PID_DIR"] == str(tmp_path / "state" / "pids")
    assert standalone.DEFAULT_MEMORY == "1g"


def test_the_standalone_clusters_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    """The master's, its UI's and each worker's UI port: a port the kernel may give any connection or any bind to
    port 0 (its ephemeral range) could be taken before the JVM, seconds later, binds it."""
    from runtime.spark import standalone

    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(20):
        ports = standalone._free_ports(2 + 8)
        assert len(set(ports)) == len(ports)
        assert all(standalone.PORTS[0] <= port <= standalone.PORTS[1] < first_ephemeral for port in ports)
        servers = [socket.create_server((standalone.HOST, port)) for port in ports]
        for server in servers:
            server.close()


# ---------------------------------------------------------------------- the blocks, run (PYTIMELY_CLUSTER_TESTS=1)


def _as_written(text: str, ports: dict[str, int]) -> str:
    """The block with free ports for the page's fixed ones, and this interpreter for ``.venv/bin/python``."""
    text = text.replace("$PWD/.venv/bin/python", sys.executable).replace(".venv/bin/python", sys.executable)
    for fixed, free in ports.items():
        text = text.replace(fixed, str(free))
    return text


def _environment() -> dict[str, str]:
    kept = {key: value for key, value in os.environ.items() if not key.startswith("SPARK_")}
    return {**kept, "PYTHONPATH": str(ROOT)}


def _alive_workers(web_ui: str) -> int:
    try:
        with urllib.request.urlopen(f"{web_ui}/json/", timeout=2) as page:
            return sum(1 for worker in json.load(page).get("workers", []) if worker.get("state") == "ALIVE")
    except (OSError, ValueError):
        return 0


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_manual_start_and_stop_commands_run_as_written(tmp_path: Path) -> None:
    needs_pyspark()
    ports = dict(zip(("7077", "8080", "8081"), free_ports(3), strict=True))
    saved = tmp_path / "environment"
    script = _as_written(block("manual-start"), ports) + f"\nenv -0 > {saved}\n"
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, env=_environment(), capture_output=True, text=True, timeout=120
    )
    pids: list[int] = []
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        eventually(lambda: _alive_workers(f"http://127.0.0.1:{ports['8080']}") == 1, 90.0, "the worker registering")
        pids = [int(path.read_text()) for path in (tmp_path / "spark-daemons" / "pids").glob("*.pid")]
        assert len(pids) == 2 and (tmp_path / "spark-daemons" / "work").is_dir()
    finally:
        text = saved.read_text() if saved.exists() else ""
        exported = dict(item.split("=", 1) for item in text.split("\0") if "=" in item) or _environment()
        stop = subprocess.run(
            ["bash", "-e", "-c", _as_written(block("manual-stop"), ports)],
            cwd=tmp_path,
            env=exported,
            capture_output=True,
            text=True,
        )
        for pid in pids:
            try:
                eventually(lambda pid=pid: _gone(pid), 30.0, f"daemon {pid} stopping")
            except AssertionError:
                os.kill(pid, signal.SIGKILL)
                raise
    assert stop.returncode == 0, stop.stdout + stop.stderr


def test_the_standalone_module_commands_run_as_written(tmp_path: Path) -> None:
    needs_pyspark()
    done = subprocess.run(
        ["bash", "-e", "-c", _as_written(block("standalone-module"), {})],
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    masters = re.findall(r"spark://127\.0\.0\.1:\d+", done.stdout)
    assert len(masters) == 2 and masters[0] == masters[1]  # start, then status
    assert not (tmp_path / "spark-state" / "cluster.json").exists()
    assert list((tmp_path / "spark-state" / "logs").glob("*.out"))
