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

    def view_for(parts: list[str], hint: Optional[str], at: Optional[str] = None) -> Optional[str]:
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


def test_without_options_leaves_the_other_options_and_the_text_before_them() -> None:
    from lakelog.operators.sql.lexer import with_options, without_options

    stmt = "CREATE TABLE t (a INT) WITH ('connector' = 'lakelog', 's3.secret-key' = 'x''y', 'note' = 'it''s')"
    out = without_options(stmt, {"s3.secret-key"})
    assert out.startswith("CREATE TABLE t (a INT) WITH (")
    assert with_options(out) == {"connector": "lakelog", "note": "it's"}
    assert without_options("CREATE TABLE t (a INT)", {"x"}) == "CREATE TABLE t (a INT)"
