"""Where a catalog registers its names: the metastores behind :class:`lakelog.Catalog`.

A catalog keeps its tables' schemas and snapshots in the warehouse, as Paimon lays them out
(``<warehouse>/<db>.db/<table>/schema/...``). Which databases and tables exist is the metastore's
business, behind one interface (:class:`~lakelog.connector.catalog.base.Metastore`):

* ``filesystem`` (:mod:`.filesystem`, the default): the names are the warehouse's directories.
* ``jdbc`` (:mod:`.jdbc`): the names are rows in Paimon's JDBC catalog tables, in SQLite or
  PostgreSQL, shared with Paimon's own ``JdbcCatalog``; with ``lock.enabled`` the database also
  holds the tables' commit locks (:mod:`.jdbc_lock`).

:func:`open_metastore` picks one from the catalog options (``metastore``).
"""

from __future__ import annotations

from lakelog.connector.catalog.base import Metastore, WarehouseLayout, open_metastore

__all__ = ["Metastore", "WarehouseLayout", "open_metastore"]
