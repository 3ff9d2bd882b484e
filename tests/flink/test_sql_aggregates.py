"""Examples of Paimon's aggregation page (issue 24), as written, on a lakelog catalog: ``nested_update``,
``merge_map_with_keytime``, and ``rbm32``, ``rbm64`` and ``hll_sketch`` with the functions the page
asks the user to register taken from ``lakelog.operators.set_functions``. Every statement with such a function runs a job with Python
workers, so the walk is short; the merges themselves are checked without Flink in
tests/test_merge_engine.py and tests/test_sketches.py, and against Paimon's Java code in
tests/test_interop_paimon_java.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog import sketches
from tests.flink.sqlkit import rows, session

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]

FUNCTIONS = "lakelog.operators.set_functions"


def test_the_rbm32_and_hll_sketch_examples_of_paimons_aggregation_page(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    sql = session("batch")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("""
  -- Create a table to store user visit data with bitmap aggregation
  CREATE TABLE user_visits (
    user_id INT PRIMARY KEY NOT ENFORCED,
    visit_bitmap VARBINARY
  ) WITH (
    'merge-engine' = 'aggregation',
    'fields.visit_bitmap.aggregate-function' = 'rbm32'
  )""")
    sql.execute(f"CREATE TEMPORARY FUNCTION TO_BITMAP AS '{FUNCTIONS}.to_bitmap' LANGUAGE PYTHON")
    sql.execute("""
  -- Insert data with bitmap representations
  INSERT INTO user_visits VALUES
    (1, TO_BITMAP(100, 101, 102)),  -- User 1 visited pages 100, 101, 102
    (2, TO_BITMAP(101, 103)),       -- User 2 visited pages 101, 103
    (3, TO_BITMAP(102, 104))        -- User 3 visited pages 102, 104""")
    sql.execute("""
  -- When the same user_id is inserted again, the bitmaps will be merged
  INSERT INTO user_visits VALUES
    (1, TO_BITMAP(103, 105)),       -- User 1 also visited pages 103, 105
    (2, TO_BITMAP(104, 106))        -- User 2 also visited pages 104, 106""")
    visits = lakelog.Catalog(wh).get_table("default.user_visits").to_arrow().to_pylist()
    assert {r["user_id"]: sketches.bitmap32_values(r["visit_bitmap"]).tolist() for r in visits} == {
        1: [100, 101, 102, 103, 105],  # User 1: pages 100, 101, 102, 103, 105
        2: [101, 103, 104, 106],  # User 2: pages 101, 103, 104, 106
        3: [102, 104],  # User 3: pages 102, 104
    }
    # hll_sketch: VISITS holds a user per id; UV_AGG already counts two other users of id 1
    sql.execute("CREATE TABLE VISITS (id INT PRIMARY KEY NOT ENFORCED, user_id STRING)")
    sql.execute("""
  CREATE TABLE UV_AGG (
    id INT PRIMARY KEY NOT ENFORCED,
    uv VARBINARY
  ) WITH (
    'merge-engine' = 'aggregation',
    'fields.uv.aggregate-function' = 'hll_sketch'
  )""")
    cat = lakelog.Catalog(wh)
    v = cat.get_table("default.VISITS")
    v.write(pa.table({"id": [1, 2], "user_id": ["alice", "bob"]}, schema=v.schema))
    uv = cat.get_table("default.UV_AGG")
    uv.write(pa.table({"id": [1], "uv": [sketches.hll_sketch(["carol", "dave", "alice"])]}, schema=uv.schema))
    sql.execute(f"CREATE TEMPORARY FUNCTION HLL_SKETCH AS '{FUNCTIONS}.hll_sketch' LANGUAGE PYTHON")
    sql.execute(f"CREATE TEMPORARY FUNCTION HLL_SKETCH_COUNT AS '{FUNCTIONS}.hll_sketch_count' LANGUAGE PYTHON")
    sql.execute("INSERT INTO UV_AGG SELECT id, HLL_SKETCH(user_id) FROM VISITS")
    # the page writes HLL_SKETCH_COUNT(UV); Flink's identifiers are case-sensitive, so that fails in
    # Flink's validator whatever the catalog ("Column 'UV' not found")
    counts = rows(sql.execute("SELECT id, HLL_SKETCH_COUNT(uv) as uv FROM UV_AGG"))
    assert [(i, round(c)) for i, c in counts] == [(1, 3), (2, 1)]


def test_the_rbm64_example_of_paimons_aggregation_page(tmp_path: Path) -> None:
    """As written, but for the page's Java-style ``1000000001L`` literals, which Flink SQL does not
    parse (``L`` dropped: the UDF takes them as integers either way)."""
    wh = str(tmp_path / "wh")
    sql = session("batch")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("""
  -- Create a table to store large-scale user interaction data
  CREATE TABLE user_interactions (
    session_id BIGINT PRIMARY KEY NOT ENFORCED,
    interaction_bitmap VARBINARY
  ) WITH (
    'merge-engine' = 'aggregation',
    'fields.interaction_bitmap.aggregate-function' = 'rbm64'
  )""")
    sql.execute(f"CREATE TEMPORARY FUNCTION TO_BITMAP64 AS '{FUNCTIONS}.to_bitmap64' LANGUAGE PYTHON")
    sql.execute("""
  -- Insert data with 64-bit bitmap representations
  INSERT INTO user_interactions VALUES
    (1001, TO_BITMAP64(1000000001, 1000000002, 1000000003)),
    (1002, TO_BITMAP64(1000000002, 1000000004)),
    (1003, TO_BITMAP64(1000000003, 1000000005))""")
    sql.execute("""
  -- Merge additional interactions
  INSERT INTO user_interactions VALUES
    (1001, TO_BITMAP64(1000000004, 1000000006)),
    (1002, TO_BITMAP64(1000000005, 1000000007))""")
    got = lakelog.Catalog(wh).get_table("default.user_interactions").to_arrow().to_pylist()
    assert {r["session_id"]: sketches.bitmap64_values(r["interaction_bitmap"]).tolist() for r in got} == {
        1001: [1000000001, 1000000002, 1000000003, 1000000004, 1000000006],
        1002: [1000000002, 1000000004, 1000000005, 1000000007],
        1003: [1000000003, 1000000005],
    }
    sql.execute(f"CREATE TEMPORARY FUNCTION BITMAP64_COUNT AS '{FUNCTIONS}.bitmap64_count' LANGUAGE PYTHON")
    sql.execute(f"CREATE TEMPORARY FUNCTION BITMAP64_CONTAINS AS '{FUNCTIONS}.bitmap64_contains' LANGUAGE PYTHON")
    counts = rows(sql.execute("SELECT session_id, BITMAP64_COUNT(interaction_bitmap), "
                              "BITMAP64_CONTAINS(interaction_bitmap, CAST(1000000007 AS BIGINT)) "
                              "FROM user_interactions"))
    assert counts == [(1001, 5, False), (1002, 4, True), (1003, 2, False)]


def test_the_nested_update_example_of_paimons_aggregation_page(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    sql = session("batch")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("""
  -- orders table
  CREATE TABLE orders (
    order_id BIGINT PRIMARY KEY NOT ENFORCED,
    user_name STRING,
    address STRING
  )""")
    sql.execute("""
  -- sub orders that have the same order_id
  -- belongs to the same order
  CREATE TABLE sub_orders (
    order_id BIGINT,
    sub_order_id INT,
    product_name STRING,
    price BIGINT,
    PRIMARY KEY (order_id, sub_order_id) NOT ENFORCED
  )""")
    sql.execute("""
  -- wide table
  CREATE TABLE order_wide (
    order_id BIGINT PRIMARY KEY NOT ENFORCED,
    user_name STRING,
    address STRING,
    sub_orders ARRAY<ROW<sub_order_id BIGINT, product_name STRING, price BIGINT>>
  ) WITH (
    'merge-engine' = 'aggregation',
    'fields.sub_orders.aggregate-function' = 'nested_update',
    'fields.sub_orders.nested-key' = 'sub_order_id'
  )""")
    cat = lakelog.Catalog(wh)  # the two sources are written in Python: one job fewer
    o = cat.get_table("default.orders")
    o.write(pa.table({"order_id": [1, 2], "user_name": ["ann", "bob"], "address": ["a st", "b st"]}, schema=o.schema))
    s = cat.get_table("default.sub_orders")
    s.write(pa.table({"order_id": [1, 1, 2], "sub_order_id": [1, 2, 1], "product_name": ["pen", "ink", "cup"],
                      "price": [3, 5, 7]}, schema=s.schema))  # fmt: skip
    sql.execute("""
  -- widen
  INSERT INTO order_wide

  SELECT
    order_id,
    user_name,
    address,
    CAST (NULL AS ARRAY<ROW<sub_order_id BIGINT, product_name STRING, price BIGINT>>)
  FROM orders

  UNION ALL

  SELECT
    order_id,
    CAST (NULL AS STRING),
    CAST (NULL AS STRING),
    ARRAY[ROW(sub_order_id, product_name, price)]
  FROM sub_orders""")
    got = rows(sql.execute("""
  -- query using UNNEST
  SELECT order_id, user_name, address, sub_order_id, product_name, price
  FROM order_wide, UNNEST(sub_orders) AS so(sub_order_id, product_name, price)"""))
    assert got == sorted([(1, "ann", "a st", 1, "pen", 3), (1, "ann", "a st", 2, "ink", 5),
                          (2, "bob", "b st", 1, "cup", 7)], key=repr)  # fmt: skip


def test_the_merge_map_with_keytime_example_of_paimons_aggregation_page(tmp_path: Path) -> None:
    """The page's table as written; its three records as one batch ``INSERT`` each. Paimon compares
    the timestamps as strings, so its own example's "50" is newer than "100" (Paimon 1.4's Java code
    agrees: tests/test_interop_paimon_java.py); a fourth record with "300" shows the newest winning."""
    wh = str(tmp_path / "wh")
    sql = session("batch")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("""
  CREATE TABLE my_table (
      biz_order_id STRING,
      key_value_map MAP<STRING, ROW<`value` STRING, `ts` STRING>>,
      PRIMARY KEY (biz_order_id) NOT ENFORCED
  ) WITH (
      'merge-engine' = 'aggregation',
      'fields.key_value_map.aggregate-function' = 'merge_map_with_keytime',
      'fields.key_value_map.ts-field' = 'ts'
  )""")
    for entries in ("'product_name', ROW('iPhone', '100'), 'color', ROW('Black', '100')",
                    "'product_name', ROW('iPad', '200'), 'price', ROW('999', '200')",
                    "'color', ROW('White', '50')",
                    "'price', ROW('899', '300'), 'color', ROW('Red', '0')"):
        sql.execute(f"INSERT INTO my_table VALUES ('1', MAP[{entries}])")
    [row] = lakelog.Catalog(wh).get_table("default.my_table").to_arrow().to_pylist()
    assert dict(row["key_value_map"]) == {
        "product_name": {"value": "iPad", "ts": "200"},
        "color": {"value": "White", "ts": "50"},
        "price": {"value": "899", "ts": "300"},
    }
    assert rows(sql.execute("SELECT key_value_map['price'].`value` FROM my_table")) == [("899",)]
