"""The LSM merge tree of primary-key buckets (and the simpler file list of append buckets).

Key-value rows sorted and merged in Arrow (``kv``), levels and sorted runs with Paimon's universal
compaction picker (``levels``), the bounded-memory merge of sorted runs (``sort_merge``), reading a
bucket's files with merge-on-read (``split``, ``split_read``), the writer of one bucket
(``bucket_writer``), compaction of one bucket (``compaction``), changelog producers
(``changelog``, ``diff``) and the merge engines with their aggregate functions (``merge``). This
layer reads and writes files through the format layer; it never publishes snapshots and never
imports the table layer.
"""
