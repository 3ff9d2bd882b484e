"""Editing the footer of a Parquet data file, to write and read INT96 columns pyarrow cannot.

pyarrow 16 writes INT96 only for every timestamp column of a file at once, and reads INT96 only
through conversions that can be wrong (:mod:`~lakelog.connector.format.int96`). Both ends meet in
FIXED_LEN_BYTE_ARRAY(12), whose data pages hold the same bytes as INT96's:

* :func:`declare_int96`: a file written with the 12 bytes of each TIMESTAMP(7..9) value as
  FIXED_LEN_BYTE_ARRAY(12) gets a footer declaring those columns INT96 (and marking the file as
  lakelog's, :data:`LAKELOG_INT96`).
* :func:`binary_view`: a file opened through a copy of its footer declaring its INT96 columns
  FIXED_LEN_BYTE_ARRAY(12), so that pyarrow hands over the bytes.

And the footer's checksum. Page CRCs (Parquet's own, written and verified by
:mod:`~lakelog.connector.format.data_file`) cover the page data only; the footer, which says how to
decode those pages, has none in Parquet. A flipped bit there can turn an OPTIONAL column REQUIRED,
and the intact pages then decode to wrong values without an error. So every data file lakelog
writes carries, in its footer's key-value metadata, the CRC-32 of the footer itself
(:data:`FOOTER_CRC_KEY`, eight hex digits; computed with those digits as ``00000000``):

* :func:`footer_checksum_slot`: the key-value entry to write (the placeholder), and
  :func:`seal_footer`, which fills it in once the file is complete: one read of the footer and an
  eight-byte write in place, so the footer is neither decoded nor moved.
* :func:`verify_footer`: checked on every read, before pyarrow decodes the footer. A footer without
  the entry (a file Paimon, pypaimon or lakelog before this wrote) is not checked.

Readers that do not know the key (Paimon's Java reader, pypaimon, Spark) ignore it, like any other
key-value metadata.

The footer is Thrift (compact protocol): :mod:`~lakelog.connector.format.thrift_compact`.
"""

from __future__ import annotations

import contextlib
import io
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow.parquet as pq

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format import thrift_compact as tc
from lakelog.connector.format.fileio import io_for

__all__ = [
    "read_footer",
    "binary_view",
    "declare_int96",
    "int96_from_lakelog",
    "LAKELOG_INT96",
    "FOOTER_CRC_KEY",
    "footer_checksum_slot",
    "seal_footer",
    "verify_footer",
]

LAKELOG_INT96 = (b"lakelog.int96", b"timestamp[ns]")
"""Key-value metadata of files whose INT96 columns lakelog wrote from Arrow ``timestamp[ns]`` values:
every one inside 1677-09-21 .. 2262-04-11, so that pyarrow's own reading of them is exact."""

_INT96, _FIXED_LEN_BYTE_ARRAY = 3, 7  # parquet.thrift Type


def int96_from_lakelog(f: pq.ParquetFile) -> bool:
    """Whether ``f``'s INT96 columns were written by lakelog from nanosecond timestamps."""
    kv = f.metadata.metadata or {}
    return kv.get(LAKELOG_INT96[0]) == LAKELOG_INT96[1]


# ---- reading -------------------------------------------------------------------------------------
class _SplicedFile(io.RawIOBase):
    """The bytes of ``path`` up to ``cut``, followed by ``tail``."""

    def __init__(self, path: str, cut: int, tail: bytes) -> None:
        super().__init__()
        self._f = io_for(path).open_input(path)  # closed with this object; local or object store
        self._cut = cut
        self._tail = tail
        self._size = cut + len(tail)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        want = min(len(view), max(0, self._size - self._pos))
        done = 0
        if self._pos < self._cut and want:
            data = self._f.read_at(min(want, self._cut - self._pos), self._pos)
            n = len(data)
            view[:n] = data
            done, self._pos = n, self._pos + n
        if done < want and self._pos >= self._cut:
            start = self._pos - self._cut
            chunk = self._tail[start : start + want - done]
            view[done : done + len(chunk)] = chunk
            done, self._pos = done + len(chunk), self._pos + len(chunk)
        return done

    def close(self) -> None:
        self._f.close()
        super().close()


_TAIL = 64 * 1024  # one ranged read fetches the footer of most files (an object store's GET)


def read_footer(path: str, source: Any = None) -> tuple[int, bytes]:
    """(offset, bytes) of the Thrift footer of a Parquet file; ``source``: the file, already open
    for random access (a ``pyarrow.NativeFile``), else it is opened through the file IO."""
    if source is None:
        with io_for(path).open_input(path) as f:
            return read_footer(path, f)
    size = source.size()
    if size < 12:
        raise CorruptFileError(f"data file {path} is too short to be a Parquet file")
    start = max(0, size - _TAIL)
    tail = source.read_at(size - start, start)
    if tail[-4:] != b"PAR1":
        raise CorruptFileError(f"data file {path}: no Parquet footer (encrypted or damaged)")
    n = int.from_bytes(tail[-8:-4], "little")
    if n > size - 12:
        raise CorruptFileError(f"data file {path}: footer length {n} exceeds the file")
    cut = size - 8 - n
    if cut >= start:
        return cut, bytes(tail[cut - start : size - 8 - start])
    return cut, bytes(source.read_at(n, cut))


def _as_fixed_binary(meta: list[tc.TField]) -> list[tc.TField]:
    """FileMetaData with INT96 leaves declared FIXED_LEN_BYTE_ARRAY(12), without their statistics and
    without key-value metadata (its ARROW:schema would describe those columns as timestamps)."""
    out = []
    for f in meta:
        if f.id == 5:  # key_value_metadata
            continue
        if f.id == 2:  # schema: list<SchemaElement>
            for element in f.value.items:
                t = tc.field(element, 1)
                if t is not None and t.value == _INT96:
                    t.value = _FIXED_LEN_BYTE_ARRAY
                    element[:] = [x for x in element if x.id != 2]
                    element.insert(element.index(t) + 1, tc.TField(2, tc.I32, 12))  # type_length
        if f.id == 4:  # row_groups: list<RowGroup>
            for group in f.value.items:
                chunks = tc.field(group, 1)
                for chunk in chunks.value.items if chunks is not None else ():
                    md = tc.field(chunk, 3)  # ColumnMetaData
                    t = tc.field(md.value, 1) if md is not None else None
                    if md is not None and t is not None and t.value == _INT96:
                        t.value = _FIXED_LEN_BYTE_ARRAY
                        md.value[:] = [x for x in md.value if x.id != 12]  # statistics
        out.append(f)
    return out


@contextlib.contextmanager
def binary_view(path: str) -> Iterator[pq.ParquetFile]:
    """``path`` opened with its INT96 columns read as ``fixed_size_binary(12)``."""
    cut, footer = read_footer(path)
    try:
        patched = tc.write_struct(_as_fixed_binary(tc.read_struct(footer)))
    except CorruptFileError as e:
        raise CorruptFileError(f"data file {path}: cannot decode its footer: {e}") from None
    tail = patched + len(patched).to_bytes(4, "little") + b"PAR1"
    with _SplicedFile(path, cut, tail) as source:
        f = pq.ParquetFile(source, page_checksum_verification=True)
        try:
            yield f
        finally:
            f.close()


# ---- writing ---------------------------------------------------------------------------------------------
def _leaf_elements(schema: list[tc.TField]) -> list[list[tc.TField]]:
    """The SchemaElements of the leaves, in column order (elements are stored depth first; a group has
    ``num_children``, field 5)."""
    return [e for e in schema if tc.field(e, 5) is None]


def declare_int96(path: str, leaves: Sequence[int], *, checksum_slot: bool = False) -> None:
    """Rewrite the footer of the Parquet file ``path`` so that leaf columns ``leaves`` (indices in
    column order), written as FIXED_LEN_BYTE_ARRAY(12) by :func:`~lakelog.connector.format.int96.encode`,
    are INT96 columns, without statistics (INT96 has no defined order), and mark the file as lakelog's.
    ``checksum_slot``: also add the footer checksum's slot (:func:`footer_checksum_slot`) unless the
    footer has it (pyarrow writes no key-value metadata for these files, which store no Arrow schema).

    Only those bytes change (the rest of the footer is not encoded again: this runs for every file)."""
    cut, footer = read_footer(path)
    meta = tc.read_struct(footer)
    schema, groups, kv = tc.field(meta, 2), tc.field(meta, 4), tc.field(meta, 5)
    if schema is None or groups is None:
        raise CorruptFileError(f"data file {path}: its footer has no schema or no row groups")
    edits: list[tc.Edit] = []
    elements = _leaf_elements(schema.value.items[1:])
    for i in leaves:
        element = elements[i]
        t, length = tc.field(element, 1), tc.field(element, 2)
        annotated = [x for x in element if x.id in (6, 10)]  # converted_type, logicalType
        if t is None or t.value != _FIXED_LEN_BYTE_ARRAY or length is None or length.value != 12 or annotated:
            raise CorruptFileError(f"data file {path}: leaf {i} was not written as FIXED_LEN_BYTE_ARRAY(12)")
        edits.append(_as_int96(footer, t))
        edits.append(tc.without_field(footer, element, element.index(length)))  # type_length
    for group in groups.value.items:
        chunks = tc.field(group, 1)
        assert chunks is not None
        for i in leaves:
            md = tc.field(chunks.value.items[i], 3)  # ColumnMetaData
            t = tc.field(md.value, 1) if md is not None else None
            if md is None or t is None or t.value != _FIXED_LEN_BYTE_ARRAY:
                raise CorruptFileError(f"data file {path}: a chunk of leaf {i} is no FIXED_LEN_BYTE_ARRAY")
            edits.append(_as_int96(footer, t))
            stats = tc.field(md.value, 12)
            if stats is not None:
                edits.append(tc.without_field(footer, md.value, md.value.index(stats)))
    entries = [LAKELOG_INT96]
    if checksum_slot and (kv is None or all(getattr(tc.field(e, 1), "value", None) != FOOTER_CRC_KEY
                                            for e in kv.value.items)):
        entries += footer_checksum_slot().items()
    markers = [[tc.TField(1, tc.BINARY, k), tc.TField(2, tc.BINARY, v)] for k, v in entries]
    if kv is None:  # key_value_metadata
        new = tc.TField(5, tc.LIST, tc.TList(tc.STRUCT, markers))
        edits.append(tc.with_field(footer, meta, new, len(footer) - 1))
    else:
        kv.value.items.extend(markers)
        edits.append(tc.replaced_field(meta, meta.index(kv)))
    patched = tc.apply_edits(footer, edits)
    with open(path, "r+b") as fh:
        fh.truncate(cut)
        fh.seek(cut)
        fh.write(patched + len(patched).to_bytes(4, "little") + b"PAR1")


def _as_int96(footer: bytes, t: tc.TField) -> tc.Edit:
    """The edit turning a decoded Type field from FIXED_LEN_BYTE_ARRAY into INT96 (both one byte)."""
    if t.end != t.vpos + 1:
        raise CorruptFileError("a Parquet Type field is not one byte long")
    return (t.vpos, t.end, bytes([_INT96 << 1]))


# ---- the footer's checksum -------------------------------------------------------------------------------
FOOTER_CRC_KEY = b"lakelog.footer.crc32"
"""Key-value metadata key of the CRC-32 (zlib's) of the footer, as eight lowercase hex digits."""

_CRC_PLACEHOLDER = b"00000000"
# The entry as Thrift's compact protocol writes a KeyValue: field 1 (binary, header 0x18), the key's
# length and bytes, field 2 (binary, 0x18) and the value's length, 8; then the digits.
_CRC_ENTRY = bytes([0x18, len(FOOTER_CRC_KEY)]) + FOOTER_CRC_KEY + bytes([0x18, len(_CRC_PLACEHOLDER)])


def footer_checksum_slot() -> dict[bytes, bytes]:
    """The key-value metadata that :func:`seal_footer` fills in: add it to the schema the file is
    written with."""
    return {FOOTER_CRC_KEY: _CRC_PLACEHOLDER}


def _slot(footer: bytes) -> int:
    """Where the eight digits of the footer's checksum start, or -1 for a footer without one. The
    last match: key-value metadata follows the row groups, whose statistics hold user values, and
    only fixed text (``created_by``) and column orders follow it."""
    at = footer.rfind(_CRC_ENTRY)
    return at + len(_CRC_ENTRY) if at >= 0 else -1


def _footer_crc(footer: bytes, start: int) -> bytes:
    end = start + len(_CRC_PLACEHOLDER)
    crc = zlib.crc32(footer[end:], zlib.crc32(_CRC_PLACEHOLDER, zlib.crc32(footer[:start])))
    return b"%08x" % crc


def seal_footer(path: str) -> None:
    """Write the checksum of the complete footer of data file ``path`` into its slot (see
    :func:`footer_checksum_slot`); the file must have been written with the slot."""
    cut, footer = read_footer(path)
    start = _slot(footer)
    if start < 0 or footer[start : start + len(_CRC_PLACEHOLDER)] != _CRC_PLACEHOLDER:
        raise CorruptFileError(f"data file {path}: its footer has no empty checksum slot to fill")
    with open(path, "r+b") as fh:
        fh.seek(cut + start)
        fh.write(_footer_crc(footer, start))


def verify_footer(path: str, source: Any = None) -> None:
    """Check the footer of data file ``path`` (``source``: the file open, see :func:`read_footer`)
    against its checksum, if it has one; a mismatch raises :class:`CorruptFileError` naming it."""
    _, footer = read_footer(path, source)
    start = _slot(footer)
    if start < 0:
        return
    stored = footer[start : start + len(_CRC_PLACEHOLDER)]
    computed = _footer_crc(footer, start)
    if stored != computed:
        raise CorruptFileError(
            f"data file {path}: its footer fails its checksum (stored {stored.decode('latin-1')!r}, "
            f"computed {computed.decode()!r}): the file was damaged after it was written"
        )
