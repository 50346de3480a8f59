"""Run the docstring examples of every module of the package (`rat` and `model`), and of the
benchmark scripts that have them, as tests."""

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import model
import rat


def _modules(package) -> list[str]:
    return [package.__name__] + [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
                                 if not m.name.endswith("__main__")]


MODULES = _modules(rat) + _modules(model)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def test_every_rat_module_has_examples():
    without = [n for n in _modules(rat) if doctest.testmod(importlib.import_module(n)).attempted == 0]
    assert without == []


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if ">>>" in p.read_text())


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_doctests(path):
    """The benchmark scripts' helpers keep their examples too (imported by path: not a package)."""
    spec = importlib.util.spec_from_file_location(f"benchmarks_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, f"{result.failed} doctest(s) failed in {path.name}"
