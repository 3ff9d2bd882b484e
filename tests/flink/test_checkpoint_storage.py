"""Checkpoints of the shipped configuration hold a fast source's state (issue 14).

A Flink SQL ``datagen`` source with ``sequence`` fields keeps every value it has still to emit in
its checkpointed state, 8 bytes per value and field. When ``flink-conf/`` kept checkpoints in the
JobManager's memory, which refuses any state handle over 5 MiB, such an ``INSERT`` failed each
checkpoint taken while the source still held more than that, restarted from scratch and gave up
("Exceeded checkpoint tolerable failure threshold"): 3 of 3 runs of the issue's 2M-row job here.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pyarrow.compute as pc
import pytest

import lakelog
from tests.flink.conftest import REPO_CONF_DIR

pytest.importorskip("pyflink")

ROWS = 200_000
FIELDS = 16  # sequence fields: the source starts with ROWS * FIELDS * 8 bytes of state, 25.6 MB
# With parallelism 2 each source subtask starts with 12.8 MB and gets below 5 MiB after 59k of its
# 100k rows, 3 s at this cap or later: every run takes a checkpoint meanwhile (2 s interval). The cap
# is above what the sink writes on two cores (about 30k rows/s), so it binds only on faster machines.
ROWS_PER_SECOND = 40_000
MEMORY_STATE_LIMIT = 5 * 1024 * 1024  # Flink's JobManagerCheckpointStorage refuses larger handles


class _LargestFile(threading.Thread):
    """Records the size of the largest state file (not a checkpoint's ``_metadata``) that appears
    under ``folder`` while it runs."""

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.largest = folder, 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            for root, _dirs, files in os.walk(self.folder):
                for name in (n for n in files if "_metadata" not in n):
                    with contextlib.suppress(OSError):  # a subsumed checkpoint was deleted meanwhile
                        self.largest = max(self.largest, os.path.getsize(os.path.join(root, name)))


def test_fast_insert_whose_source_state_is_megabytes(tmp_path: Path) -> None:
    from lakelog.operators.flink_env import load_settings, local_checkpoint_dir
    from lakelog.operators.sql import LakelogSql

    seq = [f"c{j}" for j in range(1, FIELDS)]
    fields = ", ".join(f"{c} BIGINT" for c in seq)
    gen_options = ", ".join(
        f"'fields.{c}.kind' = 'sequence', 'fields.{c}.start' = '{j * ROWS + 1}', "
        f"'fields.{c}.end' = '{(j + 1) * ROWS}'"
        for j, c in enumerate(["id", *seq])
    )
    path = tmp_path / "wh" / "db.db" / "t"
    script = f"""
        CREATE TABLE gen (id BIGINT NOT NULL, {fields}) WITH (
          'connector' = 'datagen', 'rows-per-second' = '{ROWS_PER_SECOND}', {gen_options});
        CREATE TABLE t (id BIGINT NOT NULL, {fields}, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'lakelog', 'path' = '{path}', 'bucket' = '4');
        INSERT INTO t SELECT * FROM gen;
    """
    # the shipped configuration as it is: streaming, parallelism 2, a checkpoint every 2 s
    settings = load_settings(REPO_CONF_DIR)
    assert (settings["parallelism.default"], settings["execution.checkpointing.interval"]) == ("2", "2s")
    watcher = _LargestFile(Path(local_checkpoint_dir()[len("file://") :]))
    watcher.start()
    try:
        LakelogSql(config=settings).run_script(script, print_results=False)
    finally:
        watcher.stop.set()
        watcher.join()

    # the run checkpointed more source state than the JobManager's memory would have taken
    print(f"largest checkpoint state file: {watcher.largest / 2**20:.1f} MiB")
    assert watcher.largest > MEMORY_STATE_LIMIT, watcher.largest
    got = lakelog.Catalog(str(tmp_path / "wh")).get_table("db.t").to_arrow()
    ids = got.column("id")
    assert got.num_rows == ROWS and pc.count_distinct(ids).as_py() == ROWS
    assert (pc.min(ids).as_py(), pc.max(ids).as_py()) == (1, ROWS)
    for j, c in enumerate(seq, start=1):  # each row whole: its fields come from one generator step
        assert pc.all(pc.equal(pc.subtract(got.column(c), ids), j * ROWS)).as_py(), c
