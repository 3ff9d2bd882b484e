"""The typed table option registry."""

from __future__ import annotations

import pytest

from lakelog.connector.errors import OptionError
from lakelog.connector.format.options import (
    ALL_OPTIONS,
    IMMUTABLE_KEYS,
    ChangelogProducer,
    ConfigOption,
    CoreOptions,
    Duration,
    LogSystem,
    MemorySize,
    MergeEngine,
    SortOrder,
    StartupMode,
    check_alter,
    find_option,
    validate_options,
)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("128 mb", 128 << 20),
        ("64mb", 64 << 20),
        ("1gb", 1 << 30),
        ("1024", 1024),
        ("16 kb", 16 << 10),
        ("2 MB", 2 << 20),
        ("3 mebibytes", 3 << 20),
        ("10b", 10),
        ("1 t", 1 << 40),
    ],
)
def test_memory_size_parse(text: str, expected: int) -> None:
    assert MemorySize.parse(text).bytes == expected


@pytest.mark.parametrize("bad", ["", "mb", "1.5 mb", "12 qb", "-1 mb"])
def test_memory_size_parse_errors(bad: str) -> None:
    with pytest.raises(ValueError):
        MemorySize.parse(bad)


def test_memory_size_is_an_int_of_bytes() -> None:
    size = MemorySize.parse("2 kb")
    assert size == 2048 and size.bytes == 2048 and size.kibibytes == 2
    assert size < 4096 and size * 2 == 4096 and size <= 3000
    assert f"{size}" == "2 kb" and f"{size:d}" == "2048" and repr(size) == "MemorySize(2048)"
    assert CoreOptions({"write-buffer-size": "1 kb"}).write_buffer_size == 1024
    with pytest.raises(ValueError):
        MemorySize(-1)


def test_memory_size_str() -> None:
    assert str(MemorySize.of_mebibytes(128)) == "128 mb"
    assert str(MemorySize(1 << 30)) == "1 gb"
    assert str(MemorySize(1000)) == "1000 bytes"
    assert MemorySize.parse(str(MemorySize(12345 << 10))) == MemorySize(12345 << 10)


@pytest.mark.parametrize(
    "text,millis",
    [
        ("1 h", 3_600_000),
        ("30 min", 1_800_000),
        ("10 s", 10_000),
        ("500 ms", 500),
        ("1d", 86_400_000),
        ("250", 250),
        ("2 hours", 7_200_000),
        ("5m", 300_000),
        ("3 sec", 3000),
    ],
)
def test_duration_parse(text: str, millis: int) -> None:
    assert Duration.parse(text).millis == millis


def test_duration_details() -> None:
    assert Duration.parse("1500 us").nanos == 1_500_000
    assert Duration.parse("10 s").seconds == 10.0
    assert str(Duration.parse("90 min")) == "90 min"
    assert str(Duration.parse("2 h")) == "2 h"
    assert str(Duration.of_millis(1500)) == "1500 ms"
    for bad in ("", "h", "1.5 h", "3 fortnights"):
        with pytest.raises(ValueError):
            Duration.parse(bad)


def test_defaults_follow_paimon() -> None:
    o = CoreOptions({})
    assert o.bucket == -1
    assert o.bucket_key is None
    assert o.merge_engine is MergeEngine.DEDUPLICATE
    assert o.changelog_producer is ChangelogProducer.NONE
    assert o.file_format == "parquet"
    assert o.file_compression == "zstd"
    assert o.file_compression_zstd_level == 1
    assert o.target_file_size == MemorySize.of_mebibytes(128)
    assert o.target_file_size_for(has_primary_key=False) == MemorySize.of_mebibytes(256)
    assert o.write_buffer_size == MemorySize.of_mebibytes(256)
    assert o.num_levels is None
    assert o.num_sorted_run_compaction_trigger == 5
    assert o.num_sorted_run_stop_trigger == 8
    assert o.snapshot_num_retained_min == 10
    assert o.snapshot_num_retained_max == 2**31 - 1
    assert o.snapshot_time_retained == Duration.parse("1 h")
    assert o.snapshot_expire_limit == 50
    assert o.manifest_target_file_size == MemorySize.of_mebibytes(8)
    assert o.manifest_merge_min_count == 30
    assert o.sequence_field == []
    assert o.ignore_delete is False
    assert o.partition_default_name == "__DEFAULT_PARTITION__"
    assert o.write_only is False
    assert o.commit_user_prefix is None
    assert o.consumer_expiration_time is None
    assert o.orphan_clean_older_than == Duration.parse("1 d")
    assert o.compaction_max_size_amplification_percent == 200
    assert o.compaction_size_ratio == 1
    assert o.full_compaction_delta_commits is None
    assert o.write_buffer_spillable is None
    assert o.scan_mode is StartupMode.DEFAULT
    assert o.startup_mode is StartupMode.LATEST_FULL
    assert o.continuous_discovery_interval == Duration.parse("10 s")
    assert o.lookup_wait is True
    assert o.changelog_producer_row_deduplicate is False
    assert o.sequence_field_sort_order is SortOrder.ASCENDING
    assert o.log_system is LogSystem.NONE
    assert o.changelog_num_retained_min == 10
    assert o.changelog_time_retained == Duration.parse("1 h")


def test_typed_values() -> None:
    o = CoreOptions(
        {
            "bucket": "4",
            "bucket-key": "a, b",
            "merge-engine": "partial-update",
            "changelog-producer": "LOOKUP",
            "target-file-size": "64mb",
            "snapshot.time-retained": "30 min",
            "num-sorted-run.stop-trigger": "2",
            "sequence.field": "ts,seq",
            "write-only": "TRUE",
            "consumer.expiration-time": "1d",
            "log.system": "kafka",
            "kafka.bootstrap.servers": "localhost:9092",
            "kafka.topic": "t",
            "path": "/somewhere",
            "connector": "paimon",
        }
    )
    assert o.bucket == 4
    assert o.bucket_key == ["a", "b"]
    assert o.merge_engine is MergeEngine.PARTIAL_UPDATE
    assert o.changelog_producer is ChangelogProducer.LOOKUP
    assert o.target_file_size.mebibytes == 64
    assert o.snapshot_time_retained.millis == 30 * 60_000
    assert o.num_sorted_run_stop_trigger == 5  # never below the compaction trigger
    assert o.sequence_field == ["ts", "seq"]
    assert o.write_only is True
    assert o.consumer_expiration_time == Duration.parse("24 h")
    assert o.log_system is LogSystem.KAFKA
    assert o.kafka_options() == {"bootstrap.servers": "localhost:9092", "topic": "t"}
    assert o.get(CoreOptions.PATH) == "/somewhere"
    assert o.to_map()["kafka.topic"] == "t"
    assert o.contains(CoreOptions.BUCKET) and not o.contains(CoreOptions.NUM_LEVELS)


def test_fallback_keys() -> None:
    assert CoreOptions({"changelog-producer.lookup-wait": "false"}).lookup_wait is False
    assert CoreOptions({"partial-update.ignore-delete": "true"}).ignore_delete is True


def test_pattern_options() -> None:
    o = CoreOptions(
        {
            "merge-engine": "aggregation",
            "fields.price.aggregate-function": "max",
            "fields.sales.aggregate-function": "SUM",
            "fields.sales.ignore-retract": "true",
            "fields.default-aggregate-function": "last_non_null_value",
            "fields.g1,g2.sequence-group": "a,b",
            "fields.ts.sequence-group": "c",
            "fields.tags.list-agg-delimiter": ";",
            "fields.tags.distinct": "true",
        }
    )
    assert o.field_aggregate_function("price") == "max"
    assert o.field_aggregate_function("sales") == "sum"
    assert o.field_aggregate_function("other") == "last_non_null_value"
    assert o.field_ignore_retract("sales") and not o.field_ignore_retract("price")
    assert o.sequence_groups() == {("g1", "g2"): ["a", "b"], ("ts",): ["c"]}
    assert o.field_list_agg_delimiter("tags") == ";"
    assert o.field_list_agg_delimiter("x") == ","
    assert o.field_distinct("tags")
    assert isinstance(find_option("fields.x.aggregate-function"), object)
    assert find_option("kafka.anything") is None


def test_unknown_key_names_the_nearest() -> None:
    with pytest.raises(OptionError, match=r"'buckets'.*'bucket'"):
        validate_options({"buckets": "2"})
    with pytest.raises(OptionError, match=r"'snapshot.num-retained-min'.*'snapshot.num-retained.min'"):
        CoreOptions({"snapshot.num-retained-min": "3"})
    with pytest.raises(OptionError, match="fields.a.agregate-function"):
        CoreOptions({"fields.a.agregate-function": "sum"})


def test_lenient_mode_keeps_unknown_keys() -> None:
    o = CoreOptions({"some.engine.option": "x", "bucket": "2"}, strict=False)
    assert o.bucket == 2
    assert o.to_map()["some.engine.option"] == "x"
    with pytest.raises(OptionError, match="'bucket'"):
        CoreOptions({"some.engine.option": "x", "bucket": "zero"}, strict=False)


@pytest.mark.parametrize(
    "options,fragments",
    [
        ({"bucket": "two"}, ["'bucket'", "'two'", "integer"]),
        ({"bucket": "0"}, ["'bucket'", "'0'", "-1"]),
        ({"bucket": "99999999999"}, ["'bucket'", "range"]),
        ({"merge-engine": "dedupe"}, ["'merge-engine'", "'dedupe'", "'deduplicate'", "'first-row'"]),
        ({"changelog-producer": "always"}, ["'changelog-producer'", "'lookup'"]),
        ({"file.format": "orc"}, ["'file.format'", "'orc'", "parquet"]),
        ({"file.format": "avro"}, ["'file.format'", "'avro'"]),
        ({"file.compression": "lzo"}, ["'file.compression'", "'lzo'", "'zstd'"]),
        ({"target-file-size": "huge"}, ["'target-file-size'", "'huge'", "mb"]),
        ({"target-file-size": "0"}, ["'target-file-size'", "greater than 0"]),
        ({"snapshot.time-retained": "1 fortnight"}, ["'snapshot.time-retained'", "min"]),
        ({"write-only": "yes"}, ["'write-only'", "'yes'", "true or false"]),
        ({"snapshot.num-retained.min": "0"}, ["'snapshot.num-retained.min'", "at least 1"]),
        ({"fields.a.aggregate-function": "median"}, ["'fields.a.aggregate-function'", "'median'", "sum"]),
        ({"fields.a.ignore-retract": "maybe"}, ["'fields.a.ignore-retract'"]),
        ({"deletion-vectors.enabled": "true"}, ["'deletion-vectors.enabled'", "deletion vectors"]),
        ({"scan.snapshot-id": "0"}, ["'scan.snapshot-id'"]),
        ({"metadata.stats-mode": "most"}, ["'metadata.stats-mode'", "truncate"]),
        ({"log.system": "pulsar"}, ["'log.system'", "'kafka'"]),
    ],
)
def test_malformed_values(options: dict[str, str], fragments: list[str]) -> None:
    with pytest.raises(OptionError) as exc:
        validate_options(options)
    for frag in fragments:
        assert frag in str(exc.value)


def test_cross_option_rules() -> None:
    with pytest.raises(OptionError, match="snapshot.num-retained.max"):
        validate_options({"snapshot.num-retained.min": "20", "snapshot.num-retained.max": "5"})
    with pytest.raises(OptionError, match="scan.snapshot-id"):
        validate_options({"scan.mode": "from-snapshot"})
    with pytest.raises(OptionError, match="scan.timestamp-millis"):
        validate_options({"scan.mode": "from-timestamp"})
    with pytest.raises(OptionError, match="must not be set"):
        validate_options({"scan.mode": "latest", "scan.snapshot-id": "3"})
    with pytest.raises(OptionError, match="must not be set"):
        validate_options({"scan.snapshot-id": "3", "scan.timestamp-millis": "5"})
    with pytest.raises(OptionError, match="only one"):
        validate_options({"scan.mode": "from-snapshot", "scan.snapshot-id": "3", "scan.tag-name": "t"})
    validate_options({"scan.mode": "from-snapshot", "scan.snapshot-id": "3"})
    validate_options({"scan.snapshot-id": "3"})
    assert CoreOptions({"scan.snapshot-id": "3"}).startup_mode is StartupMode.FROM_SNAPSHOT
    assert CoreOptions({"scan.timestamp-millis": "3"}).startup_mode is StartupMode.FROM_TIMESTAMP
    assert CoreOptions({"scan.mode": "full"}).startup_mode is StartupMode.LATEST_FULL


def test_registry_shape() -> None:
    assert "bucket" in ALL_OPTIONS and isinstance(ALL_OPTIONS["bucket"], ConfigOption)
    for key in ("bucket-key", "primary-key", "partition", "merge-engine", "sequence.field"):
        assert key in IMMUTABLE_KEYS
    assert "changelog-producer" not in IMMUTABLE_KEYS and "bucket" not in IMMUTABLE_KEYS
    assert CoreOptions.SEQUENCE_FIELD.immutable and not CoreOptions.WRITE_ONLY.immutable
    assert not CoreOptions.BUCKET.immutable  # it changes between counts > 0 (check_alter's rules)
    for opt in set(ALL_OPTIONS.values()):
        assert opt.description
        if opt.default is not None:
            # every default survives a format/parse round trip
            assert opt.parse(opt.format(opt.default)) == opt.default


def test_check_alter() -> None:
    check_alter({"bucket": "2", "write-only": "false"}, {"bucket": "2", "write-only": "true"})
    check_alter({}, {"bucket": "-1"})  # explicitly setting the default is no change
    check_alter({"merge-engine": "deduplicate"}, {})
    check_alter({"bucket": "2"}, {"bucket": "4"})  # a rescale: new partitions take 4 buckets
    with pytest.raises(OptionError, match="'bucket' cannot change from -1"):
        check_alter({"bucket": "-1"}, {"bucket": "4"})
    with pytest.raises(OptionError, match="'bucket' cannot change from 2 to -1"):
        check_alter({"bucket": "2"}, {"bucket": "-1"})
    with pytest.raises(OptionError, match="'bucket' cannot be reset"):
        check_alter({"bucket": "2"}, {})
    check_alter({"bucket": "-1"}, {"bucket": "4"}, has_snapshots=False)  # Paimon: free before any data
    with pytest.raises(OptionError, match="'merge-engine'"):
        check_alter({}, {"merge-engine": "first-row"})
    with pytest.raises(OptionError, match="'bucket-key'"):
        check_alter({"bucket-key": "a"}, {})
    with pytest.raises(OptionError, match="'sequence.field'"):
        check_alter({}, {"sequence.field": "ts"})


def test_core_options_equality_and_errors() -> None:
    assert CoreOptions({"bucket": "1"}) == CoreOptions({"bucket": "1"})
    assert hash(CoreOptions({"bucket": "1"})) == hash(CoreOptions({"bucket": "1"}))
    with pytest.raises(OptionError):
        CoreOptions({"bucket": 1})  # type: ignore[dict-item]
