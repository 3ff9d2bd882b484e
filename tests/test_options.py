"""The table option registry: value parsing, malformed values named, and the rule that every key
is either honoured or refused when a table is created or altered.

That a key parses proves nothing about whether lakelog does what it says; the tests that an
honoured option changes behaviour live with the behaviour (see ``HONOURED_BY`` below, which names
them, and ``test_every_honoured_option_has_a_test_that_fails_when_it_is_ignored``).
"""

from __future__ import annotations

import enum
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import OptionError
from lakelog.connector.format.options import (
    ALL_OPTIONS,
    IMMUTABLE_KEYS,
    NOT_YET,
    PATTERN_OPTIONS,
    SUPPORTED_AGGREGATE_FUNCTIONS,
    ConfigOption,
    CoreOptions,
    Duration,
    MemorySize,
    MergeEngine,
    PatternOption,
    StartupMode,
    check_alter,
    find_option,
    unsupported_reason,
    validate_options,
)
from lakelog.connector.table.scan_start import scan_options

from .conftest import ORDERS, MakeTable


# ---- value types -------------------------------------------------------------------------------------
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
    with pytest.raises(ValueError):
        MemorySize(-1)
    assert str(MemorySize.of_mebibytes(128)) == "128 mb"
    assert str(MemorySize(1000)) == "1000 bytes"
    assert MemorySize.parse(str(MemorySize(12345 << 10))) == MemorySize(12345 << 10)


@pytest.mark.parametrize(
    "text,millis",
    [("1 h", 3_600_000), ("30 min", 1_800_000), ("10 s", 10_000), ("500 ms", 500), ("1d", 86_400_000),
     ("250", 250), ("2 hours", 7_200_000), ("5m", 300_000), ("3 sec", 3000), ("0 s", 0)],
)
def test_duration_parse(text: str, millis: int) -> None:
    assert Duration.parse(text).millis == millis


def test_duration_details() -> None:
    assert Duration.parse("1500 us").nanos == 1_500_000
    assert Duration.parse("10 s").seconds == 10.0
    assert str(Duration.parse("90 min")) == "90 min"
    assert str(Duration.of_millis(1500)) == "1500 ms"
    for bad in ("", "h", "1.5 h", "3 fortnights"):
        with pytest.raises(ValueError):
            Duration.parse(bad)


# ---- malformed values and unknown keys ---------------------------------------------------------------
@pytest.mark.parametrize(
    "options,fragments",
    [
        ({"bucket": "two"}, ["'bucket'", "'two'", "integer"]),
        ({"bucket": "0"}, ["'bucket'", "'0'", "-1"]),
        ({"bucket": "99999999999"}, ["'bucket'", "range"]),
        ({"merge-engine": "dedupe"}, ["'merge-engine'", "'dedupe'", "'deduplicate'", "'first-row'"]),
        ({"changelog-producer": "always"}, ["'changelog-producer'", "'lookup'"]),
        ({"file.format": "orc"}, ["'file.format'", "'orc'", "parquet"]),
        ({"file.compression": "lzo"}, ["'file.compression'", "'lzo'", "'zstd'"]),
        ({"target-file-size": "huge"}, ["'target-file-size'", "'huge'", "mb"]),
        ({"target-file-size": "0"}, ["'target-file-size'", "greater than 0"]),
        ({"snapshot.time-retained": "1 fortnight"}, ["'snapshot.time-retained'", "min"]),
        ({"write-only": "yes"}, ["'write-only'", "'yes'", "true or false"]),
        ({"snapshot.num-retained.min": "0"}, ["'snapshot.num-retained.min'", "at least 1"]),
        ({"fields.a.aggregate-function": "median"}, ["'fields.a.aggregate-function'", "'median'", "sum"]),
        ({"fields.a.ignore-retract": "maybe"}, ["'fields.a.ignore-retract'"]),
        ({"deletion-vectors.enabled": "maybe"}, ["'deletion-vectors.enabled'", "'maybe'", "true or false"]),
        ({"scan.snapshot-id": "0"}, ["'scan.snapshot-id'"]),
        ({"metadata.stats-mode": "most"}, ["'metadata.stats-mode'", "truncate"]),
        ({"type": "format-table"}, ["'type'", "'format-table'", "'table'"]),
        ({"manifest.format": "orc"}, ["'manifest.format'", "'avro'"]),
    ],
)
def test_malformed_values_name_key_value_and_what_is_allowed(
    options: dict[str, str], fragments: list[str]
) -> None:
    with pytest.raises(OptionError) as exc:
        validate_options(options)
    for frag in fragments:
        assert frag in str(exc.value)


def test_unknown_keys_name_the_nearest() -> None:
    with pytest.raises(OptionError, match=r"unknown table option 'buckets'.*'bucket'"):
        validate_options({"buckets": "2"})
    with pytest.raises(OptionError, match=r"'snapshot.num-retained-min'.*'snapshot.num-retained.min'"):
        CoreOptions({"snapshot.num-retained-min": "3"})
    with pytest.raises(OptionError, match="fields.a.agregate-function"):
        CoreOptions({"fields.a.agregate-function": "sum"})


def test_lenient_mode_keeps_unknown_and_unsupported_keys_of_other_engines() -> None:
    o = CoreOptions({"some.engine.option": "x", "bucket": "2", "log.system": "kafka", "branch": "b"},
                    strict=False)
    assert o.bucket == 2
    assert o.to_map()["some.engine.option"] == "x"
    with pytest.raises(OptionError, match="'bucket'"):
        CoreOptions({"some.engine.option": "x", "bucket": "zero"}, strict=False)


def test_cross_option_rules() -> None:
    with pytest.raises(OptionError, match="snapshot.num-retained.max"):
        validate_options({"snapshot.num-retained.min": "20", "snapshot.num-retained.max": "5"})
    with pytest.raises(OptionError, match="scan.snapshot-id"):
        validate_options({"scan.mode": "from-snapshot"})
    with pytest.raises(OptionError, match="must not be set"):
        validate_options({"scan.mode": "latest", "scan.snapshot-id": "3"})
    with pytest.raises(OptionError, match="only one"):
        validate_options({"scan.mode": "from-snapshot", "scan.snapshot-id": "3", "scan.tag-name": "t"})
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
        if opt.default is not None:  # every default survives a format/parse round trip
            assert opt.parse(opt.format(opt.default)) == opt.default
        if opt.supported_values is not None:
            assert opt.unsupported and opt.default in opt.supported_values, opt.key
    assert CoreOptions({"changelog-producer.lookup-wait": "false"}).lookup_wait is False  # fallback keys
    assert CoreOptions({"partial-update.ignore-delete": "true"}).ignore_delete is True


def test_check_alter_refuses_immutable_options() -> None:
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
    # as in Paimon, a table without snapshots may change them (an empty branch takes its own layout),
    # except its type, partitioning and log
    check_alter({}, {"merge-engine": "first-row", "sequence.field": "ts", "bucket-key": "a"}, has_snapshots=False)
    for key, value in (("partition", "dt"), ("kafka.topic", "t2"), ("log.system", "kafka"), ("type", "x")):
        with pytest.raises(OptionError, match=f"'{key}'"):
            check_alter({}, {key: value}, has_snapshots=False)


# ---- refused keys ------------------------------------------------------------------------------------
def _sample(opt: ConfigOption[Any] | PatternOption) -> str:
    """A well-formed value for ``opt`` that lakelog refuses (for value-restricted options, another
    value than the supported ones)."""
    tp = opt.type
    allowed = getattr(opt, "supported_values", None)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(str(m.value) for m in tp if allowed is None or m not in allowed)
    if tp is bool:
        return "true" if allowed is None or True not in allowed else "false"
    if tp is int:
        return "3"
    if tp in (MemorySize,):
        return "4 mb"
    if tp is Duration:
        return "5 min"
    if tp is list:
        return "name"
    return "dev" if allowed is not None else "x"


def _key(opt: ConfigOption[Any] | PatternOption) -> str:
    return opt.key if isinstance(opt, ConfigOption) else opt.key_for("name")


REFUSED = sorted(
    (_key(o) for o in {*ALL_OPTIONS.values(), *PATTERN_OPTIONS} if o.unsupported is not None),
)


@pytest.mark.parametrize("key", REFUSED)
def test_refused_keys_say_not_supported_at_create_and_alter(make_table: MakeTable, key: str) -> None:
    opt = find_option(key)
    assert opt is not None and opt.unsupported
    value = _sample(opt)
    with pytest.raises(OptionError, match=rf"option '{key}'.*not supported by lakelog"):
        make_table(options={key: value})
    t = make_table()
    with pytest.raises(OptionError, match=rf"option '{key}'.*not supported by lakelog"):
        t.alter(lakelog.SetOption(key, value))
    with pytest.raises(OptionError, match=rf"option '{key}'.*not supported by lakelog"):
        scan_options(t.store, {key: value})  # a dynamic option (a SQL hint) is refused as well
    assert unsupported_reason(key, value) == opt.unsupported
    assert key not in t.options


def test_value_restricted_options_accept_their_supported_values(make_table: MakeTable) -> None:
    t = make_table(options={"branch": "main", "consumer.mode": "exactly-once",
                            "incremental-between-scan-mode": "auto"})
    assert t.options["branch"] == "main"
    with pytest.raises(OptionError, match=r"'branch' = 'dev' is not supported by lakelog \(only 'main'\)"):
        t.alter(lakelog.SetOption("branch", "dev"))


def test_not_yet_supported_keys_are_one_grep_away() -> None:
    planned = sorted(k for k in REFUSED if (unsupported_reason(k) or "").startswith(NOT_YET))
    assert planned == ["dynamic-bucket.assigner-parallelism"]


def test_foreign_tables_with_refused_keys_still_open_and_alter(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.t", ORDERS, primary_key=["dt", "id"], options={"bucket": "1"})
    schema_file = f"{t.path}/schema/schema-0"
    import json
    from pathlib import Path

    doc = json.loads(Path(schema_file).read_text())
    doc["options"].update({"read.batch-size": "4096", "commit.force-compact": "true", "branch": "main"})
    with open(schema_file, "w") as f:
        f.write(json.dumps(doc))
    t = catalog.get_table("db.t")
    t.write(pa.table({"dt": ["a"], "id": [1], "name": ["x"], "amount": [1.0]}, schema=ORDERS))
    assert t.to_arrow().num_rows == 1
    t.alter(lakelog.SetOption("snapshot.num-retained.min", "3"))  # untouched foreign keys are kept
    assert t.options["commit.force-compact"] == "true"


def test_aggregate_functions_lakelog_does_not_merge_are_refused_at_create(make_table: MakeTable) -> None:
    from lakelog.connector.lsm.merge.aggregators import SUPPORTED_AGGREGATE_FUNCTIONS as MERGED

    assert SUPPORTED_AGGREGATE_FUNCTIONS == MERGED
    with pytest.raises(OptionError, match=r"'avg' is not supported by lakelog; supported: "):
        make_table(options={"merge-engine": "aggregation", "fields.amount.aggregate-function": "avg"})


def test_changelog_retention_must_equal_the_snapshot_retention(make_table: MakeTable) -> None:
    make_table("db.same", options={"changelog.num-retained.min": "10", "changelog.time-retained": "1 h"})
    for key, value in [("changelog.num-retained.min", "20"), ("changelog.num-retained.max", "100"),
                       ("changelog.time-retained", "2 h")]:
        with pytest.raises(OptionError, match=rf"'{key}' = '{value}' is not supported by lakelog.*must equal"):
            make_table(f"db.t{len(key)}", options={key: value})
    t = make_table("db.follow", options={"snapshot.num-retained.min": "20", "changelog.num-retained.min": "20"})
    with pytest.raises(OptionError, match="changelog.num-retained.min"):
        t.alter(lakelog.SetOption("snapshot.num-retained.min", "5"))
    assert t.options["snapshot.num-retained.min"] == "20"
    assert CoreOptions({"snapshot.num-retained.min": "7"}).changelog_num_retained_min == 7


def test_typed_accessors() -> None:
    o = CoreOptions({"bucket": "4", "bucket-key": "a, b", "merge-engine": "partial-update",
                     "target-file-size": "64mb", "num-sorted-run.stop-trigger": "2", "sequence.field": "ts,seq"})
    assert o.bucket == 4 and o.bucket_key == ["a", "b"] and o.merge_engine is MergeEngine.PARTIAL_UPDATE
    assert o.target_file_size.mebibytes == 64
    assert o.num_sorted_run_stop_trigger == 5  # never below the compaction trigger
    assert o.sequence_field == ["ts", "seq"]
    assert CoreOptions({}).target_file_size_for(has_primary_key=False) == MemorySize.of_mebibytes(256)


# ---- every honoured key has a test that fails when it is ignored ----------------------------------------
_REFUSAL = "tests/test_options.py::test_refused_keys_say_not_supported_at_create_and_alter"
_MALFORMED = "tests/test_options.py::test_malformed_values_name_key_value_and_what_is_allowed"
_LOOKUP_CACHE = "tests/test_lookup_cache.py::test_auto_loads_a_large_dimension_straight_to_disk_and_disk_budget"
HONOURED_BY: dict[str, str] = {
    # buckets that change (dynamic bucket mode, cross-partition upsert, overwrite)
    "dynamic-bucket.target-row-num": "tests/test_dynamic_bucket.py::test_assignment_of_paimon_worked_example",
    "dynamic-bucket.initial-buckets":
        "tests/test_dynamic_bucket.py::test_initial_buckets_spread_new_keys_over_assigners",
    "dynamic-bucket.max-buckets": "tests/test_dynamic_bucket.py::test_max_buckets_caps_a_partition",
    "dynamic-partition-overwrite": "tests/test_rescale.py::test_overwrite_static_partitions",
    "cross-partition-upsert.bootstrap-parallelism":
        "tests/test_cross_partition.py::test_bootstrap_reads_as_many_splits_at_once_as_the_option_says",
    # layout
    "bucket": "tests/test_bucket.py::test_primary_key_buckets_match_pypaimon",
    "bucket-key": "tests/test_bucket.py::test_bucket_key_option_on_append_table_with_nulls",
    "primary-key": "tests/test_schema.py::test_create_keys_from_options",
    "partition": "tests/test_schema.py::test_create_keys_from_options",
    "type": _MALFORMED,  # 'table' only: other values refused
    "branch": _REFUSAL,  # 'main' only
    # files and manifests
    "file.format": _MALFORMED,  # parquet only
    "file.compression": "tests/test_option_effects.py::test_file_compression_is_the_parquet_codec",
    "file.compression.zstd-level": "tests/test_option_effects.py::test_file_compression_zstd_level_changes_the_encoding",
    "target-file-size": "tests/test_option_effects.py::test_target_file_size_rolls_data_files",
    "data-file.prefix": "tests/test_table.py::test_file_name_options_name_data_and_changelog_files",
    "changelog-file.prefix": "tests/test_table.py::test_file_name_options_name_data_and_changelog_files",
    "file.suffix.include.compression": "tests/test_table.py::test_file_name_options_name_data_and_changelog_files",
    "metadata.stats-mode": "tests/test_stats_mode.py::test_each_mode_writes_what_paimon_writes",
    "fields.*.stats-mode": "tests/test_stats_mode.py::test_field_modes_override_the_table_mode",
    "manifest.format": _MALFORMED,  # avro only
    "manifest.compression": "tests/test_option_effects.py::test_manifest_compression_is_the_avro_codec",
    "manifest.target-file-size": "tests/test_option_effects.py::test_manifest_target_file_size_rolls_manifest_files",
    "manifest.merge-min-count":
        "tests/test_option_effects.py::test_manifest_merge_min_count_bounds_the_manifests_a_snapshot_reads",
    "deletion-vectors.enabled":
        "tests/test_deletion_vectors.py::test_updates_mark_rows_instead_of_rewriting_the_files_above",
    "deletion-vectors.bitmap64": "tests/test_deletion_vectors.py::test_bitmap64_vectors_carry_the_64_bit_magic",
    # merge tree and engines
    "merge-engine": "tests/test_merge_engine.py::test_first_row",
    "changelog-producer": "tests/test_stream_writer.py::test_lookup_wait_true_changelog_follows_every_commit",
    "changelog-producer.row-deduplicate": "tests/test_engine_model.py::test_row_deduplicate",
    "changelog-producer.row-deduplicate-ignore-fields":
        "tests/test_stream_writer.py::test_row_deduplicate_ignore_fields_leave_columns_out_of_the_comparison",
    "lookup-wait": "tests/test_stream_writer.py::test_lookup_wait_false_changelog_lags_but_stays_exact",
    "sequence.field": "tests/test_merge_engine.py::test_deduplicate_sequence_field",
    "sequence.field.sort-order": "tests/test_merge_engine.py::test_aggregation_sequence_field_ordering",
    "rowkind.field": "tests/test_merge_engine.py::test_rowkind_field_sets_each_rows_kind",
    "ignore-delete": "tests/test_merge_engine.py::test_deduplicate_ignore_delete",
    "ignore-update-before": "tests/test_option_effects.py::test_ignore_update_before_drops_minus_u_rows",
    "partial-update.remove-record-on-delete": "tests/test_merge_engine.py::test_partial_update_delete_handling",
    "partial-update.remove-record-on-sequence-group":
        "tests/test_merge_engine.py::test_partial_update_sequence_group_retract_and_remove_on_group",
    "aggregation.remove-record-on-delete": "tests/test_merge_engine.py::test_aggregation_remove_record_on_delete",
    "fields.default-aggregate-function": "tests/test_merge_engine.py::test_partial_update_aggregation_in_groups_doc_example",
    "fields.*.aggregate-function": "tests/test_merge_engine.py::test_partial_update_aggregation_in_groups_doc_example",
    "fields.*.ignore-retract": "tests/test_merge_engine.py::test_aggregate_options",
    "fields.*.distinct": "tests/test_merge_engine.py::test_aggregate_options",
    "fields.*.list-agg-delimiter": "tests/test_merge_engine.py::test_aggregate_options",
    "fields.*.nested-key": "tests/test_merge_engine.py::test_random_aggregation",
    "fields.*.count-limit": "tests/test_merge_engine.py::test_random_aggregation",
    "fields.*.ts-field": "tests/test_merge_engine.py::test_merge_map_with_keytime_as_paimons_page_shows_it",
    "fields.*.sequence-group": "tests/test_merge_engine.py::test_partial_update_sequence_group_doc_example",
    "fields.*.default-value": "tests/test_table.py::test_default_values_fill_nulls_and_missing_columns_on_write",
    "file-index.bitmap.columns":
        "tests/test_file_index.py::test_bitmap_indexes_skip_files_and_rewrite_file_index_builds_them",
    "file-index.bitmap.*.version":
        "tests/test_file_index.py::test_bitmap_indexes_skip_files_and_rewrite_file_index_builds_them",
    "file-index.bitmap.*.index-block-size":
        "tests/test_file_index.py::test_bitmap_indexes_skip_files_and_rewrite_file_index_builds_them",
    "file-index.bloom-filter.*.fpp": "tests/test_file_index.py::test_items_and_fpp_size_each_columns_filter",
    "file-index.bloom-filter.*.items": "tests/test_file_index.py::test_items_and_fpp_size_each_columns_filter",
    "file-index.bloom-filter.columns":
        "tests/test_file_index.py::test_a_point_query_opens_only_the_files_that_may_hold_the_value",
    "file-index.read.enabled":
        "tests/test_file_index.py::test_a_point_query_opens_only_the_files_that_may_hold_the_value",
    "file-index.in-manifest-threshold":
        "tests/test_file_index.py::test_a_large_index_is_written_beside_its_file_and_goes_with_it",
    # writing and compaction
    "write-buffer-size": "tests/test_lsm.py::test_write_buffer_flushes_or_spills_when_full",
    "write-buffer-spillable": "tests/test_lsm.py::test_write_buffer_flushes_or_spills_when_full",
    "write-buffer-spill.max-disk-size":
        "tests/test_lsm.py::test_write_buffer_spill_max_disk_size_flushes_once_the_spill_budget_is_used",
    "write-only": "tests/test_lsm.py::test_write_only_writers_never_compact_and_a_compaction_run_does",
    "num-levels": "tests/test_lsm.py::test_num_levels_sets_the_top_level_of_a_full_compaction",
    "num-sorted-run.compaction-trigger": "tests/test_lsm.py::test_writer_compacts_and_never_exceeds_the_stop_trigger",
    "num-sorted-run.stop-trigger": "tests/test_stream_writer.py::test_a_stall_keeps_sorted_runs_at_the_stop_trigger",
    "compaction.max-size-amplification-percent":
        "tests/test_lsm.py::test_compaction_max_size_amplification_percent_decides_a_full_compaction",
    "compaction.size-ratio": "tests/test_lsm.py::test_compaction_size_ratio_decides_which_newest_runs_merge",
    "compaction.optimization-interval": "tests/test_stream_writer.py::test_optimization_interval_runs_full_compactions",
    "compaction.total-size-threshold": "tests/test_stream_writer.py::test_total_size_threshold_keeps_small_buckets_in_one_run",
    "compaction.incremental-size-threshold":
        "tests/test_lsm.py::test_compaction_incremental_size_threshold_forces_a_full_compaction",
    "compaction.min.file-num":
        "tests/test_option_effects.py::test_compaction_min_file_num_decides_when_an_append_bucket_compacts",
    "compaction.delete-ratio-threshold":
        "tests/test_append_delete.py::test_delete_ratio_threshold_decides_when_a_bucket_compacts",
    "full-compaction.delta-commits": "tests/test_lsm.py::test_full_compaction_every_n_delta_commits",
    "commit.max-retries": "tests/test_table.py::test_commit_max_retries_bounds_the_attempts_of_a_commit_that_keeps_losing",
    "lock-acquire-timeout": "tests/test_commit_lock.py::test_the_lock_excludes_other_processes_and_a_timeout_names_its_holder",
    "sink.flush-interval": "tests/test_option_effects.py::test_sink_flush_interval_is_the_default_flush_interval",
    # snapshots, consumers, cleanup
    "snapshot.num-retained.min": "tests/test_maintenance.py::test_num_retained_min_option_protects_old_snapshots",
    "snapshot.num-retained.max": "tests/test_maintenance.py::test_num_retained_max_option_forces_expiry_of_young_snapshots",
    "snapshot.time-retained": "tests/test_maintenance.py::test_time_retained_option_and_older_than_override",
    "snapshot.expire.limit": "tests/test_maintenance.py::test_expire_limit_option_and_max_deletes",
    "snapshot.clean-empty-directories": "tests/test_maintenance.py::test_snapshot_clean_empty_directories",
    "changelog.num-retained.min": "tests/test_options.py::test_changelog_retention_must_equal_the_snapshot_retention",
    "changelog.num-retained.max": "tests/test_options.py::test_changelog_retention_must_equal_the_snapshot_retention",
    "changelog.time-retained": "tests/test_options.py::test_changelog_retention_must_equal_the_snapshot_retention",
    "consumer-id": "tests/test_option_effects.py::test_streaming_read_options_consumer_and_discovery_interval",
    "consumer.expiration-time":
        "tests/test_maintenance.py::test_consumer_expiration_time_releases_snapshots_of_idle_consumers",
    "consumer.mode": _REFUSAL,  # exactly-once only
    "consumer.ignore-progress": "tests/test_option_effects.py::test_streaming_read_options_consumer_and_discovery_interval",
    "orphan-clean.older-than": "tests/test_maintenance.py::test_orphan_clean_older_than_is_the_default_guard",
    # partitions
    "partition.default-name": "tests/test_option_effects.py::test_partition_default_name_names_the_directory_of_null_values",
    "partition.legacy-name": "tests/test_interop_pypaimon.py::test_partition_directories_agree_with_pypaimon",
    "partition.expiration-time": "tests/test_partition_expire.py::test_expire_partitions_drops_the_old_ones_in_one_commit",
    "partition.expiration-check-interval":
        "tests/test_partition_expire.py::test_writers_expire_at_commit_once_per_check_interval",
    "partition.timestamp-formatter":
        "tests/test_partition_expire.py::test_pattern_and_formatter_build_the_time_from_several_fields",
    "partition.timestamp-pattern":
        "tests/test_partition_expire.py::test_pattern_and_formatter_build_the_time_from_several_fields",
    # scans
    "scan.mode": "tests/test_scan_start.py::test_scan_modes",
    "scan.snapshot-id": "tests/test_scan_start.py::test_scan_modes",
    "scan.timestamp-millis": "tests/test_scan_start.py::test_scan_modes",
    "scan.timestamp": "tests/test_scan_start.py::test_timestamp_spellings_of_start_and_range",
    "scan.tag-name": "tests/test_interop_pypaimon.py::test_tags_and_expiration_across_writers",
    "scan.fallback-branch": "tests/test_branches.py::test_a_batch_read_takes_missing_partitions_from_the_fallback_branch",
    "incremental-between": "tests/test_scan_start.py::test_scan_modes",
    "incremental-between-timestamp": "tests/test_scan_start.py::test_timestamp_spellings_of_start_and_range",
    "incremental-between-scan-mode": "tests/test_source_plan.py::test_incremental_delta_reads_the_rows_written_with_their_kinds",
    "schema.*": "tests/flink/test_sql_ddl.py::test_sql_ddl_lasts_and_event_time_windows_work",
    "lookup.cache": _LOOKUP_CACHE,
    "lookup.cache-max-memory-size": _LOOKUP_CACHE,
    "lookup.cache-max-disk-size": _LOOKUP_CACHE,
    "lookup.cache-rows": _LOOKUP_CACHE,
    "continuous.discovery-interval":
        "tests/test_option_effects.py::test_streaming_read_options_consumer_and_discovery_interval",
    "streaming-read-overwrite":
        "tests/test_rescale.py::test_streaming_read_overwrite_reads_an_overwrite_as_retract_and_insert",
    # the Kafka log
    "log.system": "tests/test_log_store.py::test_every_commit_reaches_the_topic_once_with_the_snapshots_offsets",
    "log.consistency": "tests/test_log_store.py::test_eventual_writes_reach_the_log_before_the_commit",
    "log.changelog-mode": "tests/test_log_store.py::test_log_changelog_mode_all_keeps_update_before",
    "log.format": "tests/test_log_store.py::test_bad_log_options_are_refused_by_name",  # debezium-json only
    "log.key.format": "tests/test_log_store.py::test_bad_log_options_are_refused_by_name",  # json only
    "log.retention": "tests/test_log_store.py::test_the_topic_is_made_as_the_log_options_say",
    "log.system.partitions": "tests/test_log_store.py::test_the_topic_is_made_as_the_log_options_say",
    "log.system.replication": "tests/test_log_store.py::test_the_topic_is_made_as_the_log_options_say",
    "partition.mark-done-action":
        "tests/test_procedures_tags.py::test_mark_partition_done_writes_success_files_that_orphan_cleanup_keeps",
    "log.kafka.client": "tests/test_log_store.py::test_every_commit_reaches_the_topic_once_with_the_snapshots_offsets",
    "log.system.auto-register": "tests/test_log_store.py::test_a_missing_topic_or_too_few_partitions_is_named",
    "log.ignore-delete": "tests/test_log_store.py::test_log_ignore_delete_leaves_deletes_out",
    "streaming-read-mode": "tests/test_subscribe.py::test_streaming_read_mode_file_reads_a_log_table_from_its_files",
    "kafka.*": "tests/test_log_store.py::test_kafka_properties_reach_the_clients",
    "table-read.sequence-number.enabled":
        "tests/test_sequence_number.py::test_batch_reads_carry_the_sequence_number_of_each_keys_row",
}


def test_every_honoured_option_has_a_test_that_fails_when_it_is_ignored() -> None:
    """Every key lakelog does not refuse names the test that shows it has an effect (each one was
    checked to fail with its option's code path broken). A new option needs an entry here, or an
    ``unsupported`` reason in the registry."""
    import importlib

    honoured = {o.key for o in ALL_OPTIONS.values() if o.unsupported is None or o.supported_values}
    honoured |= {p.template for p in PATTERN_OPTIONS if p.unsupported is None}
    assert sorted(honoured - set(HONOURED_BY)) == [], "honoured options without a test"
    assert sorted(set(HONOURED_BY) - honoured) == [], "tests listed for keys that are refused or unknown"
    for key, node in HONOURED_BY.items():
        path, name = node.split("::")
        module = importlib.import_module(path[:-3].replace("/", "."))
        assert callable(getattr(module, name, None)), f"{key}: {node} does not exist"
