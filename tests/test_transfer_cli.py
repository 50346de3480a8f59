"""scripts/transfer.py's bad input is one line and exit 2: a --model without model.json, a
--predictions folder that is not there, a shared-data folder that is not there."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "transfer.py"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})


def test_bad_input_is_one_line(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    done = run("--model", str(model), "--data", "spider")
    assert done.returncode == 2 and f"--model {model}: no model.json there" in done.stderr
    (model / "model.json").write_text("{}")
    for args, env, says in [(["--data", "spider_train_qwen", "--predictions", str(tmp_path / "none")], None,
                             f"--predictions {tmp_path / 'none'}: not a folder"),
                            (["--data", "bird"], {"RAT_SHARED_DATA": str(tmp_path)},
                             f"--data bird: {tmp_path / 'bird'} not found")]:
        done = run("--model", str(model), *args, env=env)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
