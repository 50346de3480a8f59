"""Execution accuracy of the 11 published Spider-dev systems: ours vs the manifest's reference.

    python benchmarks/exec_accuracy.py [--data ../shared/data] [--workers 2] [--cache-dir DIR] [--distinct]

Prints one row per system: reference and our accuracy (percent, over the dev questions that
have a database), the difference, and our count of each outcome.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

from model.cli_types import existing_dir, positive_float, positive_int
from model.data.exec_command import evaluate_file
from model.data.execution import OUTCOMES

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=existing_dir, default=REPO.parent / "shared" / "data")
    parser.add_argument("--workers", type=positive_int, default=2)
    parser.add_argument("--timeout", type=positive_float, default=30.0)
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="default: a fresh temporary folder"
    )
    parser.add_argument(
        "--distinct", action="store_true", help="keep DISTINCT (test-suite removes it)"
    )
    args = parser.parse_args()

    manifest = json.loads((args.data / "predictions" / "MANIFEST.json").read_text())
    with tempfile.TemporaryDirectory(prefix="exec_accuracy_") as fresh:
        compare_systems(args, manifest, args.cache_dir or Path(fresh))


def compare_systems(args, manifest: dict, cache_dir: Path) -> None:
    """One row per system of the manifest, then the largest difference from the reference."""
    header = f"{'system':<18} {'reference':>9} {'ours':>6} {'diff':>6}  " + " ".join(
        f"{o:>11}" for o in OUTCOMES
    )
    print(header)
    worst = 0.0
    start = time.perf_counter()
    for entry in manifest["spider_dev"]:
        report = evaluate_file(
            args.data / "spider",
            "dev",
            args.data / entry["file"],
            timeout_s=args.timeout,
            cache_dir=cache_dir,
            workers=args.workers,
            distinct=args.distinct,
            progress=False,
        )
        ours = 100 * report["execution_accuracy"]
        reference = entry["execution_accuracy_reference"]
        worst = max(worst, abs(ours - reference))
        counts = " ".join(f"{report['outcomes'][o]:>11}" for o in OUTCOMES)
        print(
            f"{entry['system']:<18} {reference:>9.1f} {ours:>6.1f} {ours - reference:>+6.1f}  {counts}"
        )
    print(
        f"largest |ours - reference|: {worst:.2f} points; {time.perf_counter() - start:.1f} s "
        f"with {args.workers} workers"
    )


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
