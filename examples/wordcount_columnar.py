"""Streaming word count written columnar: words split and counted in C, only ``(word, count)`` pairs exchanged.

The same computation as ``examples/wordcount.py``, on the same text and with the
same flags and output, but each operator handles a whole batch per call:

* each worker sends its share of an epoch's lines as one NumPy array of strings
  (``send_batch`` of an array is one message);
* ``map_batch`` splits all the lines of a batch into a column of words: with
  pyarrow, giving an Arrow table, by a few NumPy passes over the lines' bytes
  when they are ASCII (``split_ascii``), else ``pyarrow.compute.utf8_split_whitespace``;
  without it, one ``str.split`` of the joined lines, giving a NumPy structured
  array;
* ``aggregate_batch("word", [("word", "count", "count")])`` counts each batch
  where it is (Arrow's hash aggregation, or a NumPy sort), exchanges only one
  ``(word, count)`` row per distinct word by the word's stable hash, and adds
  the partial counts on the word's owner once the epoch is complete;
* a last ``map_batch`` keeps the running totals and emits ``(word, total so
  far)`` for each word counted in the epoch, exactly as the record-wise version.

Run it with ``python examples/wordcount_columnar.py -w 2`` (or ``-n 2 -w 1`` for
two processes); it checks its answer against the same plain-Python reference.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.strings  # noqa: F401  # loaded with the example, not by the first batch (a millisecond)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from wordcount import Totals, combine, random_text, reference  # noqa: E402

from runtime import Worker, execute, execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from scopes import ScopeBuilder, Stream  # noqa: E402

ARROW = importlib.util.find_spec("pyarrow") is not None
"""Whether lines are split with pyarrow (else with NumPy)."""
if ARROW:  # imported with the example, not by the first batch
    import pyarrow as pa
    import pyarrow.compute as pc


def split_lines_numpy(lines: np.ndarray) -> np.ndarray:
    """All the words of a batch of lines as a structured array with one ``word`` column (one call per batch)."""
    words = np.array(" ".join(lines.tolist()).split(), dtype=str)
    result = np.empty(len(words), [("word", words.dtype)])
    result["word"] = words
    return result


CHUNK_BYTES = 1 << 20
"""How many bytes of ASCII text :func:`split_lines_arrow` cuts at a time (a core's cache holds its passes)."""


def scratch(name: str, size: int, dtype: Any) -> np.ndarray:
    """A reusable buffer of ``size`` items for this thread: :func:`split_ascii`'s passes write into the same memory
    batch after batch rather than page-faulting fresh arrays in (a fault costs as much as a pass over the page)."""
    buffers = _SCRATCH.__dict__
    buffer = buffers.get(name)
    if buffer is None or buffer.size < size or buffer.dtype != dtype:
        buffer = buffers[name] = np.empty(size, dtype)
    return buffer[:size]


_SCRATCH = threading.local()
"""The buffers of :func:`scratch`, one set per thread (worker threads of one process split at once)."""


def split_ascii(lines: np.ndarray) -> Any:
    """The words of a NumPy array of ASCII lines as one Arrow string array, cut with a few NumPy passes.

    The lines' UCS-4 code points are narrowed to bytes (one byte a character,
    each line followed by a space, so that a line of the full width ends its
    last word), the bytes that are not whitespace are kept, and where a word
    starts and ends gives the string array's offsets: no Python string and no
    UTF-8 decoding per line.  Whitespace is what ``str.split()`` takes for it.
    The passes write into :func:`scratch` buffers; only the words' bytes and
    offsets are new arrays (they become the Arrow array's buffers).  ``None``
    when the lines are not ASCII, or hold a control character that is not
    whitespace (a NUL among them), so that the caller splits them the general way.
    """
    count, width = len(lines), lines.dtype.itemsize // 4
    if lines.dtype.kind != "U" or not count or not width:
        return None
    codes = np.ascontiguousarray(lines).view(np.uint32).reshape(count, width)
    if codes.max() >= 128:
        return None
    size = count * (width + 1)
    table = scratch("text", size, np.uint8).reshape(count, width + 1)
    table[:, :width] = codes
    table[:, width] = ord(" ")
    text, flags, kept = table.reshape(-1), scratch("flags", size, np.bool_), scratch("kept", size, np.bool_)
    padding = count * width - int(np.strings.str_len(lines).sum())  # the NULs after each shorter line
    # below 9 only NUL (padding, when no line holds one); 14..27 are controls, not whitespace
    if np.count_nonzero(np.less(text, 9, out=flags)) != padding:
        return None
    shifted = np.subtract(text, np.uint8(14), out=scratch("shifted", size, np.uint8))
    if np.count_nonzero(np.less(shifted, 14, out=flags)):
        return None
    np.greater(text, ord(" "), out=kept)  # every byte left is whitespace (\t..\r, \x1c..\x1f, space) or padding
    edges = np.not_equal(kept[1:], kept[:-1], out=flags[: size - 1])
    bounds = np.flatnonzero(edges)  # alternately the last byte before a word and its last byte
    if kept[0]:
        bounds = np.concatenate(([-1], bounds))
    kind = pa.string() if size < 2**31 else pa.large_string()  # 32-bit offsets while they fit
    offsets = np.zeros(len(bounds) // 2 + 1, np.int32 if kind == pa.string() else np.int64)
    np.subtract(bounds[1::2], bounds[0::2], out=offsets[1:], casting="unsafe")
    np.cumsum(offsets[1:], out=offsets[1:])
    data = text[kept]
    return pa.Array.from_buffers(kind, len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def split_lines_arrow(lines: np.ndarray) -> Any:
    """All the words of a batch of lines as an Arrow table with one ``word`` column, split in C.

    ASCII lines are cut by :func:`split_ascii` (about twice as fast as Arrow's
    split, which converts every line to UTF-8 first), :data:`CHUNK_BYTES` of
    text at a time so that its passes stay in the core's cache (a quarter faster
    on 50,000 lines than one cut); others by ``pyarrow.compute.utf8_split_whitespace``.
    """
    step = max(1, CHUNK_BYTES // max(1, lines.dtype.itemsize // 4 + 1)) if lines.dtype.kind == "U" else len(lines)
    chunks = [split_ascii(lines[start : start + step]) for start in range(0, len(lines), step)]
    words = pa.chunked_array(chunks, pa.string()) if chunks and None not in chunks else None
    if words is None:
        words = pc.utf8_split_whitespace(pa.array(lines)).flatten()
        words = words.filter(pc.not_equal(words, ""))  # an empty line splits into [""]
    return pa.table({"word": words})


def split_lines(lines: np.ndarray) -> Any:
    """:func:`split_lines_arrow` when pyarrow is installed, else :func:`split_lines_numpy`."""
    return split_lines_arrow(lines) if ARROW else split_lines_numpy(lines)


def word_counts(batch: Any) -> tuple[list[str], list[int]]:
    """The ``word`` and ``count`` columns of an aggregated batch (Arrow table or structured array) as lists."""
    if isinstance(batch, np.ndarray):
        return batch["word"].tolist(), batch["count"].tolist()
    return batch.column("word").to_pylist(), batch.column("count").to_pylist()


def count_words(words: Stream) -> Stream:
    """Running totals of a stream of word columns, emitted as ``(word, total)`` once each epoch is done."""
    totals: dict[str, int] = {}

    def running(batch: Any) -> list[tuple[str, int]]:
        result = []
        for word, count in zip(*word_counts(batch), strict=True):  # one step per distinct word of the epoch
            total = totals[word] = totals.get(word, 0) + count
            result.append((word, total))
        return result

    counts = words.aggregate_batch("word", [("word", "count", "count")], name="Count")
    return counts.map_batch(running, name="Totals")


def worker_main(worker: Worker, text: list[list[str]], lockstep: bool = True) -> list[tuple[int, str, int]]:
    """Build and drive the dataflow on one worker; return the ``(epoch, word, total)`` it produced."""
    produced: list[tuple[int, str, int]] = []

    def collect(time: Any, batch: list[tuple[str, int]]) -> None:
        produced.extend((time, word, total) for word, total in batch)

    def build(scope: ScopeBuilder) -> Any:
        handle, lines = scope.new_input("Lines")
        words = lines.map_batch(split_lines, name="Split")
        probe = count_words(words).inspect_batch(collect, name="Collect").probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="wordcount_columnar")
    for epoch, lines in enumerate(text):
        mine = lines[worker.index :: worker.peers]
        if mine:
            handle.send_batch(np.array(mine, dtype=str))
        handle.advance_to(epoch + 1)
        if lockstep:
            worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return produced


def run(text: list[list[str]], workers: int = 1, lockstep: bool = True, processes: int = 1) -> Totals:
    """Count the words of ``text`` (a list of epochs, each a list of lines) on ``workers`` workers."""
    return combine(execute(partial(worker_main, text=text, lockstep=lockstep), workers=workers, processes=processes))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (the flags and output of ``examples/wordcount.py``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--epochs", type=int, default=4, help="number of epochs")
    parser.add_argument("--lines", type=int, default=50, help="lines per epoch")
    parser.add_argument("--seed", type=int, default=1, help="random seed for the text")
    parser.add_argument("--no-lockstep", action="store_true", help="send every epoch without waiting")
    args = parser.parse_args(argv)

    text = random_text(args.epochs, args.lines, args.seed)
    result = combine(execute_from_args(partial(worker_main, text=text, lockstep=not args.no_lockstep), argv))
    for epoch in sorted(result):
        top = sorted(result[epoch].items(), key=lambda item: (-item[1], item[0]))[:4]
        shown = ", ".join(f"{word}={total}" for word, total in top)
        print(f"epoch {epoch}: {len(result[epoch])} words updated; top totals: {shown}")
    ok = result == reference(text)
    print(f"{args.workers * args.processes} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
