"""The code's shape, checked: what imports what, and how big a file or a function may grow.

The rules are the project's (docs/architecture/index.md): the engine (``playground/``) never
imports the page (``visual/``), gradio or the tools beside it (``tools/``); the app imports one
tool, the bench, for its Benchmark tab; no module imports a module that imports it back
(imports inside functions and under ``TYPE_CHECKING`` count too); a file past 600 lines or a
function past 80 asks to be split; and a run's settings are spelled out as parameters or
fields in at most two places (``RunSettings`` and ``Preset``'s defaults), everything else
passes a ``RunSettings`` or derives from its schema.
"""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

from playground.settings import RunSettings, public_name

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("playground", "visual", "tools")


def _modules() -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package's __init__)."""
    out = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            init = parts[-1] == "__init__"
            out[".".join(parts[:-1] if init else parts)] = (f, init)
    out["app"] = (ROOT / "app.py", False)
    return out


MODULES = _modules()


def _imports(mod: str) -> set[str]:
    """Every name ``mod`` imports anywhere in its body (modules, or ``from x import name``)."""
    f, init = MODULES[mod]
    found = set()
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if init else mod.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                m = ".".join(base + ([node.module] if node.module else []))
            else:
                m = node.module
            found |= {f"{m}.{a.name}" if f"{m}.{a.name}" in MODULES else m for a in node.names}
    return found


IMPORTS = {mod: _imports(mod) for mod in MODULES}


def _graph() -> dict[str, set[str]]:
    return {m: {n for n in names if n in MODULES and n != m} for m, names in IMPORTS.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
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
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_engine_never_imports_the_page_gradio_or_the_tools():
    bad = {
        mod: sorted(n for n in names if _top(n) in ("visual", "tools", "gradio", "plotly", "app"))
        for mod, names in IMPORTS.items()
        if _top(mod) == "playground"
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_the_app_imports_one_tool_the_bench():
    bad = {
        mod: sorted(n for n in names if _top(n) == "tools" and not n.startswith("tools.bench"))
        for mod, names in IMPORTS.items()
        if _top(mod) in ("visual", "app")
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_no_module_imports_one_that_imports_it_back():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _sources():
    for mod, (f, _) in MODULES.items():
        if _top(mod) in ("playground", "visual", "tools", "app"):
            yield f


def test_no_file_over_600_lines():
    long = {
        str(f.relative_to(ROOT)): n for f in _sources() if (n := len(f.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert long == {}


def _long_functions(tree: ast.AST, limit: int = 80) -> list[str]:
    return [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_over_80_lines():
    long = {
        str(f.relative_to(ROOT)): x
        for f in _sources()
        if (x := _long_functions(ast.parse(f.read_text(encoding="utf-8"))))
    }
    assert long == {}


def test_the_length_check_sees_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(81))
    assert _long_functions(ast.parse(f"def f():\n{body}\n")) == ["f (82 lines)"]


# a run's settings by every name they go by (fields, and public names such as ``verification``)
SETTINGS = {f.name for f in fields(RunSettings)} | {public_name(f.name) for f in fields(RunSettings)}
SPELLED_OUT = 5  # settings named by one function's parameters or one class's fields that count as a parallel list
SETTINGS_HOMES = {("playground/settings.py", "RunSettings"), ("playground/config.py", "Preset")}


def _spelled_out(tree: ast.AST) -> list[str]:
    """Functions whose parameters, and classes whose annotated fields, name ``SPELLED_OUT`` or more run settings."""
    out = []
    for node in ast.walk(tree):
        names = set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        elif isinstance(node, ast.ClassDef):
            names = {b.target.id for b in node.body if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name)}
        if len(names & SETTINGS) >= SPELLED_OUT:
            out.append(node.name)
    return out


def test_run_settings_are_spelled_out_only_by_run_settings_and_presets():
    """Everything else passes a ``RunSettings`` (or a dict of its values), so a new setting needs no edits there."""
    found = {
        (str(f.relative_to(ROOT)), name)
        for f in _sources()
        if _top(f.relative_to(ROOT).parts[0]) in ("playground", "visual")
        for name in _spelled_out(ast.parse(f.read_text(encoding="utf-8")))
    }
    assert found <= SETTINGS_HOMES, sorted(found - SETTINGS_HOMES)


def test_the_settings_check_sees_a_parallel_list():
    src = (
        "def run(prompt, preset, gamma, temperature, seed, max_new_tokens): pass\n"
        "def fine(prompt, settings, n_samples): pass\n"
        "class Form:\n    preset: str\n    gamma: int\n    top_k: int\n    top_p: float\n    verification: str\n"
    )
    assert _spelled_out(ast.parse(src)) == ["run", "Form"]
