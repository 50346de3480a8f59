"""`rat` under both sqlglot builds: the compiled one (sqlglotc) and pure Python
(`RAT_SQLGLOT=pure`) give the same trees, hashes, labels and canonical SQL; the CLI says which
build runs; a bug in rat is an InternalError, never "cannot parse"."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import rat
from rat import tree as tree_module
from rat.errors import InternalError

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
# Constructs where rat steers sqlglot: functions kept as written, aggregates and CAST typed,
# BETWEEN and count(<constant>) rewritten, parentheses at the depth limit.
EXTRA_QUERIES = [
    "SELECT strftime('%Y', d), substr(a, 1, 2), trim(b), iif(a > 1, 'x', 'y') FROM t",
    "SELECT CAST(a AS REAL), group_concat(b, ','), count(1), max(a, b), min(a) FROM t",
    "SELECT a FROM t WHERE b BETWEEN 1 AND 5 AND NOT c BETWEEN 2 AND 3",
    "SELECT replace(a, 'x', 'y'), left(a, 2), date(d), datetime(d), julianday(d) FROM t",
    "SELECT " + "(" * 800 + "1" + ")" * 800,
    "SELECT " + "(" * 801 + "1" + ")" * 801,
    "SELECT a FROM t WHERE (",
]


def _run(args, build: str, check: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAT_SQLGLOT": build}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          cwd=REPO, check=check)


def _fixture_queries() -> list[str]:
    queries = []
    for path in sorted((FIXTURES / "rat").glob("*.txt")) + [FIXTURES / "rat_spans" / "spans.txt"]:
        for line in path.read_text().splitlines():
            if line.lstrip().upper().startswith(("SELECT", "WITH")):
                queries.append(line)
    return queries


@pytest.mark.parametrize("build, words", [("pure", "pure Python"), ("compiled", "")])
def test_version_names_sqlglot_and_its_build(build, words):
    result = _run(["-m", "rat", "--version"], build, check=True)
    line = result.stdout.strip()
    assert line.startswith("rat: sqlglot ")
    assert line.endswith(("compiled (sqlglotc)", "pure Python"))
    assert words in line


def test_pure_switch_loads_every_sqlglot_module_from_source():
    check = ("import sys, rat; rat.to_tree('SELECT a FROM t'); "
             "print([m for m, v in list(sys.modules.items()) if m.startswith('sqlglot') "
             "and not (getattr(v, '__file__', None) or '.py').endswith(('.py', '.pyc'))])")
    assert _run(["-c", check], "pure", check=True).stdout.strip() == "[]"


def test_both_builds_give_the_same_trees(tmp_path):
    queries = tmp_path / "queries.sql"
    queries.write_text("\n".join(_fixture_queries() + EXTRA_QUERIES) + "\n")
    result = _run(["benchmarks/rat_builds.py", "--queries", str(queries)], "compiled")
    if result.returncode == 2:
        pytest.skip("sqlglotc is not installed: one build only")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.data
@pytest.mark.slow
def test_both_builds_give_the_same_trees_on_all_real_queries(shared_data):
    result = _run(["benchmarks/rat_builds.py", "--data-root", str(shared_data)], "compiled")
    if result.returncode == 2:
        pytest.skip("sqlglotc is not installed: one build only")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_bug_in_rat_is_an_internal_error_not_bad_sql(monkeypatch):
    def broken(self, node, ctes):
        raise TypeError("a bug")

    monkeypatch.setattr(tree_module._Builder, "expr", broken)
    with pytest.raises(InternalError) as info:
        rat.to_tree("SELECT a FROM t")
    assert not isinstance(info.value, rat.RATError)
    assert "build tree raised TypeError: a bug" in str(info.value)
    assert isinstance(info.value.__cause__, TypeError)


def test_only_sqlglot_errors_are_cannot_parse():
    for sql in ("SELECT a FROM t WHERE (", "SELECT 'unterminated"):
        with pytest.raises(rat.RATError, match="cannot parse"):
            rat.to_tree(sql)
