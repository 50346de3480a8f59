"""Same trees under both sqlglot builds: runs `rat` on every query once with the compiled
build (sqlglotc) and once with pure-Python sqlglot (`RAT_SQLGLOT=pure`, see `rat.build`), each
in a subprocess, and compares per query the tree's hash, its node-by-node serialisation, its
labelling hashes and the canonical SQL (or the RATError message).

    python benchmarks/rat_builds.py [--data-root ../shared/data] [--queries FILE]
    python benchmarks/rat_builds.py --dump OUT.json   # this process's build only

Without --queries: Spider gold (dev, train_spider, train_others), BIRD dev gold and the 11
systems' Spider dev predictions. --queries reads one SQL a line (no schema). Exit status 1
when any query differs, 2 when sqlglotc is not installed (nothing to compare).
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere: `rat` is the checkout's

import rat  # after the path: the checkout's rat
from model.cli_types import existing_dir, existing_file, non_negative_int
from rat.build import sqlglot_build
from rat.hashing import contextual_hashes


def load_queries(data_root: Path | None, queries_file: Path | None):
    """[(dataset name, sql, schema or None)] in a fixed order."""
    if queries_file is not None:
        lines = queries_file.read_text(encoding="utf-8").splitlines()
        return [("file", sql, None) for sql in lines if sql.strip()]
    sys.path.insert(0, str(REPO / "benchmarks"))
    from rat_coverage import bird_gold, read_prediction_file, schemas, spider_gold

    spider_schemas = schemas(data_root / "spider" / "tables.json")
    bird_schemas = schemas(data_root / "bird" / "dev_tables.json")
    gold = spider_gold(data_root)
    rows = [(name, sql, spider_schemas[db]) for name, qs in gold.items() for sql, db in qs]
    rows += [("bird/dev", sql, bird_schemas[db]) for sql, db in bird_gold(data_root)]
    dev_db = [db for _, db in gold["spider/dev"]]
    for path in sorted((data_root / "predictions" / "spider_dev").iterdir()):
        rows += [(f"pred/{path.stem}", sql, spider_schemas[db])
                 for sql, db in zip(read_prediction_file(path), dev_db)]
    return rows


def digest(sql: str, schema) -> str:
    """What `rat` makes of one query, as one digest: tree hash, post-order labels, labelling
    hashes and canonical SQL; or the RATError message."""
    try:
        tree = rat.to_tree(sql, schema)
        canonical = rat.canonicalize(sql, schema)
    except rat.RATError as error:
        return "RATError: " + str(error)
    parts = [tree.hash, rat.serialize(tree), *contextual_hashes(tree), canonical]
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=16).hexdigest()


def dump(rows, out: Path) -> None:
    start = time.perf_counter()
    digests = [digest(sql, schema) for _, sql, schema in rows]
    out.write_text(json.dumps({"build": sqlglot_build(), "digests": digests,
                               "seconds": time.perf_counter() - start}))


def compare(args) -> int:
    rows = load_queries(args.data_root, args.queries)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for build in ("compiled", "pure"):
            env = {**os.environ, "RAT_SQLGLOT": "pure" if build == "pure" else "compiled"}
            out = Path(tmp) / f"{build}.json"
            command = [sys.executable, __file__, "--dump", str(out)]
            command += ["--queries", str(args.queries)] if args.queries else \
                ["--data-root", str(args.data_root)]
            subprocess.run(command, env=env, check=True)
            results[build] = json.loads(out.read_text())
    compiled, pure = results["compiled"], results["pure"]
    for result in (compiled, pure):
        print(f"{result['build']:40s} {len(result['digests'])} queries in {result['seconds']:.1f} s")
    if compiled["build"] == pure["build"]:
        print("sqlglotc is not installed: both runs used the same build, nothing to compare")
        return 2
    differ = [i for i, (a, b) in enumerate(zip(compiled["digests"], pure["digests"])) if a != b]
    errors = sum(d.startswith("RATError") for d in compiled["digests"])
    print(f"{len(rows)} queries ({errors} RATError under both builds alike or not): "
          f"{len(differ)} differ")
    for i in differ[: args.show]:
        name, sql, _ = rows[i]
        print(f"  [{name}] {sql[:200]!r}\n    compiled: {compiled['digests'][i][:120]}"
              f"\n    pure:     {pure['digests'][i][:120]}")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=existing_dir, default=REPO.parent / "shared" / "data")
    parser.add_argument("--queries", type=existing_file, help="one SQL a line instead of the data")
    parser.add_argument("--dump", type=Path, help="write this build's digests and stop")
    parser.add_argument("--show", type=non_negative_int, default=10, help="differing queries listed")
    args = parser.parse_args()
    if args.dump:
        dump(load_queries(args.data_root, args.queries), args.dump)
        return 0
    return compare(args)


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        sys.exit(main())
