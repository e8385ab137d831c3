"""One error hierarchy: every exception class uopc defines is a UopcError, the tree in the docstring of
uopc.ir.errors (which the book's appendix A prints) names each class, its builtin base and its package, and
the appendix's example of each class still raises it."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import sys
from pathlib import Path
from types import ModuleType

from uopc.ir import UopcError

PACKAGES = ["uopc.ir", "uopc.lower", "uopc.backend.c", "uopc.backend.cuda", "uopc.tensor"]
BUILTINS = (ValueError, TypeError, RuntimeError, LookupError, IndexError)


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of a uopc package, by name."""
    found: dict[str, type[BaseException]] = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        inside = pkgutil.iter_modules(package.__path__, f"{name}.")
        modules = [package, *(importlib.import_module(m.name) for m in inside)]
        for module in modules:
            for value in vars(module).values():
                if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                    found[value.__name__] = value
    return found


def drawn_tree() -> dict[str, tuple[str, str]]:
    """The classes the docstring's tree draws: name -> (the builtin named beside it, the package named), the
    builtin and package of a nested class being those of its parent when the line leaves them out."""
    doc = importlib.import_module(UopcError.__module__).__doc__ or ""
    drawn: dict[str, tuple[str, str]] = {}
    parent = ("", "")
    for line in doc.splitlines():
        m = re.match(r"\s+(│\s+)?[├└]── (\w+)\s+(\w+Error|\w+Exception)?\s*(uopc\.[\w.]+)?", line)
        if m:
            nested, name, builtin, package = m.groups()
            if nested:
                drawn[name] = (builtin or parent[0], package or parent[1])
            else:
                drawn[name] = parent = (builtin or "", package or "")
    return drawn


def test_every_uopc_exception_is_a_uopc_error() -> None:
    outside = [name for name, cls in defined_exceptions().items() if not issubclass(cls, UopcError)]
    assert not outside, f"exception classes that are not UopcErrors: {outside}"


def test_the_documented_tree_is_the_real_one() -> None:
    real = {name: cls for name, cls in defined_exceptions().items() if cls is not UopcError}
    drawn = drawn_tree()
    assert sorted(drawn) == sorted(real)
    for name, (builtin, package) in drawn.items():
        cls = real[name]
        assert cls.__module__.startswith(package + "."), f"{name} is defined in {cls.__module__}, drawn in {package}"
        bases = [b.__name__ for b in cls.__mro__ if b in BUILTINS]
        assert builtin in bases, f"{name} derives from {bases}, the tree says {builtin}"


def appendix_a() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "docs" / "listings" / "appendix_a_reference.py"
    spec = importlib.util.spec_from_file_location("appendix_a_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_error_class_has_an_example_that_raises_it() -> None:
    """The book's build stops on a stale example; this names the class first (an example that stopped
    raising once broke the build, docs/notes.md)."""
    appendix = appendix_a()
    for name, cls in defined_exceptions().items():
        if cls is not UopcError:
            what, message = appendix.example_message(cls)
            assert message, f"the example of {name} ({what}) raised it with no message"
