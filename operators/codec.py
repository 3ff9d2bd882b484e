"""Explicit JSON codec for commit messages travelling through the sink's commit channel.

Nothing read back from disk is ever unpickled: a committable is a JSON object whose byte fields are
base64 strings, decoded field by field into :class:`CommitMessage` / :class:`DataFileMeta`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.index_file import DELETION_VECTORS_INDEX, HASH_INDEX, IndexFileMeta
from lakelog.connector.format.manifest import DataFileMeta, SimpleStats

__all__ = ["Committable", "encode_committable", "decode_committable", "message_to_dict", "message_from_dict"]

CODEC_VERSION = 1

_FILE_LISTS = ("new_files", "changelog_files", "compact_before", "compact_after", "compact_changelog_files")
_INT_FIELDS = (
    "file_size",
    "row_count",
    "min_sequence_number",
    "max_sequence_number",
    "schema_id",
    "level",
)
_OPT_INT_FIELDS = ("creation_time_millis", "delete_row_count", "file_source", "first_row_id")
_OPT_STR_LIST_FIELDS = ("value_stats_cols", "write_cols")


@dataclass
class Committable:
    """One writer flush: a unique id, the writer key it came from, and its commit messages."""

    id: str
    key: str
    messages: list[CommitMessage]
    properties: Optional[dict[str, str]] = None
    log_offsets: Optional[dict[int, int]] = None  # eventual logs: the offset after the writer's records
    # cross-partition tables: the snapshot the writer's key index was loaded from (the committer
    # refuses the commit when another commit user committed rows after it)
    view: Optional[int] = None


def _b64(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise CorruptFileError(
            f"committable field {what!r}: expected a base64 string, got {type(text).__name__}"
        )
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise CorruptFileError(f"committable field {what!r}: bad base64: {exc}") from exc


def _stats_to_dict(s: SimpleStats) -> dict[str, Any]:
    return {
        "min": _b64(s.min_values),
        "max": _b64(s.max_values),
        "nulls": None if s.null_counts is None else [None if n is None else int(n) for n in s.null_counts],
    }


def _stats_from_dict(d: Any, what: str) -> SimpleStats:
    if not isinstance(d, dict):
        raise CorruptFileError(f"committable field {what!r}: expected an object")
    nulls = d.get("nulls")
    return SimpleStats(
        _unb64(d.get("min"), what + ".min"),
        _unb64(d.get("max"), what + ".max"),
        None if nulls is None else [None if n is None else _int(n, what + ".nulls") for n in nulls],
    )


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise CorruptFileError(f"committable field {what!r}: expected an integer, got {v!r}")
    return v


def file_to_dict(f: DataFileMeta) -> dict[str, Any]:
    d: dict[str, Any] = {
        "file_name": f.file_name,
        "min_key": _b64(f.min_key),
        "max_key": _b64(f.max_key),
        "key_stats": _stats_to_dict(f.key_stats),
        "value_stats": _stats_to_dict(f.value_stats),
        "extra_files": list(f.extra_files),
        "embedded_file_index": _b64(f.embedded_file_index),
        "external_path": f.external_path,
        "write_cols_sequences": None if f.write_cols_sequences is None else list(f.write_cols_sequences),
    }
    for name in _INT_FIELDS + _OPT_INT_FIELDS:
        d[name] = getattr(f, name)
    for name in _OPT_STR_LIST_FIELDS:
        v = getattr(f, name)
        d[name] = None if v is None else list(v)
    return d


def file_from_dict(d: Any) -> DataFileMeta:
    if not isinstance(d, dict) or not isinstance(d.get("file_name"), str):
        raise CorruptFileError("committable: a data file entry lacks 'file_name'")
    name = d["file_name"]
    ints = {k: _int(d.get(k), f"{name}.{k}") for k in _INT_FIELDS}
    opt_ints = {k: None if d.get(k) is None else _int(d[k], f"{name}.{k}") for k in _OPT_INT_FIELDS}
    lists = {k: None if d.get(k) is None else [str(x) for x in d[k]] for k in _OPT_STR_LIST_FIELDS}
    seqs = d.get("write_cols_sequences")
    efi = d.get("embedded_file_index")
    return DataFileMeta(
        file_name=name,
        file_size=ints["file_size"],
        row_count=ints["row_count"],
        min_key=_unb64(d.get("min_key"), f"{name}.min_key"),
        max_key=_unb64(d.get("max_key"), f"{name}.max_key"),
        key_stats=_stats_from_dict(d.get("key_stats"), f"{name}.key_stats"),
        value_stats=_stats_from_dict(d.get("value_stats"), f"{name}.value_stats"),
        min_sequence_number=ints["min_sequence_number"],
        max_sequence_number=ints["max_sequence_number"],
        schema_id=ints["schema_id"],
        level=ints["level"],
        extra_files=[str(x) for x in d.get("extra_files") or []],
        creation_time_millis=opt_ints["creation_time_millis"],
        delete_row_count=opt_ints["delete_row_count"],
        embedded_file_index=None if efi is None else _unb64(efi, f"{name}.embedded_file_index"),
        file_source=opt_ints["file_source"],
        value_stats_cols=lists["value_stats_cols"],
        external_path=None if d.get("external_path") is None else str(d["external_path"]),
        first_row_id=opt_ints["first_row_id"],
        write_cols=lists["write_cols"],
        write_cols_sequences=None
        if seqs is None
        else [_int(x, f"{name}.write_cols_sequences") for x in seqs],
    )


def index_file_to_dict(f: IndexFileMeta) -> dict[str, Any]:
    """A ``HASH`` index file of a dynamic-bucket commit (writers write no other index type)."""
    if f.index_type != HASH_INDEX or f.dv_ranges is not None:
        raise ValueError(f"committables carry HASH index files only, not {f.index_type} ({f.file_name})")
    return {
        "index_type": f.index_type,
        "file_name": f.file_name,
        "file_size": f.file_size,
        "row_count": f.row_count,
        "external_path": f.external_path,
    }


def index_file_from_dict(d: Any) -> IndexFileMeta:
    if not isinstance(d, dict) or not isinstance(d.get("file_name"), str):
        raise CorruptFileError("committable: an index file entry lacks 'file_name'")
    name = d["file_name"]
    if d.get("index_type") != HASH_INDEX:
        raise CorruptFileError(f"committable: index file {name} has type {d.get('index_type')!r}, not HASH")
    ext = d.get("external_path")
    return IndexFileMeta(
        HASH_INDEX,
        name,
        _int(d.get("file_size"), f"{name}.file_size"),
        _int(d.get("row_count"), f"{name}.row_count"),
        external_path=None if ext is None else str(ext),
    )


def dv_file_to_dict(f: IndexFileMeta) -> dict[str, Any]:
    """A compaction's ``DELETION_VECTORS`` index file, its per-data-file ranges included."""
    if f.index_type != DELETION_VECTORS_INDEX:
        raise ValueError(f"not a deletion-vector index file: {f.index_type} ({f.file_name})")
    ranges = [
        {"file": r["f0"], "offset": r["f1"], "length": r["f2"], "cardinality": r.get("_CARDINALITY")}
        for r in f.dv_ranges or ()
    ]
    return {"file_name": f.file_name, "file_size": f.file_size, "row_count": f.row_count, "ranges": ranges}


def dv_file_from_dict(d: Any) -> IndexFileMeta:
    if not isinstance(d, dict) or not isinstance(d.get("file_name"), str):
        raise CorruptFileError("committable: a deletion-vector index file entry lacks 'file_name'")
    name = d["file_name"]
    ranges = d.get("ranges")
    if not isinstance(ranges, list):
        raise CorruptFileError(f"committable: deletion-vector index file {name} has no 'ranges' list")
    out = []
    for r in ranges:
        if not isinstance(r, dict) or not isinstance(r.get("file"), str):
            raise CorruptFileError(f"committable: a range of deletion-vector index file {name} lacks 'file'")
        card = r.get("cardinality")
        out.append({
            "f0": r["file"],
            "f1": _int(r.get("offset"), f"{name}.offset"),
            "f2": _int(r.get("length"), f"{name}.length"),
            "_CARDINALITY": None if card is None else _int(card, f"{name}.cardinality"),
        })
    return IndexFileMeta(
        DELETION_VECTORS_INDEX, name, _int(d.get("file_size"), f"{name}.file_size"),
        _int(d.get("row_count"), f"{name}.row_count"), dv_ranges=tuple(out),
    )


def message_to_dict(m: CommitMessage) -> dict[str, Any]:
    d: dict[str, Any] = {
        "partition": _b64(m.partition),
        "bucket": m.bucket,
        "total_buckets": m.total_buckets,
        "index_files": [index_file_to_dict(f) for f in m.index_files],
        "index_base": m.index_base,
    }
    if m.dv_changed:  # deletion-vector mode (absent otherwise: committables of other tables unchanged)
        d["dv_base"] = m.dv_base
        d["dv_file"] = None if m.dv_file is None else dv_file_to_dict(m.dv_file)
    if m.dv_view is not None:
        d["dv_view"] = list(m.dv_view)
    for name in _FILE_LISTS:
        d[name] = [file_to_dict(f) for f in getattr(m, name)]
    return d


def message_from_dict(d: Any) -> CommitMessage:
    if not isinstance(d, dict):
        raise CorruptFileError("committable: a commit message is not an object")
    lists: dict[str, list[DataFileMeta]] = {}
    for name in _FILE_LISTS:
        entries = d.get(name) or []
        if not isinstance(entries, list):
            raise CorruptFileError(f"committable field {name!r}: expected a list")
        lists[name] = [file_from_dict(e) for e in entries]
    index = d.get("index_files") or []
    if not isinstance(index, list):
        raise CorruptFileError("committable field 'index_files': expected a list")
    base = d.get("index_base")
    if base is not None and not isinstance(base, str):
        raise CorruptFileError(f"committable field 'index_base': expected a file name, got {base!r}")
    msg = CommitMessage(
        partition=_unb64(d.get("partition"), "partition"),
        bucket=_int(d.get("bucket"), "bucket"),
        total_buckets=_int(d.get("total_buckets"), "total_buckets"),
        index_files=[index_file_from_dict(e) for e in index],
        index_base=base,
        **lists,
    )
    if "dv_file" in d:
        dv_base = d.get("dv_base")
        if dv_base is not None and not isinstance(dv_base, str):
            raise CorruptFileError(f"committable field 'dv_base': expected a file name, got {dv_base!r}")
        msg.dv_changed, msg.dv_base = True, dv_base
        msg.dv_file = None if d["dv_file"] is None else dv_file_from_dict(d["dv_file"])
    if "dv_view" in d:
        view = d["dv_view"]
        if not isinstance(view, list) or not all(isinstance(n, str) for n in view):
            raise CorruptFileError("committable field 'dv_view': expected a list of file names")
        msg.dv_view = list(view)
    return msg


def encode_committable(c: Committable) -> str:
    """One line of JSON (no newlines inside)."""
    return json.dumps(
        {
            "v": CODEC_VERSION,
            "id": c.id,
            "key": c.key,
            "properties": c.properties,
            "messages": [message_to_dict(m) for m in c.messages],
            "log_offsets": None if c.log_offsets is None else {str(p): o for p, o in c.log_offsets.items()},
            "view": c.view,
        },
        separators=(",", ":"),
    )


def decode_committable(line: str) -> Committable:
    try:
        d = json.loads(line)
    except ValueError as exc:
        raise CorruptFileError(f"committable is not JSON: {exc}") from exc
    if not isinstance(d, dict) or d.get("v") != CODEC_VERSION:
        raise CorruptFileError(
            f"committable has unknown codec version {d.get('v') if isinstance(d, dict) else d!r}"
        )
    if not isinstance(d.get("id"), str) or not isinstance(d.get("messages"), list):
        raise CorruptFileError("committable lacks 'id' or 'messages'")
    props = d.get("properties")
    if props is not None and not (
        isinstance(props, dict) and all(isinstance(v, str) for v in props.values())
    ):
        raise CorruptFileError("committable 'properties' must map strings to strings")
    offsets = d.get("log_offsets")
    if offsets is not None and not (
        isinstance(offsets, dict) and all(str(p).isdigit() and isinstance(o, int) for p, o in offsets.items())
    ):
        raise CorruptFileError("committable 'log_offsets' must map partitions to offsets")
    view = d.get("view")
    if view is not None:
        view = _int(view, "view")
    return Committable(
        id=d["id"],
        key=str(d.get("key", "")),
        messages=[message_from_dict(m) for m in d["messages"]],
        properties=props,
        log_offsets=None if offsets is None else {int(p): int(o) for p, o in offsets.items()},
        view=view,
    )


def merge_log_offsets(committables: Sequence[Committable]) -> Optional[dict[int, int]]:
    """The eventual log's offsets after every writer's records (per partition, the largest)."""
    out: dict[int, int] = {}
    for c in committables:
        for p, o in (c.log_offsets or {}).items():
            out[p] = max(out.get(p, 0), o)
    return out or None


def merge_properties(committables: Sequence[Committable]) -> Optional[dict[str, str]]:
    props: dict[str, str] = {}
    for c in committables:
        props.update(c.properties or {})
    return props or None
