"""viz.dot and ``python -m viz``: clusters, ports, frontiers, stuck marks, collapse, errors, speed."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.recording_v1 import header as _header
from helpers.recording_v1 import pack as _pack
from helpers.viz_synthetic import ROOT, Script, finish, running

import viz
from runtime.instrument import (
    END_FRAME,
    K_CHANNEL,
    K_FRONTIERS,
    K_LOCATIONS,
    K_OPERATOR,
    Recorder,
    encode_events,
    encode_header,
)
from viz.dot import to_graph
from viz.errors import RenderError, SelectionError
from viz.model import Model

REPO = Path(__file__).resolve().parent.parent


def cluster_tree(source: str) -> dict[str, str | None]:
    """Each cluster's name mapped to its enclosing cluster's name, from DOT text."""
    parents: dict[str, str | None] = {}
    stack: list[str | None] = []
    for line in source.splitlines():
        match = re.match(r"\s*subgraph (\S+) \{", line)
        if match:
            name = match.group(1)
            enclosing = next((s for s in reversed(stack) if s is not None), None)
            parents[name] = enclosing
            stack.append(name)
        elif line.strip() == "}" and stack:
            stack.pop()
    return parents


def test_clusters_nest_as_scopes_with_names_and_timestamp_types() -> None:
    model = Model.from_events(running().events())
    source = to_graph(model).source
    assert cluster_tree(source) == {"cluster_op_0": None, "cluster_op_0_2": "cluster_op_0"}
    assert "flow : integer" in source
    assert "Loop : Product[integer, integer]" in source
    assert "scope input 0" in source and "scope output 0" in source


def test_ports_show_frontiers_and_edges_contracts_and_counts() -> None:
    model = Model.from_events(running(in_flight=4).events())
    source = to_graph(model).source
    assert 'PORT="i0"' in source and 'PORT="o0"' in source
    assert "in 0 {0}" in source  # the probe's input frontier
    assert "in 1 {(0, 1)}" in source  # Step's feedback input, inside the loop
    assert "Exchange" in source
    assert "4 in flight" in source
    # the input holds capabilities: it stands out
    assert "holds out 0: 0×2" in source
    assert "#ffd59a" in source


def test_finished_run_shows_empty_frontiers() -> None:
    script = running()
    finish(script)
    source = to_graph(Model.from_events(script.events())).source
    assert "in 0 {}" in source and "{0}" not in source
    assert "(completed)" in source


def test_stuck_location_is_marked_with_its_blockers() -> None:
    model = Model.from_events(running().events())
    source = to_graph(model, stuck=(model.input_loc((0, 3), 0), 0)).source
    assert "stuck_note" in source
    assert "input &#x27;numbers&#x27; was never advanced" in source or "input 'numbers' was never advanced" in source
    assert "#f6a6a6" in source  # the input operator is filled as a blocker
    assert 'BORDER="3"' in source  # the stuck port is outlined


def test_depth_collapses_nested_scopes_into_a_box() -> None:
    model = Model.from_events(running().events())
    source = to_graph(model, depth=0).source
    assert cluster_tree(source) == {"cluster_op_0": None}
    assert "2 operators inside (collapsed)" in source
    assert "op_0_2:i0" in source  # edges attach to the collapsed box's ports


def test_render_svg_and_jupyter() -> None:
    diagram = viz.render(running().events(), worker=1)
    svg = diagram._repr_svg_()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    with Recorder() as recording:
        pass
    assert "digraph" in viz.render(recording).source


def test_missing_dot_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    diagram = viz.render(running().events())
    assert "digraph" in diagram.source  # DOT always works
    with pytest.raises(RenderError, match="apt-get install graphviz"):
        diagram.svg()


def synthetic_chain(operators: int, scopes: int = 10) -> Script:
    """A dataflow of ``operators`` unary operators split into ``scopes`` nested regions of a chain."""
    script = Script()
    e = script.emit
    per = operators // scopes
    locs = [(1, 0, True)]
    e(0, K_OPERATOR, (0, 1), "source", 0, 1, (), None)
    for s in range(scopes):
        scope = (0, 2 + s)
        table = [(0, 0, False), (0, 0, True)]
        for i in range(1, per + 1):
            e(0, K_OPERATOR, scope + (i,), f"op{s}.{i}", 1, 1, ((0,),), None)
            e(0, K_CHANNEL, scope, (0 if i == 1 else i - 1, 0), (i, 0), "Pipeline" if i % 3 else "Exchange")
            table += [(i, 0, False), (i, 0, True)]
        e(0, K_CHANNEL, scope, (per, 0), (0, 0), "Pipeline")
        e(0, K_OPERATOR, scope, f"region{s}", 1, 1, ((0,),), "integer")
        e(0, K_LOCATIONS, scope, tuple(table))
        e(0, K_FRONTIERS, scope, tuple((k, 5, 1) for k in range(len(table))))
        e(0, K_CHANNEL, ROOT, (1 + s, 0), (2 + s, 0), "Pipeline")
        locs += [(2 + s, 0, False), (2 + s, 0, True)]
    e(0, K_OPERATOR, ROOT, "big", 0, 0, (), "integer")
    e(0, K_LOCATIONS, ROOT, tuple(locs))
    return script


def test_a_thousand_operators_render_in_under_ten_seconds() -> None:
    model = Model.from_events(synthetic_chain(1000).events())
    assert len(model.operators) >= 1000
    start = time.perf_counter()
    svg = viz.render(model).svg()
    elapsed = time.perf_counter() - start
    assert "op9.100" in svg
    assert elapsed < 10, f"rendering 1,000 operators took {elapsed:.1f} s"


# ---------------------------------------------------------------------- the command line


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "viz", *args], capture_output=True, text=True, cwd=REPO, timeout=60)


def write_recording(path: Path, script: Script) -> None:
    path.write_bytes(encode_header(0) + encode_events(script.raw) + END_FRAME)


def write_recording_v1(path: Path, script: Script) -> None:
    with open(path, "wb") as handle:
        handle.write(_header(0))
        for raw in script.raw:
            handle.write(_pack(raw))


def test_cli_draws_svg_and_dot(tmp_path: Path) -> None:
    log = tmp_path / "run.msgpack"
    write_recording(log, running())
    result = run_cli("dot", str(log), "-o", str(tmp_path / "out.svg"), "--worker", "0", "--depth", "3")
    assert result.returncode == 0, result.stderr
    assert "</svg>" in (tmp_path / "out.svg").read_text()
    result = run_cli("dot", str(log), "-o", "-", "--stuck", "0,3:in:0", "--at", "0.05")
    assert result.returncode == 0, result.stderr
    assert "stuck_note" in result.stdout and "numbers" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"", "empty file"),
        (b"hello, this is text\n", "not a pytimely recording"),
        (_pack({"format": "pytimely-events", "version": 99}), "newer than this viewer"),
        (_header(0) + _pack([10, 0, 1, 1.0]) + b"\xc1garbage", "corrupted after 1 events"),
        (_header(0) + _pack([99, 0, 1, 1.0]), "not a pytimely event"),
    ],
    ids=["missing", "empty", "text", "newer", "corrupted", "not an event"],  # the header holds our pid: fixed ids
)
def test_cli_bad_recordings_give_one_clear_line(tmp_path: Path, content: bytes | None, message: str) -> None:
    log = tmp_path / "bad.msgpack"
    if content is not None:
        log.write_bytes(content)
    result = run_cli("dot", str(log), "-o", str(tmp_path / "out.dot"), "--allow-format-1")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_cli_bad_selections_give_one_clear_line(tmp_path: Path) -> None:
    log = tmp_path / "run.msgpack"
    write_recording(log, running())
    for args, message in [
        (["--worker", "5"], "--worker 5"),
        (["--stuck", "9,9"], "no operator at address"),
        (["--stuck", "0,3:out:0"], "has no output 0"),
        (["--stuck", "nosuch"], "operator(s) named"),
    ]:
        result = run_cli("dot", str(log), "-o", str(tmp_path / "o.dot"), *args)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert message in result.stderr, result.stderr


def test_cli_refuses_a_moment_before_the_start_or_not_a_number_and_a_time_without_a_location(tmp_path: Path) -> None:
    """``--at -1`` drew an empty diagram and exited 0, ``--at nan`` drew every event but the last tracker batches,
    and ``--time`` without ``--stuck`` was ignored (found by the debugging audit)."""
    log = tmp_path / "run.msgpack"
    write_recording(log, running())
    for args, message in [
        (["--at", "-1"], "--at -1.0: expected seconds from the start of the recording, 0 or more"),
        (["--at", "nan"], "--at nan: expected seconds"),
        (["--at", "inf"], "--at inf: expected seconds"),
        (["--time", "3"], "--time is the time a --stuck location cannot pass: give --stuck too"),
    ]:
        result = run_cli("dot", str(log), "-o", "-", *args)
        assert result.returncode == 1 and result.stdout == "", args
        assert result.stderr.startswith(f"python -m viz: error: {message}"), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    with pytest.raises(SelectionError, match="at least 0"):
        viz.render(running().events(), at=-0.5)
    assert run_cli("dot", str(log), "-o", "-", "--at", "0").returncode == 0


def test_a_location_whose_numbers_int_cannot_read_is_refused_in_one_line(tmp_path: Path) -> None:
    """``--stuck 'Probe:in:²'`` or ``'0,²'`` ended in a ValueError traceback (str.isdigit takes '²', which int
    refuses), and so did a port or address of 5,000 digits (Python's integer-string limit); Model.locate promises
    SelectionError for anything that is not a location (found by the debugging audit)."""
    log = tmp_path / "run.msgpack"
    write_recording(log, running())
    for text, message in [
        ("0,3:in:²", "expected NAME or ADDRESS[:in|out:PORT]"),
        ("0,²", "operator(s) named '0,²'"),
        ("0,3:in:" + "9" * 5000, "expected NAME or ADDRESS[:in|out:PORT]"),
        ("0," + "9" * 5000, "operator(s) named"),
    ]:
        result = run_cli("dot", str(log), "-o", "-", "--stuck", text)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-300:]
        assert message in result.stderr, result.stderr[:300]
        with pytest.raises(SelectionError):
            Model.from_events(running().events()).locate(text)


def test_a_file_name_without_a_suffix_is_dot_wherever_it_is(tmp_path: Path) -> None:
    """``-o diagram`` wrote DOT but ``-o ./diagram`` (or ``a.d/diagram``) was refused as 'use a file ending in .dot,
    ...': the suffix was taken after the path's last dot, in a folder's name too (found by the debugging audit)."""
    log = tmp_path / "run.msgpack"
    write_recording(log, running())
    folder = tmp_path / "diagrams.d"
    folder.mkdir()
    for target in (folder / "flow", tmp_path / "flow"):
        result = run_cli("dot", str(log), "-o", f"{target.parent}/./{target.name}")
        assert result.returncode == 0, result.stderr
        assert target.read_text().startswith("digraph")


def test_cli_reads_format_1_only_when_asked_and_warns(tmp_path: Path) -> None:
    log = tmp_path / "old.msgpack"
    write_recording_v1(log, running())
    refused = run_cli("dot", str(log), "-o", str(tmp_path / "o.dot"))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "format version 1" in refused.stderr and "--allow-format-1" in refused.stderr, refused.stderr
    assert not (tmp_path / "o.dot").exists()
    read = run_cli("dot", str(log), "-o", str(tmp_path / "o.dot"), "--allow-format-1")
    assert read.returncode == 0, read.stderr
    [warning] = read.stderr.strip().splitlines()
    assert warning.startswith("python -m viz: warning:") and "without checksums" in warning
    assert "numbers" in (tmp_path / "o.dot").read_text()


def test_cli_recording_cut_short_uses_the_complete_events(tmp_path: Path) -> None:
    log = tmp_path / "cut.msgpack"
    write_recording(log, running())
    data = log.read_bytes()
    log.write_bytes(data[:-3])
    result = run_cli("dot", str(log), "-o", str(tmp_path / "o.dot"))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("stuck", "time", "message"),
    [
        ("0,3:in:0", "(3, 1)", "Product(3, 1) is not a time of 'Probe' input 0"),
        ("0,3:in:0", "'x'", "whose times are int"),
        ("0,3:in:0", "[1]", "[1] is not a time"),
        ("0,3:in:0", "None", "None is not a time"),
        ("0,2,2:in:0", "3", "whose times are Product(int, int)"),
        ("0,2,2:in:0", "(1, 2, 3)", "(1, 2, 3) is not a time"),
    ],
)
def test_cli_a_time_of_another_kind_than_the_locations_gives_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stuck: str, time: str, message: str
) -> None:
    """Found by the viewer audit: ``--time (3, 1)`` at an input of integer times raised TypeError ('<=' not
    supported between 'int' and 'Product'), ``--time [1]`` 'unhashable type', both tracebacks."""
    from viz.__main__ import main

    log = tmp_path / "run.msgpack"
    write_recording(log, running())
    assert main(["dot", str(log), "-o", str(tmp_path / "o.dot"), "--stuck", stuck, "--time", time]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert main(["dot", str(log), "-o", str(tmp_path / "o.dot"), "--stuck", "0,2,2:in:0", "--time", "(1, 2)"]) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--at", "nan"], "--at nan: expected seconds from the start of the recording, 0 or more"),
        (["--at", "-3"], "--at -3.0: expected seconds"),
        (["--at", "inf"], "--at inf: expected seconds"),
        (["--depth", "-1"], "--depth -1: expected how many scopes deep to show, 0 or more"),
    ],
)
def test_cli_an_instant_or_depth_out_of_range_gives_one_clear_line(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the new-user audit: --at nan drew the end of the run, --at -3 its start and --depth -1 the same as
    --depth 0, each without a word."""
    from viz.__main__ import main

    log = tmp_path / "run.msgpack"
    write_recording(log, running())
    assert main(["dot", str(log), "-o", str(tmp_path / "o.dot"), *args]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o.dot").exists()
