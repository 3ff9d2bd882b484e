"""lakelog.jobs: runnable jobs. They parse arguments and run graphs that :mod:`lakelog.operators`
builds; nothing in ``operators/`` imports them.

- :mod:`lakelog.jobs.pipeline`: the main job (a changelog into a partitioned primary-key table, a
  streaming read of it, a batch check), on an embedded MiniCluster.
- :mod:`lakelog.jobs.sql`: Flink SQL scripts over lakelog tables (``lakelog sql -f``, also
  ``flink run -py jobs/sql.py``).
- :mod:`lakelog.jobs.compact`: the dedicated compaction job (``lakelog compact --job|--streaming``).
- :mod:`lakelog.jobs.cli`: the ``lakelog`` command.
- :mod:`lakelog.jobs.demo`: the table API without Flink.

Their Flink settings come from ``flink-conf/`` through :mod:`lakelog.operators.flink_env`.
"""
