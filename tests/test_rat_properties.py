"""Property tests: spellings of the same query share a root hash; a changed literal never does."""

from hypothesis import given, settings
from hypothesis import strategies as st

import rat

SCHEMA = rat.Schema({
    "singer": ["singer_id", "name", "country", "age"],
    "concert": ["concert_id", "singer_id", "stadium_id", "year"],
    "stadium": ["stadium_id", "location", "capacity"],
    "song": ["song_id", "singer_id", "title", "sales"],
})
# A chain of joinable tables and the condition joining each to the previous one.
JOIN_CHAIN = [("singer", None), ("concert", ("singer", "singer_id", "concert", "singer_id")),
              ("stadium", ("concert", "stadium_id", "stadium", "stadium_id")),
              ("song", ("singer", "singer_id", "song", "singer_id"))]
KEYWORDS = ["select", "from", "where", "and", "or", "in", "join", "on", "as", "union", "order",
            "by", "desc", "limit", "count", "not", "like", "group"]

settings.register_profile("rat", max_examples=60, deadline=None)
settings.load_profile("rat")

values = st.one_of(st.integers(-1000, 100000).map(str),
                   st.text("abcdefgh XYZ%", min_size=1, max_size=8).map(lambda s: f"'{s}'"))
conditions = st.builds(
    lambda column, op, value: f"{column} {op} {value}",
    st.sampled_from(["singer.name", "singer.country", "singer.age"]),
    st.sampled_from(["=", "!=", ">", "<", ">=", "<=", "LIKE"]),
    values,
)
aliases = st.text("abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=6).map(lambda s: "q" + s)


def root(sql: str) -> str:
    return rat.to_tree(sql, SCHEMA).hash


@given(st.lists(conditions, min_size=2, max_size=5, unique=True), st.randoms(),
       st.sampled_from(["AND", "OR"]))
def test_shuffling_and_or_operands_keeps_the_root_hash(operands, rnd, connective):
    shuffled = operands[:]
    rnd.shuffle(shuffled)
    sql = "SELECT singer.name FROM singer WHERE {}"
    assert root(sql.format(f" {connective} ".join(operands))) == root(
        sql.format(f" {connective} ".join(shuffled)))


@given(st.lists(values, min_size=1, max_size=6, unique=True), st.randoms())
def test_shuffling_in_lists_keeps_the_root_hash(items, rnd):
    shuffled = items[:]
    rnd.shuffle(shuffled)
    sql = "SELECT name FROM singer WHERE country IN ({})"
    assert root(sql.format(", ".join(items))) == root(sql.format(", ".join(shuffled)))


def join_sql(order: list[int], flip: list[bool], alias_names: dict[str, str]) -> str:
    """A join over the tables JOIN_CHAIN[i] for i in `order`; every join condition is placed
    on the last of the tables (in `order`) it mentions."""
    position = {JOIN_CHAIN[i][0]: k for k, i in enumerate(order)}
    on: dict[int, list[str]] = {}
    for i in order:
        link = JOIN_CHAIN[i][1]
        if link is None:
            continue
        t1, c1, t2, c2 = link
        left, right = f"{alias_names[t1]}.{c1}", f"{alias_names[t2]}.{c2}"
        if flip[i]:
            left, right = right, left
        on.setdefault(max(position[t1], position[t2]), []).append(f"{left} = {right}")
    parts = []
    for k, i in enumerate(order):
        table = JOIN_CHAIN[i][0]
        item = f"{table} AS {alias_names[table]}"
        if k == 0:
            parts.append(f"FROM {item}")
        else:
            # A table joined before its partner has no condition yet: a plain JOIN (a cross
            # product); its condition goes with the partner.
            conditions = " AND ".join(on.get(k, []))
            parts.append(f"JOIN {item} ON {conditions}" if conditions else f"JOIN {item}")
    return f"SELECT {alias_names['singer']}.name " + " ".join(parts)


@given(st.integers(2, 4), st.randoms(), st.lists(aliases, min_size=4, max_size=4, unique=True))
def test_join_order_and_alias_names_keep_the_root_hash(n_tables, rnd, alias_list):
    tables = [t for t, _ in JOIN_CHAIN]
    identity = {t: t for t in tables}
    renamed = dict(zip(tables, alias_list))
    order = list(range(n_tables))
    shuffled = order[:]
    rnd.shuffle(shuffled)
    flips = [rnd.random() < 0.5 for _ in JOIN_CHAIN]
    written = join_sql(order, [False] * 4, identity)
    permuted = join_sql(shuffled, flips, renamed)
    assert root(written) == root(permuted), (written, permuted)


@given(st.lists(conditions, min_size=2, max_size=4, unique=True), st.randoms(),
       st.sampled_from(["UNION", "INTERSECT", "UNION ALL"]))
def test_shuffling_set_operands_keeps_the_root_hash(operands, rnd, operator):
    queries = [f"SELECT singer.name FROM singer WHERE {c}" for c in operands]
    shuffled = queries[:]
    rnd.shuffle(shuffled)
    assert root(f" {operator} ".join(queries)) == root(f" {operator} ".join(shuffled))


@given(st.lists(st.booleans(), min_size=len(KEYWORDS), max_size=len(KEYWORDS)),
       conditions, aliases)
def test_keyword_case_and_alias_names_keep_the_root_hash(upper, condition, alias):
    sql = ("select {a}.name, count(*) from singer as {a} join concert on {a}.singer_id = "
           "concert.singer_id where {c} and {a}.age not in (1, 2) group by {a}.name "
           "order by count(*) desc limit 3")
    cased = sql
    for keyword, is_upper in zip(KEYWORDS, upper):
        if is_upper:
            cased = " ".join(w.upper() if w == keyword else w for w in cased.split(" "))
    assert root(sql.format(a="singer", c=condition)) == root(cased.format(a=alias, c=condition))


@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6),
       st.sampled_from(["WHERE age > {}", "WHERE age IN (1, {})", "LIMIT {}",
                        "WHERE age BETWEEN 0 AND {}", "WHERE age + {} > 3"]))
def test_changing_a_number_changes_the_root_hash(a, b, clause):
    if a == b:
        return
    sql = "SELECT name FROM singer " + clause
    assert root(sql.format(a)) != root(sql.format(b))


@given(st.text(min_size=1, max_size=10).filter(lambda s: "\x00" not in s),
       st.text(min_size=1, max_size=10).filter(lambda s: "\x00" not in s))
def test_changing_a_string_changes_the_root_hash(a, b):
    if a == b:
        return
    sql = "SELECT name FROM singer WHERE country = {}"
    quote = lambda s: "'" + s.replace("'", "''") + "'"
    assert root(sql.format(quote(a))) != root(sql.format(quote(b)))


def test_join_helper_writes_different_sql_for_the_same_join():
    # Guards the join property against being vacuous.
    tables = {t: t for t, _ in JOIN_CHAIN}
    a = join_sql([0, 1, 2, 3], [False] * 4, tables)
    b = join_sql([3, 2, 1, 0], [True] * 4, tables)
    assert a != b
    assert root(a) == root(b)
    c = join_sql([0, 1, 2, 3], [False] * 4, tables).replace("concert.stadium_id", "concert.year")
    assert root(a) != root(c)
