"""What a Flink SQL statement is, before anyone runs it: its kind and the object it names.

The runner decides from this which statements lakelog handles itself (those that touch a lakelog
table or catalog), which it refuses, and which go to Flink as they are. Only the leading keywords
and the object name are read here, on the tokens of :mod:`.lexer`; Flink parses the rest. No
pyflink here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakelog.operators.sql.lexer import Token, read_name, significant, strip_comments

__all__ = ["Statement", "classify", "QUERY_WORDS"]

QUERY_WORDS = ("SELECT", "WITH", "VALUES", "(", "TABLE")
_OBJECTS = ("CATALOG", "DATABASE", "TABLE", "VIEW", "FUNCTION", "MODEL")


@dataclass(frozen=True)
class Statement:
    """One statement: ``kind`` such as ``"CREATE TABLE"``, ``"ALTER TABLE"``, ``"QUERY"``,
    ``"INSERT"``, ``"SHOW TABLES"``; ``target`` the name parts of the object it is about (empty when
    none); ``flags`` further words that matter (``TEMPORARY``, ``IF EXISTS``, ``IF NOT EXISTS``,
    ``OVERWRITE``, ``CASCADE``, ``AS``, ``LIKE``, ``OR REPLACE``, ``EXTENDED``)."""

    kind: str
    text: str
    target: tuple[str, ...] = ()
    flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def temporary(self) -> bool:
        return "TEMPORARY" in self.flags

    @property
    def head(self) -> str:
        """The statement's first words, for messages (``ALTER TABLE shop.orders``, ``SELECT``)."""
        if self.kind == "QUERY":
            first = significant(self.text)[:1]
            return first[0].text.upper() if first else "QUERY"
        name = ".".join(self.target)
        return f"{self.kind} {name}".strip()


def _words(toks: list[Token]) -> list[str]:
    return [t.word or t.text for t in toks]


def _skip(words: list[str], i: int, *seq: str) -> tuple[int, bool]:
    if words[i : i + len(seq)] == list(seq):
        return i + len(seq), True
    return i, False


def _named(kind: str, text: str, toks: list[Token], i: int, flags: set[str]) -> Statement:
    """``kind`` with the name at ``i`` (after IF [NOT] EXISTS)."""
    words = _words(toks)
    i, found = _skip(words, i, "IF", "NOT", "EXISTS")
    if found:
        flags.add("IF NOT EXISTS")
    i, found = _skip(words, i, "IF", "EXISTS")
    if found:
        flags.add("IF EXISTS")
    parts, j = read_name(toks, i)
    tail = words[j:]
    if kind in ("CREATE TABLE",) and parts:
        depth = 0
        for w in tail:
            if w == "(":
                depth += 1
            elif w == ")":
                depth -= 1
            elif depth == 0 and w in ("AS", "LIKE"):
                flags.add(w)
                break
    if kind in ("DROP DATABASE",) and "CASCADE" in tail:
        flags.add("CASCADE")
    return Statement(kind, text, tuple(parts), frozenset(flags))


def classify(stmt: str) -> Statement:
    """The kind and target of ``stmt`` (comments are dropped first)."""
    text = strip_comments(stmt)
    toks = significant(text)
    words = _words(toks)
    if not words:
        return Statement("EMPTY", text)
    first = words[0]
    flags: set[str] = set()
    if first in ("SET", "RESET"):
        return Statement(first, text)
    if first in QUERY_WORDS:
        return Statement("QUERY", text)
    if first == "CREATE":
        i = 1
        i, replace = _skip(words, i, "OR", "REPLACE")
        if replace:
            flags.add("OR REPLACE")
        i, temp = _skip(words, i, "TEMPORARY")
        if temp:
            flags.add("TEMPORARY")
            i, _ = _skip(words, i, "SYSTEM")
        if words[i : i + 2] == ["MATERIALIZED", "TABLE"]:
            return _named("CREATE MATERIALIZED TABLE", text, toks, i + 2, flags)
        obj = words[i] if i < len(words) else ""
        if obj in _OBJECTS:
            st = _named(f"CREATE {obj}", text, toks, i + 1, flags)
            if obj == "TABLE" and "AS" in st.flags:
                kind = "REPLACE TABLE AS" if replace else "CREATE TABLE AS"
                return Statement(kind, text, st.target, st.flags)
            return st
        return Statement("CREATE", text)
    if first == "REPLACE" and words[1:2] == ["TABLE"]:
        return _named("REPLACE TABLE AS", text, toks, 2, flags)
    if first in ("DROP", "ALTER"):
        i = 1
        i, temp = _skip(words, i, "TEMPORARY")
        if temp:
            flags.add("TEMPORARY")
            i, _ = _skip(words, i, "SYSTEM")
        if words[i : i + 2] == ["MATERIALIZED", "TABLE"]:
            return _named(f"{first} MATERIALIZED TABLE", text, toks, i + 2, flags)
        obj = words[i] if i < len(words) else ""
        if obj in _OBJECTS:
            return _named(f"{first} {obj}", text, toks, i + 1, flags)
        return Statement(first, text)
    if first == "USE":
        if words[1:2] == ["CATALOG"]:
            return _named("USE CATALOG", text, toks, 2, flags)
        if words[1:2] == ["MODULES"]:
            return Statement("USE MODULES", text)
        return _named("USE", text, toks, 1, flags)
    if first == "INSERT":
        if words[1:2] == ["OVERWRITE"]:
            flags.add("OVERWRITE")
        return _named("INSERT", text, toks, 2, flags)
    if first == "TRUNCATE":
        return _named("TRUNCATE TABLE", text, toks, 2, flags)
    if first == "DELETE":
        return _named("DELETE", text, toks, 2, flags)
    if first == "UPDATE":
        return _named("UPDATE", text, toks, 1, flags)
    if first == "ANALYZE":
        return _named("ANALYZE TABLE", text, toks, 2, flags)
    if first == "CALL":
        return _named("CALL", text, toks, 1, flags)
    if first in ("DESCRIBE", "DESC"):
        i = 1
        if words[1:2] == ["JOB"]:
            return Statement("DESCRIBE JOB", text)
        i, ext = _skip(words, i, "EXTENDED")
        if ext:
            flags.add("EXTENDED")
        return _named("DESCRIBE", text, toks, i, flags)
    if first == "SHOW":
        return _show(text, toks, words)
    if first == "EXPLAIN":
        return Statement("EXPLAIN", text)
    if first == "BEGIN":
        return Statement("BEGIN STATEMENT SET", text)
    if first == "END":
        return Statement("END", text)
    if first == "EXECUTE":
        return Statement("EXECUTE", text)
    if first in ("LOAD", "UNLOAD") and words[1:2] == ["MODULE"]:
        return Statement(f"{first} MODULE", text)
    if first in ("ADD", "REMOVE") and words[1:2] == ["JAR"]:
        return Statement(f"{first} JAR", text)
    if first in ("QUIT", "EXIT", "HELP", "CLEAR"):
        return Statement(first, text)
    return Statement(" ".join(words[:2]), text)


def _show(text: str, toks: list[Token], words: list[str]) -> Statement:
    w = words[1:]
    if w[:1] == ["CREATE"] and len(w) > 1:
        return _named(f"SHOW CREATE {w[1]}", text, toks, 3, set())
    if w[:1] == ["PARTITIONS"]:
        return _named("SHOW PARTITIONS", text, toks, 2, set())
    if w[:1] == ["COLUMNS"] and w[1:2] in (["FROM"], ["IN"]):
        return _named("SHOW COLUMNS", text, toks, 3, set())
    if w[:1] in (["TABLES"], ["VIEWS"], ["PROCEDURES"], ["DATABASES"], ["FUNCTIONS"], ["MODELS"]):
        kind = f"SHOW {w[0]}"
        if w[1:2] in (["FROM"], ["IN"]):
            return _named(kind, text, toks, 3, set())
        return Statement(kind, text)
    if w[:2] in (["USER", "FUNCTIONS"], ["CURRENT", "CATALOG"], ["CURRENT", "DATABASE"], ["FULL", "MODULES"]):
        return Statement("SHOW " + " ".join(w[:2]), text)
    return Statement("SHOW " + (w[0] if w else ""), text)
