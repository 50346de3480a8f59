"""The core install: the package's wheel, installed without extras into a fresh virtualenv,
scores SQL with the shipped model, with a schema and with a SQLite database, exactly as the full
install does; it pulls no torch, imports none, and caches outside the installed package."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from cold_start import build_wheel

HEAVY = ("torch", "lightning", "transformers", "sentence_transformers", "hydra", "omegaconf",
         "wandb", "matplotlib", "fastapi", "uvicorn")
SQL = "SELECT name FROM singer WHERE age > 20"
QUESTION = "Names of singers older than 20?"

# Scores SQL once with a schema and once with a database (argv[1]); prints what the test checks.
SCRIPT = r"""
import json, sys
import model
from model import Scorer
from model.data.cache import cache_dir

scorer = Scorer.pretrained()
sql, question = "SELECT name FROM singer WHERE age > 20", "Names of singers older than 20?"
with_schema = scorer.score(sql, question=question, schema={"singer": ["singer_id", "name", "age"]})
with_database = scorer.score(sql, question=question, database=sys.argv[1])
print(json.dumps({
    "package": model.__file__, "cache": str(cache_dir()),
    "schema": with_schema.to_dict(), "database": with_database.to_dict(),
    "heavy": sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[2].split(",")),
}))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAT_CACHE")}
    return {**env, "HF_HUB_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def _run(cmd: list, cwd: Path, timeout: int = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(**env), capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def core(tmp_path_factory) -> Path:
    """A virtualenv with the package's wheel and its core dependencies only (pip's wheel cache
    makes a rebuild take about half a minute)."""
    work = tmp_path_factory.mktemp("core_install")
    wheel = build_wheel(work, _env())  # the wheel benchmarks/cold_start.py measures
    venv = work / "venv"
    made = _run([sys.executable, "-m", "venv", venv], cwd=work)
    assert made.returncode == 0, made.stderr[-2000:]
    installed = _run([venv / "bin" / "python", "-m", "pip", "install", "-q", wheel], cwd=work)
    assert installed.returncode == 0, installed.stderr[-2000:]
    return venv


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("db") / "singers.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, age INTEGER)")
        conn.executemany("INSERT INTO singer VALUES (?, ?, ?)",
                         [(1, "Joe Sharp", 52), (2, "Timbaland", 32), (3, "Rose White", 19)])
    return path


def _score(python: Path, database: Path, cwd: Path, **env: str) -> dict:
    done = _run([python, "-c", SCRIPT, database, ",".join(HEAVY)], cwd=cwd, timeout=120, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_core_install_has_no_training_or_serving_stack(core):
    listed = _run([core / "bin" / "python", "-m", "pip", "list", "--format=json"], cwd=core)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "rat-confidence" in names and {"sqlglot", "scikit-learn", "skops"} <= names
    assert not names & {"torch", "lightning", "transformers", "sentence-transformers", "hydra-core",
                        "omegaconf", "wandb", "matplotlib", "fastapi", "uvicorn"}


@pytest.mark.slow
def test_core_install_scores_like_the_full_install(core, database, tmp_path):
    scored = _score(core / "bin" / "python", database, tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    site = Path(scored["package"]).parents[1]
    assert site.name == "site-packages" and site.is_relative_to(core)  # the wheel, not the checkout
    assert scored["heavy"] == []  # no torch, hydra, fastapi... imported to score
    assert scored["cache"] == str(tmp_path / "xdg" / "rat-confidence")  # the user cache folder
    assert not list(site.rglob(".cache"))

    with_schema, with_database = scored["schema"], scored["database"]
    assert [n["label"] for n in with_schema["nodes"]] == \
        ['singer.name', 'singer.age', '20', 'Gt', 'singer', 'Selection', 'Project']
    assert 0.0 < with_schema["query_confidence"] < 1.0
    # the database features (values, row counts) change the numbers
    assert with_database["query_confidence"] != with_schema["query_confidence"]

    full = _score(REPO / ".venv" / "bin" / "python", database, tmp_path, RAT_CACHE=str(tmp_path))
    assert full["package"].startswith(str(REPO / "model"))
    assert (full["schema"], full["database"]) == (with_schema, with_database)


@pytest.mark.slow
def test_core_install_ships_the_models_and_the_page(core):
    (site,) = (core / "lib").glob("python*/site-packages")
    for name in ("spider", "spider_consensus", "spider_transfer"):
        for file in ("model.json", "node_model.skops", "site_model.skops"):
            assert (site / "model" / "scoring" / "pretrained" / name / file).is_file(), (name, file)
    assert (site / "model" / "scoring" / "page.html").is_file()
    modules = {root: {p.relative_to(root).as_posix() for package in ("rat", "model")
                      for p in (root / package).rglob("*.py")} for root in (site, REPO)}
    assert modules[site] == modules[REPO]  # every module, and no stale one


@pytest.mark.slow
def test_core_install_names_the_missing_extra(core, tmp_path):
    served = _run([core / "bin" / "rat-serve", "--port", "1"], cwd=tmp_path)
    assert served.returncode == 2
    (line,) = served.stderr.strip().splitlines()
    assert line.startswith("rat-serve: error: needs the [serve] extra (")
    assert line.endswith(" is not installed): pip install 'rat-confidence[serve]' (in the repository: "
                         "pip install -e '.[serve]'; make setup installs every extra)")
    trained = _run([core / "bin" / "python", REPO / "train.py"], cwd=REPO)  # the checkout's script
    assert trained.returncode == 2
    (line,) = trained.stderr.strip().splitlines()
    assert line.startswith("train.py: error: needs the [train] extra (hydra is not installed)")


@pytest.mark.slow
def test_core_install_rat_score_reads_a_database(core, database, tmp_path):
    done = _run([core / "bin" / "rat-score", "--database", database, "--sql", SQL,
                 "--question", QUESTION, "--json"], cwd=tmp_path, timeout=120,
                XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert done.returncode == 0, done.stderr[-2000:]
    row = json.loads(done.stdout)
    assert 0.0 < row["query_confidence"] < 1.0 and row["sql"] == SQL


# Per extra: what its fresh virtualenv runs (without the training stack).
EXTRA_CHECKS = {
    "mcp": ["-c", ("import subprocess, sys; from model.scoring.mcp_server import build_server, ScoringTools; "
            "done = subprocess.run([sys.prefix + '/bin/rat-mcp', '--dialect', 'oracle'], capture_output=True, "
            "text=True); assert done.returncode == 2 and 'unknown dialect' in done.stderr, done.stderr")],
    "langchain": ["-c", ("from model.scoring.langchain_tool import sql_check_tool; t = sql_check_tool(); "
                  "print(t.invoke({'question': 'How many singers?', 'sql': 'SELECT count(*) FROM singer'}))")],
}


@pytest.mark.slow
@pytest.mark.parametrize("extra", sorted(EXTRA_CHECKS))
def test_each_integration_extra_installs_into_a_fresh_virtualenv(extra, tmp_path):
    wheel = build_wheel(tmp_path, _env())
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", venv], cwd=tmp_path).returncode == 0
    installed = _run([venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[{extra}]"], cwd=tmp_path,
                     timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    checked = _run([venv / "bin" / "python", *EXTRA_CHECKS[extra]], cwd=tmp_path, timeout=300,
                   XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert checked.returncode == 0, checked.stderr[-3000:]
    listed = _run([venv / "bin" / "python", "-m", "pip", "list", "--format=json"], cwd=tmp_path)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert not names & {"torch", "lightning", "transformers", "hydra-core"}  # no training stack
