"""Cold vs warm execution cache: all 11 Spider-dev systems (11 x 1034 = 11,374 pairs), run twice.

    python benchmarks/exec_cache.py [--data ../shared/data] [--workers 2]

The cold run starts from an empty cache folder; the warm run reuses it, so it only reads
results and compares them. Prints both wall times, their ratio, and checks the outcomes agree.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

from model.cli_types import existing_dir, positive_int
from model.data.datasets import database_path, load_questions
from model.data.execution import execute_pairs
from model.data.predictions import load_predictions

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=existing_dir, default=REPO.parent / "shared" / "data")
    parser.add_argument("--workers", type=positive_int, default=2)
    args = parser.parse_args()

    root = args.data / "spider"
    questions = load_questions(root, "dev")
    manifest = json.loads((args.data / "predictions" / "MANIFEST.json").read_text())
    pairs = []
    for entry in manifest["spider_dev"]:
        sql = {p.question_id: p.sql for p in load_predictions(args.data / entry["file"], questions)}
        pairs += [
            (database_path(root, q.db_id), sql.get(q.question_id, ""), q.gold_sql)
            for q in questions
        ]

    with tempfile.TemporaryDirectory(prefix="exec_cache_") as cache_dir:
        times, outcomes = {}, {}
        for run in ("cold", "warm"):
            start = time.perf_counter()
            outcomes[run] = execute_pairs(
                pairs, cache_dir=Path(cache_dir), workers=args.workers, progress=False
            )
            times[run] = time.perf_counter() - start
    assert outcomes["cold"] == outcomes["warm"], "warm cache changed an outcome"
    print(f"{len(pairs)} pairs, {args.workers} workers")
    print(f"{'cold cache':>12} {'warm cache':>12} {'speed-up':>9}")
    print(f"{times['cold']:>11.2f}s {times['warm']:>11.2f}s {times['cold'] / times['warm']:>8.1f}x")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
