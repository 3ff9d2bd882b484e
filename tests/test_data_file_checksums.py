"""Data files carry checksums and every read checks them (issue 19, item 6).

An adversarial probe flipped single bytes of data files and 2 of 117 flips read back wrong values
without an error; with incompressible values (random doubles, timestamps), where zstd stores the
bytes as they are, most flips of page data did. Now every data file lakelog writes (data, changelog
and compaction outputs) carries Parquet's page CRCs, dictionary pages included, and the CRC-32 of its
footer in the footer's key-value metadata; every read checks both, and a damaged file raises
:class:`CorruptFileError` naming it. Files without them (Paimon's, pypaimon's, older lakelog files)
read unchecked, as before.

The flip experiment (:func:`test_flipped_bytes_never_read_back_wrong`) flips a sample of bytes of
one data file, one at a time, in every region of the file (page headers, page data, dictionary
pages, the column metadata pyarrow writes after each column chunk, the footer, the magic), reads the
table back and counts the outcomes. A flip may read back the right rows (it hit bytes no read uses:
a column the read does not need, page statistics, the column metadata copies), or raise
:class:`CorruptFileError`; never anything else.
"""

from __future__ import annotations

import decimal
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.connector.errors import CorruptFileError, LakelogError
from lakelog.connector.format import parquet_layout
from lakelog.connector.format import thrift_compact as tc
from lakelog.connector.format.parquet_footer import FOOTER_CRC_KEY, read_footer, verify_footer

from .conftest import MakeTable

_DICTIONARY_PAGE = 2  # parquet.thrift PageType
_REQUIRED, _OPTIONAL = 0, 1  # parquet.thrift FieldRepetitionType


@dataclass(frozen=True)
class Page:
    column: str
    header_start: int
    header_end: int
    end: int
    dictionary: bool
    crc: Optional[int]


def pages(path: Path) -> list[Page]:
    """Every page of a Parquet file, found by walking each column chunk's page headers."""
    data = path.read_bytes()
    md = pq.ParquetFile(path).metadata
    out = []
    for g in range(md.num_row_groups):
        for c in range(md.num_columns):
            chunk = md.row_group(g).column(c)
            pos = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            end = pos + chunk.total_compressed_size
            while pos < end:
                header, header_end = tc.read_struct_at(data, pos)
                size = tc.field(header, 3)  # compressed_page_size
                crc = tc.field(header, 4)
                kind = tc.field(header, 1)
                assert size is not None and kind is not None
                out.append(Page(chunk.path_in_schema, pos, header_end, header_end + size.value,
                                kind.value == _DICTIONARY_PAGE, crc.value if crc is not None else None))
                pos = header_end + size.value
    return out


def regions(path: Path) -> dict[str, list[int]]:
    """Byte offsets of a Parquet file by region."""
    size = path.stat().st_size
    cut, _ = read_footer(str(path))
    out: dict[str, list[int]] = {"magic": [0, 1, 2, 3], "footer": list(range(cut, size - 8)),
                                 "footer length and magic": list(range(size - 8, size))}
    covered = set(out["magic"]) | set(range(cut, size))
    for p in pages(path):
        kind = "dictionary page" if p.dictionary else "data page"
        out.setdefault(f"{kind} header", []).extend(range(p.header_start, p.header_end))
        out.setdefault(kind, []).extend(range(p.header_end, p.end))
        covered.update(range(p.header_start, p.end))
    out["column metadata after each chunk"] = [i for i in range(size) if i not in covered]
    return out


def _lakelog_files(t: lakelog.Table) -> list[Path]:
    return sorted(p for p in Path(t.path).rglob("*.parquet"))


# ---- data: incompressible values, where a flip in page data used to read back silently ------------------
def _schema(nanos: bool) -> pa.Schema:
    fields = [pa.field("id", pa.int64(), False), ("name", pa.string()), ("amount", pa.float64()),
              ("ts", pa.timestamp("ms")), ("price", pa.decimal128(10, 2))]
    if nanos:  # TIMESTAMP(9): INT96 in a footer that lakelog rewrites, no Arrow schema
        fields.append(("ts9", pa.timestamp("ns")))
    return pa.schema(fields)


def _rows(schema: pa.Schema, n: int, seed: int = 7, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols: dict[str, pa.Array] = {
        "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
        "name": pa.array([f"name-{i % 13}" for i in range(n)]),  # dictionary encoded
        "amount": pa.array(rng.random(n) * 1000, mask=rng.random(n) < 0.05),
        "ts": pa.array(1_700_000_000_000 + rng.integers(0, 10**10, n), pa.int64()).view(pa.timestamp("ms")),
        "price": pa.array([decimal.Decimal(int(v)) / 100 for v in rng.integers(0, 10**6, n)], pa.decimal128(10, 2)),
    }
    if "ts9" in schema.names:
        cols["ts9"] = pa.array(1_700_000_000 * 10**9 + rng.integers(0, 10**15, n), pa.int64()).view(pa.timestamp("ns"))
    return pa.table(cols, schema=schema)


def _one_file_table(make_table: MakeTable, nanos: bool, name: str = "db.t") -> tuple[lakelog.Table, Path, pa.Table]:
    schema = _schema(nanos)
    t = make_table(name, schema, primary_key=("id",), partition_by=None, options={"bucket": "1"})
    t.write(_rows(schema, 600))
    (path,) = _lakelog_files(t)
    return t, path, t.to_arrow().sort_by("id")


def _flip(path: Path, offset: int, mask: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([b ^ mask]))


def _outcome(t: lakelog.Table, expected: pa.Table) -> str:
    try:
        got = t.to_arrow().sort_by("id")
    except CorruptFileError:
        return "detected"
    except LakelogError as e:
        return f"other lakelog error {type(e).__name__}: {e}"
    except Exception as e:
        return f"raw {type(e).__name__}: {e}"
    return "same" if got.equals(expected) else "WRONG"


# ---- every writer writes them -----------------------------------------------------------------------------
def test_every_data_file_lakelog_writes_carries_page_and_footer_checksums(make_table: MakeTable) -> None:
    """Data files, changelog files and compaction outputs, of primary-key and append tables, with
    and without INT96 columns: every page has its CRC and every footer its checksum."""
    pk = make_table("db.pk", _schema(True), primary_key=("id",), partition_by=None,
                    options={"bucket": "1", "changelog-producer": "lookup"})
    append = make_table("db.append", _schema(False), primary_key=None, partition_by=None, options={"bucket": "-1"})
    for t in (pk, append):
        for i in range(3):
            t.write(_rows(_schema(t is pk), 50, seed=i, start=25 * i))
        t.compact(full=True)
    files = _lakelog_files(pk) + _lakelog_files(append)
    names = {p.name.split("-")[0] for p in files}
    assert names == {"data", "changelog"}, names
    for path in files:
        ps = pages(path)
        assert ps and all(p.crc is not None for p in ps), f"{path.name}: pages without a CRC"
        assert any(p.dictionary for p in ps)
        assert FOOTER_CRC_KEY in (pq.ParquetFile(path).metadata.metadata or {}), path.name
        verify_footer(str(path))  # and it is right


def test_files_without_checksums_still_read(make_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files as Paimon's and pypaimon's writers leave them (no page CRCs, no footer checksum) read."""
    monkeypatch.setattr(parquet_layout, "DEFAULT_LAYOUT", parquet_layout.WriteLayout(checksums=False))
    for nanos in (False, True):
        t, path, expected = _one_file_table(make_table, nanos, f"db.t{int(nanos)}")
        assert all(p.crc is None for p in pages(path))
        assert FOOTER_CRC_KEY not in (pq.ParquetFile(path).metadata.metadata or {})
        assert t.to_arrow().sort_by("id").equals(_rows(_schema(nanos), 600))
        assert expected.num_rows == 600


# ---- damage is detected --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["data page", "dictionary page"])
def test_a_damaged_page_raises_corrupt_file_error_naming_the_file(make_table: MakeTable, kind: str) -> None:
    """Regression: a flipped bit in the zstd page of incompressible doubles read back as another
    double, and one in an uncompressed dictionary page as another name ("name-12" as "name-13")."""
    options = {"bucket": "1"} if kind == "data page" else {"bucket": "1", "file.compression": "none"}
    schema = _schema(False)
    t = make_table("db.t", schema, primary_key=("id",), partition_by=None, options=options)
    t.write(_rows(schema, 600))
    (path,) = _lakelog_files(t)
    if kind == "data page":
        page = next(p for p in pages(path) if p.column == "amount")
        offset = (page.header_end + page.end) // 2
    else:
        page = next(p for p in pages(path) if p.column == "name" and p.dictionary)
        offset = page.end - 1  # the last character of the last name in the dictionary
    _flip(path, offset, 0x01)
    with pytest.raises(CorruptFileError, match=rf"{path.name} fails a page checksum"):
        t.to_arrow()


def test_a_damaged_footer_raises_corrupt_file_error_naming_the_file(make_table: MakeTable) -> None:
    """Regression: one bit of the footer turned the OPTIONAL decimal column REQUIRED, and its intact
    pages decoded to other values (no page checksum covers the footer)."""
    t, path, _ = _one_file_table(make_table, nanos=False)
    cut, footer = read_footer(str(path))
    schema = tc.field(tc.read_struct(footer), 2)
    assert schema is not None
    element = next(e for e in schema.value.items if getattr(tc.field(e, 4), "value", None) == b"price")
    repetition = tc.field(element, 3)
    assert repetition is not None and repetition.value == _OPTIONAL
    _flip(path, cut + repetition.vpos, 0x01)  # zigzag 1 -> 0: REQUIRED
    with pytest.raises(CorruptFileError, match=rf"{path.name}: its footer fails its checksum"):
        t.to_arrow()


# ---- the flip experiment -----------------------------------------------------------------------------
def _sweep(t: lakelog.Table, path: Path, expected: pa.Table, flips: dict[str, list[tuple[int, int]]]) -> None:
    """Flip each (offset, mask) of ``flips`` (by region) alone, read the table, restore the file;
    fail on any outcome but the right rows or CorruptFileError."""
    original = path.read_bytes()
    outcomes: dict[str, Counter[str]] = {}
    bad: list[str] = []
    for region, todo in flips.items():
        for offset, mask in todo:
            _flip(path, offset, mask)
            outcome = _outcome(t, expected)
            path.write_bytes(original)
            outcomes.setdefault(region, Counter())[outcome.split(":")[0]] += 1
            if outcome not in ("same", "detected"):
                bad.append(f"{region} @{offset} ^{mask:#x}: {outcome}")
    summary = {r: dict(c) for r, c in outcomes.items()}
    assert not bad, f"{len(bad)} flips not detected or not named: {bad[:10]}; outcomes {summary}"
    detected = sum(c["detected"] for c in outcomes.values())
    assert outcomes["data page"]["detected"] > 0 and outcomes["footer"]["detected"] > 0, summary
    assert detected > sum(c["same"] for c in outcomes.values()), summary
    assert t.to_arrow().sort_by("id").equals(expected)


@pytest.mark.parametrize("nanos", [False, True], ids=["arrow-schema", "int96"])
def test_flipped_bytes_never_read_back_wrong(make_table: MakeTable, nanos: bool) -> None:
    """A sample of single-byte flips over every region of a data file (about 600): each reads back
    the right rows or raises CorruptFileError naming the file; none reads back wrong values, none
    raises another error. (Before the checksums, most flips of page data in this file read back
    wrong.)"""
    t, path, expected = _one_file_table(make_table, nanos)
    rng = random.Random(19)
    flips: dict[str, list[tuple[int, int]]] = {}
    for region, offsets in regions(path).items():
        sample = offsets if len(offsets) <= 40 else rng.sample(offsets, 40 if region != "footer" else 160)
        flips[region] = [(o, m) for o in sample for m in (0x01, rng.randrange(2, 256))]
    _sweep(t, path, expected, flips)


@pytest.mark.soak
@pytest.mark.parametrize("nanos", [False, True], ids=["arrow-schema", "int96"])
def test_no_flipped_byte_reads_back_wrong(make_table: MakeTable, nanos: bool) -> None:
    """The whole experiment: every byte of the file flipped, in its lowest bit (Arrow schema) or in
    all its bits (INT96): about 17,000 reads each, half a minute (the sampled test above flips
    random bits of both files)."""
    t, path, expected = _one_file_table(make_table, nanos)
    mask = 0xFF if nanos else 0x01
    flips = {r: [(o, mask) for o in offsets] for r, offsets in regions(path).items()}
    _sweep(t, path, expected, flips)
