"""The layers of DESIGN.md §2, checked on the source: front ends -> facade -> service ->
engine -> store -> leaves, imports pointing down only (lazy ones inside functions
included), no import cycles, no module much over 500 lines (the panel's TypeScript too)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nbmemory"
PANEL = PACKAGE.parent / "labextension" / "src"  # the JupyterLab panel's TypeScript
LAYERS = {  # module (or package) -> layer; higher layers may import lower ones only
    "front": ["magics", "magic_args", "magic_memory", "magic_checks", "magic_recall", "options", "cli", "cli_args", "cli_commands", "mcp", "mcp_calls", "mcp_wire", "server", "browse", "ambient", "audit", "doctor", "namespace",
              "procedures", "progress", "__main__", "__init__"],
    "facade": ["memory", "backends", "about_here", "checks_here"],
    "service": ["service"],
    "engine": ["engine", "ranking", "dense_search", "stale", "history", "exchange", "exchange_replace", "export_file", "export_rows", "sharing"],
    "store": ["store"],
    "leaves": ["errors", "files", "arrays", "dense_weight", "keyword_lift", "keyword_places", "models", "config", "lexical", "lexical_segment", "tokenizer", "spellings", "values", "vectors", "dense_rows", "cards", "embed", "onnx_model", "anchors", "mentions", "events",
               "operations", "address", "repos", "wording", "columns", "markdown", "when", "_version", "lock", "syntax", "display", "checks",
               "provenance"],
}
RANK = {layer: rank for rank, layer in enumerate(reversed(list(LAYERS)))}
# What the engine and everything below it must never import.
FRONT_END_LIBRARIES = ("IPython", "tornado", "jupyter_server", "mcp", "click", "ipywidgets")
MAX_LINES = 520
# Modules still longer than MAX_LINES, with their length (none left); each may only shrink.
NOT_YET_SPLIT: dict[str, int] = {}
KNOWN_CYCLES = []


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        out[".".join(parts)] = path
    return out


def layer_of(module: str) -> str:
    top = module.split(".")[0]
    for layer, names in LAYERS.items():
        if top in names:
            return layer
    raise AssertionError(f"nbmemory.{module} is in no layer: add it to LAYERS")


def imports(module: str, path: Path) -> set[str]:
    """Modules of nbmemory (dotted, without the package) and top-level libraries."""
    found = set()
    package = module.split(".")[:-1] if path.name != "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name.replace("nbmemory.", "", 1) if alias.name.startswith("nbmemory.")
                          else "lib:" + alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                name = node.module or ""
                if name == "nbmemory" or name.startswith("nbmemory."):
                    base = name[len("nbmemory."):] if name != "nbmemory" else ""
                    found |= {f"{base}.{a.name}".strip(".") if base else a.name for a in node.names}
                    if base:
                        found.add(base)
                else:
                    found.add("lib:" + name.split(".")[0])
            else:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                found.add(target) if target else None
                found |= {f"{target}.{a.name}".strip(".") for a in node.names}
    known = modules()
    return {m for m in found if m.startswith("lib:") or m in known}


GRAPH = {m: imports(m, p) for m, p in modules().items()}


def test_every_import_points_down():
    wrong = []
    for module, targets in GRAPH.items():
        here = RANK[layer_of(module)]
        for target in targets:
            if target.startswith("lib:"):
                if here <= RANK["engine"] and target[4:] in FRONT_END_LIBRARIES:
                    wrong.append(f"{module} ({layer_of(module)}) imports {target[4:]}")
                continue
            if target.split(".")[0] == module.split(".")[0]:
                continue  # within one module or package
            if RANK[layer_of(target)] > here:
                wrong.append(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    assert wrong == []


def test_no_module_imports_itself_through_others():
    graph = {m: {t for t in ts if not t.startswith("lib:") and t != m and t in GRAPH}
             for m, ts in GRAPH.items()}
    for package in {m.rsplit(".", 1)[0] for m in graph if "." in m}:
        graph.pop(package, None)  # a package's __init__ re-exports its modules
    for targets in graph.values():
        targets -= {t for t in targets if t not in graph}
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert [c for c in cycles if c not in KNOWN_CYCLES] == []


def test_modules_stay_small_enough_to_read():
    sizes = {m: len(p.read_text().splitlines()) for m, p in modules().items()}
    assert {m: n for m, n in sizes.items()
            if n > NOT_YET_SPLIT.get(m, MAX_LINES)} == {}


def test_panel_modules_stay_small_enough_to_read():
    if not PANEL.exists():
        pytest.skip("the JupyterLab panel (labextension/) is not in this checkout")
    sizes = {p.name: len(p.read_text().splitlines())
             for p in [*PANEL.glob("*.ts"), *PANEL.glob("*.tsx")]}
    assert sizes
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
