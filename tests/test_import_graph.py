"""The package import graph of `tcl` runs one way: a lower layer never imports a higher one.

Layers, lowest first (a package may import its own layer and any lower one):
the leaves (`tcl/*.py`: config, platforms, registry, compute) <- workloads <- data <- collect
<- features <- models <- tracking <- train <- records <- sampling <- transfer <- tvm.
`flows/` and `benchmarks/` sit above all of them. Imports inside functions count too: a lazy
import still ties the packages together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "tcl"
LAYERS = [{"_leaf"}, {"workloads"}, {"data"}, {"collect"}, {"features"}, {"models"}, {"tracking"}, {"train"},
          {"records", "recipe"}, {"sampling"}, {"transfer"}, {"tvm"}]
# Known upward imports, each to be removed; a new one fails the test.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def package_of(module: str) -> str:
    """`tcl.train.loop` -> `train`; modules directly under tcl/ are leaves."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (ROOT / parts[-1]).is_dir() else "_leaf"


def imports(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> the files with such an import, relative ones resolved."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        here = package_of(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")[: (len(module.split(".")) - node.level + (rel.name == "__init__"))]
                    full = ".".join(base + ([node.module] if node.module else []))
                    targets = [f"{full}.{a.name}" for a in node.names] if node.module is None else [full]
                elif node.module and node.module.split(".")[0] == "tcl":
                    targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "tcl"]
            for target in targets:
                there = package_of(target) if target.count(".") else "_leaf"
                if there != here:
                    edges.setdefault((here, there), []).append(str(path.relative_to(root.parent)))
    return edges


def layer(package: str) -> int:
    for i, members in enumerate(LAYERS):
        if package in members:
            return i
    raise AssertionError(f"tcl/{package}/ is in no layer of {Path(__file__).name}: add it to LAYERS")


def test_every_package_has_a_layer():
    for path in ROOT.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            layer(path.name)


def test_no_package_imports_a_higher_layer():
    upward = {edge: files for edge, files in imports().items()
              if layer(edge[1]) > layer(edge[0]) and edge not in KNOWN_UPWARD}
    assert not upward, "upward imports (a lower package importing a higher one):\n" + "\n".join(
        f"  {a} -> {b}: {sorted(set(files))}" for (a, b), files in sorted(upward.items()))


def test_the_checker_sees_relative_lazy_and_absolute_imports(tmp_path):
    """A sign flip in the checker (missing an import form) would let a cycle in unseen."""
    pkg = tmp_path / "tcl"
    for name in ("data", "train"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "config.py").write_text("")
    (pkg / "data" / "a.py").write_text("def f():\n    from ..train import loop\n")
    (pkg / "data" / "b.py").write_text("import tcl.train.loop\n")
    (pkg / "data" / "c.py").write_text("from tcl.config import X\nfrom . import d\n")
    (pkg / "train" / "loop.py").write_text("from ..data.a import f\n")
    edges = imports(pkg)
    assert sorted(edges) == [("data", "_leaf"), ("data", "train"), ("train", "data")]
    assert sorted(edges[("data", "train")]) == ["tcl/data/a.py", "tcl/data/b.py"]


@pytest.mark.parametrize("package", ["data", "models", "train"])
def test_known_layers_are_ordered(package):
    assert layer("workloads") < layer(package) < layer("tvm")
