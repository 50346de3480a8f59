"""Run the docstring examples of every module of the package (`rat` and `model`) as tests."""

import doctest
import importlib
import pkgutil

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
