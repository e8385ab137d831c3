"""The C backend takes values from lowering and calls nothing in it: a renderer that linearized kernels
itself, or imported a helper of the opts, would make lowering and the backend one tangle again."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "uopc" / "backend" / "c"
# the stages a backend is given and returns, and the protocol it implements: no function of lowering
ALLOWED = {
    "Backend",
    "Binary",
    "Compiler",
    "Executable",
    "LinearProgram",
    "Manifest",
    "Opts",
    "OptsStore",
    "Param",
    "Renderer",
    "Runtime",
    "Signature",
    "Source",
    "Step",
}


def lowering_imports(path: Path) -> list[str]:
    """Every name a module imports from uopc.lower, as 'module:name'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("uopc.lower"):
            found += [f"{node.module}:{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [f"{alias.name}:*" for alias in node.names if alias.name.startswith("uopc.lower")]
    return found


def test_the_backend_imports_only_stages_and_protocols_from_lowering() -> None:
    modules = sorted(SOURCE.glob("*.py"))
    assert modules
    imported = {f"{p.name}: {name}" for p in modules for name in lowering_imports(p)}
    allowed = {f"{p.name}: uopc.lower:{name}" for p in modules for name in ALLOWED}
    assert imported <= allowed, sorted(imported - allowed)
