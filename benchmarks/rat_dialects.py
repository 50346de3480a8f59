"""rat across dialects on real SQL: every Spider dev gold query, the 11 systems' Spider dev
predictions and every BIRD dev gold query, transpiled from SQLite by sqlglot to each of rat's
dialects, read back with
`rat.to_tree(transpiled, schema, dialect=d)`: the share giving the same canonical tree (hash) as
the SQLite original, and the differing cases grouped by cause. With `--scores`, what a user
sees: the BIRD dev gold queries scored by the shipped scorer (`Scorer.pretrained()`, with the
question and the schema, no database) as SQLite and as written in each dialect: the share whose
query confidence is the SQLite original's, the mean and largest difference, the rows not scored.

    python benchmarks/rat_dialects.py [--data-root ../shared/data] [--show 2] [--scores]

Only queries rat reads as SQLite count (the others have no tree to compare). A group's cause is
classified as a real meaning difference (the transpiled query means something else in that
dialect, so its tree must differ) or a defect (sqlglot's or rat's).
"""

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from sqlglot.errors import SqlglotError

import rat
from model.cli_types import existing_dir, non_negative_int
from model.data.transpile import from_sqlite

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
from rat_coverage import read_prediction_file, schemas

# (cause, kind, predicate on (sqlite sql, transpiled sql, dialect)): the first that matches names
# a differing case's cause. "meaning": the transpiled query means something else there.
CAUSES = [
    ("a quoted name keeps its case in the target (SQLite's quoted names ignore case);"
     + " sqlglot keeps the quotes", "meaning",
     lambda s, t, d: rat.DIALECTS[d].case_sensitive and any(
         rat.DIALECTS[d].label(name, True).startswith('"') for name in _QUOTED.findall(t))),
    ("sqlglot writes strftime('%s', ..) (seconds since 1970) as another function", "defect",
     lambda s, t, d: "'%s'" in s.lower() and "strftime" in s.lower()),
]
_LIKE = re.compile(r"\blike\b", re.IGNORECASE)
_QUOTED = re.compile(r'"((?:[^"]|"")+)"')


def cause_of(sql: str, transpiled: str, dialect: str, error: str | None) -> tuple[str, str]:
    if error is not None:
        return f"error: {error}", "defect"
    for cause, kind, matches in CAUSES:
        if matches(sql, transpiled, dialect):
            return cause, kind
    return "unexplained tree difference", "defect"


def compare(sql: str, schema: rat.Schema | None, dialect: str, original: rat.Node):
    """None when the transpiled query gives the original's tree, else (transpiled, error)."""
    try:
        transpiled = from_sqlite(sql, dialect, schema, habits=False)  # sqlglot's alone
    except (SqlglotError, ValueError) as error:
        return "", f"sqlglot cannot write it: {type(error).__name__}"
    try:
        tree = rat.to_tree(transpiled, schema, dialect)
    except rat.RATError as error:
        message = re.sub(r"'[^']*'", "'..'", str(error))[:80]
        return transpiled, f"rat: {message}"
    return None if tree.hash == original.hash else (transpiled, None)


def compare_scores(root: Path, dialects: list[str]) -> None:
    """The shipped scorer's query confidence of each BIRD dev gold query (question, schema, no
    database) as SQLite and transpiled to each dialect."""
    from model import Scorer

    entries = {e["db_id"]: e for e in json.loads((root / "bird" / "dev_tables.json").read_text())}
    rows = [{"sql": r["SQL"], "question": r["question"], "evidence": r.get("evidence", ""),
             "schema": entries[r["db_id"]], "db_id": r["db_id"]}
            for r in json.loads((root / "bird" / "dev.json").read_text())]
    scorer = Scorer.pretrained()
    sqlite = [getattr(s, "query_confidence", None) for s in scorer.score_many(rows, progress=False)]
    print(f"BIRD dev gold scored as SQLite: {sum(c is not None for c in sqlite)} of {len(rows)}\n")
    print(f"{'dialect':10s} {'scored':>7s} {'same confidence':>16s} {'mean |diff|':>12s} {'max |diff|':>11s}")
    for dialect in dialects:
        written = []
        for row in rows:
            try:
                sql = from_sqlite(row["sql"], dialect, rat.Schema.from_spider(row["schema"]), habits=False)
            except (SqlglotError, ValueError):
                sql = ""  # (sqlglot cannot write it: not scored, counted below)
            written.append(dict(row, sql=sql, dialect=dialect))
        scored = [getattr(s, "query_confidence", None) for s in scorer.score_many(written, progress=False)]
        pairs = [(a, b) for a, b in zip(sqlite, scored, strict=True) if a is not None and b is not None]
        diffs = [abs(a - b) for a, b in pairs]
        print(f"{dialect:10s} {len(pairs):7d} {100 * sum(d < 1e-9 for d in diffs) / len(diffs):15.2f}% "
              f"{sum(diffs) / len(diffs):12.4f} {max(diffs):11.3f}")
    print()


def dialect_names(text: str) -> list[str]:
    """``--dialects``: comma-separated names of ``rat.DIALECTS``."""
    names = text.split(",")
    unknown = [d for d in names if d not in rat.DIALECTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown dialect {unknown[0]!r} (known: {', '.join(sorted(rat.DIALECTS))})")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=existing_dir, default=REPO.parent / "shared" / "data")
    parser.add_argument("--show", type=non_negative_int, default=2, help="examples listed per cause")
    parser.add_argument("--dialects", type=dialect_names,
                        default=",".join(d for d in sorted(rat.DIALECTS) if d != "sqlite"))
    parser.add_argument("--scores", action="store_true",
                        help="also score BIRD dev gold in each dialect with the shipped scorer")
    args = parser.parse_args()
    root = args.data_root
    if args.scores:
        compare_scores(root, args.dialects)
    spider = schemas(root / "spider" / "tables.json")
    dev = json.loads((root / "spider" / "dev.json").read_text())
    sets = {"gold": [(r["query"], spider.get(r["db_id"])) for r in dev]}
    preds = []
    for path in sorted((root / "predictions" / "spider_dev").iterdir()):
        preds += [(s, spider.get(r["db_id"])) for s, r in zip(read_prediction_file(path), dev, strict=True)]
    sets["predictions"] = preds
    bird = schemas(root / "bird" / "dev_tables.json")
    sets["bird gold"] = [(r["SQL"], bird.get(r["db_id"]))
                         for r in json.loads((root / "bird" / "dev.json").read_text())]

    originals = {}
    for name, queries in sets.items():
        kept = []
        for sql, schema in queries:
            try:
                kept.append((sql, schema, rat.to_tree(sql, schema)))
            except rat.RATError:
                continue
        originals[name] = kept
        print(f"{name}: {len(queries)} queries, {len(kept)} read by rat as SQLite")

    print(f"\n{'dialect':10s} {'set':12s} {'queries':>8s} {'same tree':>10s} {'share':>8s}"
          f" {'meaning':>8s} {'defect':>7s} {'LIKE*':>6s} {'s':>6s}")
    groups: dict[tuple[str, str, str], list] = defaultdict(list)
    for dialect in args.dialects:
        for name, kept in originals.items():
            start = time.perf_counter()
            same, kinds, like = 0, Counter(), 0
            for sql, schema, original in kept:
                differs = compare(sql, schema, dialect, original)
                if differs is None:
                    same += 1
                    like += _LIKE.search(sql) is not None \
                        and not rat.DIALECTS[dialect].like_ignores_case
                    continue
                cause, kind = cause_of(sql, differs[0], dialect, differs[1])
                kinds[kind] += 1
                groups[(dialect, kind, cause)].append((name, sql, differs[0]))
            print(f"{dialect:10s} {name:12s} {len(kept):8d} {same:10d}"
                  f" {100 * same / len(kept):7.2f}% {kinds['meaning']:8d} {kinds['defect']:7d}"
                  f" {like:6d} {time.perf_counter() - start:6.1f}")

    print("\nLIKE*: same-tree queries with LIKE, which ignores ASCII case in SQLite but not in"
          " the target;\nsqlglot writes LIKE as LIKE, and a tree names the operator, not the"
          " dialect's LIKE (a query\nis compared with others of its own dialect).")
    print("\ndiffering cases by cause (kind: meaning = a real meaning difference, defect)")
    for (dialect, kind, cause), cases in sorted(groups.items(), key=lambda g: (g[0][0], -len(g[1]))):
        print(f"\n[{dialect}] {kind}: {cause} ({len(cases)})")
        for name, sql, transpiled in cases[:args.show]:
            print(f"  {name}: {' '.join(sql.split())}\n    -> {transpiled}")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
