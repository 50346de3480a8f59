"""Speed of `rat` under both sqlglot builds side by side: `to_tree` over every Spider gold
query against `sqlglot.parse_one` of the same build on the same queries, and `label_nodes` per
(prediction, gold) pair against one `to_tree`.

    python benchmarks/rat_speed.py [--data-root ../shared/data] [--repeat 3]
                                   [--baseline DIR]

Each build runs in a subprocess of its own (compiled: sqlglotc, where installed; pure:
``RAT_SQLGLOT=pure``, see `rat.build`), the builds taking turns once per repeat so that load
from other processes hits them alike; the best of the repeats is shown. ``--baseline DIR``
adds the `rat` of another checkout (e.g. ``git worktree add /tmp/rat-old <commit>``) run on
pure-Python sqlglot, to compare with an earlier version of `rat` in the same run.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from model.cli_types import existing_dir, positive_int

REPO = Path(__file__).resolve().parents[1]
METRICS = ("parse", "own_parse", "tree", "label", "label_tree")


def measure(args) -> dict:
    """One repeat in this process: seconds per candidate (see METRICS) and the build."""
    if args.rat_from:
        # An earlier rat may predate rat.build: switch sqlglot to pure Python with this
        # checkout's switch, then import the other checkout's rat.
        spec = importlib.util.spec_from_file_location("_switch", REPO / "rat" / "build.py")
        switch = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(switch)
        switch.use_pure_sqlglot()
        sys.path.insert(0, str(args.rat_from))
    else:
        sys.path.insert(0, str(REPO))
    import rat  # noqa: I001 - before sqlglot: with RAT_SQLGLOT=pure, rat decides how it loads
    from rat.canonicalize import parse as rat_parse

    import sqlglot

    spider = args.data_root / "spider"
    schemas = {e["db_id"]: rat.Schema.from_spider(e)
               for e in json.loads((spider / "tables.json").read_text())}
    queries = []
    for split in ("dev", "train_spider", "train_others"):
        queries += [(r["query"], r["db_id"])
                    for r in json.loads((spider / f"{split}.json").read_text())]
    for q, d in queries[:300]:  # warm up: imports, caches
        rat.to_tree(q, schemas[d])
        sqlglot.parse_one(q, read="sqlite")

    # Interleaved per query, so that load from other processes hits all three alike.
    candidates = {
        "parse": lambda q, d: sqlglot.parse_one(q, read="sqlite"),
        "own_parse": lambda q, d: rat_parse(q),
        "tree": lambda q, d: rat.to_tree(q, schemas[d]),
    }
    totals = dict.fromkeys(candidates, 0.0)
    clock = time.perf_counter
    for q, d in queries:
        for name, run in candidates.items():
            start = clock()
            run(q, d)
            totals[name] += clock() - start

    # label_nodes on real pairs: a system's Spider dev prediction against its gold query, on
    # fresh trees (hashes are cached on nodes, and a real caller labels each pair once), each
    # interleaved with one to_tree of the same gold query.
    dev = json.loads((spider / "dev.json").read_text())
    predictions = args.data_root / "predictions" / "spider_dev" / "codes_7b.txt"
    label = label_tree = 0.0
    kept = 0
    for row, pred_sql in zip(dev, predictions.read_text().splitlines()):
        gold_sql, schema = row["query"], schemas[row["db_id"]]
        try:
            pred, gold = rat.to_tree(pred_sql, schema), rat.to_tree(gold_sql, schema)
        except rat.RATError:
            continue
        kept += 1
        start = clock()
        rat.label_nodes(pred, gold)
        middle = clock()
        rat.to_tree(gold_sql, schema)
        label += middle - start
        label_tree += clock() - middle
    build = "pure Python"
    if not args.rat_from:
        from rat.build import sqlglot_build

        build = sqlglot_build()
    return {**totals, "label": label, "label_tree": label_tree, "queries": len(queries),
            "pairs": kept, "build": build, "sqlglot": sqlglot.__version__}


def run_child(args, build: str, rat_from: Path | None) -> dict:
    env = {**os.environ, "RAT_SQLGLOT": build}
    command = [sys.executable, __file__, "--child", "--data-root", str(args.data_root)]
    if rat_from is not None:
        command += ["--rat-from", str(rat_from)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode == 2:  # the child's one-line error (a data root of another layout)
        sys.stderr.write(result.stderr)
        sys.exit(2)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} (RAT_SQLGLOT={build}) failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def checkout(text: str) -> Path:
    """``--baseline``: a folder with a ``rat`` package of its own (another checkout); without one,
    the child would import this checkout's rat and the column would compare it with itself."""
    if not (Path(text) / "rat" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{text}: no rat package there (give another checkout of this repository)")
    return Path(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=existing_dir, default=REPO.parent / "shared" / "data")
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--baseline", type=checkout, help="another checkout's rat, pure Python")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rat-from", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return

    runs = {"compiled": ("compiled", None), "pure": ("pure", None)}
    if args.baseline:
        runs["baseline"] = ("pure", args.baseline.resolve())
    best: dict[str, dict] = {}
    for _ in range(args.repeat):
        for name, (build, rat_from) in runs.items():
            result = run_child(args, build, rat_from)
            if name not in best:
                best[name] = result
            else:
                best[name].update({m: min(best[name][m], result[m]) for m in METRICS})
    if best["compiled"]["build"] == best["pure"]["build"]:
        print("note: sqlglotc is not installed, both columns are pure Python")
    names = {"compiled": "rat, compiled", "pure": "rat, pure Python",
             "baseline": f"baseline {args.baseline}"}
    n = best["pure"]["queries"]
    print(f"Spider gold queries (dev + train_spider + train_others): {n}, best of {args.repeat};"
          f" sqlglot {best['pure']['sqlglot']}")
    print(f"{'':34s}" + "".join(f"{names[k][:28]:>30s}" for k in best))
    print(f"{'build':34s}" + "".join(f"{r['build']:>30s}" for r in best.values()))

    def row(title, values):
        print(f"{title:34s}" + "".join(f"{v:>30s}" for v in values))

    def rate(seconds, count):
        return f"{count / seconds:8.0f} q/s {1e6 * seconds / count:7.1f} us"

    row("sqlglot.parse_one (sqlite)", [rate(r["parse"], n) for r in best.values()])
    row("rat's parse step alone", [rate(r["own_parse"], n) for r in best.values()])
    row("rat.to_tree (with schema)", [rate(r["tree"], n) for r in best.values()])
    row("to_tree / parse_one (<= 1.2)", [f"{r['tree'] / r['parse']:.2f}" for r in best.values()])
    reference = best.get("baseline", best["pure"])
    which = "baseline" if "baseline" in best else "pure"
    row(f"to_tree speed-up vs {which} to_tree",
        [f"{reference['tree'] / r['tree']:.2f}x" for r in best.values()])
    row("label_nodes per pair (codes_7b)",
        [f"{1e6 * r['label'] / r['pairs']:.1f} us" for r in best.values()])
    row("label_nodes / to_tree (<= 1)",
        [f"{r['label'] / r['label_tree']:.2f}" for r in best.values()])


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
