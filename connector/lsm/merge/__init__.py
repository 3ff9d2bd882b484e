"""Merge engines of primary-key tables: deduplicate, first-row, partial-update and aggregation.

``engine`` picks and validates the table's engine, ``functions`` holds the four merge functions,
``aggregators`` the aggregate functions of the aggregation and partial-update engines, and
``events`` the per-key row events and reductions they share. All are vectorised over Arrow.
"""
