"""Statement rewrites of lakelog's Flink SQL wrapper, on the tokens of :mod:`.lexer` (no pyflink).

* :func:`rewrite_table_refs`: every table named after ``FROM``/``JOIN`` (with its ``/*+ OPTIONS */``
  hint) that the caller resolves to a view is replaced by that view: lakelog tables become views over
  their sources.
* :func:`rewrite_lookup_joins`: ``JOIN t FOR SYSTEM_TIME AS OF ...`` (a processing-time lookup join)
  over a lakelog table becomes a ``LATERAL TABLE`` join over a lookup table function
  (:func:`lakelog.operators.lookup.register_lookup_function`): Flink plans ``FOR SYSTEM_TIME AS OF``
  only against a Java ``LookupTableSource``.

Both edit the original text at token offsets and leave the rest of the statement untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from lakelog.connector.errors import OptionError
from lakelog.operators.sql.lexer import Token, significant, tokenize

__all__ = [
    "rewrite_table_refs",
    "rewrite_lookup_joins",
    "is_constant_time",
    "ProbeSide",
    "LookupCall",
    "LookupRegister",
]

# keywords that end the table list of a FROM clause (or begin another clause)
_CLAUSE_END = {"WHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "ON", "UNION", "SELECT", "WINDOW", "EXCEPT",
               "INTERSECT", "MATCH_RECOGNIZE", "USING", "OFFSET", "FETCH", "QUALIFY"}  # fmt: skip
# words after a table name that are not its alias
_NOT_ALIAS = _CLAUSE_END | {"JOIN", "LEFT", "RIGHT", "FULL", "INNER", "CROSS", "OUTER", "AS", "FOR",
                             "NATURAL"}  # fmt: skip
# words that end the ON condition of a lookup join
_ON_END = {"JOIN", "LEFT", "RIGHT", "FULL", "INNER", "CROSS", "WHERE", "GROUP", "ORDER", "LIMIT",
           "HAVING", "UNION", "WINDOW", "EXCEPT", "INTERSECT", "QUALIFY", "NATURAL"}  # fmt: skip

_SKIPPED = ("ws", "comment")
# words a constant time expression (FOR SYSTEM_TIME AS OF <expr>, time travel) may hold
_TIME_WORDS = {"TIMESTAMP", "TIMESTAMP_LTZ", "INTERVAL", "YEAR", "MONTH", "DAY", "HOUR", "MINUTE",
               "SECOND", "TO", "CAST", "TO_TIMESTAMP", "TO_TIMESTAMP_LTZ", "CURRENT_TIMESTAMP", "NOW",
               "LOCALTIMESTAMP", "WITH", "LOCAL", "TIME", "ZONE"}  # fmt: skip


def is_constant_time(toks: list[Token]) -> bool:
    """Whether a ``FOR SYSTEM_TIME AS OF`` expression is a constant (time travel), not a column
    of the probe side (a lookup join): literals, time keywords and functions only."""
    return bool(toks) and all(
        t.kind in ("str", "num") or t.word in _TIME_WORDS or (t.kind == "sym" and t.text in "()+-*,")
        for t in toks
    )


def _time_travel(toks: list[Token], k: int) -> tuple[Optional[str], int]:
    """At token ``k`` (after a table name and hint): ``FOR SYSTEM_TIME AS OF <constant>`` ->
    (the expression's text, the index after it); (None, k) otherwise."""
    j = _next(toks, k)
    words = []
    m = j
    for _ in range(4):
        if m >= len(toks):
            return None, k
        words.append(toks[m].word)
        m = _next(toks, m + 1)
    if words != ["FOR", "SYSTEM_TIME", "AS", "OF"]:
        return None, k
    start = m
    depth = 0
    end = m
    last = m - 1  # the last token of the expression
    while end < len(toks):
        t = toks[end]
        if t.kind in _SKIPPED:
            end += 1
            continue
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and not (
            t.kind in ("str", "num") or t.word in _TIME_WORDS or (t.kind == "sym" and t.text in "+-*")
        ):
            break
        last = end
        end += 1
    expr = [t for t in toks[start : last + 1] if t.kind not in _SKIPPED]
    if not is_constant_time(expr):
        return None, k
    return "".join(t.text for t in toks[start : last + 1]).strip(), last


class _Blocks:
    """The query blocks of a statement (one per ``SELECT``, by parenthesis depth) as
    :func:`_replace_tables` walks it: the tables of each block's ``FROM`` and the tokens of its
    ``WHERE``. A block that reads one table and joins nothing gives that table its ``WHERE``'s
    top-level conjuncts (``conjuncts``), the table's qualifier removed from column references: a
    read may apply them, as Flink applies them after it."""

    def __init__(self) -> None:
        self.tables: dict[int, list[tuple[int, str]]] = {}  # depth -> (token index, qualifier)
        self.joined: dict[int, bool] = {}
        self.where: dict[int, list[Token]] = {}
        self.open: set[int] = set()  # depths whose WHERE is being read
        self.conjuncts: dict[int, list[str]] = {}

    def see(self, tok: Token, depth: int) -> None:
        """Note ``tok`` met at parenthesis ``depth`` (before the walk applies it)."""
        up = tok.word
        inner = depth  # the deepest block whose WHERE this token belongs to
        if tok.kind == "sym" and tok.text == "(":
            inner = depth + 1
        elif (tok.kind == "sym" and tok.text == ")") or up == "SELECT":
            self.end(depth)  # a block ends at its closing parenthesis, or where the next one begins
            inner = depth - 1
        elif up == "WHERE":
            self.where[depth] = []
            self.open.add(depth)
            inner = depth - 1
        elif up in ("JOIN", "MATCH_RECOGNIZE"):
            self.joined[depth] = True  # the block's rows are not one table's
            self.open.discard(depth)
        elif up in _CLAUSE_END:
            self.open.discard(depth)
            inner = depth - 1
        for d in self.open:
            if d <= inner:
                self.where[d].append(tok)

    def table(self, depth: int, index: int, qualifier: str) -> None:
        self.tables.setdefault(depth, []).append((index, qualifier))

    def join(self, depth: int) -> None:
        self.joined[depth] = True

    def end(self, depth: int) -> None:
        """The block at ``depth`` is complete."""
        tables = self.tables.pop(depth, [])
        where = self.where.pop(depth, [])
        self.open.discard(depth)
        if self.joined.pop(depth, False) or len(tables) != 1 or not where:
            return
        index, qualifier = tables[0]
        out = []
        for part in _split_top(where, "AND"):
            if not significant_text(part) or any(t.word == "SELECT" for t in part):
                continue
            texts = []
            k = 0
            while k < len(part):
                t = part[k]
                dot = _next(part, k + 1)
                if t.is_name and t.name == qualifier and dot < len(part) and part[dot].text == ".":
                    k = _next(part, dot + 1)  # ``alias.column`` -> ``column``
                    continue
                texts.append(" " if t.kind == "comment" else t.text)
                k += 1
            out.append("".join(texts).strip())
        if out:
            self.conjuncts[index] = out

    def finish(self) -> dict[int, list[str]]:
        for d in sorted(self.tables.keys() | self.where.keys(), reverse=True):
            self.end(d)
        return self.conjuncts


def rewrite_table_refs(
    sql: str, view_for: Callable[[list[str], Optional[str], Optional[str], list[str]], Optional[str]]
) -> str:
    """``sql`` with the tables of its ``FROM`` and ``JOIN`` clauses replaced by views.

    ``view_for(name parts, hint, time, where)`` gets each table name (``['cat', 'db', 't']``,
    ``['t']``, ...), the ``/*+ ... */`` hint after it (or None), the constant of a ``FOR SYSTEM_TIME
    AS OF`` after that (time travel; or None) and, where the table is the only one its query block
    reads, the top-level ``AND`` conjuncts of the block's ``WHERE`` with the table's qualifier removed
    (``["k = 1", "name IN ('a', 'b')"]``; else ``[]``). It returns the (quoted, qualified) view to
    read instead, or None to leave the table as it is. Hint and time travel go with the table; a
    table without an alias keeps its name as the alias, so column references stay valid."""
    toks = list(tokenize(sql))
    # a first walk, as if every table were replaced, finds each table's WHERE (which follows it)
    conjuncts = _replace_tables(toks, lambda i, parts, hint, at: "``")[1]
    out, _ = _replace_tables(toks, lambda i, parts, hint, at: view_for(parts, hint, at, conjuncts.get(i, [])))
    return "".join(out)


def _replace_tables(
    toks: list[Token], view_for: Callable[[int, list[str], Optional[str], Optional[str]], Optional[str]]
) -> tuple[list[str], dict[int, list[str]]]:
    """The walk of :func:`rewrite_table_refs`: the output texts and the conjuncts per table token."""
    out: list[str] = []
    blocks = _Blocks()
    i = 0
    depth = 0
    clause: dict[int, str] = {}
    expect = False  # the next name is a table of a FROM list
    table_arg = False  # ... or the table argument of a table function (which takes no alias)
    while i < len(toks):
        tok = toks[i]
        up = tok.word
        blocks.see(tok, depth)
        if tok.kind == "sym" and tok.text == "(":
            depth += 1
            expect = False
        elif tok.kind == "sym" and tok.text == ")":
            clause.pop(depth, None)
            depth -= 1
        elif tok.kind == "sym" and tok.text == ",":
            expect = clause.get(depth) == "FROM"
            if expect:
                blocks.join(depth)
            out.append(tok.text)
            i += 1
            continue
        elif up in ("FROM", "JOIN"):
            clause[depth] = "FROM"
            expect, table_arg = True, False
            out.append(tok.text)
            i += 1
            continue
        elif up == "TABLE" and _prev_sym(toks, i) in ("(", ",") and _next_text(toks, i + 1) != "(":
            expect = table_arg = True  # a table argument of a table function: TUMBLE(TABLE t, ...)
            out.append(tok.text)
            i += 1
            continue
        elif up in _CLAUSE_END:
            clause[depth] = up
            expect = False
        if expect and tok.is_name and up not in ("LATERAL", "TABLE", "UNNEST"):
            j = i
            parts = [toks[j].name]
            while j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].is_name:
                parts.append(toks[j + 2].name)
                j += 2
            k = _next(toks, j + 1)
            hint = toks[k].text if k < len(toks) and toks[k].kind == "hint" else None
            at, last = _time_travel(toks, k + 1 if hint else j + 1)
            view = view_for(i, parts, hint, at)
            if view is not None:
                end = last if at is not None else (k if hint else j)
                n = _next(toks, end + 1)
                alias = parts[-1]
                if n < len(toks) and toks[n].word == "AS":
                    m = _next(toks, n + 1)
                    alias = toks[m].name if m < len(toks) else ""
                    has_alias = True
                else:
                    has_alias = n < len(toks) and (
                        toks[n].kind == "qid" or (toks[n].kind == "id" and toks[n].word not in _NOT_ALIAS)
                    )
                    if has_alias:
                        alias = toks[n].name
                blocks.table(depth, i, "" if table_arg else alias)
                if table_arg:
                    blocks.join(depth)  # a table function's argument: its rows are not the block's
                named = "" if has_alias or table_arg else " AS `" + parts[-1].replace("`", "``") + "`"
                out.append(view + named)
                i = end + 1
                expect = table_arg = False
                continue
            expect = table_arg = False
        elif tok.kind not in (*_SKIPPED, "hint"):
            expect = expect and tok.kind == "sym" and tok.text == "("
        out.append(tok.text)
        i += 1
    return out, blocks.finish()


def significant_text(toks: list[Token]) -> bool:
    return any(t.kind not in _SKIPPED for t in toks)


def _prev_sym(toks: list[Token], i: int) -> str:
    """The text of the last significant token before ``i`` ("" at the start)."""
    j = i - 1
    while j >= 0 and toks[j].kind in _SKIPPED:
        j -= 1
    return toks[j].text if j >= 0 else ""


def _next_text(toks: list[Token], i: int) -> str:
    j = _next(toks, i)
    return toks[j].text if j < len(toks) else ""


def _next(toks: list[Token], i: int) -> int:
    """The index of the first token from ``i`` on that is no white space or comment."""
    while i < len(toks) and toks[i].kind in _SKIPPED:
        i += 1
    return i


def _split_top(toks: list[Token], word: str) -> list[list[Token]]:
    """``toks`` split at top-level ``word`` (AND), ignoring the AND of BETWEEN ... AND."""
    parts: list[list[Token]] = [[]]
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


@dataclass(frozen=True)
class ProbeSide:
    """The probe side of a lookup join when it is one table reference: ``FROM <text> JOIN dim ...``
    where ``text`` is ``name [hint] [[AS] alias]``; ``args`` are the probe key expressions."""

    text: str
    alias: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class LookupCall:
    """What a registered lookup function is: ``function`` and its result ``columns``; ``probe_view``
    replaces the probe side (None keeps it); ``hit_column`` (a column never null in a found row)
    marks a vectorised function returning one ROW per probe (nulls on a miss), joined through
    ``UNNEST(ARRAY[...])``; without it a table function, joined through ``LATERAL TABLE``."""

    function: str
    columns: list[str]
    probe_view: Optional[str] = None
    hit_column: Optional[str] = None


# register(path, key columns, hint, names, probe side) -> the call
LookupRegister = Callable[[str, list[str], Optional[str], list[str], Optional[ProbeSide]], LookupCall]


def _probe_side(toks: list[Token], join: int) -> Optional[tuple[int, int, str]]:
    """(first token, last token, alias) of a single table reference between ``FROM`` and the join
    at token ``join`` (``[LEFT [OUTER] | INNER] JOIN``); None for anything else (a subquery, a chain
    of joins, a comma list, time travel)."""
    j = join - 1
    while j >= 0 and toks[j].word in ("LEFT", "INNER", "OUTER"):
        j -= 1
    end = j
    k = j
    while k >= 0 and toks[k].word != "FROM":
        k -= 1
    if k < 0 or end <= k:
        return None
    ref = toks[k + 1 : end + 1]
    m = 1
    if not ref or not ref[0].is_name:
        return None
    while m + 1 < len(ref) and ref[m].text == "." and ref[m + 1].is_name:
        m += 2
    alias = ref[m - 1].name
    if m < len(ref) and ref[m].kind == "hint":
        m += 1
    if m < len(ref) and ref[m].word == "AS":
        m += 1
    if m < len(ref) and ref[m].is_name and ref[m].word not in _NOT_ALIAS:
        alias = ref[m].name
        m += 1
    return (k + 1, end, alias) if m == len(ref) else None


def rewrite_lookup_joins(
    sql: str,
    resolve: Callable[[list[str]], Optional[str]],
    register: LookupRegister,
) -> str:
    """Rewrite processing-time lookup joins against lakelog tables into ``LATERAL TABLE`` joins.

    ``[LEFT|INNER] JOIN t [/*+ OPTIONS(...) */] FOR SYSTEM_TIME AS OF <time> [AS] d ON o.k = d.k [AND ...]``
    becomes ``[LEFT|INNER] JOIN LATERAL TABLE(f(o.k)) AS d(<columns>) ON TRUE`` (a table function),
    or ``[LEFT|INNER] JOIN UNNEST(ARRAY[f(o.k)]) AS d(<columns>) ON d.<hit> IS NOT NULL`` (a
    vectorised function of one row per probe; a left join keeps ``ON TRUE``): the equalities
    between a ``d.<column>`` and an expression without ``d`` make the lookup key; other conditions
    stay in the ``ON`` clause of inner joins (left joins allow none). ``resolve(name parts)`` gives
    the lakelog table path of ``t`` (None: not a lakelog table, the join stays as it is);
    ``register(path, key columns, hint, names, probe)`` registers the lookup function and returns
    its :class:`LookupCall`; ``names`` are the alias and the table's name, as a ``LOOKUP`` hint
    names it; ``probe`` is the :class:`ProbeSide` when the probe side is a single table reference
    (a replacement keeps its alias: routed by bucket).
    """
    toks = significant(sql)
    edits: list[tuple[int, int, str]] = []
    i = 0
    while i < len(toks):
        if toks[i].word != "JOIN":
            i += 1
            continue
        j = i + 1
        if j >= len(toks) or not toks[j].is_name or toks[j].word == "LATERAL":
            i += 1
            continue
        parts = [toks[j].name]
        while j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].is_name:
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
        tail = toks[k + 4 : m]
        expr = tail[:-2] if len(tail) >= 2 and tail[-2].word == "AS" else tail[:-1] if len(tail) > 1 else tail
        if is_constant_time(expr) or is_constant_time(tail):
            i += 1  # time travel (a constant), not a lookup join: rewrite_table_refs reads it
            continue
        if m >= len(toks):
            raise OptionError(f"lookup join on {'.'.join(parts)} needs an ON clause")
        if len(tail) >= 2 and tail[-1].is_name and tail[-2].text != ".":
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
        left = "LEFT" in [t.word for t in toks[max(0, i - 2) : i]]
        if left and rest:
            raise OptionError(
                f"LEFT lookup join on {'.'.join(parts)}: only key equalities are allowed in ON, "
                f"move {' AND '.join(rest)} to WHERE or a subquery"
            )
        side = _probe_side(toks, i)
        probe = None
        if side is not None and side[2] != alias:
            first, last, probe_alias = side
            probe = ProbeSide(sql[toks[first].start : toks[last].end], probe_alias, tuple(args))
        names = list(dict.fromkeys([alias, parts[-1], ".".join(parts)]))
        call = register(path, keys, hint, names, probe)
        if call.probe_view is not None and side is not None and probe is not None:
            routed = f"{call.probe_view} AS {_quote(probe.alias)}"
            edits.append((toks[side[0]].start, toks[side[1]].end, routed))
        target = f"{_quote(alias)}({', '.join(_quote(c) for c in call.columns)})"
        conds = [f"({r})" for r in rest]
        invocation = f"{call.function}({', '.join(args)})"
        if call.hit_column is None:
            text = f"LATERAL TABLE({invocation}) AS {target} ON {' AND '.join(conds) or 'TRUE'}"
        else:
            if not left:
                conds.insert(0, f"{_quote(alias)}.{_quote(call.hit_column)} IS NOT NULL")
            text = f"UNNEST(ARRAY[{invocation}]) AS {target} ON {' AND '.join(conds) or 'TRUE'}"
        end = toks[n - 1].end if n > m + 1 else toks[m].end
        edits.append((toks[i + 1].start, end, text))
        i = n
    out = sql
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[end:]
    return out


def _lookup_keys(sql: str, cond: list[Token], alias: str) -> tuple[list[str], list[str], list[str]]:
    """(key columns, probe expressions, other conjuncts) of a lookup join's ON condition."""
    keys: list[str] = []
    args: list[str] = []
    rest: list[str] = []

    def text(ts: list[Token]) -> str:
        return sql[ts[0].start : ts[-1].end] if ts else ""

    def dim_column(ts: list[Token]) -> Optional[str]:
        if len(ts) == 3 and ts[0].is_name and ts[0].name == alias and ts[1].text == ".":
            return ts[2].name if ts[2].is_name else None
        return None

    def mentions_alias(ts: list[Token]) -> bool:
        return any(
            t.is_name and t.name == alias and k + 1 < len(ts) and ts[k + 1].text == "."
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


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
