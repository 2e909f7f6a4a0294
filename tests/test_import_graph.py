"""The house in three layers: imports point down only.

Every module of ``pate_jax/`` is parsed with :mod:`ast` (every import statement, those
inside functions included, since a deferred import is still a dependency) and:

* no import circle joins ``pate_jax`` modules (a package's ``__init__`` is its own node:
  ``from pate_jax.accounting import _gnmax`` depends on ``_gnmax`` only, while
  ``from pate_jax import accounting`` or ``from pate_jax.accounting import epsilon``
  depends on the package's ``__init__``);
* no *core* module (everything but ``pate_jax/stages/``, the harness ``experiment``,
  ``reporting`` and ``reproduction``, each a module or a package) imports a stage, the
  harness or ``ml_collections``: the core takes explicit arguments, never a ConfigDict.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = "pate_jax"
ROOT = pathlib.Path(__file__).resolve().parent.parent / PACKAGE
HARNESS = ("pate_jax.experiment", "pate_jax.reporting", "pate_jax.reproduction")
STAGES = "pate_jax.stages"
FORBIDDEN_IN_CORE = (STAGES, *HARNESS, "ml_collections")


def _module_name(path: pathlib.Path) -> str:
  parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
  if parts[-1] == "__init__":
    parts.pop()
  return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_package(name: str) -> bool:
  return MODULES.get(name, pathlib.Path()).name == "__init__.py"


def _within(name: str, prefix: str) -> bool:
  return name == prefix or name.startswith(prefix + ".")


def _imports(name: str) -> list[tuple[str, int]]:
  """``(imported module, line)`` of every import statement of module ``name``.

  ``from X import Y`` names module ``X.Y`` when that is a module of the package, else
  ``X``; relative imports are resolved against ``name``.
  """
  path = MODULES[name]
  tree = ast.parse(path.read_text(), filename=str(path))
  package = name if _is_package(name) else name.rpartition(".")[0]
  out = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      out += [(alias.name, node.lineno) for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
      for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append((sub if sub in MODULES else base, node.lineno))
  return out


def _graph() -> dict[str, dict[str, int]]:
  """``{module: {imported pate_jax module: first line}}``."""
  graph = {}
  for name in MODULES:
    edges: dict[str, int] = {}
    for target, line in _imports(name):
      while target and target not in MODULES and _within(target, PACKAGE):
        target = target.rpartition(".")[0]  # ``import pate_jax.a.name``: the module a
      if target in MODULES and target != name:
        edges.setdefault(target, line)
    graph[name] = edges
  return graph


def _cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
  """One import circle ``[a, b, ..., a]`` of ``graph``, or None (depth-first search)."""
  state: dict[str, int] = {}  # 1: on the current path, 2: finished
  path: list[str] = []

  def visit(node):
    state[node] = 1
    path.append(node)
    for nxt in sorted(graph[node]):
      if state.get(nxt) == 1:
        return path[path.index(nxt):] + [nxt]
      if nxt not in state:
        found = visit(nxt)
        if found:
          return found
    path.pop()
    state[node] = 2
    return None

  for node in sorted(graph):
    if node not in state:
      found = visit(node)
      if found:
        return found
  return None


def _is_core(name: str) -> bool:
  """Whether module ``name`` is core: not a stage, nor the harness (a harness module may
  be a package: ``pate_jax.reporting._aggregate`` is the harness's)."""
  return not any(_within(name, outside) for outside in (STAGES, *HARNESS))


def _describe(graph, cycle: list[str]) -> str:
  return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + (
      f" -> {cycle[-1]}")


def test_the_package_is_found():
  assert {"pate_jax", "pate_jax.accounting", "pate_jax.teachers",
          "pate_jax.stages.teachers"} <= set(MODULES)


def test_no_import_circle():
  graph = _graph()
  cycle = _cycle(graph)
  assert cycle is None, f"import circle: {_describe(graph, cycle)}"


def test_the_core_imports_no_stage_harness_or_config():
  bad = []
  for name in MODULES:
    if not _is_core(name):
      continue
    for target, line in _imports(name):
      hit = next((f for f in FORBIDDEN_IN_CORE if _within(target, f)), None)
      if hit:
        bad.append(f"{MODULES[name].relative_to(ROOT.parent)}:{line}: {name} imports {target}")
  assert not bad, "core modules import a stage, the harness or ml_collections:\n" + "\n".join(
      bad)


# ------------------------------------------------------------------ the checker itself


def test_cycle_finder_names_the_circle():
  graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
  assert _cycle(graph) == ["a", "b", "c", "a"]
  assert _describe(graph, ["a", "b", "c", "a"]) == "a (line 1) -> b (line 2) -> c (line 3) -> a"
  assert _cycle({"a": {"b": 1}, "b": {}, "c": {"b": 2}}) is None


@pytest.mark.parametrize("source,expected", [
    ("from pate_jax import accounting", "pate_jax.accounting"),
    ("from pate_jax.accounting import _gnmax", "pate_jax.accounting._gnmax"),
    ("from pate_jax.accounting import calibrate_noise", "pate_jax.accounting"),
    ("import pate_jax.accounting._gnmax", "pate_jax.accounting._gnmax"),
    ("def f():\n  from pate_jax import experiment", "pate_jax.experiment"),
    ("from . import _gnmax", "pate_jax.accounting._gnmax"),
    ("from .. import mechanisms", "pate_jax.mechanisms"),
])
def test_imports_are_resolved(source, expected, monkeypatch, tmp_path):
  path = tmp_path / "probe.py"
  path.write_text(source + "\n")
  monkeypatch.setitem(MODULES, "pate_jax.accounting._probe", path)
  assert [t for t, _ in _imports("pate_jax.accounting._probe")] == [expected]


def test_core_and_harness():
  assert _is_core("pate_jax.teachers") and _is_core("pate_jax.accounting._calibrate")
  assert _is_core("pate_jax.io") and _is_core("pate_jax")
  for outside in ("pate_jax.stages.teachers", "pate_jax.experiment", "pate_jax.reporting",
                  "pate_jax.reporting._aggregate", "pate_jax.reproduction"):
    assert not _is_core(outside)


def test_every_package_module_is_an_attribute_of_pate_jax():
  """``pate_jax.<name>`` imports any top-level module on first use (``pate_jax.budget``,
  ``pate_jax.stages``, ...), as the package's docstring says."""
  import pate_jax  # pylint: disable=g-import-not-at-top
  root = pathlib.Path(pate_jax.__file__).parent
  names = {p.stem for p in root.glob("*.py") if not p.stem.startswith("_")} | {
      p.parent.name for p in root.glob("*/__init__.py") if not p.parent.name.startswith("_")}
  assert names == set(pate_jax._SUBMODULES)  # pylint: disable=protected-access
  assert all(getattr(pate_jax, n).__name__ == f"pate_jax.{n}" for n in sorted(names))


def test_no_module_touches_pyplot_or_the_backend():
  """Figures are ``matplotlib.figure.Figure`` objects: a library that imports pyplot or calls
  ``matplotlib.use`` changes a notebook's backend and holds figures in pyplot's registry."""
  bad = []
  for name, path in MODULES.items():
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
      imported = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                  [f"{node.module}.{a.name}" for a in node.names]
                  if isinstance(node, ast.ImportFrom) else [])
      called = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "use" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "matplotlib")
      if called or any(_within(i, "matplotlib.pyplot") for i in imported):
        bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
  assert not bad, "pyplot or matplotlib.use in the package:\n" + "\n".join(bad)


SCRIPTS = sorted((ROOT.parent / "experiments").glob("*.py"))
MAX_SCRIPT_LINES = 120


def _script_imports(path: pathlib.Path) -> list[tuple[str, int]]:
  """``(imported name, line)`` of every import of a script: ``from X import Y`` gives
  ``X.Y`` (a module or a name of ``X``), ``import X`` gives ``X``."""
  out = []
  for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
    if isinstance(node, ast.Import):
      out += [(a.name, node.lineno) for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      out += [("." * node.level + f"{node.module or ''}.{a.name}".lstrip("."), node.lineno)
              for a in node.names]
  return out


def test_the_scripts_are_thin_and_import_only_stages_and_the_harness():
  """The top layer: each script of ``experiments/`` is at most about 120 lines and imports
  nothing but a stage (``pate_jax.stages...``) and the harness (``pate_jax.experiment``):
  never a core module, another script, or anything else (its flags, --help and --dry_run
  come from ``experiment.run_main``)."""
  assert len(SCRIPTS) >= 20
  bad = []
  for path in SCRIPTS:
    lines = len(path.read_text().splitlines())
    if lines > MAX_SCRIPT_LINES:
      bad.append(f"{path.name}: {lines} lines")
    for name, line in _script_imports(path):
      if not (_within(name, STAGES) or name == "pate_jax.experiment"):  # nor a script
        bad.append(f"{path.name}:{line} imports {name}")
  assert not bad, "scripts beyond the top layer:\n" + "\n".join(bad)
