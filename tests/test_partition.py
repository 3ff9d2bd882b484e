"""Partition directory names, as Paimon (checked against pypaimon 2.1 writes) spells them."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from lakelog.connector.format.partition import escape_path_name, partition_path, partition_value_string
from lakelog.connector.format.types import DataType

UTC = dt.timezone.utc
FLOAT, DOUBLE = DataType("FLOAT"), DataType("DOUBLE")


def test_escaping_matches_paimon() -> None:
    assert escape_path_name("a/b") == "a%2Fb"
    assert escape_path_name("x=y:z") == "x%3Dy%3Az"
    assert escape_path_name("{a}[b]^") == "%7Ba%7D%5Bb%5D%5E"  # '}' too, as PartitionPathUtils does
    assert escape_path_name("sp ace ü.") == "sp ace ü."  # spaces, dots and non-ASCII stay
    assert escape_path_name("\x00\x1f\x7f%") == "%00%1F%7F%25"


def test_dots_and_defaults() -> None:
    # "." / ".." are safe after "k=" and Paimon writes them as they are
    assert partition_path(["k"], ["."]) == "k=."
    assert partition_path(["k", "j"], ["..", None]) == "k=../j=__DEFAULT_PARTITION__"
    assert partition_path(["k"], ["  "], "NULLP") == "k=NULLP"


@pytest.mark.parametrize(
    "value,data_type,legacy,cast",
    [
        (dt.date(2024, 1, 1), DataType("DATE"), "19723", "2024-01-01"),
        (dt.date(1960, 1, 1), DataType("DATE"), "-3653", "1960-01-01"),
        (
            dt.datetime(2024, 1, 1),
            DataType("TIMESTAMP", precision=3),
            "2024-01-01T00:00",
            "2024-01-01 00:00:00.000",
        ),
        (
            dt.datetime(2024, 1, 1, 8, 30, 5),
            DataType("TIMESTAMP", precision=3),
            "2024-01-01T08:30:05",
            "2024-01-01 08:30:05.000",
        ),
        (
            dt.datetime(2024, 1, 1, 8, 30, 5, 123000),
            DataType("TIMESTAMP", precision=6),
            "2024-01-01T08:30:05.123",
            "2024-01-01 08:30:05.123000",
        ),
        (
            dt.datetime(2024, 1, 1, 8, 30, 0, 5),
            DataType("TIMESTAMP", precision=6),
            "2024-01-01T08:30:00.000005",
            "2024-01-01 08:30:00.000005",
        ),
        (
            dt.datetime(2024, 1, 1, 8, 30, 0, 5),
            DataType("TIMESTAMP", precision=0),
            "2024-01-01T08:30:00.000005",
            "2024-01-01 08:30:00.000005",
        ),
        (
            dt.datetime(2024, 1, 1, 0, 0, 0, 0),
            DataType("TIMESTAMP", precision=0),
            "2024-01-01T00:00",
            "2024-01-01 00:00:00",
        ),
        (dt.time(1, 2, 3, 4000), DataType("TIME"), "3723004", "01:02:03.004"),
        (True, DataType("BOOLEAN"), "true", "true"),
        (decimal.Decimal("-0.05"), DataType("DECIMAL", precision=10, scale=2), "-0.05", "-0.05"),
        (decimal.Decimal("1E-8"), DataType("DECIMAL", precision=10, scale=8), "0.00000001", "0.00000001"),
        (0.1, DOUBLE, "0.1", "0.1"),
        (1e10, DOUBLE, "1.0E10", "1.0E10"),
        (1e7, DOUBLE, "1.0E7", "1.0E7"),
        (1e-3, DOUBLE, "0.001", "0.001"),
        (1e-5, DOUBLE, "1.0E-5", "1.0E-5"),
        (1234567.125, DOUBLE, "1234567.125", "1234567.125"),
        (-2.5e-7, DOUBLE, "-2.5E-7", "-2.5E-7"),
        (float("nan"), DOUBLE, "NaN", "NaN"),
        (float("-inf"), DOUBLE, "-Infinity", "-Infinity"),
        (-0.0, DOUBLE, "-0.0", "-0.0"),
        (0.10000000149011612, FLOAT, "0.1", "0.1"),  # a FLOAT read back as a Python float
        (123456.703125, FLOAT, "123456.7", "123456.7"),
        (42, DataType("BIGINT"), "42", "42"),
    ],
)
def test_value_text_legacy_and_cast(value: object, data_type: DataType, legacy: str, cast: str) -> None:
    assert partition_value_string(value, data_type, legacy=True) == legacy
    assert partition_value_string(value, data_type, legacy=False) == cast


def test_ltz_uses_utc_fields_in_legacy_names() -> None:
    ltz = DataType("TIMESTAMP_LTZ", precision=6)
    v = dt.datetime(2024, 1, 1, 8, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert partition_value_string(v, ltz) == "2024-01-01T06:30"


def test_partition_path_with_types() -> None:
    types = [DataType("DATE"), FLOAT, DataType("VARCHAR", length=10)]
    values = [dt.date(2024, 1, 1), 0.10000000149011612, "a/b"]
    assert partition_path(["d", "f", "s"], values, types=types) == "d=19723/f=0.1/s=a%2Fb"
    assert (
        partition_path(["d", "f", "s"], values, types=types, legacy_name=False)
        == "d=2024-01-01/f=0.1/s=a%2Fb"
    )
    ts = [dt.datetime(2024, 1, 1, 8, 30)]
    assert partition_path(["t"], ts) == "t=2024-01-01T08%3A30"
