"""Batches from other processes are decoded by the worker that pulls them, and damage there names its source."""

from collections import deque

import pytest

from runtime.communication.process_channels import CreditingPuller as _CreditingPuller
from runtime.communication.wire import WireError, decode_batch, encode_batch


def test_a_remote_batch_is_decoded_when_pulled_and_its_bytes_become_owed() -> None:
    path, payload = encode_batch([("a", 1), ("b", 2)])
    owed = [0, 0]
    puller = _CreditingPuller(deque(), deque([(7, path, bytes(payload), 1, len(payload))]), owed, 3, 0)
    assert puller.pull() == (7, [("a", 1), ("b", 2)])
    assert owed == [0, len(payload)]
    assert puller.pull() is None


def test_local_messages_come_before_remote_ones() -> None:
    path, payload = encode_batch([1])
    puller = _CreditingPuller(deque([(1, [0])]), deque([(2, path, bytes(payload), 1, 0)]), [0, 0], 3, 0)
    assert puller.pull() == (1, [0])
    assert puller.pull() == (2, [1])


def test_a_malformed_remote_batch_names_the_process_worker_channel_and_time() -> None:
    path, payload = encode_batch([("a", 1)] * 200)
    damaged = bytes(payload)[:-5]
    with pytest.raises(WireError):
        decode_batch(path, damaged)
    owed = [0, 0]
    puller = _CreditingPuller(deque(), deque([(4, path, damaged, 1, len(damaged))]), owed, 9, 2)
    expected = r"process 1 sent worker 2 a malformed batch on channel 9 at time 4 .*same program"
    with pytest.raises(WireError, match=expected):
        puller.pull()
    assert owed == [0, len(damaged)]  # its bytes still go back to the sender's window
