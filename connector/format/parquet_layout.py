"""The physical Parquet layout of the data files lakelog writes: Paimon's, where pyarrow can make it.

* **Field ids** on every Parquet field, numbered as Paimon numbers them: a column takes its schema id,
  ``_KEY_<k>`` takes ``1073741823 + id(k)``, ``_SEQUENCE_NUMBER`` 2147483646, ``_VALUE_KIND``
  2147483645; an array element or map value takes ``536870911 + 1024 * id + depth`` and a map key
  ``536870911 - 1024 * id - depth``, where ``id`` is the nearest enclosing named field's and ``depth``
  counts array and map levels below it from 1.
* **TIMESTAMP(7..9) as INT96**, the only layout Paimon's reader takes for them (an INT64 of
  nanoseconds is read as milliseconds, or fails). pyarrow 16 can switch INT96 on only for every
  timestamp of a file at once, which would cost TIMESTAMP(0..6) their statistics, their range in
  pyarrow-based readers, and 12-18 % of the write time; so these columns are written as the 12
  bytes of their INT96 form and declared INT96 in the footer when the file is complete
  (:mod:`~lakelog.connector.format.parquet_footer`). Such files carry no ``ARROW:schema``; the
  other timestamps keep their INT64 layout, as in Paimon's files.
* **Column statistics** (min, max, null count) for every column, as Paimon writes them (pyarrow, like
  parquet-mr, writes none for INT96).
* **DECIMAL(p <= 18) as INT32/INT64** when pyarrow can (``store_decimal_as_integer``, pyarrow 17);
  pyarrow 16 writes FIXED_LEN_BYTE_ARRAY, which Paimon reads too.
* **Checksums**: a CRC-32 in every page header (Parquet's ``crc`` field, dictionary pages included),
  which parquet-mr writes too and checks only when asked, and the CRC-32 of the footer in its
  key-value metadata (:func:`~lakelog.connector.format.parquet_footer.seal_footer`), which other
  readers ignore. lakelog's reader checks both.

Reading every layout back is :mod:`lakelog.connector.format.parquet_read`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

import pyarrow as pa

from lakelog.connector.format import int96, parquet_footer
from lakelog.connector.format.arrow_leaves import map_leaves
from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND, key_column
from lakelog.connector.format.types import DataField, DataType, to_arrow_type

__all__ = [
    "FIELD_ID",
    "KEY_FIELD_ID_START",
    "SEQUENCE_NUMBER_FIELD_ID",
    "VALUE_KIND_FIELD_ID",
    "WriteLayout",
    "DEFAULT_LAYOUT",
    "PhysicalLayout",
    "with_field_id",
    "data_file_schema",
    "decimal_as_integer_supported",
]

FIELD_ID = b"PARQUET:field_id"
KEY_FIELD_ID_START = 1073741823  # Integer.MAX_VALUE / 2
SEQUENCE_NUMBER_FIELD_ID = 2147483646  # Integer.MAX_VALUE - 1
VALUE_KIND_FIELD_ID = 2147483645  # Integer.MAX_VALUE - 2
_NESTED_BASE = 536870911  # 2^29 - 1
_NESTED_DEPTH_LIMIT = 1024


def decimal_as_integer_supported() -> bool:
    """Whether the installed pyarrow can write DECIMAL(p <= 18) as INT32/INT64 (pyarrow >= 17)."""
    return int(pa.__version__.split(".")[0]) >= 17


@dataclass(frozen=True)
class WriteLayout:
    """What the data-file writer does beyond pyarrow's defaults (one switch per layout choice, so each
    can be measured alone).

    ``field_ids``: Paimon's field ids (from the file schema's field metadata). ``statistics``:
    ``"all"`` columns, only the ``"keys"`` (``_KEY_*`` and system columns), or ``"none"``. ``int96``:
    TIMESTAMP(7..9) as INT96 (see the module doc). ``decimal_as_integer``: DECIMAL(p <= 18) as
    INT32/INT64, None for "when pyarrow can". ``checksums``: page CRCs and the footer's checksum.
    ``WriteLayout(False, "none", False, False, False)`` is the layout lakelog wrote before it wrote
    Paimon's.
    """

    field_ids: bool = True
    statistics: Literal["all", "keys", "none"] = "all"
    int96: bool = True
    decimal_as_integer: Optional[bool] = None
    checksums: bool = True


DEFAULT_LAYOUT = WriteLayout()


# ---- field ids -------------------------------------------------------------------------------------------
def _id(i: int) -> dict[bytes, bytes]:
    return {FIELD_ID: str(i).encode()}


def _nested_with_ids(t: pa.DataType, dtype: DataType, owner: int, depth: int) -> pa.DataType:
    """``t`` (the Arrow type of ``dtype``) with field ids on its nested fields."""
    if dtype.root == "ARRAY" and pa.types.is_list(t):
        assert dtype.element is not None
        vf = t.value_field
        inner = _nested_with_ids(vf.type, dtype.element, owner, depth + 1)
        element_id = _NESTED_BASE + _NESTED_DEPTH_LIMIT * owner + depth + 1
        return pa.list_(pa.field(vf.name, inner, vf.nullable, metadata=_id(element_id)))
    if dtype.root in ("MAP", "MULTISET") and pa.types.is_map(t):
        key_type = dtype.key if dtype.root == "MAP" else dtype.element
        value_type = dtype.value if dtype.root == "MAP" else DataType("INT", nullable=False)
        assert key_type is not None and value_type is not None
        kf, vf = t.key_field, t.item_field
        k = _nested_with_ids(kf.type, key_type, owner, depth + 1)
        v = _nested_with_ids(vf.type, value_type, owner, depth + 1)
        key_id = _NESTED_BASE - _NESTED_DEPTH_LIMIT * owner - depth - 1
        value_id = _NESTED_BASE + _NESTED_DEPTH_LIMIT * owner + depth + 1
        return pa.map_(pa.field(kf.name, k, kf.nullable, metadata=_id(key_id)),
                       pa.field(vf.name, v, vf.nullable, metadata=_id(value_id)))
    if dtype.root == "ROW" and pa.types.is_struct(t):
        children = {f.name: f for f in dtype.fields or ()}
        out = []
        for i in range(t.num_fields):
            af = t.field(i)
            df = children.get(af.name)
            out.append(af if df is None else with_field_id(af, df.type, df.id))
        return pa.struct(out)
    return t


def with_field_id(f: pa.Field, dtype: DataType, field_id: int) -> pa.Field:
    """Arrow field ``f`` (of Paimon type ``dtype``) carrying Paimon's field ids, nested ones included."""
    return pa.field(f.name, _nested_with_ids(f.type, dtype, field_id, 0), f.nullable, metadata=_id(field_id))


def data_file_schema(
    fields: Sequence[DataField],
    key_names: Sequence[str],
    primary_keys: Sequence[str] = (),
    *,
    field_ids: bool = True,
) -> pa.Schema:
    """The Arrow schema of a data file, with Paimon's field ids unless ``field_ids`` is false: for a
    primary-key table (``key_names`` not empty) ``_KEY_<k>``, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``,
    then every column; primary-key columns are NOT NULL."""

    def column(name: str, f: DataField, nullable: bool, field_id: int) -> pa.Field:
        af = pa.field(name, to_arrow_type(f.type), nullable=nullable)
        return with_field_id(af, f.type, field_id) if field_ids else af

    by_name = {f.name: f for f in fields}
    pk = set(primary_keys)
    out = [column(key_column(k), by_name[k], False, KEY_FIELD_ID_START + by_name[k].id) for k in key_names]
    if key_names:
        seq, kind = (_id(SEQUENCE_NUMBER_FIELD_ID), _id(VALUE_KIND_FIELD_ID)) if field_ids else (None, None)
        out.append(pa.field(SEQUENCE_NUMBER, pa.int64(), False, metadata=seq))
        out.append(pa.field(VALUE_KIND, pa.int8(), False, metadata=kind))
    out += [column(f.name, f, f.type.nullable and f.name not in pk, f.id) for f in fields]
    return pa.schema(out)


# ---- INT96 for nanosecond timestamps ---------------------------------------------------------------------
def _leaves(t: pa.DataType) -> list[pa.DataType]:
    """The leaf types of ``t`` in Parquet's column order."""
    if pa.types.is_list(t):
        return _leaves(t.value_type)
    if pa.types.is_map(t):
        return _leaves(t.key_type) + _leaves(t.item_type)
    if pa.types.is_struct(t):
        return [x for f in t for x in _leaves(f.type)]
    return [t]


def _leaf_paths(name: str, t: pa.DataType) -> list[str]:
    """Parquet's dotted paths of the leaves of a column, in column order (pyarrow's compliant nested
    names: ``list.element``, ``key_value.key``, ``key_value.value``)."""
    if pa.types.is_list(t):
        return _leaf_paths(f"{name}.list.element", t.value_type)
    if pa.types.is_map(t):
        key, value = f"{name}.key_value.key", f"{name}.key_value.value"
        return _leaf_paths(key, t.key_type) + _leaf_paths(value, t.item_type)
    if pa.types.is_struct(t):
        return [p for f in t for p in _leaf_paths(f"{name}.{f.name}", f.type)]
    return [name]


def _is_nanos(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) and t.unit == "ns"


def _field_like(f: pa.Field, t: pa.DataType) -> pa.Field:
    return pa.field(f.name, t, f.nullable, metadata=f.metadata)


def _stored(t: pa.DataType) -> pa.DataType:
    """``t`` with nanosecond timestamps as the 12 bytes of their INT96 form."""
    if _is_nanos(t):
        return pa.binary(12)
    if pa.types.is_list(t):
        return pa.list_(_field_like(t.value_field, _stored(t.value_type)))
    if pa.types.is_map(t):
        kf, vf = t.key_field, t.item_field
        return pa.map_(_field_like(kf, _stored(kf.type)), _field_like(vf, _stored(vf.type)))
    if pa.types.is_struct(t):
        return pa.struct([_field_like(f, _stored(f.type)) for f in t])
    return t


def _without_ids(t: pa.DataType) -> pa.DataType:
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _without_ids(t.value_type), t.value_field.nullable))
    if pa.types.is_map(t):
        kf, vf = t.key_field, t.item_field
        return pa.map_(pa.field(kf.name, _without_ids(kf.type), kf.nullable),
                       pa.field(vf.name, _without_ids(vf.type), vf.nullable))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _without_ids(f.type), f.nullable) for f in t])
    return t


def _to_stored(arr: pa.Array, target: pa.DataType) -> pa.Array:
    return int96.encode(arr) if _is_nanos(arr.type) else arr.cast(target)


class PhysicalLayout:
    """How the chunks of one file schema are written: the schema handed to ``pq.ParquetWriter``, the
    conversion of each chunk to it, the writer's options, and :meth:`finish` for the written file."""

    def __init__(
        self, schema: pa.Schema, key_columns: Sequence[str], layout: WriteLayout = DEFAULT_LAYOUT
    ) -> None:
        self.logical = schema
        fields = list(schema)
        if not layout.field_ids:
            fields = [pa.field(f.name, _without_ids(f.type), f.nullable) for f in fields]
        leaves = [x for f in fields for x in _leaves(f.type)]
        self.int96_leaves = [i for i, t in enumerate(leaves) if _is_nanos(t)] if layout.int96 else []
        if self.int96_leaves:
            fields = [_field_like(f, _stored(f.type)) for f in fields]
        metadata = dict(schema.metadata or {}) if layout.field_ids else {}
        if layout.checksums:
            metadata.update(parquet_footer.footer_checksum_slot())
        self.schema = pa.schema(fields, metadata=metadata or None)
        self._converted = [i for i, f in enumerate(schema) if not fields[i].type.equals(f.type)]
        self.checksums = layout.checksums
        self.options = self._options(key_columns, layout)

    def _options(self, key_columns: Sequence[str], layout: WriteLayout) -> dict[str, Any]:
        stats: Union[bool, list[str]]
        if layout.statistics == "all" and self.int96_leaves:  # none for INT96 (they would be dropped)
            paths = [p for f in self.schema for p in _leaf_paths(f.name, f.type)]
            stats = [p for i, p in enumerate(paths) if i not in set(self.int96_leaves)]
        elif layout.statistics == "all":
            stats = True
        elif layout.statistics == "keys":
            stats = [c for c in (*key_columns, SEQUENCE_NUMBER, VALUE_KIND) if c in self.schema.names]
        else:
            stats = False
        opts: dict[str, Any] = {"write_statistics": stats or False, "write_page_checksum": layout.checksums}
        if self.int96_leaves:
            opts["store_schema"] = False  # its Arrow types would say fixed_size_binary(12)
        as_integer = layout.decimal_as_integer
        if as_integer is None:
            as_integer = decimal_as_integer_supported()
        if as_integer:
            opts["store_decimal_as_integer"] = True
        return opts

    def to_physical(self, chunk: pa.Table) -> pa.Table:
        """``chunk`` (in the logical schema) as the physical schema's columns."""
        if not self._converted:
            return chunk
        columns = chunk.columns
        for i in self._converted:
            target = self.schema.field(i).type
            chunks = [map_leaves(c, target, _to_stored) for c in columns[i].chunks]
            columns[i] = pa.chunked_array(chunks, target)
        return pa.Table.from_arrays(columns, schema=self.schema)

    def finish(self, path: str) -> None:
        """Complete the file ``path`` once its writer is closed: declare the INT96 columns, then seal
        the footer with its checksum (last: nothing may change the footer after it)."""
        if self.int96_leaves:
            parquet_footer.declare_int96(path, self.int96_leaves, checksum_slot=self.checksums)
        if self.checksums:
            parquet_footer.seal_footer(path)
