"""The import rules of docs/architecture.md, checked by parsing every module with ast.

Edges point down only: core <- wire <- store <- runtime <- transport <- app/cli. The core is
pure (no clock, no I/O, no third-party code), and only the composition roots (server/app.py,
server/cli.py) see the concrete store engines. The bots (server/bots) are a client beside the
server: they use the core, the wire format and the token format (server/auth.py, the one place
that makes tokens), and no part of the server uses them.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "server"

# Layer -> the server packages its modules may import (its own package included).
# Anything else under server.* (other layers, app, cli, config) is an upward or sideways edge.
LAYER_RULES: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "wire": frozenset({"core", "wire"}),
    # The operator's wallet (issue 19): its protocol, interface and engines, on the core alone,
    # so the store may use its types; internal.py alone adapts the store (WALLET_ADAPTER).
    "wallet": frozenset({"core", "wallet"}),
    "store": frozenset({"core", "wire", "wallet", "store"}),  # wire for codecs
    "runtime": frozenset({"core", "wallet", "store", "runtime", "metrics"}),  # never transport
    "transport": frozenset(
        {"core", "wire", "wallet", "store", "runtime", "transport", "metrics", "auth"}
    ),
    # A client: the rules, the wire and the tokens (auth, a leaf), no server.
    "bots": frozenset({"core", "wire", "auth", "bots"}),
}
# Only the command line may start the bots; no server layer depends on its own load generator.
BOTS_USERS = ("server/cli.py",)
# server/metrics.py is a leaf (it imports no server module), so any layer above the core may
# count things through it; test_metrics_is_a_leaf keeps it one.
LEAF_MODULES = ("metrics", "auth")

# The internal wallet is the store's balances behind the Wallet interface: it alone in
# server/wallet may import the store, and only the store's wallet interface (no engine, no
# base: the store may import server.wallet.base, so anything more could make a circle).
WALLET_ADAPTER = ("server/wallet/internal.py", frozenset({"server.store.wallet"}))

# Concrete store engines: only the composition roots (and the store package) may name them.
CONCRETE_ENGINES = ("server.store.memory", "server.store.redis")
COMPOSITION_ROOTS = ("server/app.py", "server/cli.py")

# Standard-library modules the core must not touch even though they ship with Python:
# it never reads a clock, sleeps, does I/O or logs (docs/architecture.md, Layers).
CORE_FORBIDDEN = frozenset(
    {
        "asyncio",
        "time",
        "datetime",
        "socket",
        "selectors",
        "threading",
        "subprocess",
        "logging",
        # third-party, listed so the reason reads plainly even though they are not stdlib
        "redis",
        "websockets",
        "msgpack",
        "structlog",
        "uvloop",
    }
)
# The core takes randomness as an injected random.Random; these names are the types only.
RANDOM_TYPES = frozenset({"Random", "SystemRandom"})


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(source: str, name: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, absolute module) for every import in the source, nested ones included.

    `from pkg import sub` also yields pkg.sub when sub is a module, so that
    `from server.store import memory` is seen as an import of server.store.memory.
    """
    package = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base != "__future__":
                yield node.lineno, base
            for alias in node.names:
                if is_module(f"{base}.{alias.name}"):
                    yield node.lineno, f"{base}.{alias.name}"


def file_imports(path: Path) -> list[tuple[int, str]]:
    return list(imports_of(path.read_text(), module_name(path), path.name == "__init__.py"))


def py_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


CORE_FILES = py_files(SERVER / "core")
ENGINE_BLIND_FILES = [
    p for p in py_files(SERVER) if rel(p) not in COMPOSITION_ROOTS and p.parent.name != "store"
]


def test_the_core_exists() -> None:
    """The core package is present, so the checks below are not vacuous."""
    assert {p.name for p in CORE_FILES} >= {"cards.py", "coup.py", "shoe.py", "table.py"}


@pytest.mark.parametrize("path", CORE_FILES, ids=rel)
def test_core_imports_only_stdlib_and_core(path: Path) -> None:
    """A core module imports only the standard library and server.core, and no clock or I/O."""
    bad = []
    for line, name in file_imports(path):
        top = name.split(".")[0]
        if top == "server":
            ok = name == "server.core" or name.startswith("server.core.")
        else:
            ok = top in sys.stdlib_module_names and top not in CORE_FORBIDDEN
        if not ok:
            bad.append(f"{rel(path)}:{line} imports {name}")
    assert bad == []


@pytest.mark.parametrize("path", CORE_FILES, ids=rel)
def test_core_uses_no_global_random(path: Path) -> None:
    """The core never calls the random module's global functions (randomness is injected)."""
    tree = ast.parse(path.read_text())
    bad = [
        f"{rel(path)}:{node.lineno} uses random.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "random"
        and node.attr not in RANDOM_TYPES
    ]
    bad += [
        f"{rel(path)}:{node.lineno} imports {alias.name} from random"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "random"
        for alias in node.names
        if alias.name not in RANDOM_TYPES
    ]
    assert bad == []


@pytest.mark.parametrize("layer", sorted(LAYER_RULES))
def test_layers_import_only_downwards(layer: str) -> None:
    """Each layer imports only the server packages its row of LAYER_RULES allows."""
    files = py_files(SERVER / layer)
    if not files:
        pytest.skip(f"server/{layer} has no modules yet")
    allowed = LAYER_RULES[layer]
    bad = []
    for path in files:
        for line, name in file_imports(path):
            parts = name.split(".")
            if parts[0] != "server":
                continue
            if rel(path) == WALLET_ADAPTER[0] and name in WALLET_ADAPTER[1]:
                continue
            if len(parts) < 2 or parts[1] not in allowed:
                bad.append(f"{rel(path)}:{line} imports {name}")
    assert bad == []


@pytest.mark.parametrize("leaf", LEAF_MODULES)
def test_metrics_is_a_leaf(leaf: str) -> None:
    """A leaf module that layers may import imports no server module itself."""
    path = SERVER / f"{leaf}.py"
    assert [name for _, name in file_imports(path) if name.split(".")[0] == "server"] == []
    assert "metrics" not in LAYER_RULES["core"]


@pytest.mark.parametrize("path", ENGINE_BLIND_FILES, ids=rel)
def test_only_composition_roots_see_concrete_engines(path: Path) -> None:
    """Outside server/store, only server/app.py and server/cli.py import memory or redis engines."""
    bad = [
        f"{rel(path)}:{line} imports {name}"
        for line, name in file_imports(path)
        if any(name == e or name.startswith(e + ".") for e in CONCRETE_ENGINES)
    ]
    assert bad == []


def test_rule_table_points_down_only() -> None:
    """The rule table itself has no cycle: allowed packages sit strictly below, or are self."""
    order = ["metrics", "auth", "core", "wallet", "wire", "store", "runtime", "transport", "bots"]
    for layer, allowed in LAYER_RULES.items():
        assert layer in allowed
        assert all(order.index(other) <= order.index(layer) for other in allowed)
    assert "transport" not in LAYER_RULES["runtime"]
    assert LAYER_RULES["bots"] == {"core", "wire", "auth", "bots"}


def test_only_the_internal_wallet_adapts_the_store() -> None:
    """server/wallet/internal.py imports the store's wallet interface and nothing else of the
    store; no other wallet module imports the store (the exception above is not vacuous)."""
    seen = {
        (rel(path), name)
        for path in py_files(SERVER / "wallet")
        for _, name in file_imports(path)
        if name.startswith("server.store")
    }
    assert seen == {(WALLET_ADAPTER[0], name) for name in WALLET_ADAPTER[1]}


def test_only_the_command_line_serves_the_reference_wallet() -> None:
    """The reference wallet (`baccarat wallet-demo`) is a tool beside the server: only the CLI
    starts it; no part of the server uses it."""
    bad = [
        f"{rel(path)}:{line} imports {name}"
        for path in py_files(SERVER)
        if rel(path) not in ("server/cli.py", "server/wallet/demo.py")
        for line, name in file_imports(path)
        if name == "server.wallet.demo"
    ]
    assert bad == []


def test_the_bots_exist_and_nothing_in_the_server_uses_them() -> None:
    """server/bots is there (the rule is not vacuous), and only the CLI imports it."""
    assert {p.name for p in py_files(SERVER / "bots")} >= {"checker.py", "ledger.py", "bot.py"}
    bad = [
        f"{rel(path)}:{line} imports {name}"
        for path in py_files(SERVER)
        if path.parent.name != "bots" and rel(path) not in BOTS_USERS
        for line, name in file_imports(path)
        if name == "server.bots" or name.startswith("server.bots.")
    ]
    assert bad == []


def test_the_bots_checker_and_ledger_are_pure() -> None:
    """The round checker and the ledger are as pure as the core: no clock, no I/O."""
    bad = []
    for path in (SERVER / "bots" / "checker.py", SERVER / "bots" / "ledger.py"):
        for line, name in file_imports(path):
            top = name.split(".")[0]
            if top == "server":
                ok = name.startswith(("server.core", "server.bots.checker"))
            else:
                ok = top in sys.stdlib_module_names and top not in CORE_FORBIDDEN
            if not ok:
                bad.append(f"{rel(path)}:{line} imports {name}")
    assert bad == []


def test_import_scanner_sees_every_form() -> None:
    """The scanner resolves relative, nested and `from pkg import module` imports."""
    source = (
        "import os.path\n"
        "from . import cards\n"
        "from ..store import memory\n"
        "from server.store import base\n"
        "def f():\n"
        "    import asyncio\n"
    )
    found = {name for _, name in imports_of(source, "server.core.example")}
    assert found >= {
        "os.path",
        "server.core",
        "server.core.cards",
        "server.store",
        "server.store.memory",
        "server.store.base",
        "asyncio",
    }
    assert {n for _, n in imports_of("from .x import y\n", "server.core", is_package=True)} == {
        "server.core.x"
    }


def _import_graph() -> dict[str, set[str]]:
    """server module -> the server modules it imports: at the top, inside a function or under
    TYPE_CHECKING alike (a circle hidden by a lazy import is still a circle)."""
    modules = {module_name(path): path for path in py_files(SERVER)}
    return {
        name: {imported for _, imported in file_imports(path) if imported in modules} - {name}
        for name, path in modules.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_circles_in_the_server() -> None:
    """No two server modules import each other, directly or round a longer loop (issue 17:
    http <-> operator_api and app <-> workers were, behind lazy imports)."""
    graph = _import_graph()
    assert {"server.app", "server.transport.http"} <= set(graph)  # the scan found the modules
    assert _circles(graph) == []


def test_the_circle_finder_finds_circles() -> None:
    """The check above is not vacuous: a loop of three, and one through a package, are found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}}
    assert _circles(graph) == [["a", "b", "c"], ["e", "f"]]


# --- size: modules of at most 500 lines, functions of at most 50 (issue 17) -------------------

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 50
ALL_SERVER_FILES = py_files(SERVER)


def function_sizes(path: Path) -> dict[str, int]:
    return sizes_of_functions(path.read_text(), rel(path))


def sizes_of_functions(source: str, where: str) -> dict[str, int]:
    """Lines of every function and method (its def to its last line), by qualified name."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    sizes[f"{where}:{name}"] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sizes


def module_lines(path: Path) -> int:
    return len(path.read_text().splitlines())


@pytest.mark.parametrize("path", ALL_SERVER_FILES, ids=rel)
def test_modules_and_functions_are_small(path: Path) -> None:
    """No module over MAX_MODULE_LINES lines and no function over MAX_FUNCTION_LINES (a
    function's lines run from its def, decorators aside, to its last line, docstring included)."""
    bad = []
    if module_lines(path) > MAX_MODULE_LINES:
        bad.append(f"{rel(path)} has {module_lines(path)} lines")
    bad += [
        f"{name} has {lines} lines"
        for name, lines in function_sizes(path).items()
        if lines > MAX_FUNCTION_LINES
    ]
    assert bad == []


def test_size_scanner_names_methods_and_nested_functions() -> None:
    source = "class A:\n    def f(self):\n        def g():\n            pass\n        return g\n"
    assert sizes_of_functions(source, "m.py") == {"m.py:A.f": 4, "m.py:A.f.g": 2}


# --- only the runtime sleeps --------------------------------------------------------------
# The node's loops (table loops; the hub's follower, watchdog, notice listener and retries)
# wait through a Clock (server/runtime/clock.py), so tests can drive time. `asyncio.sleep(0)`
# is a yield to the event loop, not a wait, and is allowed anywhere. The bots (server/bots)
# are a client, not the server: they pace themselves in wall-clock time like the people they
# stand for, as bench/ does; so does the reference wallet's fault injection (an operator's
# wallet that answers late, server/wallet/faults.py).
SLEEPERS = ("server/runtime/", "server/bots/", "server/wallet/faults.py")


def sleeps_in(source: str) -> list[int]:
    """Lines that use asyncio.sleep other than as `asyncio.sleep(0)`, or import it by name."""
    tree = ast.parse(source)
    yields = {
        id(node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == 0
    }
    lines = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "sleep"
        and isinstance(node.value, ast.Name)
        and node.value.id == "asyncio"
        and id(node) not in yields
    ]
    lines += [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module == "asyncio"
        and any(alias.name == "sleep" for alias in node.names)
    ]
    return sorted(lines)


@pytest.mark.parametrize(
    "path", [p for p in ALL_SERVER_FILES if not rel(p).startswith(SLEEPERS)], ids=rel
)
def test_only_the_runtime_sleeps(path: Path) -> None:
    """Outside server/runtime (and the bots), nothing calls or hands on asyncio.sleep."""
    assert [f"{rel(path)}:{line}" for line in sleeps_in(path.read_text())] == []


def test_sleep_scanner_sees_calls_references_and_imports() -> None:
    source = (
        "import asyncio\n"
        "from asyncio import sleep\n"
        "async def f(pause=asyncio.sleep):\n"
        "    await asyncio.sleep(0)\n"
        "    await asyncio.sleep(1)\n"
        "    await asyncio.sleep(0.0 + 0)\n"
    )
    assert sleeps_in(source) == [2, 3, 5, 6]


def test_the_readme_layout_lists_every_package() -> None:
    """README's layout section names every package of server/ (and the docs it points to
    exist), so a new package cannot land without a line saying what it holds."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout") :]
    layout = layout[: layout.index("\n## ", 1)] if "\n## " in layout[1:] else layout
    packages = sorted(p.parent.name for p in SERVER.glob("*/__init__.py"))
    assert packages, "no packages found under server/"
    missing = [name for name in packages if f"  {name}/" not in layout]
    assert missing == []
    assert (ROOT / "docs" / "architecture.md").is_file()
