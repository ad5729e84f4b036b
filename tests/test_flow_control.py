"""Flow control between processes: a slow receiver slows its senders down instead of filling memory."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest
from helpers import flow_control_mains
from helpers.process_tree import run_measuring_peak

from runtime import execute
from runtime.communication.process_fabric import DEFAULT_SEND_WINDOW, send_window_from
from runtime.communication.wire import max_frame_from
from runtime.errors import ConfigurationError

pytestmark = pytest.mark.usefixtures("transport")  # every test over shared memory and over TCP

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PEAK_BOUND = 220 * 10**6
"""Bytes: three interpreters with NumPy (the script and its two processes, about 45 MB each) and a window.

Without flow control the same run peaks above 400 MB: the 2,000 arrays (320 MB)
pile up in process 1 while its operator sleeps.
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_slow_receiver_keeps_the_process_tree_s_memory_flat_and_the_answer_right() -> None:
    epochs, rows = 2000, 20_000
    env = dict(os.environ, PYTIMELY_SEND_WINDOW="1M")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    output, peak = run_measuring_peak(
        [sys.executable, str(HERE / "helpers" / "flow_control_mains.py"), str(epochs), str(rows), "0.003"],
        timeout=240,
        env=env,
    )
    total, expected = (int(word) for word in output.split())
    assert total == expected == flow_control_mains.expected_total(epochs, rows)
    assert 0 < peak < PEAK_BOUND, f"the process tree peaked at {peak / 1e6:.0f} MB"


def test_a_loop_with_exchange_and_a_barrier_completes_with_a_tiny_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both processes wait for each other's room while holding data inside a loop; neither may deadlock."""
    monkeypatch.setenv("PYTIMELY_SEND_WINDOW", "64K")
    numbers, rounds = 1000, 3
    main = functools.partial(flow_control_mains.loop_and_window, numbers=numbers, rounds=rounds)
    results = execute(main, processes=2, stall_timeout=60)
    for round_ in range(rounds):
        first = 2 + round_ * numbers * 2
        expected = flow_control_mains.collatz_total(first, first + 2 * numbers - 1)
        assert sum(result[0][round_] for result in results) == expected
    for _, window, most, largest in results:
        assert window == 64 * 1024
        assert 0 < most < window + largest  # the window held: at most one message beyond it


def test_the_send_window_setting_is_parsed_and_refused_when_wrong() -> None:
    assert send_window_from(None) == send_window_from("") == DEFAULT_SEND_WINDOW
    assert send_window_from("65536") == 65536
    assert send_window_from("64K") == send_window_from("64KiB") == 64 * 1024
    assert send_window_from(" 8M ") == 8 << 20
    # 5000 digits: a bare ValueError from int(); Arabic-Indic digits: not ASCII
    for wrong in ("lots", "-5", "1.5M", "100", "4K", "9" * 5000, "\u0665\u0660\u0660\u0660\u0660\u0660"):
        with pytest.raises(ConfigurationError, match="PYTIMELY_SEND_WINDOW"):
            send_window_from(wrong)


def test_the_frame_limit_setting_reads_the_forms_the_other_byte_settings_read() -> None:
    """PYTIMELY_MAX_FRAME_BYTES is read as PYTIMELY_SEND_WINDOW and PYTIMELY_SHM_RING_BYTES are: '64K' and '512M'
    are taken (int() refused them), a sign, a separator or non-ASCII digits are not (int() took them), and a limit
    past what a frame's 32-bit length prefix can say is refused rather than failing the first frame that large."""
    assert max_frame_from(None) == max_frame_from(" ") == 1 << 30
    assert max_frame_from("65536") == 65536
    assert max_frame_from("64K") == max_frame_from("64KiB") == 64 * 1024
    assert max_frame_from(" 512M ") == 512 << 20
    assert max_frame_from("4294967295") == (1 << 32) - 1
    for wrong in ("lots", "+65536", "65_536", "\u0667\u0660\u0660\u0660\u0660", "-5", "1.5M", "4K", "4G", "9" * 5000):
        with pytest.raises(ConfigurationError, match="PYTIMELY_MAX_FRAME_BYTES"):
            max_frame_from(wrong)


def test_a_frame_over_this_process_s_limit_names_the_setting_a_peer_may_have_set_higher() -> None:
    """Process 0 with the default limit sent 1.6 MB arrays to process 1 started with PYTIMELY_MAX_FRAME_BYTES=64K:
    process 1 said 'lost process 0 ...: it sent malformed data (frame of 1600036 bytes (header 13) exceeds the limit
    of 65536)', naming neither the setting nor that the processes disagree on it.  Both readers (TCP and the
    shared-memory ring) now name the setting, and a frame within it that is malformed otherwise does not."""
    import struct

    from runtime.communication.shm_ring import MIN_CAPACITY, Ring, RingReader, RingWriter, ring_bytes
    from runtime.communication.wire import MAX_FRAME, FrameReader, WireError

    prefix = struct.pack("!II", MAX_FRAME + 1, 13)
    with pytest.raises(WireError, match=r"PYTIMELY_MAX_FRAME_BYTES.*every process of a cluster needs the same value"):
        list(FrameReader().feed(prefix))
    memory = os.memfd_create("test-ring")  # one ring mapped twice, as the writing and the reading process would
    try:
        os.ftruncate(memory, ring_bytes(MIN_CAPACITY))
        written, read = Ring(memory, MIN_CAPACITY), Ring(memory, MIN_CAPACITY)
    finally:
        os.close(memory)
    RingWriter(written, lambda: None).send([prefix])
    with pytest.raises(WireError, match=r"PYTIMELY_MAX_FRAME_BYTES.*every process of a cluster needs the same value"):
        list(RingReader(read, lambda: None).frames())
    with pytest.raises(WireError) as malformed:
        list(FrameReader().feed(struct.pack("!II", 10, 20)))  # a header longer than its frame
    assert "PYTIMELY_MAX_FRAME_BYTES" not in str(malformed.value)
