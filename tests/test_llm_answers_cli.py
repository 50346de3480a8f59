"""scripts/llm_answers.py's bad input is one line and exit 2, before any model is loaded: a --split
with no questions, a shared-data folder without Spider, a --limit below 1."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "llm_answers.py"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "out.jsonl"), *args],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "RAT_SHARED_DATA": str(tmp_path / "shared")})


def test_bad_input_is_one_line(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 2 and f"Spider not found under {tmp_path / 'shared' / 'spider'}" in done.stderr
    (tmp_path / "shared" / "spider").mkdir(parents=True)
    for args, says in [(["--split", "trian"], "--split trian: no questions for split 'trian'"),
                       (["--limit", "0"], "--limit must be 1 or more; found 0")]:
        done = run(tmp_path, *args)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out.jsonl").exists()  # nothing written
