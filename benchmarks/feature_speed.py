"""Node-feature extraction speed (model.nodes.features) on the 11 systems' Spider dev predictions:
cold (empty cache) and warm (cached), single process, in nodes per second; then the scorer-LM
span group (``lm=True``) with the whole-query scorer's token cache (warm when the whole-query
track has scored these predictions: the LM only loads, the spans are matched to the written SQL).

    .venv/bin/python benchmarks/feature_speed.py [--root ../shared/data/spider] [--limit N]
"""

from __future__ import annotations

import argparse
import glob
import tempfile
import time
from pathlib import Path

from model.data.datasets import database_path, load_schemas
from model.nodes.examples import build_examples
from model.nodes.features import build_features

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(REPO.parent / "shared" / "data" / "spider"))
    parser.add_argument("--predictions", default=None, help="glob (default: <root>/../predictions/spider_dev/*)")
    parser.add_argument("--limit", type=int, default=None, help="first N examples only")
    args = parser.parse_args()
    root = Path(args.root)
    files = sorted(Path(p) for p in glob.glob(args.predictions or str(root.parent / "predictions" / "spider_dev" / "*")))
    start = time.perf_counter()
    examples, _ = build_examples(root, "dev", files, verbose=False)
    examples = examples[: args.limit]
    print(f"{len(examples)} examples, {sum(len(e.node_labels) for e in examples)} nodes "
          f"(build_examples: {time.perf_counter() - start:.1f} s)")
    schemas = load_schemas(root)
    db_paths = {db: database_path(root, db) for db in {e.db_id for e in examples}}
    with tempfile.TemporaryDirectory() as folder:
        for run in ("cold", "warm"):
            for consensus in (False, True):
                if run == "cold" and consensus:
                    continue  # consensus is never cached: its time is the warm difference
                _, names, report = build_features(examples, schemas, db_paths, consensus=consensus,
                                                  cache_folder=Path(folder))
                track = "single+consensus" if consensus else "single"
                print(f"{run:5s} {track:17s} {len(names)} features: {report}")
        start = time.perf_counter()
        _, names, report = build_features(examples, schemas, db_paths, cache_folder=Path(folder), lm=True)
        print(f"warm  single+lm         {len(names)} features: {report} "
              f"(with loading the LM: {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
