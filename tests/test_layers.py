"""The import graph of app/: each import goes to its own floor or a lower one, with no circles.

Floors, top to bottom (DESIGN.md; docs/architecture.md explains each):

    5  factory   app (app/__init__.py: create_app wires everything together)
    4  entry     api, console, tasks, app.cli, app.auth_cli, app.databases_cli, app.security,
                 app.ops
    3  adapter   mindsdb, mcp (MCP: a sibling adapter that may call mindsdb)
    2  service   services, schemas
    1  data      store, sql, ml, federation (above sql: it imports sql, never the reverse),
                 kb (knowledge bases' index file and embeddings)
    0  base      config, errors, extensions, rules, lru, jsonio, malloc, telemetry, lazy

Every import counts: at module level, inside functions and under ``if TYPE_CHECKING``. An
import inside a function must moreover be one of ``LAZY_IMPORTS`` (each with its reason), so
that no function-level import quietly hides a circle.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FLOOR_NAMES = {5: "factory", 4: "entry", 3: "adapter", 2: "service", 1: "data", 0: "base"}
# A module's floor is that of the longest name here that is the module or a package above it.
FLOORS = {
    "app": 5,
    "app.api": 4, "app.console": 4, "app.tasks": 4,
    "app.cli": 4, "app.auth_cli": 4, "app.databases_cli": 4, "app.security": 4, "app.ops": 4,
    "app.mindsdb": 3, "app.mcp": 3,
    "app.services": 2, "app.schemas": 2,
    "app.store": 1, "app.sql": 1, "app.ml": 1, "app.federation": 1, "app.kb": 1,
    "app.config": 0, "app.errors": 0, "app.extensions": 0, "app.rules": 0, "app.lru": 0,
    "app.jsonio": 0, "app.malloc": 0, "app.telemetry": 0, "app.lazy": 0,
}
# Function-level imports of app modules that are allowed, and why. Nothing else may import
# inside a function (it would only hide a circle).
LAZY_IMPORTS = {
    # scikit-learn, pandas and numpy load on first use: a worker that serves only SQL and
    # CRUD never pays their ~150 MiB.
    ("app.ml", "app.ml.training"): "loads scikit-learn on first training",
    ("app.ml", "app.ml.prediction"): "loads scikit-learn on first prediction",
    # ADBC (and its C++ driver) loads with the first Arrow/CSV stream from PostgreSQL.
    ("app.sql.stream", "app.sql.native"): "loads ADBC on the first native stream",
    ("app.sql.formats", "app.sql.native"): "writes batches only a native stream made",
    ("app.federation.legs", "app.sql.native"): "casts batches only a native stream made",
    ("app.sql.execute", "app.sql.native"): "opens an ADBC session only where engine is preloaded",
    # connectorx (a large library) loads with the first Arrow stream from MariaDB/MySQL.
    ("app.sql.stream", "app.sql.native_mysql"): "loads connectorx on the first native stream",
    ("app.sql.execute", "app.sql.native_mysql"): "reads through connectorx at a worker's start",
    ("app.sql.execute", "app.sql.native_sqlite"): "reads through connectorx at a worker's start",
    ("app.federation.legs", "app.sql.native_sqlite"): "loads connectorx for the first SQLite "
                                                      "leg read at once",
    # Celery loads only with a broker configured (else in a Celery worker, via wsgi.celery).
    ("app", "app.tasks"): "loads Celery only when a broker is configured",
}
# Third-party packages only some floors may use.
CONFINED = {"mindsdb_sql_parser": ("app.mindsdb",), "mcp_types": ("app.mcp",),
            # Spark Connect's client: one module speaks to Spark (docs/spark.md)
            "pyspark": ("app.federation.spark",)}


@dataclass(frozen=True)
class Import:
    source: str        # the importing module
    target: str        # the imported module (for third-party imports: its top package)
    path: Path
    line: int
    in_function: bool

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name -> file."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return True
    return False


def imports(root: Path, package: str) -> Iterator[Import]:
    """Every import statement in ``package``, resolved to the modules it loads."""
    known = modules(root, package)
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        parents = _parents(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            nested = _in_function(node, parents)
            for target in _targets(node, name, is_package, known, package):
                yield Import(name, target, path, node.lineno, nested)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             known: dict[str, Path], package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name if alias.name.split(".")[0] == package
                else alias.name.split(".")[0] for alias in node.names]
    if node.level:
        base_parts = module.split(".") if is_package else module.split(".")[:-1]
        base_parts = base_parts[:len(base_parts) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base.split(".")[0] != package:
        return [base.split(".")[0]]
    # ``from .pkg import name``: the submodule pkg.name when there is one, else pkg itself.
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]


def floor_of(module: str) -> int | None:
    """The module's floor; None when neither it nor a package above it (but the root) is
    placed: a new top-level module must be placed on purpose."""
    parts = module.split(".")
    if len(parts) == 1:
        return FLOORS.get(module)
    for end in range(len(parts), 1, -1):
        floor = FLOORS.get(".".join(parts[:end]))
        if floor is not None:
            return floor
    return None


def layer_violations(root: Path, package: str) -> list[str]:
    """Upward imports, unplaced modules, unlisted function-level imports, confined packages."""
    problems = []
    for module in modules(root, package):
        if floor_of(module) is None:
            problems.append(f"{module} is on no floor: add it to FLOORS in tests/test_layers.py "
                            "and to docs/architecture.md")
    for imp in imports(root, package):
        if imp.target.split(".")[0] != package:
            allowed = CONFINED.get(imp.target)
            if allowed and not any(imp.source == a or imp.source.startswith(a + ".")
                                   for a in allowed):
                problems.append(f"{imp.where(root)}: {imp.source} imports {imp.target}, which "
                                f"only {', '.join(allowed)} may use")
            continue
        low, high = floor_of(imp.target), floor_of(imp.source)
        if low is not None and high is not None and low > high:
            problems.append(
                f"{imp.where(root)}: {imp.source} ({FLOOR_NAMES[high]}, floor {high}) imports "
                f"{imp.target} ({FLOOR_NAMES[low]}, floor {low}): an import may not go up")
        if imp.in_function and (imp.source, imp.target) not in LAZY_IMPORTS:
            problems.append(f"{imp.where(root)}: {imp.source} imports {imp.target} inside a "
                            "function; import it at the top of the module (or, when loading "
                            "it late is the point, list it in LAZY_IMPORTS with the reason)")
    return problems


def import_cycles(root: Path, package: str) -> list[str]:
    """Each circle of imports between modules, as the chain of imports that closes it."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports(root, package):
        if imp.target.split(".")[0] == package and imp.target != imp.source:
            edges.setdefault(imp.source, {}).setdefault(imp.target, imp)
    cycles = []
    for component in _strongly_connected(edges):
        if len(component) > 1:
            cycles.append(_describe_cycle(component, edges, root))
    return cycles


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is small, but recursion limits are not)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(edges) | {t for ts in edges.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
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
                found.append(sorted(component))
    return found


def _describe_cycle(component: list[str], edges: dict[str, dict[str, Import]],
                    root: Path) -> str:
    """One circle through the component: a -> b -> … -> a, with where each import is."""
    members = set(component)
    path = [component[0]]
    while True:
        here = path[-1]
        nexts = sorted(t for t in edges.get(here, {}) if t in members)
        step = next((t for t in nexts if t == path[0] and len(path) > 1), None) \
            or next((t for t in nexts if t not in path), None) or nexts[0]
        path.append(step)
        if step in path[:-1]:
            break
    start = path.index(path[-1])
    chain = path[start:]
    hops = [f"{a} -> {b} ({edges[a][b].where(root)})" for a, b in itertools.pairwise(chain)]
    rest = sorted(members - set(chain))
    also = f" (the circle takes in {', '.join(rest)} as well)" if rest else ""
    return "import circle: " + "; ".join(hops) + also


# --- the app itself -------------------------------------------------------------------------

def test_every_import_goes_down_or_level():
    problems = layer_violations(ROOT, "app")
    assert not problems, "\n".join(problems)


def test_no_import_circles():
    cycles = import_cycles(ROOT, "app")
    assert not cycles, "\n".join(cycles)


# --- the checks themselves, on a small tree with every fault ---------------------------------

@pytest.fixture
def faulty(tmp_path, monkeypatch) -> Path:
    files = {
        "app/__init__.py": "from .api import views\n",
        "app/api/__init__.py": "",
        "app/api/views.py": "from ..services import things\n",
        "app/services/__init__.py": "",
        "app/services/things.py": "from ..api import views  # up\n",
        "app/sql/__init__.py": "",
        "app/sql/a.py": "def f():\n    from . import b\n",
        "app/sql/b.py": "from .a import f\nimport mindsdb_sql_parser\n",
        "app/stray.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_checker_names_each_offending_import(faulty):
    problems = "\n".join(layer_violations(faulty, "app"))
    assert "app/services/things.py:1: app.services.things (service, floor 2) imports " \
           "app.api.views (entry, floor 4)" in problems
    assert "app/sql/a.py:2: app.sql.a imports app.sql.b inside a function" in problems
    assert "app/sql/b.py:2: app.sql.b imports mindsdb_sql_parser, which only app.mindsdb" \
           in problems
    assert "app.stray is on no floor" in problems
    assert "views.py" not in problems.replace("imports app.api.views", "")  # a downward import


def test_checker_finds_circles(faulty):
    cycles = import_cycles(faulty, "app")
    assert len(cycles) == 2, cycles
    text = "\n".join(cycles)
    assert "app.api.views -> app.services.things (app/api/views.py:1)" in text
    assert "app.services.things -> app.api.views (app/services/things.py:1)" in text
    assert "app.sql.a -> app.sql.b (app/sql/a.py:2)" in text
    assert "app.sql.b -> app.sql.a (app/sql/b.py:1)" in text


# Where a statement runs is decided in one place (app/federation/route.py): no other module
# names the gate's CROSS_SOURCE or the files source's dialect to choose a path.
ROUTE_MARKERS = ("ErrorCode.CROSS_SOURCE", "FILES_DIALECT")
ROUTE_OWNERS = {"app/federation/route.py", "app/sql/gate.py", "app/sql/files.py",
                "app/sql/errors.py"}


def test_one_module_decides_where_a_statement_runs():
    found = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in ROUTE_OWNERS:
            continue
        text = path.read_text()
        found += [f"{relative}: {marker}" for marker in ROUTE_MARKERS if marker in text]
    assert found == [], found
