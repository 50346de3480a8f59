"""The scripts of benchmarks/ and scripts/ refuse a bad argument as argparse does: the usage and
``prog: error: ...`` on stderr, exit code 2, before any heavy work (no traceback, no data read,
no server started); and ``--help`` shows the module's docstring, not its first line cut short."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.relative_to(REPO).as_posix() for folder in ("benchmarks", "scripts")
                 for p in (REPO / folder).glob("*.py"))

# (script, arguments): each must stop at once; the shared data may be there or not
BAD = [
    ("benchmarks/rat_coverage.py", ["--data-root", "/nonexistent"]),
    ("benchmarks/rat_coverage.py", ["--show", "-1"]),
    ("benchmarks/rat_builds.py", ["--queries", "/nonexistent.sql"]),
    ("benchmarks/rat_dialects.py", ["--dialects", "foo"]),
    ("benchmarks/rat_speed.py", ["--repeat", "0"]),
    ("benchmarks/rat_speed.py", ["--baseline", "/nonexistent"]),
    ("benchmarks/exec_accuracy.py", ["--data", "/nonexistent"]),
    ("benchmarks/exec_accuracy.py", ["--timeout", "-1"]),
    ("benchmarks/exec_cache.py", ["--workers", "-1"]),
    ("benchmarks/feature_speed.py", ["--predictions", "/nonexistent/*"]),
    ("benchmarks/score_speed.py", ["--questions", "0"]),
    ("benchmarks/score_speed.py", ["--device", "foo"]),
    ("benchmarks/score_speed.py", ["--model", "/nonexistent"]),
    ("benchmarks/scorer_speed.py", ["--queries", "0"]),
    ("benchmarks/scorer_speed.py", ["--neural", "/nonexistent"]),
    ("benchmarks/mcp_speed.py", ["--calls", "0"]),
    ("benchmarks/ddl_speed.py", ["--mb", "0"]),
    ("benchmarks/train_speed.py", ["--minilm-lengths", "abc"]),
    ("benchmarks/train_speed.py", ["--spider", "/nonexistent"]),
    ("benchmarks/backend_speed.py", ["--turns", "0"]),
    ("benchmarks/serve_load.py", ["--model", "/nonexistent"]),
    ("benchmarks/score_memory.py", ["--copies", "0"]),
    ("scripts/backend_agreement.py", ["--systems", "foo"]),
    ("scripts/candidate_choice.py", ["--run", "/nonexistent"]),
    ("scripts/candidate_choice.py", ["--run", ".", "--bootstrap", "0"]),
    ("scripts/candidate_choice.py", ["--scored", "/nonexistent"]),
    ("scripts/candidate_choice.py", ["--scored", "README.md"]),
    ("scripts/check_loop.py", ["--tries", "0"]),
    ("scripts/leave_one_system_out.py", ["--calibrator-only", "/nonexistent"]),
    ("scripts/leave_one_system_out.py", ["--systems", "foo"]),
    ("scripts/localisation_loso.py", ["--systems", "foo"]),
    ("scripts/node_features_results.py", ["--stages", "foo"]),
    ("scripts/node_features_results.py", ["--folds", "0"]),
    ("scripts/perturbation_mix.py", ["--data", "/nonexistent"]),
    ("scripts/policy_targets.py", ["--predictions", "/nonexistent", "--data-root", "/tmp"]),
    ("scripts/pretrained_check.py", ["--model", "/nonexistent"]),
    ("scripts/pretrained_check.py", ["--faithfulness-queries", "-1"]),
]


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / script), *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO, check=False)


@pytest.mark.parametrize(("script", "args"), BAD, ids=[f"{Path(s).stem} {' '.join(a)}" for s, a in BAD])
def test_a_bad_argument_is_one_usage_error(script, args):
    done = run(script, *args)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith("usage: ") and f"{Path(script).name}: error: " in done.stderr, done.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_starts_and_shows_the_whole_first_paragraph(script):
    done = run(script, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    first = ast.get_docstring(ast.parse((REPO / script).read_text()), clean=False).split("\n\n")[0]
    assert " ".join(first.split()) in " ".join(done.stdout.split())


@pytest.mark.parametrize(("script", "option"), [("benchmarks/rat_coverage.py", "--data-root"),
                                                ("benchmarks/rat_speed.py", "--data-root"),
                                                ("benchmarks/exec_accuracy.py", "--data")])
def test_a_data_root_of_another_layout_is_one_line(script, option, tmp_path):
    done = run(script, option, str(tmp_path))  # a folder that exists, holding no dataset
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith(f"{Path(script).name}: error: ") and str(tmp_path) in done.stderr


@pytest.mark.parametrize("where", [["--root", "."], ["--database", "shop.duckdb"]])
def test_rat_exec_names_the_option_of_a_missing_file(where, tmp_path):
    done = subprocess.run([sys.executable, "-m", "model.data.exec_command", *where, "--predictions", "nonexist.txt"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and done.stderr == "rat-exec: error: --predictions nonexist.txt: no such file\n", \
        done.stderr[-2000:]
