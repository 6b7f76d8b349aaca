"""The package layout holds: data flows one way between packages, and prediction does not
import training (a predicting process never loads the training code)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gnnperf"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _top_level_imports(path: Path) -> set[str]:
    """gnnperf modules ``path`` imports at module level (imports inside functions are the
    lazy ones that keep ``import gnnperf`` light, and may point anywhere); ``from pkg
    import submodule`` counts as importing the submodule."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gnnperf"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("gnnperf")}
    return out - {_module_name(path)}


GRAPH = {name: _top_level_imports(path) for name, path in MODULES.items()}


def _closure(module: str) -> set[str]:
    """Every module ``module`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for dep in GRAPH.get(todo.pop(), ()):
            if dep in GRAPH and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_no_module_imports_itself_through_others() -> None:
    cycles = [m for m in GRAPH if m in _closure(m)]
    assert cycles == []


@pytest.mark.parametrize("module", ["gnnperf.estimators.gnn.predictor", "gnnperf.prediction.api"])
def test_prediction_does_not_import_training(module: str) -> None:
    reached = _closure(module)
    assert "gnnperf.estimators.gnn.training" not in reached
    assert "gnnperf.estimators.kernel.training" not in reached


def test_every_package_has_a_docstring_that_says_what_it_holds() -> None:
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40 and "TODO" not in doc, init


def test_the_readme_is_short_and_its_layout_table_matches_the_tree() -> None:
    readme = (PACKAGE.parent / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    packages = {p.parent.relative_to(PACKAGE.parent).as_posix()
                for p in PACKAGE.glob("*/__init__.py")}
    listed = {line.split("`")[1].rstrip("/") for line in readme.splitlines()
              if line.startswith("| `gnnperf/") and "/` |" in line}
    assert listed == packages


def test_feature_columns_are_named_in_the_schema_module_only() -> None:
    """Every encoder reads its column names from ``features/schema.py``: a list of feature
    names written anywhere else is a second schema that can drift from the first."""
    from gnnperf.features.schema import HARDWARE, SCHEDULE, feature_names, kernel_feature_names

    schema = PACKAGE / "features" / "schema.py"
    for path in MODULES.values():
        if path == schema:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                assert not any(n.endswith("FEATURE_NAMES") for n in names), (path, names)
            if isinstance(node, ast.FunctionDef) and node.name.endswith("feature_names"):
                raise AssertionError(f"{path}: {node.name} defines feature names")
    assert feature_names()[-len(HARDWARE):] == [f"hw_{n}" for n in HARDWARE]
    assert kernel_feature_names()[-len(HARDWARE) - len(SCHEDULE):-len(HARDWARE)] == list(SCHEDULE)
