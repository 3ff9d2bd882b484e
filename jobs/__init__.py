"""lakelog.jobs: runnable PyFlink jobs.

- :mod:`lakelog.jobs.pipeline`: the main job (a changelog into a partitioned primary-key table, a
  streaming read of it, a batch check), on an embedded MiniCluster.
- :mod:`lakelog.jobs.sql`: Flink SQL scripts over lakelog tables (``lakelog sql -f``, also
  ``flink run -py jobs/sql.py``).
- :mod:`lakelog.jobs.flink_env`: the Flink configuration (``flink-conf/``) and execution environments.
- :mod:`lakelog.jobs.demo`: the same table API without Flink.
"""
