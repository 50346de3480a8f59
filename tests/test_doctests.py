"""Run the docstring examples of every module of the package (`rat` and `model`), and of the
scripts (benchmarks/, scripts/) that have them, as tests."""

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


REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for folder in ("benchmarks", "scripts") for p in (REPO / folder).glob("*.py")
                 if ">>>" in p.read_text())


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_doctests(path):
    """The scripts' helpers keep their examples too (imported by path: not a package)."""
    spec = importlib.util.spec_from_file_location(f"{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, f"{result.failed} doctest(s) failed in {path.name}"
