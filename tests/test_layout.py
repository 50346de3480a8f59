"""The folders show the flow and the arrows run one way: each package imports only from the
packages below it (files -> trees and labels -> examples -> model -> predictions -> metrics), no
module imports a module that imports it back (outside ``rat``), the model, its file format and
``Scorer`` read nothing from evaluation or a command line, and no private name crosses a module.

Every import counts, those inside functions too: a lazy import is still an arrow."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# package -> the packages it may import from (besides itself)
BASE = {"rat", "model.errors", "model.extras", "model.data", "model.lm", "model.metrics", "model.calibrators",
        "model.label_shift"}
ALLOWED = {
    "rat": set(),
    "model.errors": {"rat"},  # (its messages are shown with rat.text.printable)
    "model.extras": {"model.errors"},
    "model.data": {"rat", "model.errors", "model.extras"},
    "model.lm": {"rat", "model.errors", "model.extras", "model.data"},
    "model.metrics": {"model.data", "model.calibrators"},
    "model.calibrators": set(),
    "model.label_shift": set(),  # the rate of right queries in an unlabelled file (numpy only)
    "model.eval": BASE,
    "model.synth": {"rat", "model.errors", "model.data", "model.lm"},
    "model.nodes": BASE | {"model.synth"},
    "model.wholequery": BASE | {"model.eval", "model.nodes"},
    # scoring a user's own SQL sits on top of the model: it loads what model.nodes saved
    "model.scoring": BASE | {"model.nodes"},
    # its command line and service: entry points, above the rest of it (reports come from model.eval)
    "model.scoring.cli": BASE | {"model.nodes", "model.scoring", "model.eval"},
    "model.scoring.service": BASE | {"model.nodes", "model.scoring", "model.eval"},
}
LIBRARY = set(ALLOWED)
# the entry points' bodies sit on top and may use any package, not each other
ALLOWED |= {"model": {"model.scoring"}, "model.train": LIBRARY | {"model.train_boosted"},
            "model.train_boosted": LIBRARY, "model.evaluate": LIBRARY}
# the command-line and service modules of scoring: entry points, above the rest of it
SCORING_EDGE = {"model.scoring.cli", "model.scoring.service"}
COMMAND_LINES = {"model.scoring.cli"}

FILES = sorted(p for d in ("rat", "model") for p in (REPO / d).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in FILES}


def package_of(module: str) -> str | None:
    return max((p for p in ALLOWED if module == p or module.startswith(p + ".")), key=len, default=None)


def imported_modules(path: Path) -> set[str]:
    """The project modules ``path`` imports, anywhere in it: ``from a.b import c`` is ``a.b.c``
    when that is a module, else ``a.b``."""
    here = module_name(path)
    tree = ast.parse(path.read_text())
    type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                 and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                 for n in ast.walk(block)}  # annotations only: no arrow at run time
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else ".".join(
                here.split(".")[:len(here.split(".")) - node.level + (path.name == "__init__.py")]
                + [node.module])
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {m for m in found if m in MODULES and m != here}


GRAPH = {m: imported_modules(p) for m, p in MODULES.items()}


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(REPO)) for p in FILES])
def test_imports_run_one_way(path):
    module = module_name(path)
    own = package_of(module)
    assert own is not None, f"{module} is in no package of the layout"
    wrong = sorted({m for m in GRAPH[module] if (p := package_of(m)) and p != own and p not in ALLOWED[own]})
    assert not wrong, f"{module} ({own}) imports {wrong}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted.

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_cycle_outside_rat():
    outside = {m: {w for w in ws if not w.startswith("rat")} for m, ws in GRAPH.items() if not m.startswith("rat")}
    assert cycles(outside) == []


def test_the_cycle_finder_finds_a_cycle_of_three():
    assert cycles({"model.x": {"model.y"}, "model.y": {"model.z"}, "model.z": {"model.x"}}) == [
        ["model.x", "model.y", "model.z"]]


MODEL_AND_SCORER = sorted(m for m in MODULES if m.startswith(("model.nodes", "model.scoring"))
                          and m not in SCORING_EDGE)


@pytest.mark.parametrize("module", MODEL_AND_SCORER)
def test_the_model_and_scorer_read_nothing_from_evaluation_or_a_command_line(module):
    wrong = sorted(m for m in GRAPH[module] if m == "model.eval" or m.startswith("model.eval.") or m in COMMAND_LINES)
    assert not wrong, f"{module} imports {wrong}"


def test_the_file_format_knows_nothing_of_training():
    """model.nodes.model_file: the saved model's format only (no training code, no config)."""
    tree = ast.parse(MODULES["model.nodes.model_file"].read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in names if m.split(".")[0] in ("omegaconf", "hydra", "torch", "lightning")
                or m.startswith(("model.eval", "model.nodes.boosted", "model.nodes.estimator", "model.train"))}


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(REPO)) for p in FILES])
def test_no_private_name_crosses_a_module(path):
    """``from a import _b`` reaches into another module's insides: a name used elsewhere is public."""
    private = sorted(f"{n.module}.{a.name}" for n in ast.walk(ast.parse(path.read_text()))
                     if isinstance(n, ast.ImportFrom) and n.module and n.module != "__future__"
                     for a in n.names if a.name.startswith("_") and not a.name.startswith("__"))
    assert not private, f"{module_name(path)} imports {private}"
