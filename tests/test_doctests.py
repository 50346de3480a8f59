"""Run the docstring examples of every `rat` module as tests."""

import doctest
import importlib
import pkgutil

import pytest

import rat

MODULES = ["rat"] + [f"rat.{m.name}" for m in pkgutil.iter_modules(rat.__path__)]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def test_every_public_module_has_examples():
    without = [n for n in MODULES if n != "rat.__main__"
               and doctest.testmod(importlib.import_module(n)).attempted == 0]
    assert without == []
