"""One size grammar (dal/core/sizes.py): every way the docs let an operator write a size reads the same,
a limit DAL shows reads back as the same size, and what it cannot read says what it expected."""

from __future__ import annotations

import pytest

from dal.core.sizes import approx_size, format_size, parse_size


@pytest.mark.parametrize(("text", "size"), [
    ("512M", 512 << 20), ("512MB", 512 << 20), ("512 MiB", 512 << 20), ("1.5G", 3 << 29), ("1T", 1 << 40),
    ("2gib", 2 << 30), ("4096", 4096), ("1_024k", 1 << 20), ("300 bytes", 300),
])
def test_each_spelling_of_a_size_reads_as_one_number_of_bytes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("size", [1, 300, 1024, 1536, 5 << 20, (5 << 20) + 1, 3 << 30, 2000 << 30])
def test_a_limit_as_dal_shows_it_reads_back_as_the_same_size(size: int) -> None:
    assert parse_size(format_size(size)) == size


def test_what_a_run_wrote_is_shown_to_a_tenth_of_its_unit() -> None:
    assert [approx_size(n) for n in (1024, 1536, 5 << 20, 3 << 30)] == ["1.0 KiB", "1.5 KiB", "5.0 MiB", "3.0 GiB"]


@pytest.mark.parametrize("text", ["lots", "", "12Q", "1.5.2G", "G"])
def test_an_unreadable_size_says_what_was_expected(text: str) -> None:
    with pytest.raises(ValueError, match="expected a size such as 512M or 2G"):
        parse_size(text)


def test_a_size_below_the_minimum_is_refused_with_the_minimum() -> None:
    with pytest.raises(ValueError, match="at least 1,048,576 bytes"):
        parse_size("1K", minimum=1 << 20)
