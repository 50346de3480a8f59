"""Where each RAT node lies in the query's canonical SQL text (to colour the SQL itself by node
confidence, as in the fine-grained paper's Table 13).

The canonical sqlglot tree is generated once with a marking generator, which gives the exact
character span of every sqlglot sub-expression; the RAT is then rebuilt by `rat.tree.from_ast`,
whose build steps say which sqlglot expression (or clause) each node comes from. A node's span
is the hull of its own text and its children's spans, i.e. the text of its subtree. The
rebuilt tree must equal the caller's tree label for label; anything that does not fit gives
nodes without a span, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial

from sqlglot import expressions as exp

from rat.canonicalize import (
    canonical_ast,
    lowercase_outside_strings,
    quiet_sqlglot,
    sqlglot_dialect,
)
from rat.dialects import SQLITE, Dialect
from rat.dialects import dialect as _dialect
from rat.errors import DepthError, InternalError, with_deep_stack
from rat.node import Node, check_node
from rat.schema import Schema
from rat.tree import from_ast, window_clauses

__all__ = ["Span", "SqlSpans", "sql_spans"]

Span = tuple[int, int]  # [start, end) in the SQL text

_OPEN, _MID, _CLOSE = "\ue000", "\ue001", "\ue002"  # private-use code points: never in SQL
_MARKER = re.compile(f"{_OPEN}([0-9]+){_MID}|{_CLOSE}")
_TAG = "rat_span_number"
# Nodes `rat` builds without a sqlglot expression of their own, and the keyword that
# introduces their text in the SQL.
_LEADING_KEYWORDS = {"When": "when", "Else": "else", "Partitionby": "partition by",
                     "Using": "using"}
_FRAME_WORDS = {"Current_row": "current row", "Unbounded_preceding": "unbounded preceding",
                "Unbounded_following": "unbounded following", "Exclude_current_row": "exclude current row",
                "Exclude_group": "exclude group", "Exclude_ties": "exclude ties"}
_JSON_OPERATOR = re.compile(r"\s*(->>|->|#>>|#>)\s*")


@dataclass(frozen=True)
class SqlSpans:
    """Node spans of one query.

    ``sql``: the text the spans index (canonical SQL, or the input when it cannot be parsed);
    ``spans[i]``: the [start, end) span of post-order node i's subtree, None when not found;
    ``owners[c]``: the post-order index of the innermost node at character c (None: no node),
    worked out on first use; ``tree``: the RAT the spans belong to, built from the same parse
    (None when the text could not be mapped).
    """

    sql: str
    spans: tuple[Span | None, ...]
    _find_owners: Callable[[], tuple[int | None, ...]] = field(repr=False, compare=False)
    tree: Node | None = field(default=None, repr=False, compare=False)

    @cached_property
    def owners(self) -> tuple[int | None, ...]:
        return self._find_owners()

    def __reduce__(self):  # pickled with its owners worked out (the finder closes over the parse)
        return SqlSpans, (self.sql, self.spans, partial(tuple, self.owners), self.tree)

    @property
    def unmapped(self) -> int:
        """Number of nodes without a span."""
        return sum(span is None for span in self.spans)

    def text(self, i: int) -> str | None:
        """The SQL text of node i's subtree (None when it has no span)."""
        span = self.spans[i]
        return None if span is None else self.sql[span[0]:span[1]]


def sql_spans(sql: str, tree: Node | None = None, schema: Schema | Mapping | None = None,
              dialect: str = "sqlite") -> SqlSpans:
    """Spans of the nodes of ``tree`` (default: ``rat.to_tree(sql, schema, dialect)``) in the
    canonical text of ``sql``; the schema and dialect must be the ones ``tree`` was built with.

    >>> from rat.tree import to_tree
    >>> s = sql_spans("SELECT name FROM singer WHERE age > 20")
    >>> s.sql
    'select singer.name from singer where singer.age > 20'
    >>> [(n.label, s.text(i)) for i, n in enumerate(to_tree(s.sql).postorder())][1:4]
    [('singer.age', 'singer.age'), ('20', '20'), ('Gt', 'singer.age > 20')]
    >>> s.text(5), s.text(6) == s.sql, s.unmapped
    ('from singer where singer.age > 20', True, 0)
    >>> s.tree == to_tree(s.sql)  # the tree comes with the spans: no second parse
    True
    >>> import pickle
    >>> pickle.loads(pickle.dumps(s)).owners == s.owners
    True
    >>> sql_spans("SELEC name", Node("t")).unmapped  # not SQL: no span, no exception
    1
    >>> s = sql_spans("SELECT TOP 1 [Name] FROM singer", dialect="tsql")
    >>> s.sql, s.tree.postorder()[s.owners[s.sql.index("top")]].label
    ('select top 1 singer.name from singer', 'Limit')
    """
    if not isinstance(sql, str):
        raise TypeError(f"sql: expected a str, found {type(sql).__name__}")
    if tree is not None:
        check_node(tree)
    schema = Schema.of(schema)
    nodes = None if tree is None else tree.postorder()
    rat_dialect = _dialect(dialect)
    try:
        return with_deep_stack(_spans, sql, nodes, schema, rat_dialect)
    except DepthError:
        return _unmapped(sql, nodes)


def _spans(sql: str, nodes: list[Node] | None, schema: Schema | None,
           rat_dialect: Dialect = SQLITE) -> SqlSpans:
    try:
        ast = canonical_ast(sql, schema, rat_dialect)
        text, expression_spans = _generate(ast, rat_dialect)
    except (DepthError, InternalError):  # a bug in rat is raised, not hidden in a report
        raise
    except RecursionError:
        raise DepthError(sql) from None
    except Exception:  # noqa: BLE001 - a report must show every query, mapped or not
        return _unmapped(sql, nodes)
    try:
        recorder = _SpanRecorder(text, expression_spans)
        built = from_ast(ast, sql, recorder, rat_dialect)
        built_nodes = built.postorder()
        if nodes is None:
            nodes = built_nodes
        elif [n.label for n in built_nodes] != [n.label for n in nodes]:
            return _unmapped(text, nodes)
        spans = recorder.spans(built, built_nodes)
    except DepthError:
        raise
    except RecursionError:
        raise DepthError(sql) from None
    except Exception:  # noqa: BLE001 - e.g. the builder changed shape; degrade, don't crash
        return _unmapped(text, nodes)
    return SqlSpans(text, spans, lambda: _owners(built, built_nodes, recorder.near(built_nodes, spans),
                                                 recorder.own, len(text)), built)


def _unmapped(text: str, nodes) -> SqlSpans:
    return SqlSpans(text, (None,) * len(nodes or ()), lambda: (None,) * len(text))


# ---------------------------------------------------------------- spans of sqlglot expressions


def _marking_generator(rat_dialect: Dialect = SQLITE):
    """A generator of `rat_dialect` (default SQLite) that wraps the text of every numbered expression in markers.

    sqlglot's compiled Generator (sqlglotc) refuses subclasses, so the generator is composed:
    its own per-instance table of handlers (expression type -> function) is replaced by one
    whose handlers mark what the original ones write. Functions and properties, which the
    generator writes generically when the table lacks their type, get marking entries too.
    """
    generator = sqlglot_dialect(rat_dialect).generator()
    generic = type(generator)
    if generic not in _MARKING_HANDLERS:  # one table per generator class, built once
        _MARKING_HANDLERS[generic] = _marking_handlers(generic, generator._dispatch)
    generator._dispatch = _MARKING_HANDLERS[generic]
    return generator


_MARKING_HANDLERS: dict[type, dict] = {}


def _marking_handlers(generic: type, dispatch: dict) -> dict:
    handlers = dict(dispatch)
    for kind in exp.EXPR_CLASSES.values():
        if kind not in handlers:
            if issubclass(kind, exp.Func):
                handlers[kind] = generic.function_fallback_sql
            elif issubclass(kind, exp.Property):
                handlers[kind] = generic.property_sql
    return {kind: _mark(handler) for kind, handler in handlers.items()}


def _mark(handler):
    def marked(generator, expression):
        text = handler(generator, expression)
        number = expression.meta.get(_TAG) if text else None
        if number is None:
            return text
        # Spaces around the text stay outside the markers, where a caller's strip() finds
        # them (FILTER writes its WHERE stripped).
        inner = text.strip()
        if not inner:
            return text
        start = text.index(inner[0])
        return f"{text[:start]}{_OPEN}{number}{_MID}{inner}{_CLOSE}{text[start + len(inner):]}"

    return marked


def _generate(ast: exp.Expression, rat_dialect: Dialect = SQLITE) -> tuple[str, dict[int, Span]]:
    """The canonical text of ``ast`` (as `rat.canonicalize` writes it) and id(expression) ->
    its span, leading and trailing spaces trimmed."""
    # The generator works on a copy (it preprocesses in place). sqlglot deep-copies each
    # expression's `meta` dict in Python, node by node, so the copy is made without any: the
    # metas are set aside while copying and given back after (`rat.tree` reads notes of
    # canonicalize's there: `one_row`), and the copy's expressions are numbered after copying,
    # walking both trees in the same order (number k leads back to `ast`'s k-th expression).
    expressions = list(ast.walk())
    metas = [expression._meta for expression in expressions]
    for expression in expressions:
        expression._meta = None
    copied = ast.copy()
    for expression, meta in zip(expressions, metas, strict=True):
        expression._meta = meta
    number = -1
    for number, expression in enumerate(copied.walk()):
        if type(expression) is not exp.Identifier:  # no node is built from a bare name
            expression.meta[_TAG] = number
    if number + 1 != len(expressions):
        raise ValueError("the copy of the tree has another shape")
    with quiet_sqlglot():
        marked = _marking_generator(rat_dialect).generate(copied, copy=False)
    # One pass over the markers (not the characters): the plain text between them, and each
    # expression's [start, end) in it. That the markers leave the text as `ast.sql()` writes
    # it is checked by the tests (every fixture and every Spider dev query), not per query.
    pieces = _MARKER.split(marked)  # text, then per marker: its number (None: a close), text
    length = len(pieces[0])
    open_: list[tuple[int, int]] = []  # (expression number, start)
    ends: list[tuple[int, int, int]] = []  # (expression number, start, end)
    for k in range(1, len(pieces), 2):
        number = pieces[k]
        if number is not None:
            open_.append((int(number), length))
        else:
            ends.append((*open_.pop(), length))
        length += len(pieces[k + 1])
    text = "".join(pieces[0::2])
    spans: dict[int, Span] = {}
    for number, start, end in ends:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        spans[id(expressions[number])] = (start, end)
    lowered = lowercase_outside_strings(text, rat_dialect)
    # Lowercasing may change the length of exotic characters; then keep the generator's case.
    return (lowered if len(lowered) == len(text) else text), spans


# ---------------------------------------------------------------- RAT nodes -> own text


class _SpanRecorder:
    """Observer of `rat.tree.from_ast`: notes the text each node is built from ("own" ranges)."""

    def __init__(self, text: str, expression_spans: dict[int, Span]):
        self.text = text
        self.expression_spans = expression_spans
        self.own: dict[int, list[Span]] = {}  # id(node) -> the text it is built from
        self.extent: dict[int, list[Span]] = {}  # id(node) -> wrappers: `( .. )`, `( .. ) as x`
        # Claimed nodes stay referenced so that no later node reuses their id().
        self.claimed: list[Node] = []
        self.cores: dict[int, Node] = {}  # id(query) -> the relation under its modifiers
        self.windows: dict = {}  # each SELECT's named windows, resolved (rat.tree.window_clauses)
        self.ctes: set[int] = set()  # id(node) of each CTE's query, put where it is read

    def __call__(self, step: str, expression: exp.Expression, node: Node,
                 core: Node | None) -> None:
        if step == "query" and (isinstance(expression, exp.CTE) or isinstance(expression.parent, exp.CTE)
                                and not expression.parent.args.get("recursive")):  # (a recursive one: its Recursive)
            self.ctes.add(id(node))
        if step in ("expr", "relation", "query"):
            # Expressions, tables and (sub)queries map to their own sqlglot expression;
            # parentheses and subquery aliases around a node widen its span only.
            if isinstance(expression, exp.Paren | exp.Subquery):
                self.widen(node, expression)
            else:
                self.claim(node, self.span(expression))
            if step == "expr":
                self.typed_leaf(expression, node)
            elif node.label in ("Pivot", "Unpivot", "Unpivot_include_nulls", "Sample_percent", "Sample_rows") \
                    and isinstance(expression, exp.Table | exp.Subquery):
                rows = node.children[-1]  # the table's name, or the subquery's text
                self.claim(rows, self.find(expression, rows.label) if isinstance(expression, exp.Table)
                           else self.span(expression.this))
            elif node.label == "In_schema" and isinstance(expression, exp.Table):
                table, schema = node.children  # `sales.orders`: the schema's name, then the table's
                found = self.find(expression, schema.label)
                self.claim(schema, found)
                self.claim(table, found and self.find(expression, table.label, found[1]))
        elif step == "modifiers":
            self.modifiers(expression, node, core)
        elif step == "select":
            self.select(expression, node)
        elif step == "from":
            # A Product or join owns its FROM clause; a lone table already has its own text.
            self.claim(node, self.span(expression.args.get("from_")),
                       *(self.span(j) for j in expression.args.get("joins") or ()))

    def span(self, expression) -> Span | None:
        return None if expression is None else self.expression_spans.get(id(expression))

    def claim(self, node: Node, *ranges: Span | None) -> None:
        """First claim wins: the innermost sqlglot expression a node was built from."""
        ranges = [r for r in ranges if r is not None]
        if ranges and id(node) not in self.own:
            self.own[id(node)] = ranges
            self.claimed.append(node)

    def widen(self, node: Node, expression) -> None:
        """Parentheses and subquery aliases around a node belong to its span, not its own text."""
        span = self.span(expression)
        if span is not None:
            self.extent.setdefault(id(node), []).append(span)
            self.claimed.append(node)

    def typed_leaf(self, expression: exp.Expression, node: Node) -> None:
        """Nodes `rat` names from an expression's arguments: `real` of CAST(.. AS REAL) or
        CONVERT, EXTRACT's unit, a date part, a named argument's name, an interval's amount and
        unit, a JSON path, a window's frame, a struct's field."""
        if isinstance(expression, exp.Cast):
            typed = expression.args.get("to")
        elif isinstance(expression, exp.Convert):  # CONVERT(type, x[, style])
            self.claim(node.children[-1], self.span(expression.this))
            return
        elif isinstance(expression, exp.PropertyEQ):  # DuckDB's `input := x`: the name is the text before `:=`
            self.claim(node.children[-1], self.find(expression, expression.this.name))
            return
        elif isinstance(expression, exp.Extract | exp.Kwarg):  # EXTRACT(epoch FROM ..), `input => x`
            typed = expression.this
        elif isinstance(expression, exp.Bracket) and node.label == "Subscript":
            # PostgreSQL's `tags[1]` is index 0 to sqlglot, which writes its own 1: the text in []
            span, inner = self.span(expression), self.span(expression.this)
            if span is not None and inner is not None and self.text[inner[1]:inner[1] + 1] == "[":
                self.claim(node.children[1], (inner[1] + 1, span[1] - 1))
            return
        elif isinstance(expression, exp.Dot) and node.label == "Field":  # `o.shipping.city`: the name after the struct
            struct = self.span(expression.this)
            self.claim(node.children[1], struct and self.find(expression, node.children[1].label, struct[1]))
            return
        elif isinstance(expression, exp.Anonymous):  # a date part: DATEADD(day, ..)
            if len(expression.expressions) == len(node.children):
                for argument, child in zip(expression.expressions, node.children, strict=True):
                    if type(argument) is exp.Var:
                        self.claim(child, self.span(argument))
            return
        elif isinstance(expression, exp.Collate | exp.JSONExtract | exp.JSONExtractScalar
                        | exp.JSONBExtract | exp.JSONBExtractScalar):
            typed = expression.expression
        elif isinstance(expression, exp.Interval):
            # `interval '7 days'` is written as one string: the amount is found in it
            amount = node.children[0]
            self.claim(amount, self.span(expression.this) or self.find(expression, amount.label))
            typed = expression.args.get("unit")
        elif isinstance(expression, exp.Window):
            self.frame(expression, node.children[-1])
            return
        elif isinstance(expression, exp.MatchAgainst) and expression.args.get("modifier"):
            self.claim(node.children[-1], self.find(expression, str(expression.args["modifier"]).lower()))
            return
        elif node.label in ("Exclude", "Star_replace"):  # `t.* EXCLUDE (a)`: the star is the text up to its `*`
            star, inner = self.find(expression, "*"), node.children[0]
            if node.label == "Star_replace":  # `* [EXCLUDE (a)] REPLACE (f(b) AS b)`: each `f(b) AS b`, its name
                args = (expression if isinstance(expression, exp.Star) else expression.this).args
                for named, alias in zip(node.children[1:], args["replace"], strict=True):
                    self.claim(named, self.span(alias))
                    value = self.span(alias.this)
                    self.claim(named.children[-1], value and self.find(alias, named.children[-1].label, value[1]))
                if inner.label == "Exclude":  # its text runs to the `)` closing its list
                    last = self.span(args["except_"][-1])
                    close = last and self.find(expression, ")", last[1])
                    self.claim(inner, close and (self.span(expression)[0], close[1]))
                    inner = inner.children[0]
            self.claim(inner, star and (self.span(expression)[0], star[1]))
            return
        else:
            return
        if typed is not None and len(node.children) == 2:
            # a JSON path is written without markers: the text after the operator; Databricks'
            # EXTRACT(YEAR FROM d) its unit (the first word of that name in the call's text)
            self.claim(node.children[1], self.span(typed) or self.after_operator(expression)
                       or type(expression) is exp.Extract and self.find(expression, node.children[1].label) or None)

    def find(self, expression: exp.Expression, word: str, start: int = 0) -> Span | None:
        """The first `word` in the text of `expression` from `start` on."""
        span = self.span(expression)
        if span is None:
            return None
        at = self.text.find(word, max(start, span[0]), span[1])
        return None if at < 0 else (at, at + len(word))

    def after_operator(self, expression: exp.Expression) -> Span | None:
        """The text after `a ->` / `a ->>` / `a #>` in the text of `expression`."""
        span, left = self.span(expression), self.span(expression.this)
        if span is None or left is None:
            return None
        operator = _JSON_OPERATOR.match(self.text, left[1], span[1])
        return None if operator is None or operator.end() >= span[1] else (operator.end(), span[1])

    def frame(self, window: exp.Window, frame: Node) -> None:
        """A window frame is the text of its spec; its bounds `current row` and `unbounded
        preceding` / `following` are found in it (`n preceding` has its number's text)."""
        spec = (window_clauses(window, self.windows) or [None] * 3)[2]  # (its own, or the named window's)
        if spec is None or frame.label not in ("Rows", "Range", "Groups"):
            return
        self.claim(frame, self.span(spec))
        at = 0
        for bound in frame.children:
            word = _FRAME_WORDS.get(bound.label)
            found = None if word is None else self.find(spec, word, at)
            if found is not None:
                self.claim(bound, found)
                at = found[1]

    # Clause operators map to their clause: Limit -> `limit 3`, Selection -> `where ...`.
    def modifiers(self, query: exp.Expression, top: Node, relation: Node) -> None:
        self.cores[id(query)] = relation
        current = top
        limit, offset, order = (query.args.get(k) for k in ("limit", "offset", "order"))
        if limit is not None and current.label == "Limit":
            self.claim(current, self.span(limit))
            extra = current.children[1] if len(current.children) == 3 else None
            if extra is not None and extra.label == "Offset":
                self.claim(extra, self.span(offset) or self.span(limit.args.get("offset")))
            current = current.children[-1]
        elif offset is not None and current.label == "Offset":
            self.claim(current, self.span(offset))
            current = current.children[-1]
        if order is not None:
            keys = list(order.expressions)
            first = True
            while current is not relation and current.label.startswith("Orderby"):
                run, keys = keys[: len(current.children) - 1], keys[len(current.children) - 1:]
                # The primary run also owns `order by`; later runs own their `key desc`.
                self.claim(current, *([self.span(order)] if first else []),
                           *(self.span(k) for k in run))
                first = False
                current = current.children[-1]

    def select(self, node: exp.Select, top: Node) -> None:
        current = self.cores.get(id(node))
        args = node.args
        if current is None:
            return
        if args.get("distinct") is not None:
            if current.label not in ("Distinct", "Distinct_on"):
                return
            own = self.span(args["distinct"])
            on = self.span(args["distinct"].args.get("on"))
            if own is not None and on is not None:  # `distinct on`: the keys are its children
                own = (own[0], on[0])
            self.claim(current, own)
            current = current.children[-1]
        if current.label != "Project":
            return
        self.claim(current, self.select_keyword(node))
        clauses = [(label, args.get(key)) for label, key in
                   (("Qualify", "qualify"), ("Having", "having"), ("Groupby", "group"),
                    ("Selection", "where"))]
        for label, clause in clauses:
            if clause is None:
                continue
            current = current.children[-1] if current.children else None
            if current is None or current.label != label:
                return
            self.claim(current, self.span(clause))
        # `from t` belongs to the operator reading t (a lone table owns only its name).
        if args.get("from_") is not None:
            self.widen(current, args["from_"])

    def select_keyword(self, node: exp.Select) -> Span | None:
        start = self.span(node)
        first = self.span(node.expressions[0]) if node.expressions else None
        if start is None or first is None:
            return None
        matches = list(re.finditer(r"\bselect\b", self.text[start[0]:first[0]], re.IGNORECASE))
        if not matches:
            return None
        return start[0] + matches[-1].start(), start[0] + matches[-1].end()

    # ---- from own text to subtree spans

    def spans(self, tree: Node, nodes: list[Node]) -> tuple[Span | None, ...]:
        """Span of each of `nodes` (the post-order of `tree`)."""
        hulls: dict[int, Span | None] = {}
        # The root's subtree is the whole query, WITH clause included.
        self.extent.setdefault(id(tree), []).append((0, len(self.text)))
        for node in nodes:  # children first
            if id(node) in hulls:
                continue  # a CTE's subtree, read twice
            ranges = list(self.own.get(id(node), ())) + self.extent.get(id(node), [])
            ranges += [s for s in (hulls[id(c)] for c in node.children) if s is not None]
            hull = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None
            keyword = _LEADING_KEYWORDS.get(node.label)
            if hull is not None and keyword and id(node) not in self.own:
                before = self.text[:hull[0]].rstrip(" (")
                start = len(before) - len(keyword)
                if before.lower().endswith(keyword) and not (
                        start > 0 and (before[start - 1].isalnum() or before[start - 1] == "_")):
                    own = (start, hull[0])
                    self.claim(node, own)
                    hull = (own[0], hull[1])
            hulls[id(node)] = hull
        return tuple(hulls[id(n)] for n in nodes)

    def near(self, nodes: list[Node], spans: tuple[Span | None, ...]) -> tuple[Span | None, ...]:
        """The spans `_owners` reads: a node's span, but for a node above a read of a CTE the hull of
        its text without the CTE's (in the WITH clause; the FROM clause that reads it is the node's
        own text or its child's): a join of a CTE is not the owner of `) select a, b` between them."""
        if not self.ctes:
            return spans
        near: dict[int, Span | None] = {}
        whole = dict(zip(map(id, nodes), spans))
        for node, span in zip(nodes, spans):  # children first
            if id(node) in near:
                continue
            if span is None or all(id(c) not in self.ctes and near[id(c)] == whole[id(c)] for c in node.children):
                near[id(node)] = span
                continue
            ranges = list(self.own.get(id(node), ())) + self.extent.get(id(node), [])
            ranges += [s for s in (near[id(c)] for c in node.children if id(c) not in self.ctes) if s is not None]
            near[id(node)] = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else span
        return tuple(near[id(n)] for n in nodes)


def _owners(tree: Node, nodes: list[Node], spans: tuple[Span | None, ...],
            own: dict[int, list[Span]], length: int) -> tuple[int | None, ...]:
    """Per character: the node with the smallest span covering it; among equal spans the
    node whose own text covers it (`distinct` of Distinct over Project), then the deepest.
    `nodes` is the post-order of `tree`."""
    depth: list[int] = []
    stack = [(tree, 0, False)]  # post-order depths, iteratively
    while stack:
        node, level, expanded = stack.pop()
        if expanded or not node.children:
            depth.append(level)
            continue
        stack.append((node, level, True))
        stack.extend((child, level + 1, False) for child in reversed(node.children))
    owners: list[int | None] = [None] * length
    best: list[tuple[int, bool, int] | None] = [None] * length
    for i, (node, span) in enumerate(zip(nodes, spans)):
        if span is None:
            continue
        ranges = own.get(id(node), ())
        for c in range(*span):
            key = (span[1] - span[0], not any(s <= c < e for s, e in ranges), -depth[i])
            if best[c] is None or key < best[c]:
                best[c], owners[c] = key, i
    return tuple(owners)
