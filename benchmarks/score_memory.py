"""Peak memory of ``rat-score`` on a large prediction file, side by side in one run: the file
scored a chunk at a time (``model.scoring.cli.CHUNK_ROWS`` rows, each chunk written before the
next is scored) against the same file with ``--label-shift``, which reads every row's confidence
before it writes any and so holds the whole file's results.

Items: the 11 systems' Spider dev predictions, repeated ``--copies`` times as JSONL rows
(../shared/data; the demo corpus when it is absent), scored with their databases.

    python benchmarks/score_memory.py [--copies 1]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.cli_types import positive_int
from model.data.datasets import load_questions
from model.data.predictions import load_predictions
from model.synth.demo import demo_root

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def rows_and_root() -> tuple[list[dict], Path, str]:
    if (SHARED / "spider" / "dev.json").exists():
        root, files, source = SHARED / "spider", sorted((SHARED / "predictions" / "spider_dev").iterdir()), "Spider dev"
    else:
        root, source = demo_root(), "the demo corpus"
        files = sorted((root / "predictions").glob("*.jsonl"))
    questions = load_questions(root, "dev")
    rows = [{"question_id": p.question_id, "sql": p.sql, "system": p.system}
            for path in files for p in load_predictions(path, questions, allow_partial=True)]
    return rows, root, f"{len(files)} systems' {source} predictions"


def peak_mib(command: list[str]) -> tuple[float, float]:
    """Seconds and the peak resident memory (MiB) of the largest process ``command`` ran."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr[-500:]}")
    return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=positive_int, default=1, help="the rows repeated this many times")
    args = parser.parse_args()
    rows, root, source = rows_and_root()
    rows = [{**row, "system": f"{row['system']}_{k}"} for k in range(args.copies) for row in rows]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        base = [sys.executable, "-m", "model.scoring.cli", "--data-root", str(root), "--split", "dev",
                "--predictions", str(path), "--out", str(Path(folder) / "scored.jsonl")]
        print(f"{len(rows)} rows: {source} x {args.copies}, scored with their databases")
        print(f"{'rat-score':<28}{'seconds':>9}{'peak MiB':>10}")
        # (RUSAGE_CHILDREN's peak is the largest of all children so far: the smaller run first)
        chunked = peak_mib(base)
        print(f"{'a chunk at a time':<28}{chunked[0]:>9.1f}{chunked[1]:>10.0f}")
        whole = peak_mib([*base, "--label-shift"])
        print(f"{'--label-shift (whole file)':<28}{whole[0]:>9.1f}{whole[1]:>10.0f}")
        print(f"peak memory ratio, chunked / whole file: {chunked[1] / whole[1]:.2f}")


if __name__ == "__main__":
    main()
