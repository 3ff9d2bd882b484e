"""The on-disk format: everything a Paimon table's files hold and how they are named, with no
knowledge of how rows are merged.

Data types and their Arrow mapping (``types``), Paimon's binary rows (``binary_row``), Avro
container files (``avro``), manifests (records, their Avro codec, the manifest and manifest-list
files), snapshots, tags and consumers, table schemas (the schema itself, its validation, schema
changes, read-side evolution, the schema files), partition directories, fixed-bucket assignment,
Parquet data files, the key-value column layout of primary-key data files, commit messages, table
options, local file I/O, and :class:`~lakelog.connector.format.store.TableStore`, which ties them
together for one table directory. Modules here import only each other and ``lakelog.connector.errors``.
"""
