"""``JOIN t FOR SYSTEM_TIME AS OF ...`` (a processing-time lookup join) rewritten into a ``LATERAL TABLE``
join over a lookup table function (:func:`lakelog.operators.lookup.register_lookup_function`).

Flink plans ``FOR SYSTEM_TIME AS OF`` only against a Java ``LookupTableSource``; this rewrite lets
the standard syntax work against lakelog tables in :class:`lakelog.jobs.sql.LakelogSql`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from lakelog.connector.errors import OptionError

__all__ = ["rewrite_lookup_joins"]

_SQL_TOKEN = re.compile(
    r"(?P<ws>\s+)|(?P<hint>/\*\+.*?\*/)|(?P<comment>/\*.*?\*/|--[^\n]*)|(?P<str>'(?:[^']|'')*')"
    r"|(?P<qid>`(?:[^`]|``)*`)|(?P<id>[A-Za-z_][\w$]*)|(?P<num>\d+(?:\.\d*)?)|(?P<sym>.)",
    re.S,
)
_ON_END = {"JOIN", "LEFT", "RIGHT", "FULL", "INNER", "CROSS", "WHERE", "GROUP", "ORDER", "LIMIT",
           "HAVING", "UNION", "WINDOW", "EXCEPT", "INTERSECT", "QUALIFY", "NATURAL"}  # fmt: skip


@dataclass
class _Tok:
    kind: str
    text: str
    start: int
    end: int

    @property
    def word(self) -> str:
        return self.text.upper() if self.kind == "id" else ""

    @property
    def name(self) -> str:
        return self.text[1:-1].replace("``", "`") if self.kind == "qid" else self.text


def _sql_tokens(sql: str) -> list[_Tok]:
    out = []
    for m in _SQL_TOKEN.finditer(sql):
        kind = m.lastgroup or "sym"
        if kind not in ("ws", "comment"):
            out.append(_Tok(kind, m.group(), m.start(), m.end()))
    return out


def _split_top(toks: list[_Tok], word: str) -> list[list[_Tok]]:
    """``toks`` split at top-level ``word`` (AND), ignoring the AND of BETWEEN ... AND."""
    parts: list[list[_Tok]] = [[]]
    depth = 0
    between = False
    for t in toks:
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        if depth == 0 and t.word == "BETWEEN":
            between = True
        elif depth == 0 and t.word == word:
            if between:
                between = False
            else:
                parts.append([])
                continue
        parts[-1].append(t)
    return parts


def rewrite_lookup_joins(
    sql: str,
    resolve: Callable[[list[str]], Optional[str]],
    register: Callable[[str, list[str], Optional[str]], tuple[str, list[str]]],
) -> str:
    """Rewrite processing-time lookup joins against lakelog tables into ``LATERAL TABLE`` joins.

    ``[LEFT|INNER] JOIN t [/*+ OPTIONS(...) */] FOR SYSTEM_TIME AS OF <time> [AS] d ON o.k = d.k [AND ...]``
    becomes ``[LEFT|INNER] JOIN LATERAL TABLE(f(o.k)) AS d(<columns>) ON TRUE``: the equalities
    between a ``d.<column>`` and an expression without ``d`` make the lookup key; other conditions
    stay in the ``ON`` clause of inner joins (left joins allow none). ``resolve(name parts)`` gives
    the lakelog table path of ``t`` (None: not a lakelog table, the join stays as it is);
    ``register(path, key columns, hint)`` registers a table function and returns (its name, its
    columns).
    """
    toks = _sql_tokens(sql)
    edits: list[tuple[int, int, str]] = []
    i = 0
    while i < len(toks):
        if toks[i].word != "JOIN":
            i += 1
            continue
        j = i + 1
        if j >= len(toks) or toks[j].kind not in ("id", "qid") or toks[j].word == "LATERAL":
            i += 1
            continue
        parts = [toks[j].name]
        while j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].kind in ("id", "qid"):
            parts.append(toks[j + 2].name)
            j += 2
        k = j + 1
        hint = None
        if k < len(toks) and toks[k].kind == "hint":
            hint = toks[k].text
            k += 1
        if [t.word for t in toks[k : k + 4]] != ["FOR", "SYSTEM_TIME", "AS", "OF"]:
            i += 1
            continue
        # the time expression, then [AS] alias, up to the top-level ON
        m = k + 4
        depth = 0
        while m < len(toks) and not (depth == 0 and toks[m].word == "ON"):
            depth += toks[m].text == "("
            depth -= toks[m].text == ")"
            m += 1
        if m >= len(toks):
            raise OptionError(f"lookup join on {'.'.join(parts)} needs an ON clause")
        tail = toks[k + 4 : m]
        if len(tail) >= 2 and tail[-1].kind in ("id", "qid") and tail[-2].text != ".":
            alias = tail[-1].name
        else:
            alias = parts[-1]
        # the ON condition, up to the next clause at this level
        n = m + 1
        depth = 0
        while n < len(toks):
            t = toks[n]
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (t.word in _ON_END or t.text == ";"):
                break
            n += 1
        cond = toks[m + 1 : n]
        path = resolve(parts)
        if path is None:
            i = n
            continue
        keys, args, rest = _lookup_keys(sql, cond, alias)
        if not keys:
            raise OptionError(
                f"lookup join on {'.'.join(parts)}: the ON clause needs equalities {alias}.<column> = <expr>"
            )
        if "LEFT" in [t.word for t in toks[max(0, i - 2) : i]] and rest:
            raise OptionError(
                f"LEFT lookup join on {'.'.join(parts)}: only key equalities are allowed in ON, "
                f"move {' AND '.join(rest)} to WHERE or a subquery"
            )
        fn, columns = register(path, keys, hint)
        cols = ", ".join("`" + c.replace("`", "``") + "`" for c in columns)
        on = " AND ".join(f"({r})" for r in rest) if rest else "TRUE"
        text = f"LATERAL TABLE({fn}({', '.join(args)})) AS `{alias}`({cols}) ON {on}"
        end = toks[n - 1].end if n > m + 1 else toks[m].end
        edits.append((toks[i + 1].start, end, text))
        i = n
    out = sql
    for start, end, text in reversed(edits):
        out = out[:start] + text + out[end:]
    return out


def _lookup_keys(sql: str, cond: list[_Tok], alias: str) -> tuple[list[str], list[str], list[str]]:
    """(key columns, probe expressions, other conjuncts) of a lookup join's ON condition."""
    keys: list[str] = []
    args: list[str] = []
    rest: list[str] = []

    def text(ts: list[_Tok]) -> str:
        return sql[ts[0].start : ts[-1].end] if ts else ""

    def dim_column(ts: list[_Tok]) -> Optional[str]:
        if len(ts) == 3 and ts[0].kind in ("id", "qid") and ts[0].name == alias and ts[1].text == ".":
            return ts[2].name if ts[2].kind in ("id", "qid") else None
        return None

    def mentions_alias(ts: list[_Tok]) -> bool:
        return any(
            t.kind in ("id", "qid") and t.name == alias and k + 1 < len(ts) and ts[k + 1].text == "."
            for k, t in enumerate(ts)
        )

    for conj in _split_top(cond, "AND"):
        eq = [
            k
            for k, t in enumerate(conj)
            if t.text == "=" and (k == 0 or conj[k - 1].text not in ("<", ">", "!"))
        ]
        if len(eq) == 1:
            lhs, rhs = conj[: eq[0]], conj[eq[0] + 1 :]
            for a, b in ((lhs, rhs), (rhs, lhs)):
                col = dim_column(a)
                if col is not None and b and not mentions_alias(b) and col not in keys:
                    keys.append(col)
                    args.append(text(b))
                    break
            else:
                rest.append(text(conj))
            continue
        if conj:
            rest.append(text(conj))
    return keys, args, rest
