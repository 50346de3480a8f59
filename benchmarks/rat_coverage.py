"""How much real SQL `rat.to_tree` converts: per dataset (Spider gold, BIRD gold, the 11
systems' Spider dev predictions), per SQL construct, and which queries fail.

    python benchmarks/rat_coverage.py [--data-root ../shared/data] [--show 10]
"""

import argparse
import csv
import json
import time
from collections import Counter
from pathlib import Path

import rat
from model.cli_types import existing_dir, non_negative_int

REPO = Path(__file__).resolve().parents[1]

# Construct -> predicate on the lowercased SQL text (a cheap, approximate classifier: it
# tells which kinds of query fail, not a parse).
CONSTRUCTS = {
    "join": lambda s: " join " in s,
    "left join": lambda s: "left join" in s or "left outer join" in s,
    "group by": lambda s: "group by" in s,
    "having": lambda s: "having" in s,
    "order by": lambda s: "order by" in s,
    "limit": lambda s: "limit" in s,
    "distinct": lambda s: "distinct" in s,
    "union/intersect/except": lambda s: any(k in s for k in (" union ", " intersect ",
                                                               " except ")),
    "subquery": lambda s: s.count("select") > 1,
    "in / not in": lambda s: " in (" in s or " in(" in s,
    "like": lambda s: " like " in s,
    "between": lambda s: " between " in s,
    "exists": lambda s: "exists" in s,
    "case / iif": lambda s: "case " in s or "iif(" in s,
    "cast": lambda s: "cast(" in s,
    "with (cte)": lambda s: s.lstrip().startswith("with "),
    "window (over)": lambda s: " over (" in s or " over(" in s,
}


def spider_gold(root: Path) -> dict[str, list[tuple[str, str]]]:
    datasets = {}
    for split in ("dev", "train_spider", "train_others"):
        rows = json.loads((root / "spider" / f"{split}.json").read_text())
        datasets[f"spider/{split}"] = [(r["query"], r["db_id"]) for r in rows]
    return datasets


def bird_gold(root: Path) -> list[tuple[str, str]]:
    rows = json.loads((root / "bird" / "dev.json").read_text())
    return [(r["SQL"], r["db_id"]) for r in rows]


def read_prediction_file(path: Path) -> list[str]:
    """SQL strings of a Spider dev prediction file: .txt one a line, .csv column PREDICTED SQL."""
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            return [row["PREDICTED SQL"] for row in csv.DictReader(f)]
    return path.read_text().splitlines()


def schemas(path: Path) -> dict[str, rat.Schema]:
    return {e["db_id"]: rat.Schema.from_spider(e) for e in json.loads(path.read_text())}


def convert(queries, schema_by_db):
    """(converted count, failures [(sql, message)], other-exception failures)."""
    ok, failures, crashes = 0, [], []
    for sql, db_id in queries:
        try:
            rat.to_tree(sql, schema_by_db.get(db_id))
            ok += 1
        except rat.RATError as error:
            failures.append((sql, str(error)))
        except Exception as error:  # noqa: BLE001 - counted as a bug, listed below
            crashes.append((sql, f"{type(error).__name__}: {error}"))
    return ok, failures, crashes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=existing_dir, default=REPO.parent / "shared" / "data")
    parser.add_argument("--show", type=non_negative_int, default=10, help="failures listed per dataset")
    args = parser.parse_args()
    root = args.data_root
    spider_schemas = schemas(root / "spider" / "tables.json")
    bird_schemas = schemas(root / "bird" / "dev_tables.json")
    datasets = {name: (q, spider_schemas) for name, q in spider_gold(root).items()}
    datasets["bird/dev"] = (bird_gold(root), bird_schemas)
    dev_db = [db for _, db in spider_gold(root)["spider/dev"]]
    for path in sorted((root / "predictions" / "spider_dev").iterdir()):
        sqls = read_prediction_file(path)
        datasets[f"pred/{path.stem}"] = (list(zip(sqls, dev_db)), spider_schemas)

    construct_total, construct_failed = Counter(), Counter()
    print(f"{'dataset':32s} {'queries':>8s} {'converted':>10s} {'RATError':>9s} {'other':>6s}"
          f" {'coverage':>9s} {'ms/query':>9s}")
    listed = []
    for name, (queries, schema_by_db) in datasets.items():
        start = time.perf_counter()
        ok, failures, crashes = convert(queries, schema_by_db)
        elapsed = time.perf_counter() - start
        failed = {sql for sql, _ in failures + crashes}
        for sql, _ in queries:
            lowered = " ".join(sql.lower().split())
            for construct, present in CONSTRUCTS.items():
                if present(lowered):
                    construct_total[construct] += 1
                    construct_failed[construct] += sql in failed
        print(f"{name:32s} {len(queries):8d} {ok:10d} {len(failures):9d} {len(crashes):6d}"
              f" {100 * ok / len(queries):8.2f}% {1000 * elapsed / len(queries):9.3f}")
        listed.append((name, failures, crashes))

    print("\nper construct (all datasets above together)")
    print(f"{'construct':26s} {'queries':>8s} {'failed':>7s} {'coverage':>9s}")
    for construct in CONSTRUCTS:
        total, failed = construct_total[construct], construct_failed[construct]
        if total:
            print(f"{construct:26s} {total:8d} {failed:7d} {100 * (total - failed) / total:8.2f}%")

    print(f"\nfailures (first {args.show} per dataset)")
    for name, failures, crashes in listed:
        for sql, message in (crashes + failures)[: args.show]:
            print(f"  [{name}] {message[:300]}")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
