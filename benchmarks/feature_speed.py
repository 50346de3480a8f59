"""Node-feature extraction speed (model.nodes.features) on the 11 systems' Spider dev predictions:
cold (empty cache) and warm (cached), single process, in nodes per second; then the scorer-LM
span group (``lm=True``) with the whole-query scorer's token cache (warm when the whole-query
track has scored these predictions: the LM only loads, the spans are matched to the written SQL).

    .venv/bin/python benchmarks/feature_speed.py [--root ../shared/data/spider] [--limit N] [--no-lm]

With an empty token cache the ``lm=True`` pass runs the LM on every prediction (about an hour for
all 10,681 on 2 CPU cores; later runs read the cache); ``--no-lm`` leaves that pass out.
"""

from __future__ import annotations

import argparse
import glob
import tempfile
import time
from pathlib import Path

from model.cli_types import existing_dir, positive_int
from model.data.datasets import database_path, load_schemas
from model.lm.token_probabilities import scores_cache_path
from model.nodes.examples import build_examples
from model.nodes.features import build_features

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=existing_dir, default=str(REPO.parent / "shared" / "data" / "spider"))
    parser.add_argument("--predictions", default=None, help="glob (default: <root>/../predictions/spider_dev/*)")
    parser.add_argument("--limit", type=positive_int, default=None, help="first N examples only")
    parser.add_argument("--no-lm", action="store_true", help="leave out the scorer-LM (lm=True) pass")
    args = parser.parse_args()
    root = args.root
    pattern = args.predictions or str(root.parent / "predictions" / "spider_dev" / "*")
    files = sorted(Path(p) for p in glob.glob(pattern))
    if not files:
        parser.error(f"--predictions {pattern}: no file matches")
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
        if args.no_lm:
            return
        cache = scores_cache_path()
        held = f"{cache.stat().st_size / 2**20:.0f} MB" if cache.is_file() else "absent"
        print(f"single+lm: loading the scorer LM; the token log-probs of the {len(examples)} predictions are "
              f"read from {cache} ({held}), those missing there computed now (about an hour for all 10,681 "
              "from an empty cache on 2 CPU cores; --no-lm leaves this pass out)", flush=True)
        start = time.perf_counter()
        _, names, report = build_features(examples, schemas, db_paths, cache_folder=Path(folder), lm=True)
        print(f"warm  single+lm         {len(names)} features: {report} "
              f"(with loading the LM: {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
