"""Byte counts in settings: what they accept, and that no text makes the parser fail or return a huge number."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.communication.byte_sizes import parse_byte_count


@pytest.mark.parametrize(
    ("text", "count"),
    [("65536", 65536), ("64K", 65536), (" 64 KiB ", 65536), ("8M", 8 << 20), ("1g", 1 << 30), ("2kb", 2048)],
)
def test_the_forms_people_write_are_read(text: str, count: int) -> None:
    assert parse_byte_count(text) == count


@pytest.mark.parametrize("text", ["", "-1", "1.5M", "64 KB B", "nan", "١٢٣", "7²", "9" * 19, "64T"])
def test_other_text_is_no_count(text: str) -> None:
    assert parse_byte_count(text) is None


@settings(deadline=None)  # a loaded machine may pause an example past Hypothesis's 200 ms
@given(st.text(max_size=40))
def test_no_text_fails_or_says_more_than_18_digits_of_gigabytes(text: str) -> None:
    count = parse_byte_count(text)
    assert count is None or 0 <= count < 10**18 << 30
