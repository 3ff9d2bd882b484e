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


def test_freshness_times_every_update_on_every_path() -> None:
    """The main job's latency: an update is visible on a path from the first row of that path, for
    its key, that reaches its order, whichever path made the update known."""
    from lakelog.jobs.pipeline import Freshness

    f = Freshness(("log", "files"))
    key = ("2024-06-01", "c1")
    # the log delivers every update the aggregation emits, half a second after its order was made
    assert f.add("log", key, 10, made=100.0, arrived=100.5) == [0.5]
    assert f.add("log", key, 20, made=101.0, arrived=101.5) == [0.5]
    # a commit shows only the key's newest order: both updates become visible on the file path now
    assert sorted(f.add("files", key, 20, made=101.0, arrived=103.0)) == [2.0, 3.0]
    assert sorted(f.latencies("files")) == [2.0, 3.0] and f.latencies("log") == [0.5, 0.5]
    # updates made before every path had delivered (t = 103) are start-up, not steady state
    assert f.steady("files") == [] and f.steady("log") == []
    f.add("log", key, 30, made=104.0, arrived=104.4)
    assert f.latencies("files", made_after=103.0) == []  # not visible on the file path yet
    f.add("files", key, 40, made=105.0, arrived=106.0)  # its commit covers order 30 too
    assert sorted(f.steady("files")) == [1.0, 2.0]
    assert [round(x, 6) for x in f.steady("log")] == [0.4]  # order 40 never came through the log here
