"""The one typed registry of table options.

Keys, types and defaults follow Apache Paimon's ``CoreOptions`` wherever Paimon has the idea, so a table
lakelog creates means the same to Flink, Spark and pypaimon. A handful of keys are lakelog's own and say
so in their description.

* :class:`ConfigOption` describes one key; :class:`CoreOptions` holds the ``ConfigOption`` constants and
  wraps a table's ``dict[str, str]`` with typed accessors.
* Pattern keys (``fields.<name>.aggregate-function`` and friends) are described by :class:`PatternOption`.
* Every key lakelog knows is either honoured (a test fails when it is ignored) or refused when a table
  is created or altered: an option's ``unsupported`` field holds the reason ("not supported by
  lakelog: ..."); :data:`NOT_YET` marks Paimon features that other work will add (dynamic buckets,
  the Kafka log system), so lifting a refusal is deleting that field. Some options are honoured for
  some values only; their validators refuse the others (``type``, ``branch``, ``file.format``, ...).
  Tables written by other engines open with unsupported keys in their options (``strict=False``).
* :func:`validate_options` rejects unknown keys (naming the nearest valid key), unsupported keys and
  malformed values (naming key, value and what is allowed); :func:`check_alter` refuses changes to
  immutable options.
"""

from __future__ import annotations

import difflib
import enum
import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, Optional, TypeVar, Union, cast

from lakelog.connector.errors import OptionError
from lakelog.connector.format.paimon_keys import PAIMON_KEYS, TEMPLATED_PREFIXES

__all__ = [
    "MemorySize",
    "Duration",
    "ConfigOption",
    "PatternOption",
    "MergeEngine",
    "ChangelogProducer",
    "StartupMode",
    "SortOrder",
    "ConsumerMode",
    "IncrementalBetweenScanMode",
    "LogSystem",
    "LogChangelogMode",
    "LogConsistency",
    "LogKafkaClient",
    "LookupCacheMode",
    "CoreOptions",
    "ALL_OPTIONS",
    "PATTERN_OPTIONS",
    "NOT_YET",
    "unsupported_reason",
    "check_supported",
    "check_changelog_retention",
    "RETENTION_KEYS",
    "IMMUTABLE_KEYS",
    "FIXED_AT_CREATION",
    "changed_options",
    "AGGREGATE_FUNCTIONS",
    "SUPPORTED_AGGREGATE_FUNCTIONS",
    "find_option",
    "validate_options",
    "check_alter",
]

T = TypeVar("T")

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


# --------------------------------------------------------------------------------------------------
# Value types
# --------------------------------------------------------------------------------------------------

def _unit_table(groups: list[tuple[str, int]]) -> dict[str, int]:
    """``[("a b c", multiplier), ...]`` -> ``{"a": multiplier, "b": multiplier, ...}``."""
    return {name: mult for names, mult in groups for name in names.split()}


_MEMORY_UNITS = _unit_table(
    [("b bytes", 1), ("k kb kibibytes", 1 << 10), ("m mb mebibytes", 1 << 20), ("g gb gibibytes", 1 << 30),
     ("t tb tebibytes", 1 << 40)]
)

_NUM_UNIT_RE = re.compile(r"^\s*(\d+)\s*([^\d\s]*)\s*$")


class MemorySize(int):
    """A number of bytes, parsed like Paimon's ``MemorySize``:
    ``"128 mb"``, ``"64mb"``, ``"1gb"``, ``"1024"`` (bytes).

    It *is* an ``int`` (the byte count), so it compares and computes like one; ``str()`` prints it the
    way Paimon does (``"128 mb"``).
    """

    UNITS_HELP: ClassVar[str] = "a whole number with an optional unit b, kb, mb, gb or tb (e.g. '128 mb')"

    def __new__(cls, value: int) -> MemorySize:
        if int(value) < 0:
            raise ValueError(f"memory size must not be negative: {value}")
        return super().__new__(cls, int(value))

    @staticmethod
    def parse(text: str) -> MemorySize:
        m = _NUM_UNIT_RE.match(str(text))
        if m is None:
            raise ValueError(f"cannot parse memory size {text!r}")
        unit = m.group(2).lower()
        if unit and unit not in _MEMORY_UNITS:
            raise ValueError(f"unknown memory unit {m.group(2)!r} in {text!r}")
        return MemorySize(int(m.group(1)) * _MEMORY_UNITS.get(unit, 1))

    @staticmethod
    def of_mebibytes(n: int) -> MemorySize:
        return MemorySize(n << 20)

    @property
    def bytes(self) -> int:
        return int(self)

    @property
    def mebibytes(self) -> int:
        return int(self) >> 20

    @property
    def kibibytes(self) -> int:
        return int(self) >> 10

    def __repr__(self) -> str:
        return f"MemorySize({int(self)})"

    def __str__(self) -> str:
        n = int(self)
        for unit, mult in (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
            if n and n % mult == 0:
                return f"{n // mult} {unit}"
        return f"{n} bytes"

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)


_DURATION_UNITS = _unit_table(
    [
        ("ns nano nanos nanosecond nanoseconds", 1),
        ("us µs micro micros microsecond microseconds", 1_000),
        ("ms milli millis millisecond milliseconds", 1_000_000),
        ("s sec secs second seconds", 1_000_000_000),
        ("m min minute minutes", 60 * 1_000_000_000),
        ("h hour hours", 3600 * 1_000_000_000),
        ("d day days", 86400 * 1_000_000_000),
    ]
)


@dataclass(frozen=True, order=True)
class Duration:
    """A time span, parsed like Paimon's durations:
    ``"1 h"``, ``"30 min"``, ``"10 s"``, ``"500 ms"``, ``"1d"``; a plain number is milliseconds."""

    nanos: int

    UNITS_HELP: ClassVar[str] = "a whole number with an optional unit ms, s, min, h or d (default ms)"

    @staticmethod
    def parse(text: str) -> Duration:
        m = _NUM_UNIT_RE.match(str(text))
        if m is None:
            raise ValueError(f"cannot parse duration {text!r}")
        unit = m.group(2).lower()
        if unit and unit not in _DURATION_UNITS:
            raise ValueError(f"unknown time unit {m.group(2)!r} in {text!r}")
        return Duration(int(m.group(1)) * _DURATION_UNITS.get(unit, 1_000_000))

    @staticmethod
    def of_millis(ms: int) -> Duration:
        return Duration(ms * 1_000_000)

    @property
    def millis(self) -> int:
        return self.nanos // 1_000_000

    @property
    def seconds(self) -> float:
        return self.nanos / 1e9

    def __str__(self) -> str:
        for unit, mult in (("d", 86400 * 10**9), ("h", 3600 * 10**9), ("min", 60 * 10**9), ("s", 10**9),
                           ("ms", 10**6), ("us", 10**3)):
            if self.nanos and self.nanos % mult == 0:
                return f"{self.nanos // mult} {unit}"
        return f"{self.nanos} ns"


class _ValueEnum(str, enum.Enum):
    """A str-valued enum whose value is the option text Paimon uses."""

    def __str__(self) -> str:
        return str(self.value)


class MergeEngine(_ValueEnum):
    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATION = "aggregation"
    FIRST_ROW = "first-row"


class ChangelogProducer(_ValueEnum):
    NONE = "none"
    INPUT = "input"
    FULL_COMPACTION = "full-compaction"
    LOOKUP = "lookup"


class StartupMode(_ValueEnum):
    DEFAULT = "default"
    LATEST_FULL = "latest-full"
    FULL = "full"
    LATEST = "latest"
    COMPACTED_FULL = "compacted-full"
    FROM_TIMESTAMP = "from-timestamp"
    FROM_FILE_CREATION_TIME = "from-file-creation-time"
    FROM_SNAPSHOT = "from-snapshot"
    FROM_SNAPSHOT_FULL = "from-snapshot-full"
    INCREMENTAL = "incremental"


class SortOrder(_ValueEnum):
    ASCENDING = "ascending"
    DESCENDING = "descending"


class ConsumerMode(_ValueEnum):
    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"


class IncrementalBetweenScanMode(_ValueEnum):
    AUTO = "auto"
    DELTA = "delta"
    CHANGELOG = "changelog"
    DIFF = "diff"


class LogSystem(_ValueEnum):
    NONE = "none"
    KAFKA = "kafka"


class LogChangelogMode(_ValueEnum):
    AUTO = "auto"
    ALL = "all"
    UPSERT = "upsert"


class LookupCacheMode(_ValueEnum):
    AUTO = "auto"
    FULL = "full"
    MEMORY = "memory"


class LogKafkaClient(_ValueEnum):
    AUTO = "auto"
    KAFKA_PYTHON = "kafka-python"
    CONFLUENT_KAFKA = "confluent-kafka"


class LogConsistency(_ValueEnum):
    TRANSACTIONAL = "transactional"
    EVENTUAL = "eventual"


# --------------------------------------------------------------------------------------------------
# Option descriptors
# --------------------------------------------------------------------------------------------------

Validator = Callable[[Any], Optional[str]]


def _type_help(tp: Any) -> str:
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if tp is list:
        return "a comma-separated list of names"
    if tp is MemorySize:
        return MemorySize.UNITS_HELP
    if tp is Duration:
        return Duration.UNITS_HELP
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(str(m.value)) for m in tp)
    return str(tp)


def _parse_value(tp: Any, raw: str, long: bool) -> Any:
    """Parse ``raw`` as ``tp``; raises ValueError with a short reason."""
    text = str(raw).strip()
    if tp is str:
        return str(raw)
    if tp is bool:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        raise ValueError("not a boolean")
    if tp is int:
        if not re.fullmatch(r"[+-]?\d+", text):
            raise ValueError("not an integer")
        v = int(text)
        lo, hi = (LONG_MIN, LONG_MAX) if long else (INT_MIN, INT_MAX)
        if not lo <= v <= hi:
            raise ValueError(f"out of range [{lo}, {hi}]")
        return v
    if tp is float:
        return float(text)
    if tp is list:
        return [p.strip() for p in text.split(",") if p.strip()]
    if tp is MemorySize:
        return MemorySize.parse(text)
    if tp is Duration:
        return Duration.parse(text)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        norm = text.lower().replace("_", "-")
        for member in tp:
            if str(member.value).lower() == norm or member.name.lower().replace("_", "-") == norm:
                return member
        raise ValueError("not an allowed value")
    raise TypeError(f"unsupported option type {tp!r}")


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One table option.

    ``type`` is one of ``int``, ``bool``, ``str``, ``float``, ``list`` (comma-separated names),
    :class:`MemorySize`, :class:`Duration` or a str-valued :class:`enum.Enum`. ``long`` widens the range of
    an ``int`` option to 64 bits. ``validator`` returns a description of what is allowed when a parsed
    value is not (``None`` when fine). ``fallback_keys`` are older spellings still read. ``unsupported``
    says why lakelog refuses the key when a table is created or altered (None: it is honoured); with
    ``supported_values`` it refuses only the other values.
    """

    key: str
    type: Any
    default: T | None
    description: str
    immutable: bool = False
    long: bool = False
    validator: Validator | None = None
    fallback_keys: tuple[str, ...] = ()
    unsupported: str | None = None
    supported_values: tuple[Any, ...] | None = None

    def parse(self, raw: str, key: str | None = None) -> T:
        """Parse a raw value; :class:`OptionError` names key, value and what is allowed."""
        k = key or self.key
        try:
            value = _parse_value(self.type, raw, self.long)
        except ValueError as e:
            raise OptionError(
                f"invalid value {raw!r} for option {k!r} ({e}): expected {self.allowed()}"
            ) from None
        if self.validator is not None:
            problem = self.validator(value)
            if problem is not None:
                raise OptionError(f"invalid value {raw!r} for option {k!r}: {problem}")
        return cast(T, value)

    def allowed(self) -> str:
        return _type_help(self.type)

    def format(self, value: T) -> str:
        return _format_value(value)


@dataclass(frozen=True)
class PatternOption:
    """An option family whose key embeds a field name, e.g. ``fields.<name>.aggregate-function``.

    ``template`` uses ``*`` for the field part, which may itself contain dots or commas
    (Paimon's ``fields.a,b.sequence-group``).
    """

    template: str
    type: Any
    default: Any
    description: str
    validator: Validator | None = None
    immutable: bool = False
    unsupported: str | None = None

    def match(self, key: str) -> str | None:
        """The field part of ``key`` if it belongs to this family, else None."""
        m = _template_regex(self.template).match(key)
        return m.group(1) if m else None

    def key_for(self, field: str) -> str:
        return self.template.replace("*", field, 1)

    def parse(self, raw: str, key: str) -> Any:
        opt: ConfigOption[Any] = ConfigOption(
            key, self.type, self.default, self.description, validator=self.validator
        )
        return opt.parse(raw)


@functools.cache
def _template_regex(template: str) -> re.Pattern[str]:
    prefix, _, suffix = template.partition("*")
    return re.compile("^" + re.escape(prefix) + "(.+)" + re.escape(suffix) + "$")


# --------------------------------------------------------------------------------------------------
# Validators
# --------------------------------------------------------------------------------------------------


def _at_least(n: int) -> Validator:
    def check(v: Any) -> str | None:
        return None if v >= n else f"must be at least {n}"

    return check


def _fraction(v: float) -> str | None:
    return None if 0.0 < v < 1.0 else "must be between 0 and 1 (exclusive)"


def _share(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be between 0 and 1"


def _positive_size(v: MemorySize) -> str | None:
    return None if v.bytes > 0 else "must be greater than 0 bytes"


def _one_of(*allowed: str, note: str = "") -> Validator:
    def check(v: Any) -> str | None:
        if str(v).lower() in allowed:
            return None
        extra = f"; {note}" if note else ""
        return "expected one of " + ", ".join(repr(a) for a in allowed) + extra

    return check


def _bucket(v: int) -> str | None:
    return None if v == -1 or v > 0 else "expected -1 (dynamic bucket mode) or a bucket count greater than 0"


def _non_empty(v: Any) -> str | None:
    return None if v else "must not be empty"


def _stats_mode(v: str) -> str | None:
    if re.fullmatch(r"none|counts|full|truncate\(\d+\)", v.strip().lower()):
        return None
    return "expected none, counts, full or truncate(<n>)"


def _file_name_part(v: str) -> str | None:
    if re.fullmatch(r"[A-Za-z0-9_.=-]*", v) and not v.startswith("."):
        return None
    return "expected letters, digits, '_', '-', '.' or '=' (part of a file name; not starting with '.')"


AGGREGATE_FUNCTIONS = frozenset(
    {
        "sum", "product", "count", "max", "min", "avg", "last_value", "last_non_null_value", "listagg",
        "bool_and", "bool_or", "first_value", "first_non_null_value", "first_not_null_value", "rbm32",
        "rbm64", "nested_update", "nested_partial_update", "collect", "merge_map", "merge_map_with_keytime",
        "hll_sketch", "theta_sketch", "primary-key",
    }
)
"""Aggregate function names Paimon knows (``fields.<name>.aggregate-function``)."""


SUPPORTED_AGGREGATE_FUNCTIONS = AGGREGATE_FUNCTIONS - {"avg"}
"""The aggregate functions lakelog's merge implements (``lsm/merge/aggregators.py`` checks it)."""


def _aggregate_function(v: str) -> str | None:
    name = v.strip().lower()
    if name in SUPPORTED_AGGREGATE_FUNCTIONS:
        return None
    supported = ", ".join(sorted(SUPPORTED_AGGREGATE_FUNCTIONS))
    if name in AGGREGATE_FUNCTIONS:
        return f"the aggregate function {name!r} is not supported by lakelog; supported: {supported}"
    return "expected an aggregate function, one of " + supported


_FILE_COMPRESSIONS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "lz4_raw", "zstd")

NOT_YET = "not yet (planned): "
"""The prefix of the reasons of refused keys whose Paimon feature lakelog is going to add; grep for
it to find them all."""

_DYNAMIC_BUCKETS = NOT_YET + (
    "the PyFlink sink assigns dynamic buckets in its writers, one writer per partition; it has no "
    "separate assigner stage whose parallelism this would set"
)




# --------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------


def _opt(key: str, tp: Any, default: Any, description: str, **kw: Any) -> ConfigOption[Any]:
    return ConfigOption(key, tp, default, description, **kw)


class CoreOptions:
    """A table's options: the ``ConfigOption`` constants plus typed accessors over a ``dict[str, str]``.

    ``CoreOptions(options)`` validates every key and value (:func:`validate_options`). With
    ``strict=False`` (for tables written by other engines) unknown keys are kept and ignored, but known
    keys must still hold valid values.
    """

    # ---- table layout --------------------------------------------------------------------------
    BUCKET: ClassVar[ConfigOption[int]] = _opt(
        "bucket", int, -1,
        "Bucket number for file store: -1 (dynamic bucket mode) or greater than 0. A change applies to "
        "partitions written from then on; existing partitions keep the count their files record until "
        "they are rescaled (Table.rescale, an overwrite). Cannot change from or to -1 once the table has "
        "snapshots.",
        validator=_bucket)
    BUCKET_KEY: ClassVar[ConfigOption[list[str]]] = _opt(
        "bucket-key", list, None,
        "Columns hashed to pick a bucket, comma-separated. Defaults to the primary key minus partition keys.",
        immutable=True)
    PRIMARY_KEY: ClassVar[ConfigOption[list[str]]] = _opt(
        "primary-key", list, None, "Defines the primary key by option (instead of the schema).",
        immutable=True)
    PARTITION: ClassVar[ConfigOption[list[str]]] = _opt(
        "partition", list, None, "Defines the partition keys by option (instead of the schema).",
        immutable=True)
    PATH: ClassVar[ConfigOption[str]] = _opt(
        "path", str, None, "The table's location.",
        unsupported="the catalog decides where a table lives (<warehouse>/<database>.db/<table>)")
    CONNECTOR: ClassVar[ConfigOption[str]] = _opt(
        "connector", str, None, "Flink connector identifier.",
        unsupported="a key of Flink's CREATE TABLE, read by lakelog's SQL wrapper; tables do not store it")
    TYPE: ClassVar[ConfigOption[str]] = _opt(
        "type", str, "table", "Type of the table; lakelog supports normal tables only.", immutable=True,
        validator=_one_of("table"))
    BRANCH: ClassVar[ConfigOption[str]] = _opt(
        "branch", str, "main", "Branch name.",
        unsupported="name the branch instead: T$branch_<name> in SQL, Table.branch(name) in Python",
        supported_values=("main",))
    DYNAMIC_BUCKET_TARGET_ROW_NUM: ClassVar[ConfigOption[int]] = _opt(
        "dynamic-bucket.target-row-num", int, 2_000_000,
        "In dynamic bucket mode, the target number of rows in one bucket.", long=True, validator=_at_least(1))
    DYNAMIC_BUCKET_INITIAL_BUCKETS: ClassVar[ConfigOption[int]] = _opt(
        "dynamic-bucket.initial-buckets", int, None,
        "Initial buckets of a partition in dynamic bucket mode: the number of assigners a partition's new "
        "keys are spread over (an embedded writer runs that many; a Flink sink min(this, its assigner "
        "parallelism)).",
        immutable=True, validator=_at_least(1))
    DYNAMIC_BUCKET_MAX_BUCKETS: ClassVar[ConfigOption[int]] = _opt(
        "dynamic-bucket.max-buckets", int, -1,
        "In dynamic bucket mode, the most buckets a partition may have (-1: unlimited, up to 32767); once "
        "reached, a new key goes to a random bucket of its assigner.",
        validator=lambda v: None if v == -1 or 1 <= v <= 32768 else "expected -1 or 1..32768")
    DYNAMIC_BUCKET_ASSIGNER_PARALLELISM: ClassVar[ConfigOption[int]] = _opt(
        "dynamic-bucket.assigner-parallelism", int, None,
        "Parallelism of a Flink sink's bucket assigner in dynamic bucket mode (default: the sink's).",
        validator=_at_least(1), unsupported=_DYNAMIC_BUCKETS)
    DYNAMIC_PARTITION_OVERWRITE: ClassVar[ConfigOption[bool]] = _opt(
        "dynamic-partition-overwrite", bool, True,
        "An overwrite of a partitioned table replaces only the partitions its rows fall into (false: every "
        "partition matching the static partition spec, all of them without one).")
    CROSS_PARTITION_UPSERT_INDEX_TTL: ClassVar[ConfigOption[Duration]] = _opt(
        "cross-partition-upsert.index-ttl", Duration, None,
        "Cross-partition upsert: forget keys not written for this long (lakelog keeps them all).",
        unsupported="lakelog's key index keeps every key (a TTL may duplicate keys)")
    CROSS_PARTITION_UPSERT_BOOTSTRAP_PARALLELISM: ClassVar[ConfigOption[int]] = _opt(
        "cross-partition-upsert.bootstrap-parallelism", int, 10,
        "Cross-partition upsert: splits read at once while a writer loads the key index.",
        validator=_at_least(1))

    # ---- files ------------------------------------------------------------------------------------
    FILE_FORMAT: ClassVar[ConfigOption[str]] = _opt(
        "file.format", str, "parquet", "Format of data files; lakelog writes and reads parquet only.",
        validator=_one_of("parquet", note="lakelog does not support avro or orc data files"))
    FILE_COMPRESSION: ClassVar[ConfigOption[str]] = _opt(
        "file.compression", str, "zstd", "Compression codec of data files.",
        validator=_one_of(*_FILE_COMPRESSIONS))
    FILE_COMPRESSION_ZSTD_LEVEL: ClassVar[ConfigOption[int]] = _opt(
        "file.compression.zstd-level", int, 1, "zstd level of data files.",
        validator=lambda v: None if 1 <= v <= 22 else "expected a zstd level between 1 and 22")
    FILE_BLOCK_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "file.block-size", MemorySize, None, "Parquet row group size (default 128 mb).",
        validator=_positive_size,
        unsupported="lakelog writes Parquet row groups of 128k rows; a size in bytes is not implemented")
    TARGET_FILE_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "target-file-size", MemorySize, MemorySize.of_mebibytes(128),
        "Target size of a data file (Paimon: 128 mb for primary-key tables, 256 mb for append tables).",
        validator=_positive_size)
    DATA_FILE_PREFIX: ClassVar[ConfigOption[str]] = _opt(
        "data-file.prefix", str, "data-", "File name prefix of data files.", validator=_file_name_part)
    CHANGELOG_FILE_PREFIX: ClassVar[ConfigOption[str]] = _opt(
        "changelog-file.prefix", str, "changelog-", "File name prefix of changelog files.",
        validator=_file_name_part)
    FILE_SUFFIX_INCLUDE_COMPRESSION: ClassVar[ConfigOption[bool]] = _opt(
        "file.suffix.include.compression", bool, False, "Whether data file names include the compression.")
    METADATA_STATS_MODE: ClassVar[ConfigOption[str]] = _opt(
        "metadata.stats-mode", str, "truncate(16)", "Column statistics kept in manifests.",
        validator=_stats_mode)
    MANIFEST_FORMAT: ClassVar[ConfigOption[str]] = _opt(
        "manifest.format", str, "avro", "Format of manifest files (avro only).", validator=_one_of("avro"))
    MANIFEST_COMPRESSION: ClassVar[ConfigOption[str]] = _opt(
        "manifest.compression", str, "zstd", "Compression of manifest files.",
        validator=_one_of("null", "none", "deflate", "snappy", "zstd", "bzip2", "xz"))
    MANIFEST_TARGET_FILE_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "manifest.target-file-size", MemorySize, MemorySize.of_mebibytes(8), "Suggested manifest file size.",
        validator=_positive_size)
    MANIFEST_MERGE_MIN_COUNT: ClassVar[ConfigOption[int]] = _opt(
        "manifest.merge-min-count", int, 30, "Minimum number of manifest files to merge.",
        validator=_at_least(1))
    MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "manifest.full-compaction-threshold-size", MemorySize, MemorySize.of_mebibytes(16),
        "Size of deleted manifest entries that triggers a full manifest compaction.",
        validator=_positive_size,
        unsupported="lakelog merges manifests by their number ('manifest.merge-min-count'), into one set of "
        "live entries")
    DELETION_VECTORS_ENABLED: ClassVar[ConfigOption[bool]] = _opt(
        "deletion-vectors.enabled", bool, False,
        "Merge-on-write: compactions mark the rows they supersede in per-file deletion vectors, and "
        "reads open each file above level 0 alone (primary-key tables; level-0 files are visible "
        "once compacted, which every commit does). Set when the table is created.",
        immutable=True)
    FILE_INDEX_BLOOM_FILTER_COLUMNS: ClassVar[ConfigOption[list[str]]] = _opt(
        "file-index.bloom-filter.columns", list, None,
        "Columns whose values every data file indexes in a bloom filter (Paimon's file index), so that "
        "reads with column = value or IN skip the files that cannot hold it.")
    FILE_INDEX_IN_MANIFEST_THRESHOLD: ClassVar[ConfigOption[MemorySize]] = _opt(
        "file-index.in-manifest-threshold", MemorySize, MemorySize(500),
        "A data file's index up to this size rides in its manifest record; a larger one is written "
        "beside the data file as <data file>.index.")
    FILE_INDEX_READ_ENABLED: ClassVar[ConfigOption[bool]] = _opt(
        "file-index.read.enabled", bool, True, "Whether reads skip data files by their file indexes.")
    FILE_INDEX_BITMAP_COLUMNS: ClassVar[ConfigOption[list[str]]] = _opt(
        "file-index.bitmap.columns", list, None,
        "Columns whose values every data file indexes in a bitmap per distinct value (Paimon's file "
        "index), so that reads with column = value or IN skip the files without it; for columns of "
        "few distinct values.")
    DELETION_VECTORS_BITMAP64: ClassVar[ConfigOption[bool]] = _opt(
        "deletion-vectors.bitmap64", bool, False,
        "Write deletion vectors as 64-bit Roaring bitmaps (the layout Iceberg reads) instead of "
        "32-bit ones.")

    # ---- merge tree ---------------------------------------------------------------------------------
    MERGE_ENGINE: ClassVar[ConfigOption[MergeEngine]] = _opt(
        "merge-engine", MergeEngine, MergeEngine.DEDUPLICATE, "Merge engine of a primary-key table.",
        immutable=True)
    CHANGELOG_PRODUCER: ClassVar[ConfigOption[ChangelogProducer]] = _opt(
        "changelog-producer", ChangelogProducer, ChangelogProducer.NONE, "How changelog files are produced.")
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE: ClassVar[ConfigOption[bool]] = _opt(
        "changelog-producer.row-deduplicate", bool, False,
        "Skip -U/+U changelog pairs for unchanged rows (lookup and full-compaction producers).")
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS: ClassVar[ConfigOption[list[str]]] = _opt(
        "changelog-producer.row-deduplicate-ignore-fields", list, None,
        "Fields ignored when comparing rows for changelog-producer.row-deduplicate.")
    LOOKUP_WAIT: ClassVar[ConfigOption[bool]] = _opt(
        "lookup-wait", bool, True, "When lookup is needed, a commit waits for the lookup compaction.",
        fallback_keys=("changelog-producer.lookup-wait",))
    FORCE_LOOKUP: ClassVar[ConfigOption[bool]] = _opt(
        "force-lookup", bool, False, "Force lookup compaction.", immutable=True,
        unsupported="lakelog runs lookup compaction for the 'lookup' changelog producer only")
    SEQUENCE_FIELD: ClassVar[ConfigOption[list[str]]] = _opt(
        "sequence.field", list, None, "Fields whose values order the rows of one key (instead of arrival).",
        immutable=True)
    SEQUENCE_FIELD_SORT_ORDER: ClassVar[ConfigOption[SortOrder]] = _opt(
        "sequence.field.sort-order", SortOrder, SortOrder.ASCENDING, "Order of sequence.field.")
    ROWKIND_FIELD: ClassVar[ConfigOption[str]] = _opt(
        "rowkind.field", str, None, "Field holding the row kind (+I, -U, +U, -D) of a row.", immutable=True)
    IGNORE_DELETE: ClassVar[ConfigOption[bool]] = _opt(
        "ignore-delete", bool, False, "Ignore delete records.",
        fallback_keys=("first-row.ignore-delete", "deduplicate.ignore-delete",
                       "partial-update.ignore-delete"))
    IGNORE_UPDATE_BEFORE: ClassVar[ConfigOption[bool]] = _opt(
        "ignore-update-before", bool, False, "Ignore update-before (-U) records on write.")
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE: ClassVar[ConfigOption[bool]] = _opt(
        "partial-update.remove-record-on-delete", bool, False,
        "Partial-update engine: remove the whole row on -D.", immutable=True)
    PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP: ClassVar[ConfigOption[list[str]]] = _opt(
        "partial-update.remove-record-on-sequence-group", list, None,
        "Partial-update engine: remove the whole row on -D of these sequence groups.", immutable=True)
    AGGREGATION_REMOVE_RECORD_ON_DELETE: ClassVar[ConfigOption[bool]] = _opt(
        "aggregation.remove-record-on-delete", bool, False, "Aggregation engine: remove the whole row on -D.",
        immutable=True)
    FIELDS_DEFAULT_AGGREGATE_FUNCTION: ClassVar[ConfigOption[str]] = _opt(
        "fields.default-aggregate-function", str, None,
        "Default aggregate function of all fields (partial-update and aggregation engines).",
        validator=_aggregate_function)
    WRITE_BUFFER_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "write-buffer-size", MemorySize, MemorySize.of_mebibytes(256),
        "Data buffered in memory before it is sorted and flushed to a file.", validator=_positive_size)
    WRITE_BUFFER_SPILLABLE: ClassVar[ConfigOption[bool]] = _opt(
        "write-buffer-spillable", bool, None, "Whether the write buffer may spill to disk.")
    WRITE_BUFFER_SPILL_MAX_DISK_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "write-buffer-spill.max-disk-size", MemorySize, None, "Max disk used by write buffer spills.",
        validator=_positive_size)
    WRITE_ONLY: ClassVar[ConfigOption[bool]] = _opt(
        "write-only", bool, False, "Skip compaction and snapshot expiration (dedicated compaction jobs).")
    NUM_LEVELS: ClassVar[ConfigOption[int]] = _opt(
        "num-levels", int, None, "Total number of LSM levels.", validator=_at_least(2))
    NUM_SORTED_RUN_COMPACTION_TRIGGER: ClassVar[ConfigOption[int]] = _opt(
        "num-sorted-run.compaction-trigger", int, 5, "Sorted runs that trigger a compaction.",
        validator=_at_least(1))
    NUM_SORTED_RUN_STOP_TRIGGER: ClassVar[ConfigOption[int]] = _opt(
        "num-sorted-run.stop-trigger", int, None,
        "Sorted runs that stop writes (default: compaction trigger + 3).", validator=_at_least(1))
    COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT: ClassVar[ConfigOption[int]] = _opt(
        "compaction.max-size-amplification-percent", int, 200,
        "Extra storage (percent) allowed before a full compaction of a merge tree.", validator=_at_least(0))
    COMPACTION_SIZE_RATIO: ClassVar[ConfigOption[int]] = _opt(
        "compaction.size-ratio", int, 1, "Percent flexibility when comparing sorted run sizes.",
        validator=_at_least(0))
    COMPACTION_OPTIMIZATION_INTERVAL: ClassVar[ConfigOption[Duration]] = _opt(
        "compaction.optimization-interval", Duration, None,
        "How often a writer runs a full compaction of the buckets it writes (keeps the read-optimized "
        "view fresh); unset: never on a timer.")
    COMPACTION_TOTAL_SIZE_THRESHOLD: ClassVar[ConfigOption[MemorySize]] = _opt(
        "compaction.total-size-threshold", MemorySize, None,
        "A writer fully compacts a bucket whose files together are smaller than this.")
    COMPACTION_INCREMENTAL_SIZE_THRESHOLD: ClassVar[ConfigOption[MemorySize]] = _opt(
        "compaction.incremental-size-threshold", MemorySize, None,
        "A writer fully compacts a bucket whose files below the top level together exceed this.")
    COMPACTION_MIN_FILE_NUM: ClassVar[ConfigOption[int]] = _opt(
        "compaction.min.file-num", int, 5, "Append tables: minimum files to trigger a compaction.",
        validator=_at_least(1))
    COMPACTION_DELETE_RATIO_THRESHOLD: ClassVar[ConfigOption[float]] = _opt(
        "compaction.delete-ratio-threshold", float, 0.2,
        "Append tables with deletion vectors: a bucket holding a file whose deleted rows exceed this "
        "share of its rows is compacted (its files rewritten without them).",
        validator=_share)
    COMPACTION_MAX_FILE_NUM: ClassVar[ConfigOption[int]] = _opt(
        "compaction.max.file-num", int, None,
        "Append tables: file count that forces a compaction (Paimon: 50, bucketed 5).",
        validator=_at_least(1),
        unsupported="append tables are compacted by 'compaction.min.file-num' only")
    FULL_COMPACTION_DELTA_COMMITS: ClassVar[ConfigOption[int]] = _opt(
        "full-compaction.delta-commits", int, None,
        "Run a full compaction after this many commits (unset: never, or at every commit with "
        "changelog-producer 'full-compaction', as Paimon's sink does).",
        validator=_at_least(1))
    COMMIT_FORCE_COMPACT: ClassVar[ConfigOption[bool]] = _opt(
        "commit.force-compact", bool, False, "Force a compaction before each commit.",
        unsupported="writers compact as universal compaction picks; a forced compaction per commit is not "
        "implemented")

    # ---- commit and sink ---------------------------------------------------------------------------
    COMMIT_USER_PREFIX: ClassVar[ConfigOption[str]] = _opt(
        "commit.user-prefix", str, None, "Prefix of the commit user.",
        unsupported="lakelog names commit users itself (a UUID, or the commit_user a writer is given)")
    COMMIT_MAX_RETRIES: ClassVar[ConfigOption[int]] = _opt(
        "commit.max-retries", int, 10, "Retries when a commit conflicts.", validator=_at_least(0))
    LOCK_ACQUIRE_TIMEOUT: ClassVar[ConfigOption[Duration]] = _opt(
        "lock-acquire-timeout", Duration, Duration.parse("8 min"),
        "lakelog (Paimon's catalog option, per table): how long a commit, an expiration or a rollback "
        "waits for the table's commit lock before it fails.")
    COMMIT_TIMEOUT: ClassVar[ConfigOption[Duration]] = _opt(
        "commit.timeout", Duration, None, "Give up retrying a commit after this long.",
        unsupported="a commit gives up after 'commit.max-retries' attempts; a time limit is not implemented")
    SINK_FLUSH_INTERVAL: ClassVar[ConfigOption[Duration]] = _opt(
        "sink.flush-interval", Duration, None,
        "lakelog: how often a streaming sink flushes and commits between checkpoints (none: on checkpoints).")

    # ---- snapshots, changelog, consumers, cleanup ----------------------------------------------
    SNAPSHOT_NUM_RETAINED_MIN: ClassVar[ConfigOption[int]] = _opt(
        "snapshot.num-retained.min", int, 10, "Minimum number of snapshots to retain.",
        validator=_at_least(1))
    SNAPSHOT_NUM_RETAINED_MAX: ClassVar[ConfigOption[int]] = _opt(
        "snapshot.num-retained.max", int, INT_MAX, "Maximum number of snapshots to retain.",
        validator=_at_least(1))
    SNAPSHOT_TIME_RETAINED: ClassVar[ConfigOption[Duration]] = _opt(
        "snapshot.time-retained", Duration, Duration.parse("1 h"), "Maximum age of retained snapshots.")
    SNAPSHOT_EXPIRE_LIMIT: ClassVar[ConfigOption[int]] = _opt(
        "snapshot.expire.limit", int, 50, "Maximum snapshots expired at a time.", validator=_at_least(1))
    SNAPSHOT_CLEAN_EMPTY_DIRECTORIES: ClassVar[ConfigOption[bool]] = _opt(
        "snapshot.clean-empty-directories", bool, False, "Remove empty directories when expiring snapshots.")
    CHANGELOG_NUM_RETAINED_MIN: ClassVar[ConfigOption[int]] = _opt(
        "changelog.num-retained.min", int, None, "Minimum changelogs to retain (default: snapshot setting).",
        validator=_at_least(1))
    CHANGELOG_NUM_RETAINED_MAX: ClassVar[ConfigOption[int]] = _opt(
        "changelog.num-retained.max", int, None, "Maximum changelogs to retain (default: snapshot setting).",
        validator=_at_least(1))
    CHANGELOG_TIME_RETAINED: ClassVar[ConfigOption[Duration]] = _opt(
        "changelog.time-retained", Duration, None, "Maximum age of retained changelogs (default: snapshot).")
    CONSUMER_ID: ClassVar[ConfigOption[str]] = _opt(
        "consumer-id", str, None, "Consumer id recording read progress in the table.", validator=_non_empty)
    CONSUMER_EXPIRATION_TIME: ClassVar[ConfigOption[Duration]] = _opt(
        "consumer.expiration-time", Duration, None, "Consumers not updated for this long expire.")
    CONSUMER_MODE: ClassVar[ConfigOption[ConsumerMode]] = _opt(
        "consumer.mode", ConsumerMode, ConsumerMode.EXACTLY_ONCE, "Consistency mode of consumers.",
        unsupported="one reader records a consumer's progress, snapshot by snapshot (exactly-once)",
        supported_values=(ConsumerMode.EXACTLY_ONCE,))
    CONSUMER_IGNORE_PROGRESS: ClassVar[ConfigOption[bool]] = _opt(
        "consumer.ignore-progress", bool, False, "Ignore the recorded consumer progress on start.")
    ORPHAN_CLEAN_OLDER_THAN: ClassVar[ConfigOption[Duration]] = _opt(
        "orphan-clean.older-than", Duration, Duration.parse("1 d"),
        "lakelog: orphan file cleaning only removes files older than this (Paimon's procedure default).")
    PARTITION_DEFAULT_NAME: ClassVar[ConfigOption[str]] = _opt(
        "partition.default-name", str, "__DEFAULT_PARTITION__",
        "Partition name used for null or empty partition values.", validator=_non_empty)
    PARTITION_LEGACY_NAME: ClassVar[ConfigOption[bool]] = _opt(
        "partition.legacy-name", bool, True, "Format partition values with toString (legacy naming).")
    PARTITION_EXPIRATION_TIME: ClassVar[ConfigOption[Duration]] = _opt(
        "partition.expiration-time", Duration, None, "Partitions older than this expire.")
    PARTITION_EXPIRATION_CHECK_INTERVAL: ClassVar[ConfigOption[Duration]] = _opt(
        "partition.expiration-check-interval", Duration, Duration.parse("1 h"),
        "Partition expiration check interval.")
    PARTITION_TIMESTAMP_FORMATTER: ClassVar[ConfigOption[str]] = _opt(
        "partition.timestamp-formatter", str, None, "Formatter of partition timestamps.")
    PARTITION_TIMESTAMP_PATTERN: ClassVar[ConfigOption[str]] = _opt(
        "partition.timestamp-pattern", str, None, "Pattern building a timestamp from partition values.")

    # ---- scans --------------------------------------------------------------------------------------
    SCAN_MODE: ClassVar[ConfigOption[StartupMode]] = _opt(
        "scan.mode", StartupMode, StartupMode.DEFAULT, "Scan startup mode.")
    SCAN_SNAPSHOT_ID: ClassVar[ConfigOption[int]] = _opt(
        "scan.snapshot-id", int, None, "Snapshot to start from (from-snapshot modes).", long=True,
        validator=_at_least(1))
    SCAN_TIMESTAMP_MILLIS: ClassVar[ConfigOption[int]] = _opt(
        "scan.timestamp-millis", int, None, "Timestamp to start from (from-timestamp mode).", long=True,
        validator=_at_least(0))
    SCAN_TIMESTAMP: ClassVar[ConfigOption[str]] = _opt(
        "scan.timestamp", str, None, "Timestamp string to start from (local time zone).")
    SCAN_FALLBACK_BRANCH: ClassVar[ConfigOption[str]] = _opt(
        "scan.fallback-branch", str, None,
        "A batch read of the latest snapshot reads the partitions this table lacks from this branch.",
        validator=_non_empty)
    SCAN_TAG_NAME: ClassVar[ConfigOption[str]] = _opt(
        "scan.tag-name", str, None, "Tag to read (from-snapshot mode).", validator=_non_empty)
    SCAN_WATERMARK: ClassVar[ConfigOption[int]] = _opt(
        "scan.watermark", int, None, "Watermark to start from (from-snapshot mode).", long=True,
        unsupported="lakelog's snapshots carry no watermark")
    SCAN_FILE_CREATION_TIME_MILLIS: ClassVar[ConfigOption[int]] = _opt(
        "scan.file-creation-time-millis", int, None, "Only read files created after this time.", long=True,
        unsupported="the from-file-creation-time scan mode is not implemented")
    SCAN_BOUNDED_WATERMARK: ClassVar[ConfigOption[int]] = _opt(
        "scan.bounded.watermark", int, None, "End a streaming read at this watermark.", long=True,
        unsupported="lakelog's snapshots carry no watermark")
    INCREMENTAL_BETWEEN: ClassVar[ConfigOption[str]] = _opt(
        "incremental-between", str, None, "Read changes between two snapshots or tags: 'start,end'.")
    INCREMENTAL_BETWEEN_TIMESTAMP: ClassVar[ConfigOption[str]] = _opt(
        "incremental-between-timestamp", str, None, "Read changes between two timestamps: 't1,t2'.")
    INCREMENTAL_BETWEEN_SCAN_MODE: ClassVar[ConfigOption[IncrementalBetweenScanMode]] = _opt(
        "incremental-between-scan-mode", IncrementalBetweenScanMode, IncrementalBetweenScanMode.AUTO,
        "What an incremental-between read scans: 'delta' the rows APPEND snapshots wrote, 'changelog' "
        "the changelog files, 'diff' the difference of the two snapshots; 'auto' is 'changelog' for "
        "tables with a changelog producer, else 'delta'.")
    CONTINUOUS_DISCOVERY_INTERVAL: ClassVar[ConfigOption[Duration]] = _opt(
        "continuous.discovery-interval", Duration, Duration.parse("10 s"),
        "Snapshot polling interval of streaming reads.")
    PARTITION_MARK_DONE_ACTION: ClassVar[ConfigOption[str]] = _opt(
        "partition.mark-done-action", str, "success-file",
        "What marking a partition done does (CALL sys.mark_partition_done): 'success-file' writes "
        "a _SUCCESS file into the partition's directory.",
        unsupported="lakelog writes success files only (done-partition, mark-event, http-report and "
        "custom actions need a metastore or a service)", supported_values=("success-file",))
    LOOKUP_CACHE: ClassVar[ConfigOption[LookupCacheMode]] = _opt(
        "lookup.cache", LookupCacheMode, LookupCacheMode.AUTO,
        "Where a lookup join holds the dimension: 'memory' on the heap, 'full' in memory-mapped local "
        "files, 'auto' on the heap until lookup.cache-max-memory-size, then on disk.")
    LOOKUP_CACHE_MAX_MEMORY_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "lookup.cache-max-memory-size", MemorySize, MemorySize.of_mebibytes(256),
        "With lookup.cache = auto: the heap a lookup join's state may take before it moves to disk.",
        validator=_positive_size)
    LOOKUP_CACHE_MAX_DISK_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "lookup.cache-max-disk-size", MemorySize, None,
        "The local disk a lookup join's state may take (default unlimited); a refresh past it fails.",
        validator=_positive_size)
    LOOKUP_CACHE_ROWS: ClassVar[ConfigOption[int]] = _opt(
        "lookup.cache-rows", int, 10_000,
        "Size of a lookup join's per-key result cache (the per-record path).", validator=_at_least(0))
    STREAMING_READ_OVERWRITE: ClassVar[ConfigOption[bool]] = _opt(
        "streaming-read-overwrite", bool, False,
        "Streaming reads also read the changes of overwrites (primary-key tables).")
    TABLE_READ_SEQUENCE_NUMBER_ENABLED: ClassVar[ConfigOption[bool]] = _opt(
        "table-read.sequence-number.enabled", bool, False,
        "Whether reads of the audit_log and binlog system tables include the _SEQUENCE_NUMBER column "
        "after rowkind (primary-key tables). A table option: a read's dynamic options (SQL hints) "
        "cannot set it.")
    READ_BATCH_SIZE: ClassVar[ConfigOption[int]] = _opt(
        "read.batch-size", int, 1024, "Read batch size.", validator=_at_least(1),
        unsupported="readers return merged key ranges; size batches with to_reader(max_chunksize=...)")
    SOURCE_SPLIT_TARGET_SIZE: ClassVar[ConfigOption[MemorySize]] = _opt(
        "source.split.target-size", MemorySize, MemorySize.of_mebibytes(128), "Target size of a read split.",
        validator=_positive_size, unsupported="a read split is one partition and bucket")
    SOURCE_SPLIT_OPEN_FILE_COST: ClassVar[ConfigOption[MemorySize]] = _opt(
        "source.split.open-file-cost", MemorySize, MemorySize.of_mebibytes(4), "Cost of opening a file.",
        validator=_positive_size, unsupported="a read split is one partition and bucket")

    # ---- log system -----------------------------------------------------------------------------
    LOG_SYSTEM: ClassVar[ConfigOption[LogSystem]] = _opt(
        "log.system", LogSystem, LogSystem.NONE, "Log system next to the file store: none or kafka.",
        immutable=True)
    LOG_CHANGELOG_MODE: ClassVar[ConfigOption[LogChangelogMode]] = _opt(
        "log.changelog-mode", LogChangelogMode, LogChangelogMode.AUTO, "Changes kept in the log system.")
    LOG_CONSISTENCY: ClassVar[ConfigOption[LogConsistency]] = _opt(
        "log.consistency", LogConsistency, LogConsistency.TRANSACTIONAL, "Visibility of log records.",
        immutable=True)
    LOG_FORMAT: ClassVar[ConfigOption[str]] = _opt(
        "log.format", str, "debezium-json", "Message format of the log system.")
    LOG_KEY_FORMAT: ClassVar[ConfigOption[str]] = _opt(
        "log.key.format", str, "json", "Key format of the log system.")
    LOG_RETENTION: ClassVar[ConfigOption[Duration]] = _opt(
        "log.retention", Duration, None, "How long the log system keeps changes (the topic's retention.ms).")
    LOG_SYSTEM_PARTITIONS: ClassVar[ConfigOption[int]] = _opt(
        "log.system.partitions", int, None, "Partitions of the log's topic (default: the bucket count).",
        validator=_at_least(1), immutable=True)
    LOG_SYSTEM_REPLICATION: ClassVar[ConfigOption[int]] = _opt(
        "log.system.replication", int, 1, "Replication factor of the log's topic.", validator=_at_least(1))
    LOG_KAFKA_CLIENT: ClassVar[ConfigOption[LogKafkaClient]] = _opt(
        "log.kafka.client", LogKafkaClient, LogKafkaClient.AUTO,
        "The Kafka client library of the log: kafka-python, confluent-kafka, or auto (confluent-kafka "
        "where it is installed, else kafka-python).")
    LOG_SYSTEM_AUTO_REGISTER: ClassVar[ConfigOption[bool]] = _opt(
        "log.system.auto-register", bool, True, "Create the log's topic when the table is created.")
    STREAMING_READ_MODE: ClassVar[ConfigOption[str]] = _opt(
        "streaming-read-mode", str, None,
        "Streaming reads of a table with a log read the 'log' (default) or the 'file's.",
        validator=_one_of("log", "file"))
    LOG_IGNORE_DELETE: ClassVar[ConfigOption[bool]] = _opt(
        "log.ignore-delete", bool, False, "Leave deletes (-D, -U) out of the log.")

    # ---- pattern options ----------------------------------------------------------------------------
    FIELD_AGGREGATE_FUNCTION: ClassVar[PatternOption] = PatternOption(
        "fields.*.aggregate-function", str, None, "Aggregate function of a field.", _aggregate_function)
    FIELD_IGNORE_RETRACT: ClassVar[PatternOption] = PatternOption(
        "fields.*.ignore-retract", bool, False, "Ignore retractions for a field's aggregate function.")
    FIELD_SEQUENCE_GROUP: ClassVar[PatternOption] = PatternOption(
        "fields.*.sequence-group", list, None,
        "Partial update: fields ordered by the sequence field(s) named in the key.")
    FIELD_DISTINCT: ClassVar[PatternOption] = PatternOption(
        "fields.*.distinct", bool, False, "listagg/collect: keep distinct values only.")
    FIELD_LIST_AGG_DELIMITER: ClassVar[PatternOption] = PatternOption(
        "fields.*.list-agg-delimiter", str, ",", "Delimiter of listagg.")
    FIELD_NESTED_KEY: ClassVar[PatternOption] = PatternOption(
        "fields.*.nested-key", list, None,
        "nested_update: key fields of the nested rows (a later row replaces the row of its key).")
    FIELD_COUNT_LIMIT: ClassVar[PatternOption] = PatternOption(
        "fields.*.count-limit", int, None, "nested_update: maximum number of nested rows.", _at_least(1))
    FIELD_TS_FIELD: ClassVar[PatternOption] = PatternOption(
        "fields.*.ts-field", str, None,
        "merge_map_with_keytime: the field of the map's ROW values holding each entry's timestamp "
        "(default: the last field).")
    KAFKA_PROPERTIES: ClassVar[PatternOption] = PatternOption(
        "kafka.*", str, None, "Properties of the Kafka log system's clients.")
    FIELD_STATS_MODE: ClassVar[PatternOption] = PatternOption(
        "fields.*.stats-mode", str, None, "Column statistics mode of one field.", _stats_mode)
    FILE_INDEX_BLOOM_FILTER_FPP: ClassVar[PatternOption] = PatternOption(
        "file-index.bloom-filter.*.fpp", float, 0.1, "False-positive rate of a column's bloom filter index.",
        _fraction)
    FILE_INDEX_BLOOM_FILTER_ITEMS: ClassVar[PatternOption] = PatternOption(
        "file-index.bloom-filter.*.items", int, 1_000_000,
        "Distinct values a column's bloom filter index is sized for (per data file).", _at_least(1))
    FILE_INDEX_BITMAP_VERSION: ClassVar[PatternOption] = PatternOption(
        "file-index.bitmap.*.version", str, "2",
        "Layout of a column's bitmap index: 2 (sorted, in index blocks) or 1 (Paimon's legacy one).",
        _one_of("1", "2"))
    FILE_INDEX_BITMAP_BLOCK_SIZE: ClassVar[PatternOption] = PatternOption(
        "file-index.bitmap.*.index-block-size", MemorySize, MemorySize(16 * 1024),
        "Size of the index blocks of a column's bitmap index (version 2).", _positive_size)
    FIELD_DEFAULT_VALUE: ClassVar[PatternOption] = PatternOption(
        "fields.*.default-value", str, None, "Default value of a field.")
    FLINK_SCHEMA: ClassVar[PatternOption] = PatternOption(
        "schema.*", str, None,
        "Flink's computed columns and watermark, as Paimon's Flink catalog stores them "
        "(schema.<n>.name/data-type/expr/comment, schema.watermark.0.rowtime/strategy.expr/"
        "strategy.data-type); the storage ignores them, Flink SQL reads them.")

    # ------------------------------------------------------------------------------------------------

    def __init__(self, options: Mapping[str, str] | None = None, strict: bool = True) -> None:
        raw = dict(options or {})
        for k, v in raw.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise OptionError(f"option {k!r} = {v!r}: keys and values must be strings")
        validate_options(raw, strict=strict)
        self._options = raw
        self._cache: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"CoreOptions({self._options!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CoreOptions) and other._options == self._options

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._options.items())))

    def to_map(self) -> dict[str, str]:
        return dict(self._options)

    def contains(self, option: ConfigOption[Any]) -> bool:
        return any(k in self._options for k in (option.key, *option.fallback_keys))

    def raw(self, key: str) -> str | None:
        return self._options.get(key)

    def get(self, option: ConfigOption[T]) -> T:
        """The typed value of ``option`` (its default when not set; may be None)."""
        if option.key in self._cache:
            return cast(T, self._cache[option.key])
        value: Any = option.default
        for k in (option.key, *option.fallback_keys):
            if k in self._options:
                value = option.parse(self._options[k], k)
                break
        self._cache[option.key] = value
        return cast(T, value)

    # ---- pattern accessors --------------------------------------------------------------------

    def _field_option(self, pattern: PatternOption, field: str) -> Any:
        key = pattern.key_for(field)
        if key in self._options:
            return pattern.parse(self._options[key], key)
        return pattern.default

    def fields_with(self, pattern: PatternOption) -> dict[str, Any]:
        """``{field part: typed value}`` for every key of a pattern family."""
        out: dict[str, Any] = {}
        for k, v in self._options.items():
            name = pattern.match(k)
            if name is not None:
                out[name] = pattern.parse(v, k)
        return out

    def field_aggregate_function(self, field: str) -> str | None:
        """The aggregate function of ``field``: its own option, else fields.default-aggregate-function."""
        v = self._field_option(self.FIELD_AGGREGATE_FUNCTION, field)
        if v is None:
            v = self.get(self.FIELDS_DEFAULT_AGGREGATE_FUNCTION)
        return None if v is None else str(v).strip().lower()

    def field_ignore_retract(self, field: str) -> bool:
        return bool(self._field_option(self.FIELD_IGNORE_RETRACT, field))

    def field_distinct(self, field: str) -> bool:
        return bool(self._field_option(self.FIELD_DISTINCT, field))

    def field_list_agg_delimiter(self, field: str) -> str:
        return str(self._field_option(self.FIELD_LIST_AGG_DELIMITER, field))

    def field_nested_key(self, field: str) -> list[str]:
        return [k.strip() for k in self._field_option(self.FIELD_NESTED_KEY, field) or [] if k.strip()]

    def field_count_limit(self, field: str) -> Optional[int]:
        v = self._field_option(self.FIELD_COUNT_LIMIT, field)
        return None if v is None else int(v)

    def field_ts_field(self, field: str) -> Optional[str]:
        v = self._field_option(self.FIELD_TS_FIELD, field)
        return None if v is None or not str(v).strip() else str(v).strip()

    def sequence_groups(self) -> dict[tuple[str, ...], list[str]]:
        """Partial-update sequence groups: ``{(sequence fields...): [fields in the group]}``."""
        groups = self.fields_with(self.FIELD_SEQUENCE_GROUP)
        return {tuple(p.strip() for p in k.split(",") if p.strip()): v for k, v in groups.items()}

    def stats_mode(self, field: str | None) -> str:
        """The statistics mode of ``field`` (``fields.<f>.stats-mode``, else ``metadata.stats-mode``);
        with ``None`` the table's mode."""
        v = self._field_option(self.FIELD_STATS_MODE, field) if field is not None else None
        return str(v if v is not None else self.get(self.METADATA_STATS_MODE)).strip().lower()

    def field_default_values(self) -> dict[str, str]:
        return self.fields_with(self.FIELD_DEFAULT_VALUE)

    def kafka_options(self) -> dict[str, str]:
        """The ``kafka.*`` options with the prefix removed."""
        return {k[len("kafka."):]: v for k, v in self._options.items() if k.startswith("kafka.")}

    # ---- typed properties -----------------------------------------------------------------------

    @property
    def bucket(self) -> int:
        return self.get(self.BUCKET)

    @property
    def dynamic_bucket_target_row_num(self) -> int:
        return self.get(self.DYNAMIC_BUCKET_TARGET_ROW_NUM)

    @property
    def dynamic_bucket_initial_buckets(self) -> int | None:
        return self.get(self.DYNAMIC_BUCKET_INITIAL_BUCKETS)

    @property
    def dynamic_bucket_max_buckets(self) -> int:
        return self.get(self.DYNAMIC_BUCKET_MAX_BUCKETS)

    @property
    def dynamic_partition_overwrite(self) -> bool:
        return self.get(self.DYNAMIC_PARTITION_OVERWRITE)

    @property
    def streaming_read_overwrite(self) -> bool:
        return self.get(self.STREAMING_READ_OVERWRITE)

    @property
    def table_read_sequence_number(self) -> bool:
        return self.get(self.TABLE_READ_SEQUENCE_NUMBER_ENABLED)

    @property
    def bucket_key(self) -> list[str] | None:
        v = self.get(self.BUCKET_KEY)
        return list(v) if v else None

    @property
    def merge_engine(self) -> MergeEngine:
        return self.get(self.MERGE_ENGINE)

    @property
    def changelog_producer(self) -> ChangelogProducer:
        return self.get(self.CHANGELOG_PRODUCER)

    @property
    def changelog_producer_row_deduplicate(self) -> bool:
        return self.get(self.CHANGELOG_PRODUCER_ROW_DEDUPLICATE)

    @property
    def lookup_wait(self) -> bool:
        return self.get(self.LOOKUP_WAIT)

    @property
    def file_format(self) -> str:
        return self.get(self.FILE_FORMAT).lower()

    @property
    def file_compression(self) -> str:
        return self.get(self.FILE_COMPRESSION).lower()

    @property
    def file_compression_zstd_level(self) -> int:
        return self.get(self.FILE_COMPRESSION_ZSTD_LEVEL)

    @property
    def target_file_size(self) -> MemorySize:
        return self.get(self.TARGET_FILE_SIZE)

    def target_file_size_for(self, has_primary_key: bool) -> MemorySize:
        """Paimon's per-kind default when the option is unset: 128 mb (primary key) or 256 mb (append)."""
        if self.contains(self.TARGET_FILE_SIZE):
            return self.target_file_size
        return MemorySize.of_mebibytes(128 if has_primary_key else 256)

    @property
    def write_buffer_size(self) -> MemorySize:
        return self.get(self.WRITE_BUFFER_SIZE)

    @property
    def write_buffer_spillable(self) -> bool | None:
        return self.get(self.WRITE_BUFFER_SPILLABLE)

    @property
    def num_levels(self) -> int | None:
        return self.get(self.NUM_LEVELS)

    @property
    def num_sorted_run_compaction_trigger(self) -> int:
        return self.get(self.NUM_SORTED_RUN_COMPACTION_TRIGGER)

    @property
    def num_sorted_run_stop_trigger(self) -> int:
        """The stop trigger (default: compaction trigger + 3), never below the compaction trigger."""
        trigger = self.num_sorted_run_compaction_trigger
        v = self.get(self.NUM_SORTED_RUN_STOP_TRIGGER)
        return max(trigger, trigger + 3 if v is None else v)

    @property
    def compaction_max_size_amplification_percent(self) -> int:
        return self.get(self.COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT)

    @property
    def compaction_size_ratio(self) -> int:
        return self.get(self.COMPACTION_SIZE_RATIO)

    @property
    def compaction_optimization_interval(self) -> Optional[Duration]:
        return self.get(self.COMPACTION_OPTIMIZATION_INTERVAL)

    @property
    def compaction_total_size_threshold(self) -> Optional[int]:
        return self.get(self.COMPACTION_TOTAL_SIZE_THRESHOLD)

    @property
    def compaction_incremental_size_threshold(self) -> Optional[int]:
        return self.get(self.COMPACTION_INCREMENTAL_SIZE_THRESHOLD)

    @property
    def full_compaction_delta_commits(self) -> int | None:
        """The option; unset with ``changelog-producer`` 'full-compaction': 1, as Paimon's sink
        full-compacts at every commit for that producer (its changelog comes from nothing else)."""
        value = self.get(self.FULL_COMPACTION_DELTA_COMMITS)
        if value is None and self.changelog_producer == ChangelogProducer.FULL_COMPACTION:
            return 1
        return value

    @property
    def snapshot_num_retained_min(self) -> int:
        return self.get(self.SNAPSHOT_NUM_RETAINED_MIN)

    @property
    def snapshot_num_retained_max(self) -> int:
        return self.get(self.SNAPSHOT_NUM_RETAINED_MAX)

    @property
    def snapshot_time_retained(self) -> Duration:
        return self.get(self.SNAPSHOT_TIME_RETAINED)

    @property
    def snapshot_expire_limit(self) -> int:
        return self.get(self.SNAPSHOT_EXPIRE_LIMIT)

    @property
    def changelog_num_retained_min(self) -> int:
        v = self.get(self.CHANGELOG_NUM_RETAINED_MIN)
        return self.snapshot_num_retained_min if v is None else v

    @property
    def changelog_num_retained_max(self) -> int:
        v = self.get(self.CHANGELOG_NUM_RETAINED_MAX)
        return self.snapshot_num_retained_max if v is None else v

    @property
    def changelog_time_retained(self) -> Duration:
        v = self.get(self.CHANGELOG_TIME_RETAINED)
        return self.snapshot_time_retained if v is None else v

    @property
    def manifest_target_file_size(self) -> MemorySize:
        return self.get(self.MANIFEST_TARGET_FILE_SIZE)

    @property
    def manifest_merge_min_count(self) -> int:
        return self.get(self.MANIFEST_MERGE_MIN_COUNT)

    @property
    def sequence_field(self) -> list[str]:
        v: list[str] | None = self.get(self.SEQUENCE_FIELD)
        return list(v) if v else []

    @property
    def sequence_field_sort_order(self) -> SortOrder:
        return self.get(self.SEQUENCE_FIELD_SORT_ORDER)

    @property
    def rowkind_field(self) -> str | None:
        return self.get(self.ROWKIND_FIELD)

    def bloom_filter_columns(self) -> dict[str, tuple[int, float]]:
        """Column -> (items, fpp) of ``file-index.bloom-filter.columns``."""
        cols = self.get(self.FILE_INDEX_BLOOM_FILTER_COLUMNS) or []
        return {
            c: (
                int(self._field_option(self.FILE_INDEX_BLOOM_FILTER_ITEMS, c)),
                float(self._field_option(self.FILE_INDEX_BLOOM_FILTER_FPP, c)),
            )
            for c in cols
        }

    def bitmap_index_columns(self) -> dict[str, tuple[int, int]]:
        """Column -> (version, index block size in bytes) of ``file-index.bitmap.columns``."""
        cols = self.get(self.FILE_INDEX_BITMAP_COLUMNS) or []
        return {
            c: (
                int(self._field_option(self.FILE_INDEX_BITMAP_VERSION, c)),
                int(self._field_option(self.FILE_INDEX_BITMAP_BLOCK_SIZE, c)),
            )
            for c in cols
        }

    @property
    def deletion_vectors_enabled(self) -> bool:
        return self.get(self.DELETION_VECTORS_ENABLED)

    @property
    def deletion_vectors_bitmap64(self) -> bool:
        return self.get(self.DELETION_VECTORS_BITMAP64)

    @property
    def ignore_delete(self) -> bool:
        return self.get(self.IGNORE_DELETE)

    @property
    def ignore_update_before(self) -> bool:
        return self.get(self.IGNORE_UPDATE_BEFORE)

    @property
    def partial_update_remove_record_on_delete(self) -> bool:
        return self.get(self.PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE)

    @property
    def aggregation_remove_record_on_delete(self) -> bool:
        return self.get(self.AGGREGATION_REMOVE_RECORD_ON_DELETE)

    @property
    def partition_default_name(self) -> str:
        return self.get(self.PARTITION_DEFAULT_NAME)

    @property
    def write_only(self) -> bool:
        return self.get(self.WRITE_ONLY)

    @property
    def commit_user_prefix(self) -> str | None:
        return self.get(self.COMMIT_USER_PREFIX)

    @property
    def consumer_id(self) -> str | None:
        return self.get(self.CONSUMER_ID)

    @property
    def consumer_expiration_time(self) -> Duration | None:
        return self.get(self.CONSUMER_EXPIRATION_TIME)

    @property
    def orphan_clean_older_than(self) -> Duration:
        return self.get(self.ORPHAN_CLEAN_OLDER_THAN)

    @property
    def commit_max_retries(self) -> int:
        return self.get(self.COMMIT_MAX_RETRIES)

    @property
    def lock_acquire_timeout(self) -> Duration:
        return self.get(self.LOCK_ACQUIRE_TIMEOUT)

    @property
    def sink_flush_interval(self) -> Duration | None:
        return self.get(self.SINK_FLUSH_INTERVAL)

    @property
    def scan_mode(self) -> StartupMode:
        return self.get(self.SCAN_MODE)

    @property
    def startup_mode(self) -> StartupMode:
        """``scan.mode`` with 'default' and 'full' resolved as Paimon does."""
        return _resolve_startup_mode(self.scan_mode, self.contains)

    @property
    def scan_snapshot_id(self) -> int | None:
        return self.get(self.SCAN_SNAPSHOT_ID)

    @property
    def scan_timestamp_millis(self) -> int | None:
        return self.get(self.SCAN_TIMESTAMP_MILLIS)

    @property
    def scan_tag_name(self) -> str | None:
        return self.get(self.SCAN_TAG_NAME)

    @property
    def continuous_discovery_interval(self) -> Duration:
        return self.get(self.CONTINUOUS_DISCOVERY_INTERVAL)

    @property
    def partition_mark_done_action(self) -> str:
        return str(self.get(self.PARTITION_MARK_DONE_ACTION))

    @property
    def lookup_cache(self) -> LookupCacheMode:
        return self.get(self.LOOKUP_CACHE)

    @property
    def lookup_cache_max_memory_size(self) -> MemorySize:
        return self.get(self.LOOKUP_CACHE_MAX_MEMORY_SIZE)

    @property
    def lookup_cache_max_disk_size(self) -> Optional[MemorySize]:
        return self.get(self.LOOKUP_CACHE_MAX_DISK_SIZE)

    @property
    def lookup_cache_rows(self) -> int:
        return int(self.get(self.LOOKUP_CACHE_ROWS))

    @property
    def log_kafka_client(self) -> LogKafkaClient:
        return self.get(self.LOG_KAFKA_CLIENT)

    @property
    def log_system(self) -> LogSystem:
        return self.get(self.LOG_SYSTEM)

    @property
    def log_consistency(self) -> LogConsistency:
        return self.get(self.LOG_CONSISTENCY)

    @property
    def log_changelog_mode(self) -> LogChangelogMode:
        return self.get(self.LOG_CHANGELOG_MODE)

    @property
    def log_retention(self) -> Optional[Duration]:
        return self.get(self.LOG_RETENTION)

    @property
    def log_system_partitions(self) -> Optional[int]:
        return self.get(self.LOG_SYSTEM_PARTITIONS)

    @property
    def log_system_replication(self) -> int:
        return int(self.get(self.LOG_SYSTEM_REPLICATION))

    @property
    def log_system_auto_register(self) -> bool:
        return bool(self.get(self.LOG_SYSTEM_AUTO_REGISTER))

    @property
    def streaming_read_mode(self) -> str:
        return str(self.get(self.STREAMING_READ_MODE) or "log")

    @property
    def log_ignore_delete(self) -> bool:
        return bool(self.get(self.LOG_IGNORE_DELETE))


def _collect_registry() -> tuple[dict[str, ConfigOption[Any]], tuple[PatternOption, ...]]:
    options: dict[str, ConfigOption[Any]] = {}
    patterns: list[PatternOption] = []
    for name in dir(CoreOptions):
        v = getattr(CoreOptions, name)
        if isinstance(v, ConfigOption):
            for k in (v.key, *v.fallback_keys):
                if k in options:
                    raise AssertionError(f"option key {k!r} registered twice")
                options[k] = v
        elif isinstance(v, PatternOption):
            patterns.append(v)
    return options, tuple(patterns)


ALL_OPTIONS, PATTERN_OPTIONS = _collect_registry()
"""Every known key (fallback spellings included) -> its option; the pattern families."""


IMMUTABLE_KEYS: frozenset[str] = frozenset(
    {o.key for o in ALL_OPTIONS.values() if o.immutable}
    | {
        # Paimon's @Immutable options lakelog does not otherwise model
        "bucket-function.type", "data-file.path-directory", "sequence.snapshot-ordering",
        "primary-key.nullable", "row-tracking.enabled", "data-evolution.enabled",
        "index-file-in-data-file-dir",
        # the log is set up with the table (topic, partitions, marker): lakelog does not attach,
        # move or re-partition it later
        "kafka.topic",
    }
)
"""Options that cannot change once a table exists (Paimon's immutable options, plus
``sequence.field`` because lakelog does not re-sort existing data). ``bucket`` may change between
counts greater than 0 (see :func:`check_alter`)."""


def find_option(key: str) -> Union[ConfigOption[Any], PatternOption, None]:
    """The option or pattern family a key belongs to (None for unknown keys)."""
    opt = ALL_OPTIONS.get(key)
    if opt is not None:
        return opt
    for p in PATTERN_OPTIONS:
        if p.match(key) is not None:
            return p
    return None


def check_supported(key: str, value: str) -> None:
    """Raise :class:`OptionError` ("not supported by lakelog: <why>") when lakelog refuses
    ``key`` = ``value`` at create and ALTER; unknown keys pass (see :func:`validate_options`)."""
    opt = find_option(key)
    if opt is None or opt.unsupported is None:
        return
    allowed = getattr(opt, "supported_values", None)
    if allowed is None:
        raise OptionError(f"option {key!r} is not supported by lakelog: {opt.unsupported}")
    if opt.parse(value, key) not in allowed:
        shown = " or ".join(repr(_format_value(v)) for v in allowed)
        raise OptionError(
            f"option {key!r} = {value!r} is not supported by lakelog (only {shown}): {opt.unsupported}"
        )


def unsupported_reason(key: str, value: str | None = None) -> str | None:
    """Why lakelog refuses ``key`` (= ``value``) at create and ALTER, or None when it is honoured
    (or unknown). Without ``value``, options honoured for some values only count as honoured."""
    opt = find_option(key)
    if opt is None or opt.unsupported is None:
        return None
    allowed = getattr(opt, "supported_values", None)
    if allowed is None:
        return opt.unsupported
    if value is None or opt.parse(value, key) in allowed:
        return None
    return opt.unsupported


def _nearest_key(key: str) -> str | None:
    candidates = list(ALL_OPTIONS) + [p.template for p in PATTERN_OPTIONS]
    near = difflib.get_close_matches(key, candidates, n=1, cutoff=0.5)
    return near[0] if near else None


def _resolve_startup_mode(mode: StartupMode, has: Callable[[ConfigOption[Any]], bool]) -> StartupMode:
    c = CoreOptions
    if mode == StartupMode.FULL:
        return StartupMode.LATEST_FULL
    if mode != StartupMode.DEFAULT:
        return mode
    if has(c.SCAN_TIMESTAMP_MILLIS) or has(c.SCAN_TIMESTAMP):
        return StartupMode.FROM_TIMESTAMP
    if has(c.SCAN_SNAPSHOT_ID) or has(c.SCAN_TAG_NAME) or has(c.SCAN_WATERMARK):
        return StartupMode.FROM_SNAPSHOT
    if has(c.SCAN_FILE_CREATION_TIME_MILLIS):
        return StartupMode.FROM_FILE_CREATION_TIME
    if has(c.INCREMENTAL_BETWEEN) or has(c.INCREMENTAL_BETWEEN_TIMESTAMP):
        return StartupMode.INCREMENTAL
    return StartupMode.LATEST_FULL


def _check_scan_options(options: Mapping[str, str]) -> None:
    """Paimon's startup-mode rules: the options a scan mode needs, and those it forbids."""

    def has(o: ConfigOption[Any]) -> bool:
        return any(k in options for k in (o.key, *o.fallback_keys))

    raw_mode = options.get(CoreOptions.SCAN_MODE.key)
    mode = CoreOptions.SCAN_MODE.parse(raw_mode) if raw_mode is not None else StartupMode.DEFAULT
    mode = _resolve_startup_mode(mode, has)
    c = CoreOptions
    needs: dict[StartupMode, tuple[ConfigOption[Any], ...]] = {
        StartupMode.FROM_TIMESTAMP: (c.SCAN_TIMESTAMP_MILLIS, c.SCAN_TIMESTAMP),
        StartupMode.FROM_SNAPSHOT: (c.SCAN_SNAPSHOT_ID, c.SCAN_TAG_NAME, c.SCAN_WATERMARK),
        StartupMode.FROM_SNAPSHOT_FULL: (c.SCAN_SNAPSHOT_ID,),
        StartupMode.FROM_FILE_CREATION_TIME: (c.SCAN_FILE_CREATION_TIME_MILLIS,),
        StartupMode.INCREMENTAL: (c.INCREMENTAL_BETWEEN, c.INCREMENTAL_BETWEEN_TIMESTAMP),
    }
    positional = (c.SCAN_TIMESTAMP_MILLIS, c.SCAN_TIMESTAMP, c.SCAN_SNAPSHOT_ID, c.SCAN_TAG_NAME,
                  c.SCAN_WATERMARK, c.SCAN_FILE_CREATION_TIME_MILLIS, c.INCREMENTAL_BETWEEN,
                  c.INCREMENTAL_BETWEEN_TIMESTAMP)
    required = needs.get(mode, ())
    if required:
        given = [o.key for o in required if has(o)]
        if not given:
            keys = " or ".join(repr(o.key) for o in required)
            raise OptionError(f"option 'scan.mode' = '{mode.value}' needs {keys} to be set")
        if len(given) > 1 and mode != StartupMode.FROM_TIMESTAMP:
            raise OptionError(f"option 'scan.mode' = '{mode.value}' takes only one of {given}")
    for o in positional:
        if o not in required and has(o):
            raise OptionError(f"option {o.key!r} must not be set when 'scan.mode' is '{mode.value}'")


def validate_options(options: Mapping[str, str], strict: bool = True) -> None:
    """Check every key and value.

    Unknown keys raise :class:`OptionError` naming the nearest valid key, and keys lakelog does not
    support say so (neither with ``strict=False``, which reads tables other engines wrote);
    malformed values raise naming key, value and what is allowed. Cross-option rules checked here:
    retained snapshot bounds, changelog retention and the scan-mode rules.
    """
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise OptionError(f"option {key!r} = {value!r}: keys and values must be strings")
        opt = find_option(key)
        if opt is None:
            if not strict:
                continue
            near = _nearest_key(key)
            if key in PAIMON_KEYS or (near is None and key.startswith(TEMPLATED_PREFIXES)):
                raise OptionError(f"option {key!r} (a Paimon table option) is not supported by lakelog")
            hint = f"; did you mean {near!r}?" if near else ""
            raise OptionError(f"unknown table option {key!r}{hint}")
        opt.parse(value, key)
        if strict:
            check_supported(key, value)

    def val(o: ConfigOption[Any]) -> Any:
        for k in (o.key, *o.fallback_keys):
            if k in options:
                return o.parse(options[k], k)
        return o.default

    c = CoreOptions
    lo, hi = val(c.SNAPSHOT_NUM_RETAINED_MIN), val(c.SNAPSHOT_NUM_RETAINED_MAX)
    if lo > hi:
        raise OptionError(
            f"option 'snapshot.num-retained.min' = {lo} must not be larger than "
            f"'snapshot.num-retained.max' = {hi}"
        )
    _check_scan_options(options)


_RETENTION_PAIRS = (
    (CoreOptions.CHANGELOG_NUM_RETAINED_MIN, CoreOptions.SNAPSHOT_NUM_RETAINED_MIN),
    (CoreOptions.CHANGELOG_NUM_RETAINED_MAX, CoreOptions.SNAPSHOT_NUM_RETAINED_MAX),
    (CoreOptions.CHANGELOG_TIME_RETAINED, CoreOptions.SNAPSHOT_TIME_RETAINED),
)
RETENTION_KEYS = frozenset(o.key for pair in _RETENTION_PAIRS for o in pair)


def check_changelog_retention(options: Mapping[str, str]) -> None:
    """Refuse a changelog retention that differs from the snapshot retention.

    Paimon keeps changelogs longer than their snapshots in separate ``changelog/`` files; lakelog's
    changelog lives and expires with its snapshot, so only values equal to the snapshot retention
    are honoured (leaving them unset means exactly that)."""
    for copt, sopt in _RETENTION_PAIRS:
        if copt.key not in options:
            continue
        given = copt.parse(options[copt.key])
        snap = _normalized(sopt.key, options)
        if given != snap:
            raise OptionError(
                f"option {copt.key!r} = {options[copt.key]!r} is not supported by lakelog: a changelog "
                f"is kept as long as its snapshot, so it must equal {sopt.key!r} ({_format_value(snap)}); "
                "leave it unset"
            )


def _normalized(key: str, options: Mapping[str, str]) -> Any:
    """The effective value of ``key`` for comparisons (absent -> default; typed when known)."""
    opt = ALL_OPTIONS.get(key)
    if opt is None:
        return options.get(key)
    for k in (opt.key, *opt.fallback_keys):
        if k in options:
            return opt.parse(options[k], k)
    return opt.default


#: Immutable options that stay fixed even before a table has data: its type, its partitioning, and
#: its log (the topic is set up when the table is created). ``primary-key`` is the schema's.
FIXED_AT_CREATION: frozenset[str] = frozenset(
    {"type", "partition", "primary-key", "log.system", "log.system.partitions", "log.consistency",
     "kafka.topic"}
)


def check_alter(old: Mapping[str, str], new: Mapping[str, str], *, has_snapshots: bool = True) -> None:
    """Refuse a change of any immutable option (set, changed or removed) with :class:`OptionError`.

    As in Paimon, a table without snapshots (nothing was written yet, as an empty branch) may change
    them, except those of :data:`FIXED_AT_CREATION`. ``bucket`` follows Paimon: once the table has
    snapshots it may change between counts greater than 0 (a rescale: partitions written from then
    on take the new count), never from or to -1 (dynamic bucket mode keeps its hash index), and it
    cannot be removed."""
    if has_snapshots:
        _check_bucket_change(old, new)
    changed = changed_options(old, new, IMMUTABLE_KEYS if has_snapshots else FIXED_AT_CREATION)
    if changed:
        key = changed[0]
        raise OptionError(
            f"option {key!r} cannot be changed once the table exists "
            f"(from {old.get(key, '<unset>')!r} to {new.get(key, '<unset>')!r})"
        )


def changed_options(old: Mapping[str, str], new: Mapping[str, str], keys: Collection[str]) -> list[str]:
    """The options among ``keys`` whose effective values differ between ``old`` and ``new`` (an
    absent one is its default), sorted."""
    return sorted(k for k in (set(old) | set(new)) & set(keys) if _normalized(k, old) != _normalized(k, new))


def _check_bucket_change(old: Mapping[str, str], new: Mapping[str, str]) -> None:
    key = CoreOptions.BUCKET.key
    if key in old and key not in new:
        raise OptionError(f"option {key!r} cannot be reset once the table has snapshots (it is {old[key]!r})")
    before, after = _normalized(key, old), _normalized(key, new)
    if before == after:
        return
    if before == -1:
        raise OptionError(
            f"option {key!r} cannot change from -1 (dynamic bucket mode) to {after}: the table's keys are "
            "placed by its hash index; create a new table and copy the rows"
        )
    if after == -1:
        raise OptionError(
            f"option {key!r} cannot change from {before} to -1 (dynamic bucket mode): the table has no hash "
            "index to place its existing keys"
        )
