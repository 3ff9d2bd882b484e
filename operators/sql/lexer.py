"""The one tokenizer of lakelog's Flink SQL wrapper, and the small parses built on it.

Flink parses the statements; lakelog only needs to find statement ends, leading keywords, table
names with their hints, ``'key' = 'value'`` option lists and lookup joins, without being fooled
by quotes or comments. Tokens keep their offsets, so rewrites edit the original text and leave
everything else (white space, comments, formatting) as it was. No pyflink here.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Optional

from lakelog.connector.errors import OptionError
from lakelog.operators.sql.table_ddl import quote_str

__all__ = [
    "Token",
    "tokenize",
    "significant",
    "split_statements",
    "leading_words",
    "unquote",
    "name_parts",
    "string_pairs",
    "with_options",
    "hint_options",
    "lookup_hints",
    "drop_lookup_hints",
    "strip_comments",
    "read_name",
    "matching_paren",
    "split_commas",
]


@dataclass(frozen=True)
class Token:
    """One token: ``kind`` is 'id', 'qid' (backticked identifier), 'str' (single- or double-quoted),
    'num', 'hint' (``/*+ ... */``), 'comment', 'ws' or 'sym' (any other character); ``start`` and
    ``end`` are offsets into the text."""

    kind: str
    text: str
    start: int
    end: int

    @property
    def word(self) -> str:
        """The upper-cased keyword or plain identifier; "" for any other token."""
        return self.text.upper() if self.kind == "id" else ""

    @property
    def name(self) -> str:
        """The identifier's name (a backticked one unquoted)."""
        return unquote(self.text) if self.kind == "qid" else self.text

    @property
    def is_name(self) -> bool:
        return self.kind in ("id", "qid")


_TOKEN = re.compile(
    r"(?P<ws>\s+)|(?P<hint>/\*\+.*?\*/)|(?P<comment>/\*.*?\*/|--[^\n]*)|(?P<str>'(?:[^']|'')*')"
    r"|(?P<dq>\"(?:[^\"]|\"\")*\")|(?P<qid>`(?:[^`]|``)*`)|(?P<id>[A-Za-z_][\w$]*)|(?P<num>\d+(?:\.\d*)?)"
    r"|(?P<sym>.)",
    re.S,
)


def tokenize(text: str) -> Iterator[Token]:
    """Every token of ``text``, white space and comments included (their texts join to ``text``).
    The quote that opens an unterminated string is a 'sym' token of its own."""
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "sym"
        yield Token("str" if kind == "dq" else kind, m.group(), m.start(), m.end())


def significant(text: str) -> list[Token]:
    """The tokens of ``text`` without white space and comments."""
    return [t for t in tokenize(text) if t.kind not in ("ws", "comment")]


def split_statements(text: str) -> list[str]:
    """Statements of a script, split on ``;`` outside quotes, identifiers and comments."""
    out: list[str] = []
    start = 0
    for tok in tokenize(text):
        if tok.kind == "sym" and tok.text == ";":
            out.append(text[start : tok.start])
            start = tok.end
    out.append(text[start:])
    return [s.strip() for s in out if significant(s)]


def strip_comments(stmt: str) -> str:
    """``stmt`` without its comments (each replaced by one space; hints stay), trimmed."""
    return "".join(" " if t.kind == "comment" else t.text for t in tokenize(stmt)).strip()


def read_name(toks: list[Token], i: int) -> tuple[list[str], int]:
    """The dotted name starting at significant token ``i`` (``cat.db.t``, backticks allowed):
    (its parts, the index after it); ([], i) when no name starts there."""
    if i >= len(toks) or not toks[i].is_name:
        return [], i
    parts = [toks[i].name]
    j = i + 1
    while j + 1 < len(toks) and toks[j].text == "." and toks[j + 1].is_name:
        parts.append(toks[j + 1].name)
        j += 2
    return parts, j


def matching_paren(toks: list[Token], i: int) -> int:
    """The index of the ``)`` closing the ``(`` at significant token ``i`` (len(toks) if none)."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text == "(":
            depth += 1
        elif toks[j].text == ")":
            depth -= 1
            if depth == 0:
                return j
    return len(toks)


def split_commas(toks: list[Token]) -> Iterator[list[Token]]:
    """The items of a comma-separated list of significant tokens, split at the commas outside
    parentheses and brackets; an empty item between two commas comes as [], a trailing one not."""
    item: list[Token] = []
    depth = 0
    for t in toks:
        depth += t.text in ("(", "[")
        depth -= t.text in (")", "]")
        if t.text == "," and depth == 0:
            yield item
            item = []
        else:
            item.append(t)
    if item:
        yield item


def leading_words(stmt: str, n: int = 4) -> list[str]:
    """The first ``n`` keywords or plain identifiers of ``stmt``, upper-cased."""
    return [t.word for t in tokenize(stmt) if t.kind == "id"][:n]


def unquote(text: str) -> str:
    """A backticked identifier's name; any other text as it is."""
    if text.startswith("`"):
        return text[1:-1].replace("``", "`")
    return text


def name_parts(text: str) -> list[str]:
    """The names of a dotted object name (``cat.`my db`.t`` -> ``['cat', 'my db', 't']``)."""
    return [t.name for t in tokenize(text) if t.is_name]


def string_pairs(text: str) -> dict[str, str]:
    """``'k' = 'v', 'k2' = 'v2'`` -> ``{'k': 'v', 'k2': 'v2'}``."""
    strs = [t.text for t in tokenize(text) if t.kind == "str"]
    if len(strs) % 2:
        raise OptionError(f"cannot parse options {text!r}: expected 'key' = 'value' pairs")
    vals = [s[1:-1].replace("''", "'") for s in strs]
    return dict(zip(vals[0::2], vals[1::2]))


def with_options(stmt: str) -> dict[str, str]:
    """The options of a DDL statement's trailing ``WITH (...)`` clause; {} without one."""
    m = re.search(r"\bWITH\s*\((.*)\)\s*$", stmt, re.I | re.S)
    return string_pairs(m.group(1)) if m else {}


def without_options(stmt: str, keys: Collection[str]) -> str:
    """``stmt`` with the options ``keys`` left out of its trailing ``WITH (...)`` clause."""
    m = re.search(r"\bWITH\s*\((.*)\)\s*$", stmt, re.I | re.S)
    if m is None:
        return stmt
    kept = {k: v for k, v in string_pairs(m.group(1)).items() if k not in keys}
    body = ", ".join(f"{quote_str(k)} = {quote_str(v)}" for k, v in kept.items())
    return stmt[: m.start(1)] + body + stmt[m.end(1) :]


def lookup_hints(sql: str) -> list[dict[str, str]]:
    """The options of every ``LOOKUP('k' = 'v', ...)`` query hint in ``sql`` (Flink's hint for
    lookup joins, ``SELECT /*+ LOOKUP('table' = 'd', 'retry-predicate' = 'lookup_miss', ...) */``)."""
    out = []
    for tok in tokenize(sql):
        if tok.kind == "hint":
            out += [string_pairs(m.group(1)) for m in re.finditer(r"LOOKUP\s*\(([^)]*)\)", tok.text, re.I)]
    return out


def drop_lookup_hints(sql: str, tables: set[str]) -> str:
    """``sql`` without the ``LOOKUP(...)`` query hints that name one of ``tables`` (a hint comment
    left empty goes as a whole): lakelog takes them, and Flink refuses a hint naming a table that a
    rewritten lookup join no longer shows it."""
    out = sql
    for tok in reversed(list(tokenize(sql))):
        if tok.kind != "hint":
            continue

        def keep(m: re.Match[str]) -> str:
            return "" if string_pairs(m.group(1)).get("table") in tables else m.group(0)

        body = re.sub(r"LOOKUP\s*\(([^)]*)\)", keep, tok.text[3:-2], flags=re.I)
        body = re.sub(r"^[\s,]+|[\s,]+$", "", re.sub(r",\s*,", ",", body))
        text = f"/*+ {body} */" if body else ""
        out = out[: tok.start] + text + out[tok.end :]
    return out


def hint_options(hint: Optional[str]) -> dict[str, str]:
    """The options of a ``/*+ OPTIONS('k' = 'v', ...) */`` hint; {} for None or another hint."""
    m = re.search(r"OPTIONS\s*\((.*)\)", hint or "", re.I | re.S)
    return string_pairs(m.group(1)) if m else {}
