"""The log store: a table's changes in a Kafka topic as well as in its files (``'log.system' = 'kafka'``).

``codec`` is the record format (Debezium JSON values, JSON keys, lakelog headers); ``kafka`` the
clients, topics and offsets; ``publisher`` writes committed changes in snapshot order, exactly once
(``log.consistency`` = ``transactional``); ``reader`` reads them back, alone or after a snapshot's
files (the hybrid read). This layer imports only the on-disk format; the table layer calls it when
it commits and when it subscribes.
"""
