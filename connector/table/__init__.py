"""The table layer: what users and the Flink operators call.

The catalog (``catalog``) opens tables (``table``); a table writes through ``write`` (rows to
buckets, one LSM writer per bucket) and publishes snapshots through ``commit``; it plans reads in
``scan`` and reads changes between snapshots in ``changes`` (incremental reads); ``compaction``
compacts and commits tables (or chosen partitions); ``maintenance`` expires snapshots (after each
commit, too) and removes orphan files.
Input conversion from Arrow and pandas lives in ``arrow_input``.
"""
