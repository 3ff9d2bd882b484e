"""The README's main job (``python -m lakelog.jobs.pipeline``) in a subprocess, as a user runs it:
with its own Kafka broker, the streaming read through the table's log beside the file-only path."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from lakelog.jobs.pipeline import TABLE, expected_totals  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_main_job(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    # a fresh process must start its own gateway: drop what a gateway-owning pytest process exported
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_GATEWAY")}
    # 15 s of orders and a commit every 2 s: on a loaded machine the first commit can come many
    # seconds after the INSERT starts, and the latencies count only updates made after it
    orders = 3000
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "lakelog.jobs.pipeline", "--warehouse", str(wh), "--orders", str(orders),
         "--checkpoint-interval", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    elapsed = time.monotonic() - started
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-5000:]
    assert "OK:" in out, out
    assert len(out.splitlines()) < 60, out  # a few lines per checkpoint, not one per row
    assert not proc.stderr.strip() or "Traceback" not in proc.stderr, proc.stderr[-3000:]
    with_log = "no Kafka log:" not in out
    if not with_log and os.environ.get("LAKELOG_REQUIRE_KAFKA", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"LAKELOG_REQUIRE_KAFKA is set but the main job ran without its Kafka log:\n{out}")
    paths = ("log", "files") if with_log else ("files",)
    reads = {p: [line for line in out.splitlines() if f"] read {p} " in line] for p in paths}
    counts = {}
    for p, lines in reads.items():
        assert lines, out
        counts[p] = {
            k: sum(int(n) for n in re.findall(rf"{re.escape(k)}\s+(\d+)", "\n".join(lines)))
            for k in ("+I", "-U", "+U")
        }
        # every customer arrived (+I), and the path's last line shows the final totals
        assert counts[p]["+I"] >= 21, out
        assert "-> 21 customers" in lines[-1] and f"{orders:>5} orders" in lines[-1], out
        assert all(re.search(r"latency p50 \d+\.\d\d s, max \d+\.\d\d s", line) for line in lines), out
    # the batch query's totals per day
    for day in ("2024-06-01", "2024-06-02", "2024-06-03"):
        assert re.search(rf"{day}\s+7\s+\d+", out), out
    # the table itself: every key's aggregate (updated ~{orders / 21:.0f} times each) is exact
    t = lakelog.Catalog(str(wh)).get_table(TABLE)
    assert t.primary_keys == ["dt", "customer"] and t.partition_keys == ["dt"]
    got = {
        (r["dt"], r["customer"]): (r["orders"], r["amount"], r["last_order"])
        for r in t.to_arrow().to_pylist()
    }
    assert got == expected_totals(orders)
    snaps = t.snapshots()
    # the job's warm-up row (written and deleted before the INSERT) has snapshots of its own
    insert_snaps = [s for s in snaps if s.commit_user == snaps[-1].commit_user]
    assert len(insert_snaps) < len(snaps), [(s.id, s.commit_user) for s in snaps]
    # 15 s of orders and a checkpoint every 2 s: the sink committed several times (not only at end
    # of input), and the file path followed the commits: later ones update keys it knows
    assert len(insert_snaps) >= 2, [(s.id, s.commit_kind) for s in insert_snaps]
    assert counts["files"]["-U"] == counts["files"]["+U"] > 0, out
    summary = [line for line in out.splitlines() if line.startswith("latency, order made -> visible")]
    assert len(summary) == 1, out
    if with_log:
        # the log: the table's options name it, every commit recorded where the log stood, and the
        # streaming read followed it ahead of the files (the log holds upserts; the SQL read is an
        # upsert table, so Flink derives a -U before every +U)
        assert t.options["log.system"] == "kafka" and t.options["log.consistency"] == "eventual"
        assert all(s.log_offsets for s in snaps), [s.log_offsets for s in snaps]
        assert counts["log"]["+U"] > 0 and counts["log"]["-U"] == counts["log"]["+U"], out
        m = re.search(r"Kafka log \(eventual\) (\d+\.\d+) / .*files only (\d+\.\d+) / ", summary[0])
        assert m is not None, summary
        log_p50, files_p50 = float(m.group(1)), float(m.group(2))
        # commits every 2 s: the files wait for them, the eventual log does not
        assert log_p50 < files_p50, summary
    else:
        assert "log.system" not in t.options
    print(f"main job: {elapsed:.1f} s, {len(insert_snaps)} INSERT snapshots; {summary[0]}")
