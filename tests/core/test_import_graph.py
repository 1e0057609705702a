"""The import graph of ``rlvr_lab`` (read from the sources, nothing imported): no cycle, and
no module imports a layer above its own (the layers of ``docs/CONTRIBUTING.md``)."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rlvr_lab"

# docs/CONTRIBUTING.md, from the bottom; a module belongs to the longest prefix listed
LAYERS = {
    0: ("_registry", "discovery", "utils", "io", "random_streams", "allocator", "reported"),
    1: ("advantages", "losses", "metrics", "stats", "claims", "envs", "models"),
    2: ("train",),
    3: ("papers",),
    4: ("experiments", "report", "sources", "paper_figures", "cli", "benchmarks"),
}
# inside train/: seed_axis -> seed_threads -> core -> transformer_update -> the trainers
TRAIN_ORDER = ("seed_axis", "seed_threads", "core", "transformer_update")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


@functools.lru_cache(maxsize=1)
def _graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in the file). ``from pkg import
    name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``."""
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                subs = [f"{base}.{a.name}" for a in node.names]
                names = [n for n in subs if n in mods] or [base]
            else:
                continue
            for name in names:
                target = resolve(name) if name.split(".")[0] == "rlvr_lab" else None
                if target and target != mod:
                    graph[mod].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layer(mod: str) -> int | None:
    parts = mod.split(".")
    if len(parts) < 2:
        return None
    return next((level for level, names in LAYERS.items() if parts[1] in names), None)


def test_the_import_graph_has_no_cycle():
    assert _cycles(_graph()) == []


def test_no_module_imports_a_layer_above_its_own():
    upward = sorted((mod, dep) for mod, deps in _graph().items() for dep in deps
                    if _layer(mod) is not None and _layer(dep) is not None
                    and _layer(dep) > _layer(mod))
    assert upward == []


def test_the_lowest_train_modules_import_only_below_them():
    graph = _graph()
    for i, name in enumerate(TRAIN_ORDER):
        allowed = {f"rlvr_lab.train.{n}" for n in TRAIN_ORDER[:i]}
        inside = {d for d in graph[f"rlvr_lab.train.{name}"] if d.startswith("rlvr_lab.train.")}
        assert inside <= allowed, (name, inside - allowed)


def test_the_checker_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
