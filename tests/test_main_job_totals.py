"""The main job's expected totals (``lakelog.jobs.pipeline.expected_totals``), without Flink; the job
itself runs in tests/flink/test_main_job.py."""

from __future__ import annotations

from decimal import Decimal

from lakelog.jobs.pipeline import expected_totals


def test_expected_totals_formula() -> None:
    exp = expected_totals(42)
    assert len(exp) == 21 and sum(v[0] for v in exp.values()) == 42
    # dt = 2024-06-0{seq % 3 + 1}, customer = c{seq % 7}: orders 21 and 42 fall on (2024-06-01, c0)
    cents = sum((s * 37) % 10000 for s in (21, 42))
    assert exp[("2024-06-01", "c0")] == (2, Decimal(cents) / 100, 42)
