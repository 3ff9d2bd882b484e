"""The README's main job (``python -m lakelog.jobs.pipeline``) in a subprocess, as a user runs it."""

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
    orders = 2000
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "lakelog.jobs.pipeline", "--warehouse", str(wh), "--orders", str(orders)],
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
    reads = [line for line in out.splitlines() if "] read " in line]
    assert reads, out
    counts = {
        k: sum(int(n) for n in re.findall(rf"{re.escape(k)}\s+(\d+)", "\n".join(reads)))
        for k in ("+I", "-U", "+U")
    }
    # every customer arrived (+I), and the last line shows the final totals
    assert counts["+I"] >= 21, out
    assert "-> 21 customers" in reads[-1] and f"{orders:>5} orders" in reads[-1], out
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
    # 10 s of orders and a checkpoint every 2 s: the sink committed several times (not only at end
    # of input), and the read followed the commits: later ones update keys it knows
    snaps = t.snapshots()
    assert len(snaps) >= 2, [(s.id, s.commit_kind) for s in snaps]
    assert counts["-U"] == counts["+U"] > 0, out
    print(f"main job: {elapsed:.1f} s, {len(snaps)} snapshots")
