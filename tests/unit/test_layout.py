"""The packages' imports point down the data flow (README "Where things are", DESIGN.md), read from
the source: an import that points the wrong way fails here, before it grows into a cycle."""

import ast
import pathlib

import nbprof

PACKAGE = pathlib.Path(nbprof.__file__).parent

# Which packages each package may import: the data flow, written once. Inside the middle tier the
# order is formats -> ranks -> analysis (a job's files load as one merged Trace; the rank summary
# counts kernel work as the analysis does). "nbprof" is the public API in nbprof/__init__.py.
ALLOWED = {
    "nbprof": {"model", "record", "formats", "analysis", "ranks", "timeline", "notebook", "cli"},
    "cli": {"nbprof", "timeline", "formats", "ranks", "analysis", "record", "model"},
    "notebook": {"timeline", "formats", "ranks", "analysis", "record", "model"},
    "timeline": {"formats", "ranks", "analysis", "model"},
    "formats": {"ranks", "analysis", "model"},
    "ranks": {"analysis", "model"},
    "analysis": {"model"},
    "record": {"model"},
    "model": set(),
}
# DESIGN.md's one sanctioned reach upward: the Trace's convenience methods (trace.steps(),
# trace.to_parquet()...) delegate with a one-line import inside the method, never at module level.
DELEGATED = {"model": {"analysis", "formats", "ranks"}}


def _package_of(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else "nbprof"


def _imported(path: pathlib.Path, node) -> list[str]:
    """The nbprof modules (dotted, from "nbprof") that an import statement names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not node.level:
        return [node.module]
    here = ["nbprof", *path.relative_to(PACKAGE).parts[:-1]]  # the importing module's package
    base = here[:len(here) - node.level + 1]
    if node.module:
        return [".".join([*base, node.module])]
    return [".".join([*base, alias.name]) for alias in node.names]


def _target(module: str) -> str | None:
    """The package an nbprof module belongs to ("nbprof" for the public API's own names)."""
    parts = module.split(".")
    if parts[0] != "nbprof":
        return None
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return "nbprof"


def package_imports():
    """(importing package, imported package, where, inside a function) for every import of
    another nbprof package in nbprof/**.py."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _package_of(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        in_function = set()
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function.update(id(node) for node in ast.walk(function) if node is not function)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for module in _imported(path, node):
                target = _target(module)
                if target is not None and target != source:
                    where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    found.append((source, target, where, id(node) in in_function))
    return found


def test_every_package_has_its_place_in_the_flow():
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert packages | {"nbprof"} == set(ALLOWED)


def test_the_allowed_imports_have_no_cycle():
    # the table itself must be a one-way flow (the public API aside: it names everything lazily)
    done, on_path = set(), []

    def visit(package):
        assert package not in on_path, f"cycle: {' -> '.join([*on_path, package])}"
        if package in done:
            return
        on_path.append(package)
        for below in ALLOWED[package] - {"nbprof"}:
            visit(below)
        on_path.pop()
        done.add(package)

    for package in set(ALLOWED) - {"nbprof"}:
        visit(package)


def test_imports_point_down_the_data_flow():
    wrong = [f"{where}: {source} imports {target} (it may import only "
             f"{', '.join(sorted(ALLOWED[source])) or 'nothing of nbprof'})"
             for source, target, where, in_function in package_imports()
             if target not in ALLOWED[source]
             and not (in_function and target in DELEGATED.get(source, ()))]
    assert not wrong, "\n".join(wrong)


def test_the_walk_sees_the_imports_it_checks():
    # the checker must see relative, absolute and function-local imports, or it would pass on
    # nothing
    seen = {(source, target, in_function)
            for source, target, _where, in_function in package_imports()}
    assert ("formats", "model", False) in seen  # from ...model import Trace (three dots, chrome/)
    assert ("model", "formats", True) in seen   # trace.to_parquet()'s delegation
    assert ("cli", "nbprof", True) in seen      # from .. import load
