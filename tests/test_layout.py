"""The folders show the flow and the arrows run one way: each package imports only from the
packages below it (files -> trees and labels -> examples -> model -> predictions -> metrics)."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# package -> the packages it may import from (besides itself)
ALLOWED = {
    "rat": set(),
    "model.cli": set(),
    "model.data": {"rat", "model.cli"},
    "model.lm": {"rat", "model.data"},
    "model.eval": {"rat", "model.data", "model.lm"},
    "model.synth": {"rat", "model.data", "model.lm"},
    "model.nodes": {"rat", "model.cli", "model.data", "model.lm", "model.eval", "model.synth"},
    "model.wholequery": {"rat", "model.data", "model.lm", "model.eval", "model.nodes"},
    # scoring a user's own SQL sits on top of the library: it loads what model.nodes saved
    "model.scoring": {"rat", "model.cli", "model.data", "model.lm", "model.eval", "model.nodes"},
}
LIBRARY = set(ALLOWED)
# the bodies of train.py and evaluate.py sit on top and may use any package, not each other
ALLOWED |= {"model": {"model.scoring"}, "model.train": LIBRARY, "model.evaluate": LIBRARY}


def package_of(module: str) -> str | None:
    return max((p for p in ALLOWED if module == p or module.startswith(p + ".")), key=len, default=None)


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


FILES = sorted(p for d in ("rat", "model") for p in (REPO / d).rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(REPO)) for p in FILES])
def test_imports_run_one_way(path):
    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
    own = package_of(module)
    assert own is not None, f"{module} is in no package of the layout"
    wrong = sorted({m for m in imports(path) if (p := package_of(m)) and p != own and p not in ALLOWED[own]})
    assert not wrong, f"{module} ({own}) imports {wrong}"
