"""capture: run a training step's kernels again without the Python that built them.

A step written with tensors rebuilds its graph, its gradients and its plan lookup at every call, only to find
the same plan and run the same kernels on new data. `capture(step)` does that work three times and then
stops doing it:

- call 1 runs eagerly (a warm-up: plans are made, kernels compiled);
- calls 2 and 3 run eagerly too, recorded: every plan launched, the buffers it read and the arrays it wrote;
- comparing the two recordings says where each buffer a kernel reads comes from: an argument of the call,
  a buffer an earlier launch of the same call wrote, a buffer the previous call wrote (a parameter, an
  optimizer's moments: state), or a buffer that is the same at every call (a constant, the learning rate);
- every later call is a replay: bind the new arguments' buffers, run the launch list, point the state
  tensors at their new values. No graph, no autodiff, no normalizing, no plan lookup, no allocation.

A lazy tensor argument is computed before the call. What must not change between calls: which arguments are
tensors, and each one's shape, dtype and device (refused with a TensorError naming the argument, its captured
and its new form); any other argument's value (refused too). Python values read inside the step are frozen at
capture: data a call makes in Python (Tensor.rand for dropout, a value from a schedule) is refused at capture
if calls 2 and 3 made it different, and kept otherwise. Reading a tensor's values inside the step (item(),
numpy()) is refused while it is recorded: a replay would not read them. Index checks (labels, embedding
indices) are kept and run on each replay's arguments. A learning rate set with `opt.lr = ...` between calls
reaches the replay (the setter writes the same buffer); other optimizer settings are frozen. A kernel
written in UOps and run by `run_kernel` (the online and tiled attention) is not recorded, so a step that runs
one is refused at its first recorded call.

A replay returns new tensors over the capture's own buffers: the next call overwrites them, so read them
(item(), numpy()) before calling again. Gradients (`.grad`) are not updated by a replay.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from uopc.ir import UOp
from uopc.lower import get_backend
from uopc.tensor.errors import TensorError
from uopc.tensor.realize import Launch, Recording, buffer_node, realizer
from uopc.tensor.tensor import Tensor

R = TypeVar("R")

ARG, HERE, PREV, FIXED = "argument", "this call", "previous call", "fixed"
"""Where a buffer a launch reads comes from (see `Source`)."""


@dataclass(frozen=True)
class Source:
    """Where input `slot` of a launch is found at a replay: the argument `name` (ARG), plan buffer `at` of
    launch `launch` in this call (HERE) or in the previous one (PREV), or whatever array `node` holds (FIXED)."""

    kind: str
    name: str = ""
    launch: int = 0
    at: int = 0
    node: UOp | None = None


@dataclass(frozen=True)
class ArgSpec:
    """A tensor argument as captured (its shape, dtype, device), or another argument's captured value."""

    tensor: bool
    shape: tuple[int, ...] = ()
    dtype: str = ""
    device: str = ""
    value: Any = None

    def describe(self) -> str:
        return f"a {self.dtype} tensor of shape {self.shape} on {self.device}" if self.tensor else repr(self.value)


def _spec(v: Any) -> ArgSpec:
    if isinstance(v, Tensor):
        return ArgSpec(True, v.shape, v.dtype.name, v.device)
    return ArgSpec(False, value=v)


def _same_value(a: Any, b: Any) -> bool:
    """Whether two non-tensor arguments are the same value: equal numbers, strings, None; the same object."""
    if a is b:
        return True
    plain = (bool, int, float, str, bytes, type(None))
    return isinstance(a, plain) and type(a) is type(b) and a == b


def _node(t: Tensor) -> UOp:
    """The BUFFER node holding a realized tensor's value."""
    node = buffer_node(realizer.computed.get(t.uop, t.uop))
    assert node is not None, "the tensor was realized"
    return node


class Replay:
    """The launch list of a captured step, with the buffers it reads and writes; `run` replays it once."""

    def __init__(self, name: str, before: Recording, last: Recording, args: tuple[dict[str, UOp], dict[str, UOp]]):
        if [x.plan for x in before.launches] != [x.plan for x in last.launches]:
            raise TensorError(
                f"capture: {name} ran {len(before.launches)} plans at call 2 and {len(last.launches)} at call 3, "
                "or different ones: its graph depends on something other than the arguments' shapes and dtypes"
            )
        self.name, self.launches = name, last.launches
        made_now, made_before = _made(last.launches), _made(before.launches)
        arg_of = {node: name for name, node in args[1].items()}
        self.sources = [
            [self._source(lx, j, made_now, made_before, arg_of, args[0], bx) for j in range(lx.plan.n_inputs)]
            for lx, bx in zip(last.launches, before.launches, strict=True)
        ]
        state = {(s.launch, s.at) for row in self.sources for s in row if s.kind == PREV}
        # a buffer read by the next call gets a second array, and the two take turns (written, then read)
        self.rings = [
            {at: [lx.buffers[at], *_spare(lx, at, (i, at) in state)] for at in range(lx.plan.n_inputs, len(lx.buffers))}
            for i, lx in enumerate(last.launches)
        ]
        self.rebind = [(node, i, at) for node, (i, at) in made_now.items() if (i, at) in state]
        self.checks = [(self._checked_argument(node, arg_of), check) for node, check in last.checks]
        self.calls = 0
        # every ring has one array or two, so a launch's buffers repeat with the parity of the call: each
        # launch keeps a list per parity, in which only arguments and fixed buffers are looked up again
        self.lists: list[list[list[Any] | None]] = [[None, None] for _ in self.launches]
        self.lookups = [[(j, s) for j, s in enumerate(row) if s.kind in (ARG, FIXED)] for row in self.sources]

    def _source(
        self,
        launch: Launch,
        j: int,
        made_now: dict[UOp, tuple[int, int]],
        made_before: dict[UOp, tuple[int, int]],
        arg_of: dict[UOp, str],
        args_before: dict[str, UOp],
        before: Launch,
    ) -> Source:
        now, then = launch.inputs[j], before.inputs[j]
        if now in arg_of and args_before.get(arg_of[now]) is then:
            return Source(ARG, name=arg_of[now])
        if now in made_now:
            return Source(HERE, launch=made_now[now][0], at=made_now[now][1])
        if now in made_before:
            return Source(PREV, launch=made_before[now][0], at=made_before[now][1])
        if now is then or _same_data(launch.device, now, then):
            return Source(FIXED, node=now)
        spec = launch.plan.buffers[j]
        raise TensorError(
            f"capture: {self.name} reads a buffer made from Python data inside the step ({spec.dtype.name}, "
            f"{spec.size} elements) that differed between calls 2 and 3 (random numbers? a value computed in "
            "Python?); a replay would freeze it: make it outside the step and pass it as an argument"
        )

    def _checked_argument(self, node: UOp, arg_of: dict[UOp, str]) -> str:
        if node not in arg_of:
            raise TensorError(
                f"capture: {self.name} checks indices it computed inside the step; a replay cannot check them: "
                "pass the indices as an argument"
            )
        return arg_of[node]

    def run(self, arrays: dict[str, Any]) -> None:
        """One replay: run each launch on this call's buffers, then point the state at what it wrote."""
        self.calls += 1
        for i, launch in enumerate(self.launches):
            launch.compiled.executable.run(self._buffers(i, arrays))
        for node, i, at in self.rebind:
            ring = self.rings[i][at]
            realizer.buffers[node] = ring[self.calls % len(ring)]

    def _buffers(self, i: int, arrays: dict[str, Any]) -> list[Any]:
        """The arrays launch i runs on in this call: the list of the last call of the same parity, with the
        arguments and the fixed buffers (a learning rate set between calls is a new array) looked up again."""
        kept = self.lists[i][self.calls % 2]
        if kept is None:
            kept = [self._resolve(s, arrays) for s in self.sources[i]]
            kept += [ring[self.calls % len(ring)] for ring in self.rings[i].values()]
            self.lists[i][self.calls % 2] = kept
            return kept
        for j, s in self.lookups[i]:
            kept[j] = self._resolve(s, arrays)
        return kept

    def _resolve(self, s: Source, arrays: dict[str, Any]) -> Any:
        if s.kind == ARG:
            return arrays[s.name]
        if s.kind == FIXED:
            return realizer.buffers[s.node]  # type: ignore[index]
        ring = self.rings[s.launch][s.at]
        return ring[(self.calls - (s.kind == PREV)) % len(ring)]


def _spare(launch: Launch, at: int, wanted: bool) -> list[Any]:
    """A second array for plan buffer `at` of a launch, if `wanted`."""
    spec = launch.plan.buffers[at]
    return [get_backend(launch.device).runtime.allocate(spec.dtype, spec.size)] if wanted else []


def _made(launches: Sequence[Launch]) -> dict[UOp, tuple[int, int]]:
    """Each BUFFER node the launches returned for a root they computed -> (launch, plan buffer)."""
    return {
        node: (i, at)
        for i, launch in enumerate(launches)
        for node, at in zip(launch.outputs, launch.plan.outputs, strict=True)
        if at >= launch.plan.n_inputs
    }


def _same_data(device: str, a: UOp, b: UOp) -> bool:
    """Whether two buffers hold the same bytes (a constant a step makes from Python at every call)."""
    if a.dtype is not b.dtype or a.arg.size != b.arg.size:
        return False
    runtime = get_backend(device).runtime
    return bool(runtime.to_numpy(realizer.buffers[a]).tobytes() == runtime.to_numpy(realizer.buffers[b]).tobytes())


class Captured(Generic[R]):
    """A step function, captured: see the module's docstring for what that means."""

    def __init__(self, fn: Callable[..., R]) -> None:
        self.fn, self.signature = fn, inspect.signature(fn)
        self.name = str(getattr(fn, "__name__", None) or getattr(getattr(fn, "func", fn), "__name__", repr(fn)))
        self.specs: dict[str, ArgSpec] | None = None
        self.recordings: list[tuple[Recording, dict[str, UOp]]] = []
        self.replay: Replay | None = None
        self.returned: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        bound = self.signature.bind(*args, **kwargs)
        arguments = bound.arguments
        self._check(arguments)
        tensors = {k: v.realize() for k, v in arguments.items() if isinstance(v, Tensor)}
        if self.replay is not None:
            return self._replay(tensors)
        if self.specs is None:
            self.specs = {k: _spec(v) for k, v in arguments.items()}
            return self.fn(*args, **kwargs)  # the warm-up: plans made and compiled, nothing recorded
        return self._record(tensors, args, kwargs)

    def _check(self, arguments: dict[str, Any]) -> None:
        if self.specs is None:
            return
        for name, spec in self.specs.items():
            new = arguments.get(name)
            same = _spec(new) == spec if spec.tensor or isinstance(new, Tensor) else _same_value(spec.value, new)
            if not same:
                raise TensorError(
                    f"capture: {self.name} was captured with argument {name!r} as {spec.describe()}, and now "
                    f"gets {_spec(new).describe()}; call a new capture(...) of the step for the new form"
                )

    def _record(self, tensors: dict[str, Tensor], args: Any, kwargs: Any) -> R:
        recording = Recording(self.name)
        realizer.recording = recording
        try:
            result = self.fn(*args, **kwargs)
            outs = _returned_tensors(result, self.name)
            if outs:
                Tensor.realize(*outs)
        finally:
            realizer.recording = None
        self.recordings.append((recording, {k: _node(t) for k, t in tensors.items()}))
        if len(self.recordings) == 2:
            (before, args_before), (last, args_last) = self.recordings
            self.replay = Replay(self.name, before, last, (args_before, args_last))
            self.returned = _returned_form(result, {node: name for name, node in args_last.items()})
            self.recordings = []
        return result

    def _replay(self, tensors: dict[str, Tensor]) -> R:
        assert self.replay is not None
        arrays = {k: realizer.buffers[_node(t)] for k, t in tensors.items()}
        for name, check in self.replay.checks:
            check(get_backend(tensors[name].device).runtime.to_numpy(arrays[name]))
        self.replay.run(arrays)
        return _rebuild(self.returned, tensors)  # type: ignore[no-any-return]


def _returned_tensors(result: Any, name: str) -> list[Tensor]:
    """The tensors a step returns: None, a tensor, or a tuple or list of tensors."""
    items = result if isinstance(result, (tuple, list)) else () if result is None else (result,)
    if not all(isinstance(t, Tensor) for t in items):
        raise TensorError(f"capture: {name} must return None, a tensor, or a tuple or list of tensors")
    return list(items)


@dataclass(frozen=True)
class _Returned:
    """A tensor a replay returns: the argument `name`, or a new tensor over the computed value `value`."""

    value: UOp
    device: str
    name: str | None


def _returned_form(result: Any, arg_of: dict[UOp, str]) -> Any:
    """What a replay returns, in the form the recorded call returned it."""
    if isinstance(result, Tensor):
        value = realizer.computed.get(result.uop, result.uop)
        return _Returned(value, result.device, arg_of.get(_node(result)))
    if isinstance(result, (tuple, list)):
        return type(result)(_returned_form(t, arg_of) for t in result)
    return None


def _rebuild(form: Any, tensors: dict[str, Tensor]) -> Any:
    if isinstance(form, _Returned):
        return tensors[form.name] if form.name is not None else Tensor(form.value, device=form.device)
    if isinstance(form, (tuple, list)):
        return type(form)(_rebuild(f, tensors) for f in form)
    return None


def capture(fn: Callable[..., R]) -> Captured[R]:
    """Capture a step function (a decorator): after three eager calls, each call replays its kernels.

    Its tensor arguments are its inputs; everything else it reads (parameters, optimizer state) is found
    in the recordings. See this module's docstring for what may and may not change between calls."""
    return Captured(fn)
