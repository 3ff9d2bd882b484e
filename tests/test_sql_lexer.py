"""The SQL wrapper's tokenizer and table-reference rewrite, without Flink."""

from __future__ import annotations

from typing import Optional

import pytest

from lakelog.connector.errors import OptionError
from lakelog.operators.sql.lexer import (
    hint_options,
    leading_words,
    name_parts,
    split_statements,
    string_pairs,
    tokenize,
    with_options,
)
from lakelog.operators.sql.rewrite import rewrite_table_refs


def test_tokens_cover_the_text_and_keep_quotes_whole() -> None:
    sql = "SELECT `a b`, 'x;y', \"q;\" /*+ OPTIONS('k'='v') */ -- c;\nFROM t;"
    toks = list(tokenize(sql))
    assert "".join(t.text for t in toks) == sql
    kinds = {t.text: t.kind for t in toks}
    assert kinds["`a b`"] == "qid" and kinds["'x;y'"] == "str" and kinds['"q;"'] == "str"
    assert kinds["/*+ OPTIONS('k'='v') */"] == "hint" and kinds["-- c;"] == "comment"
    assert [t.name for t in toks if t.kind == "qid"] == ["a b"]
    # an unterminated quote is a symbol of its own
    assert [t.kind for t in tokenize("a 'b")] == ["id", "ws", "sym", "id"]


def test_statements_words_and_options() -> None:
    script = "SET 'a' = 'b;c';\n-- a comment;\nSELECT 1; /* x */ ;INSERT INTO t VALUES ('v;');"
    assert split_statements(script) == ["SET 'a' = 'b;c'", "-- a comment;\nSELECT 1", "INSERT INTO t VALUES ('v;')"]
    assert leading_words("  create TEMPORARY table x (a INT)") == ["CREATE", "TEMPORARY", "TABLE", "X"]
    assert name_parts("cat.`my db`.t") == ["cat", "my db", "t"]
    assert string_pairs("'k' = 'it''s', 'n' = '1'") == {"k": "it's", "n": "1"}
    with pytest.raises(OptionError, match="pairs"):
        string_pairs("'k' = 'v', 'dangling'")
    assert with_options("CREATE TABLE t (a INT) WITH ('connector' = 'lakelog')") == {"connector": "lakelog"}
    assert hint_options("/*+ OPTIONS('scan.mode'='latest') */") == {"scan.mode": "latest"}
    assert hint_options(None) == {} and hint_options("/*+ BROADCAST(t) */") == {}


def test_table_references_become_views() -> None:
    seen: list[tuple[list[str], Optional[str]]] = []

    def view_for(parts: list[str], hint: Optional[str], at: Optional[str], where: list[str]) -> Optional[str]:
        seen.append((parts, hint))
        return f"`v_{parts[-1]}`" if parts[-1].startswith("lk") else None

    sql = (
        "SELECT a.x, b.y FROM lk1 /*+ OPTIONS('k'='v') */ AS a, db.lk2 JOIN other b ON a.x = b.x "
        "WHERE x IN (SELECT x FROM `lk3`) -- FROM lk4\n"
    )
    out = rewrite_table_refs(sql, view_for)
    assert out == (
        "SELECT a.x, b.y FROM `v_lk1` AS a, `v_lk2` AS `lk2` JOIN other b ON a.x = b.x "
        "WHERE x IN (SELECT x FROM `v_lk3` AS `lk3`) -- FROM lk4\n"
    )
    assert seen == [
        (["lk1"], "/*+ OPTIONS('k'='v') */"),
        (["db", "lk2"], None),
        (["other"], None),
        (["lk3"], None),
    ]
    # lateral tables and unnests are no table references
    assert rewrite_table_refs("SELECT * FROM t, LATERAL TABLE(f(t.k)) AS d", view_for) == (
        "SELECT * FROM t, LATERAL TABLE(f(t.k)) AS d"
    )


def _conjuncts(sql: str) -> dict[str, list[str]]:
    """The WHERE conjuncts rewrite_table_refs hands each table of ``sql``."""
    seen: dict[str, list[str]] = {}

    def view_for(parts: list[str], hint: Optional[str], at: Optional[str], where: list[str]) -> str:
        seen[".".join(parts)] = where
        return "`v`"

    rewrite_table_refs(sql, view_for)
    return seen


def test_a_table_alone_in_its_query_block_gets_the_conjuncts_of_its_where() -> None:
    q = "SELECT * FROM t WHERE k>=1 AND t.name = 'a' AND (x = 1 OR y BETWEEN 1 AND 3) GROUP BY k"
    assert _conjuncts(q) == {"t": ["k>=1", "name = 'a'", "(x = 1 OR y BETWEEN 1 AND 3)"]}
    # an alias qualifies columns (the table's own name no longer does); comments and hints are no text
    q = (
        "SELECT * FROM db.t /*+ OPTIONS('a'='b') */ AS u WHERE /* c */ u.k = -1e3 -- x\n"
        " AND NOT `u`.v = 'it''s' AND t.k = 2 ORDER BY k"
    )
    assert _conjuncts(q) == {"db.t": ["k = -1e3", "NOT v = 'it''s'", "t.k = 2"]}
    # each block its own WHERE: a subquery in FROM, UNION, a subquery in WHERE (not a conjunct)
    q = (
        "SELECT * FROM (SELECT * FROM t WHERE k = 1) x WHERE x.k = 2 UNION ALL "
        "SELECT * FROM z WHERE q = 1 AND k IN (SELECT k FROM s WHERE s.z=3) LIMIT 3"
    )
    assert _conjuncts(q) == {"t": ["k = 1"], "z": ["q = 1"], "s": ["z=3"]}
    # several tables, a table function's argument or MATCH_RECOGNIZE: the WHERE is not one table's
    for q in (
        "SELECT * FROM a JOIN b ON a.k = b.k WHERE a.k = 1",
        "SELECT * FROM a, b WHERE a.k = 1",
        "SELECT * FROM a, LATERAL TABLE(f(a.k)) AS d WHERE k = 1",
        "SELECT * FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' MINUTES)) WHERE k = 1",
        "SELECT * FROM a MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.k AS x PATTERN (A) "
        "DEFINE A AS A.k > 0) m WHERE x = 1",
    ):
        assert all(not w for w in _conjuncts(q).values()), q
    assert _conjuncts("SELECT * FROM t") == {"t": []}


def test_pushed_filter_takes_only_what_compares_as_flink_does() -> None:
    from lakelog.connector.format.types import DataField, DataType
    from lakelog.operators.sql.pushdown import pushed_filter

    fields = [
        DataField(0, "k", DataType("BIGINT")),
        DataField(1, "name", DataType("VARCHAR", length=2147483647)),
        DataField(2, "c", DataType("CHAR", length=4)),
        DataField(3, "f", DataType("DOUBLE")),
        DataField(4, "p", DataType("DECIMAL", precision=5, scale=2)),
        DataField(5, "d", DataType("DATE")),
        DataField(6, "b", DataType("BOOLEAN")),
        DataField(7, "ts", DataType("TIMESTAMP", precision=3)),
        DataField(8, "t8", DataType("TINYINT")),
    ]
    taken = [
        "k = 1", "k IN (1, 2)", "k BETWEEN 1 AND 3", "NOT k = 1.0", "name = 'x'", "name <> 'it''s'",
        "(k = 1 OR name IS NULL)", "p > 1", "p = 1.05", "d = '2024-01-01'", "b = TRUE", "f IS NOT NULL",
        "`k` >= -5",
    ]  # fmt: skip
    refused = [
        "k = '1'", "name = 1", "c = 'ab'", "f = 0.1", "f > 1", "ts = '2024-01-01 00:00:00'",
        "p = 1.054", "t8 = 300", "k = 1.5", "k + 1 = 2", "x.k = 1", "k = k", "upper(name) = 'X'",
        "name LIKE 'a%'", "k IN (1, NULL)", "zz = 1", "name = \"x\"", "(k = 1 OR f = 0.5)",
    ]  # fmt: skip
    for c in taken:
        assert pushed_filter([c], fields) == f"({c})", c
    for c in refused:
        assert pushed_filter([c], fields) is None, c
    assert pushed_filter(["k = 1", "f = 0.1", "name = 'a'"], fields) == "(k = 1) AND (name = 'a')"
    assert pushed_filter([], fields) is None


def test_without_options_leaves_the_other_options_and_the_text_before_them() -> None:
    from lakelog.operators.sql.lexer import with_options, without_options

    stmt = "CREATE TABLE t (a INT) WITH ('connector' = 'lakelog', 's3.secret-key' = 'x''y', 'note' = 'it''s')"
    out = without_options(stmt, {"s3.secret-key"})
    assert out.startswith("CREATE TABLE t (a INT) WITH (")
    assert with_options(out) == {"connector": "lakelog", "note": "it's"}
    assert without_options("CREATE TABLE t (a INT)", {"x"}) == "CREATE TABLE t (a INT)"
