"""Mutation testing for the whole stack: put a plausible bug back, run the tests that cover it, see whether they fail.

    python scripts/mutants.py                      # every mutant: check they apply, run the baselines, run them
    python scripts/mutants.py pad_gate_dropped     # one mutant (or several, by name)
    python scripts/mutants.py --module lower       # the mutants of one package
    python scripts/mutants.py --list               # the catalogue: module, what each breaks, the tests it runs
    python scripts/mutants.py --tests packages X   # mutant X against every package's tests, not its own subset
    python scripts/mutants.py --out docs/outputs/mutants.txt   # also write the table, stamped, for the book

A mutant is a source patch: a file, a snippet that must occur in it exactly once, and the wrong code that
replaces it. The patch is applied to a shadow copy of every package's sources in a temporary folder, which
the child process puts first on PYTHONPATH: the namespace package `uopc` then finds its portions there before
the editable installs. The child checks that it really imports the shadow copy, and the mutated module from
it, before it runs pytest -x on the tests the mutant names. The repository is never edited.

When code moves, a snippet stops matching: the run stops before testing anything and names each mutant to
update, instead of silently testing unmutated code. A mutant is killed when a test fails (or the test process
crashes); a surviving mutant is a missing test. Each set of tests first runs unmutated: a failing baseline is
an error, not a kill. Exit status 0 when every mutant applies and is killed and every baseline passes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import stamp
from arguments import output_file

ROOT = Path(__file__).resolve().parents[1]
IR, IR_T = "packages/uopc-ir/src/uopc/ir/", "packages/uopc-ir/tests/"
LOWER, LOWER_T = "packages/uopc-lower/src/uopc/lower/", "packages/uopc-lower/tests/"
C, C_T = "packages/uopc-backend-c/src/uopc/backend/c/", "packages/uopc-backend-c/tests/"
TENSOR, TENSOR_T = "packages/uopc-tensor/src/uopc/tensor/", "packages/uopc-tensor/tests/"


@dataclass(frozen=True)
class Mutant:
    """One plausible mistake: in `file`, the snippet `original` (exactly once) becomes `mutated`."""

    name: str
    file: str
    original: str
    mutated: str
    tests: tuple[str, ...]  # pytest arguments: the test files (and -k) that cover the mutated code
    breaks: str

    @property
    def module(self) -> str:
        """The package it mutates, as the hatch environments name them: ir, lower, backend-c, tensor."""
        return self.file.split("/")[1].removeprefix("uopc-")

    @property
    def module_name(self) -> str:
        """The dotted name of the mutated module, e.g. uopc.lower.rangeify."""
        inside = self.file.split("/src/", 1)[1].removesuffix(".py")
        return inside.replace("/", ".")


# ---------------------------------------------------------------------------------------------------------
# The catalogue: each mutant one small mistake written as the wrong code, with the tests that must see it.
# ---------------------------------------------------------------------------------------------------------

PROPERTIES = (IR_T + "test_properties.py",)
LOWER_TESTS = (LOWER_T,)  # the whole suite takes seconds, and one baseline then serves every lower mutant
RENDER_TESTS = (C_T + "test_render.py",)
GUARD_TESTS = (C_T + "test_guard_pages.py",)
CACHE_TESTS = (C_T + "test_cache.py",)
PROGRAM_TESTS = (C_T + "test_program.py",)
EXECUTABLE_TESTS = (C_T + "test_executable.py",)
AUTODIFF_TESTS = (TENSOR_T + "test_autodiff.py",)
TIE_TESTS = (TENSOR_T + "test_autodiff.py", "-k", "ties")
OPTIM_TESTS = (TENSOR_T + "test_optim.py",)
NN_TESTS = (TENSOR_T + "test_nn.py",)
PORTED_TESTS = (TENSOR_T + "test_ported_ops.py",)

MUTANTS: list[Mutant] = [
    # ---- uopc-ir: the algebra the rest relies on (the bugs the property tests were written to catch) ----
    Mutant(
        "idiv_all_terms",
        IR + "symbolic.py",
        "quotient = {t: k // c for t, k in terms.items() if k % c == 0}",
        "quotient = {t: k // c for t, k in terms.items()}",
        PROPERTIES,
        "x // c moves every term of the sum out of the division, divisible by c or not",
    ),
    Mutant(
        "mod_bounds_off_by_one",
        IR + "bounds.py",
        "        return 0, c - 1\n",
        "        return 0, c - 2\n",
        PROPERTIES,
        "vmax of x % c claims c - 2 where c - 1 is possible",
    ),
    Mutant(
        "cmplt_floor",
        IR + "symbolic.py",
        "limit = _divide_exactly(build_sum(terms, 0, x.scalar_dtype), g), -(-limit // g)",
        "limit = _divide_exactly(build_sum(terms, 0, x.scalar_dtype), g), limit // g",
        PROPERTIES,
        "g*y < c becomes y < c // g, rounding the limit down where it must round up",
    ),
    Mutant(
        "merge_divmod_constant",
        IR + "symbolic.py",
        "                added += inner_const * k\n",
        "",
        PROPERTIES,
        "merging c*(x//c) + x%c into x drops x's constant part (a bug the suite found, docs/notes.md)",
    ),
    Mutant(
        "argkey_untyped",
        IR + "uop.py",
        '    """The hash-consing key of an arg: 1, 1.0 and True differ, and so do 0.0 and -0.0; nan equals nan."""\n',
        '    """The hash-consing key of an arg: 1, 1.0 and True differ, and so do 0.0 and -0.0; nan equals nan."""\n'
        "    return arg\n",
        PROPERTIES,
        "the hash-consing key is the raw arg: 0.0 == -0.0 and 1 == True, so the cache mixes them up",
    ),
    Mutant(
        "typed_literal_via_f32",
        IR + "uir.py",
        "value = self.plain_literal()  # its own value",
        "value = self.literal().arg  # its own value",
        PROPERTIES,
        "the value in f64(...) is read as a float32 literal first (a bug the suite found, docs/notes.md)",
    ),
    Mutant(
        "where_bounds_true_branch",
        IR + "bounds.py",
        "    return min(a[0], b[0]), max(a[1], b[1])\n\n\ndef _bounds_cast",
        "    return a\n\n\ndef _bounds_cast",
        PROPERTIES,
        "the bounds of an undecided WHERE are those of its true branch only",
    ),
    Mutant(
        "prefetch_lost_with_the_gate",
        IR + "symbolic.py",
        "p.load(i, prefetch=x.arg) if g.arg",
        "p.load(i) if g.arg",
        (IR_T + "test_symbolic.py",),
        "a load whose gate simplify decides loses its prefetch hint: a rewrite drops what the lowering asked for",
    ),
    # ---- uopc-lower: rangeify (movement ops as index arithmetic, padding as gates) ----
    Mutant(
        "pad_gate_dropped",
        LOWER + "rangeify.py",
        "return ptr.load(idx[0], None if valid.op is Ops.CONST and valid.arg else valid)",
        "return ptr.load(idx[0])",
        LOWER_TESTS,
        "a padded buffer is loaded without its gate: reading the padding reads outside the buffer",
    ),
    Mutant(
        "pad_end_inclusive",
        LOWER + "rangeify.py",
        "valid = valid & (i >= 0) & (i < s)",
        "valid = valid & (i >= 0) & (i <= s)",
        LOWER_TESTS,
        "the gate of a padded axis lets index s through: one element past the end is read",
    ),
    Mutant(
        "flip_off_by_one",
        LOWER + "rangeify.py",
        "simplify((s - 1) - i, memo) if a in arg else i",
        "simplify(s - i, memo) if a in arg else i",
        LOWER_TESTS,
        "a flipped axis reads element s - i instead of s - 1 - i",
    ),
    Mutant(
        "shrink_offset_sign",
        LOWER + "rangeify.py",
        "return tuple(simplify(i + b, memo) for i, (b, _) in zip(idx, arg, strict=True)), valid",
        "return tuple(simplify(i - b, memo) for i, (b, _) in zip(idx, arg, strict=True)), valid",
        LOWER_TESTS,
        "a shrink moves its window the wrong way: the sign of its offset is flipped",
    ),
    Mutant(
        "permute_not_inverted",
        LOWER + "rangeify.py",
        "return tuple(idx[arg.index(a)] for a in range(len(shape))), valid",
        "return tuple(idx[arg[a]] for a in range(len(shape))), valid",
        LOWER_TESTS,
        "a permute reads its source through the permutation instead of its inverse (3-cycles differ)",
    ),
    Mutant(
        "unflatten_without_mod",
        LOWER + "rangeify.py",
        "out.append(simplify((flat // stride) % s, memo) if s > 1 else flat.const_like(0))",
        "out.append(simplify(flat // stride, memo) if s > 1 else flat.const_like(0))",
        LOWER_TESTS,
        "unflattening a reshape's index forgets the % size: inner axes run past their end",
    ),
    # ---- uopc-lower: linearize (accumulators, the loop tree, the order of statements) ----
    Mutant(
        "max_identity_zero",
        LOWER + "linearize.py",
        "Ops.MAX: dtype.min",
        "Ops.MAX: 0",
        LOWER_TESTS,
        "a max accumulator starts at 0 instead of the lowest value: the max of negative numbers is 0",
    ),
    Mutant(
        "accumulator_outside_loop",
        LOWER + "linearize.py",
        "scope = sorted(outer - set(reduce_ranges), key=lambda x: x.arg.axis)",
        "scope = sorted(set(), key=lambda x: x.arg.axis)",
        LOWER_TESTS,
        "the accumulator is declared once, outside the output loops: each output adds onto the previous sum",
    ),
    Mutant(
        "shared_scope_ignored",
        LOWER + "linearize.py",
        'outer = known[value].union(*(ctx["scopes"].get(x, ()) for x in reduce_ranges))',
        "outer = known[value]",
        LOWER_TESTS,
        "an upcast copy of a reduce that reads only padding keeps its accumulator outside the shared loop",
    ),
    Mutant(
        "common_loop_outermost",
        LOWER + "linearize.py",
        "found = self._common[(a, b)] = next((r for r in reversed(self.path(b)) if r in pa), ROOT)",
        "found = self._common[(a, b)] = next((r for r in self.path(b) if r in pa), ROOT)",
        LOWER_TESTS,
        "the loop two statements share is taken as the outermost common loop, not the innermost",
    ),
    Mutant(
        "emit_block_reversed",
        LOWER + "linearize.py",
        "work += reversed(_schedule(u, items.get(u, set()), after, order, tree))",
        "work += _schedule(u, items.get(u, set()), after, order, tree)",
        LOWER_TESTS,
        "a loop body is pushed onto the work stack in order, so it is emitted backwards",
    ),
    # ---- uopc-lower: opts and kernelize ----
    Mutant(
        "unroll_drops_last_copy",
        LOWER + "opt.py",
        "copies = [substitute(red.src[0], {r: index + k}).cast(dtype) for k in range(n)]",
        "copies = [substitute(red.src[0], {r: index + k}).cast(dtype) for k in range(n - 1)]",
        LOWER_TESTS,
        "unrolling by n combines n - 1 values per iteration: every n-th term is lost",
    ),
    Mutant(
        "upcast_forgets_stride",
        LOWER + "opt.py",
        "[outer * n + k if outer.src[0].arg > 1 else UOp.const(k, r.scalar_dtype) for k in range(n)]",
        "[outer + k if outer.src[0].arg > 1 else UOp.const(k, r.scalar_dtype) for k in range(n)]",
        LOWER_TESTS,
        "an upcast axis forgets to scale the outer index by the factor: outputs overlap and others stay unwritten",
    ),
    Mutant(
        "reduce_fused_into_expand",
        LOWER + "kernelize.py",
        "if source.op not in _CHEAP:  # an expand of computed values would recompute them per copy",
        "if source.op not in (*_CHEAP, Ops.REDUCE_AXIS):  # an expand of computed values would recompute them per copy",
        LOWER_TESTS,
        "a reduction feeding an expand fuses into its consumer: it is recomputed for every copy",
    ),
    Mutant(
        "plan_cache_ignores_opt",
        LOWER + "kernelize.py",
        "key = (graph, opt, pack)",
        "key = (graph, True, pack)",
        LOWER_TESTS,
        "the plan cache key leaves out the optimizer setting: OPT=0 gets the optimized plan",
    ),
    Mutant(
        "plan_cache_fifo",
        LOWER + "kernelize.py",
        "        if found is not None:\n            self.plans.move_to_end(key)\n",
        "",
        LOWER_TESTS,
        "the plan cache drops the plan made first, not the one used least recently",
    ),
    Mutant(
        "linearize_ignores_opts",
        LOWER + "pipeline.py",
        "optimized[key] = apply_opts(k.ast, k.opts, simplified)",
        "optimized[key] = k.ast",
        LOWER_TESTS,
        "the driver linearizes each kernel's graph without its opts: every kernel runs as plain loops",
    ),
    Mutant(
        "kernel_memo_ignores_opts",
        LOWER + "pipeline.py",
        "key = (k.ast, *k.opts.key())",
        "key = (k.ast,)",
        (C_T + "test_packing.py", C_T + "test_repeated_kernels.py"),
        "the driver lowers a graph once whatever its opts: a kernel equal to another but for its opts gets the other's",
    ),
    Mutant(
        "strided_axes_inverted",
        LOWER + "opt.py",
        "return frozenset(r.arg.axis for r, strided in _reduce_loads(kernel) if strided)",
        "return frozenset(r.arg.axis for r, strided in _reduce_loads(kernel) if not strided)",
        LOWER_TESTS,
        "the linear program names the contiguous reduce axes as strided: the renderer vectorizes the wrong loops",
    ),
    Mutant(
        "panels_ignore_threads",
        LOWER + "pack.py",
        "return -(-panels // threads) * width",
        "return panels * width",
        LOWER_TESTS,
        "the panel width ignores how panels split among threads: 16 threads get 22 wide panels for 2 x 16 narrow",
    ),
    Mutant(
        "groups_not_shared",
        LOWER + "pack.py",
        "if threads > 1 and a.blocks[0] % threads == 0:",
        "if threads < 1 and a.blocks[0] % threads == 0:",
        LOWER_TESTS,
        "a matmul with A packed threads its panels: each thread walks all of packed A, not its own share of it",
    ),
    Mutant(
        "shares_drop_groups",
        LOWER + "pack.py",
        "if threads > 1 and a.blocks[0] % threads == 0:",
        "if threads > 1:",
        (C_T + "test_packing.py",),
        "A's groups are shared among threads that do not divide them: the groups past the last whole share are lost",
    ),
    Mutant(
        "panel_not_prefetched",
        LOWER + "pack.py",
        "read = packed.load((block * p.blocks[1] + p.reduce) * p.width + inner, prefetch=ahead)",
        "read = packed.load((block * p.blocks[1] + p.reduce) * p.width + inner)",
        (C_T + "test_packing.py",),
        "the packed matmul no longer asks for B's panel ahead: every value the same, the kernel slower (notes 164)",
    ),
    # ---- uopc-backend-c: the C renderer ----
    Mutant(
        "loop_skips_first",
        C + "render.py",
        "{name} = 0; {name} <",
        "{name} = 1; {name} <",
        RENDER_TESTS,
        "every C loop starts at 1: the first iteration of each loop is skipped",
    ),
    Mutant(
        "gate_not_rendered",
        C + "render.py",
        "            if len(u.src) == 3:\n"
        '                read = f"{self.expr[u.src[2]]} ? {read} : {c_literal(0, u.scalar_dtype)}"\n',
        "",
        GUARD_TESTS,
        "the C renderer drops a load's gate: reading padding reads memory outside the buffer",
    ),
    Mutant(
        "floormod_sign",
        C + "render.py",
        "? r + b : r;",
        "? r - b : r;",
        RENDER_TESTS,
        "floor modulo corrects a remainder of the wrong sign in the wrong direction",
    ),
    Mutant(
        "idiv_truncates_negatives",
        C + "render.py",
        "if u.op in (Ops.IDIV, Ops.MOD) and dt.is_int and vmin(u.src[0]) >= 0 and vmin(u.src[1]) > 0:",
        "if u.op in (Ops.IDIV, Ops.MOD) and dt.is_int and vmin(u.src[1]) > 0:",
        RENDER_TESTS,
        "C's truncating / and % are used when only the divisor is known positive: -7 // 2 gives -3",
    ),
    Mutant(
        "wide_index_may_wrap",
        C + "render.py",
        "u.op in _EXACT_WIDE and any(s in wide for s in u.src) and never_wraps(u)",
        "u.op in _EXACT_WIDE and any(s in wide for s in u.src)",
        RENDER_TESTS,
        "int32 index arithmetic that can wrap is computed in 64 bits: i * 2^30 < 0 is false where numpy's is true",
    ),
    Mutant(
        "wide_operand_not_cast_back",
        C + "render.py",
        "if narrow and s in self.wide else",
        "if False else",
        RENDER_TESTS,
        "an int32 sum of data and a 64-bit index is computed in 64 bits inside a comparison: it never wraps",
    ),
    Mutant(
        "int16_not_wrapped",
        C + "render.py",
        "if u.op in _WIDENED and dt.is_int and dt.itemsize < 4:",
        "if u.op in _WIDENED and dt.is_int and dt.itemsize < 2:",
        RENDER_TESTS,
        "int16 arithmetic is not cast back to int16 inside expressions: it computes in int and never wraps",
    ),
    Mutant(
        "max_drops_nan",
        C + "render.py",
        '("max", "float"): "return (a > b || a != a) ? a : b;",',
        '("max", "float"): "return a > b ? a : b;",',
        (C_T + "test_reduce.py", "-k", "nan"),
        "float max ignores a NaN in its first operand (numpy's max returns NaN)",
    ),
    Mutant(
        "tile_hint_ignored",
        C + "render.py",
        "return tile >= 4 and bool(program.strided_axes)",
        "return tile >= 4",
        (C_T + "test_gemm.py", "-k", "register_tiles"),
        "every register tile turns gcc's loop vectorizer off, also where its loads are contiguous",
    ),
    Mutant(
        "prefetch_counts_bytes",
        C + "render.py",
        "+ {u.arg} * sizeof *{ptr}",
        "+ {u.arg}",
        (C_T + "test_render.py",),
        "a prefetch hint of n elements asks for the line n bytes ahead: a quarter of the distance for float32",
    ),
    # ---- uopc-backend-c: the kernel cache, checked calls, plans ----
    Mutant(
        "cache_key_ignores_cflags",
        C + "compiler.py",
        'text = "\\0".join([source, compiler_identity(cc), flags, native_target(cc, flags)])',
        'text = "\\0".join([source, compiler_identity(cc), native_target(cc, flags)])',
        CACHE_TESTS,
        "the cache key leaves out CFLAGS: a library built with other flags (-O0, sanitizers) is reused",
    ),
    Mutant(
        "cache_trusts_file_name",
        C + "compiler.py",
        "return data if _digest(data) == path.name[len(prefix) : -len(suffix)] else None",
        "return data",
        CACHE_TESTS,
        "a cached library is trusted because it is there, not because its bytes hash to its name",
    ),
    Mutant(
        "overlap_neighbours_only",
        C + "program.py",
        "for start, _, j in ranges[n + 1 :]:",
        "for start, _, j in ranges[n + 1 : n + 2]:",
        PROGRAM_TESTS,
        "the restrict check compares each array with the next one only: an overlap past it is missed",
    ),
    Mutant(
        "larger_array_accepted",
        C + "program.py",
        "elif a.size != p.size:",
        "elif a.size < p.size:",
        PROGRAM_TESTS,
        "an array larger than its parameter is accepted: the kernel silently uses its first elements",
    ),
    Mutant(
        "spin_left_in_environment",
        C + "openmp.py",
        "for name in settings:",
        "for name in settings.keys() - SPIN.keys():",
        (C_T + "test_openmp_threads.py",),
        "the short spin stays in the environment after libgomp starts: child processes and other runtimes get it",
    ),
    Mutant(
        "wait_policy_overridden",
        C + "openmp.py",
        'WAIT_CHOICES = {*SPIN, "OMP_WAIT_POLICY"}',
        "WAIT_CHOICES = {*SPIN}",
        (C_T + "test_openmp_threads.py",),
        "a user's OMP_WAIT_POLICY loses to uopc's short spin, which libgomp reads in its place",
    ),
    Mutant(
        "foreign_runtime_silent",
        C + "openmp.py",
        "if _STARTED.is_set() or foreign_runtime_warned():",
        "if _STARTED.is_set():",
        (C_T + "test_openmp_threads.py",),
        "no warning when another library loaded libgomp first: uopc's kernels run without its settings, unsaid",
    ),
    Mutant(
        "plan_buffer_last_size",
        C + "runtime.py",
        "size[b] = max(size.get(b, 0), p.size)",
        "size[b] = p.size",
        EXECUTABLE_TESTS,
        "a plan buffer shared by kernels takes the size the last kernel uses, not the largest",
    ),
    Mutant(
        "run_kernel_all_const",
        C + "runtime.py",
        "[CParam(p.name, p.dtype, p.size, p.slot not in k.written) for p in k.params]",
        "[CParam(p.name, p.dtype, p.size, True) for p in k.params]",
        EXECUTABLE_TESTS,
        "run_kernel checks every parameter as read-only input: a read-only output array is written through",
    ),
    Mutant(
        "sharing_at_a_common_step",
        C + "program.py",
        "spans[0][1] < spans[1][0] or spans[1][1] < spans[0][0]",
        "spans[0][1] <= spans[1][0] or spans[1][1] <= spans[0][0]",
        EXECUTABLE_TESTS,
        "two plan buffers used by one step may share memory: that step reads one while it writes the other",
    ),
    Mutant(
        "input_span_from_first_read",
        C + "runtime.py",
        "first.setdefault(b, i if writes else -1)",
        "first.setdefault(b, i)",
        EXECUTABLE_TESTS,
        "an input's memory may be reused before the step that reads it: the caller's data is overwritten first",
    ),
    Mutant(
        "binding_keeps_read_only",
        C + "runtime.py",
        "return sorted(moved) + [i for i in written if i not in moved and not arrays[i].flags.writeable]",
        "return sorted(moved)",
        EXECUTABLE_TESTS,
        "an array made read-only after it was bound is written through at the next call",
    ),
    Mutant(
        "memory_slot_freed_early",
        LOWER + "memory.py",
        "if end < first]",
        "if end <= first]",
        LOWER_TESTS,
        "a slot is reused by a buffer the step that last reads its old buffer writes: restrict broken",
    ),
    Mutant(
        "memory_dead_buffer_shared",
        LOWER + "memory.py",
        "if b in results or b not in spans or spans[b][0] == spans[b][1] or not share:",
        "if b in results or b not in spans or not share:",
        EXECUTABLE_TESTS,
        "a buffer written and never read shares storage, and the C runtime, which counts it a result, refuses",
    ),
    Mutant(
        "memory_outputs_shared",
        LOWER + "memory.py",
        "if b in results or b not in spans or spans[b][0] == spans[b][1] or not share:",
        "if b not in spans or spans[b][0] == spans[b][1] or not share:",
        LOWER_TESTS,
        "outputs share storage with intermediates written after them: a result is overwritten",
    ),
    # ---- uopc-tensor: gradient rules and backward ----
    Mutant(
        "permute_grad_not_inverted",
        TENSOR + "autodiff.py",
        "        out[p] = i\n",
        "        out[i] = p\n",
        AUTODIFF_TESTS,
        "the gradient of a permute is permuted forward again instead of by the inverse permutation",
    ),
    Mutant(
        "div_grad_drops_quotient",
        TENSOR + "autodiff.py",
        "Ops.DIV: lambda u, g: (g / u.src[1], -g * u / u.src[1]),",
        "Ops.DIV: lambda u, g: (g / u.src[1], -g / u.src[1]),",
        AUTODIFF_TESTS,
        "d(a/b)/db drops the factor a/b: -g/b instead of -g*a/b^2",
    ),
    Mutant(
        "max_grad_ties_not_split",
        TENSOR + "autodiff.py",
        "return (spread * hit / count,)",
        "return (spread * hit,)",
        TIE_TESTS,
        "the gradient of a max reduction goes in full to every tied maximum instead of being shared",
    ),
    Mutant(
        "maximum_grad_tie_in_full",
        TENSOR + "autodiff.py",
        "return (a_beaten.where(zero, share), b_beaten.where(zero, share))",
        "return (a_beaten.where(zero, g), b_beaten.where(zero, share))",
        TIE_TESTS,
        "maximum(a, b) with a == b gives a the whole gradient and b half of it",
    ),
    Mutant(
        "where_grad_swapped",
        TENSOR + "autodiff.py",
        "Ops.WHERE: lambda u, g: (None, u.src[0].where(g, _const(g, 0.0)), u.src[0].where(_const(g, 0.0), g)),",
        "Ops.WHERE: lambda u, g: (None, u.src[0].where(_const(g, 0.0), g), u.src[0].where(g, _const(g, 0.0))),",
        AUTODIFF_TESTS,
        "the gradient of where(c, a, b) goes to a where c is false and to b where it is true",
    ),
    Mutant(
        "shrink_grad_pad_swapped",
        TENSOR + "autodiff.py",
        "g.pad([(b, s - e) for (b, e), s in zip(u.arg, u.src[0].shape, strict=True)])",
        "g.pad([(s - e, b) for (b, e), s in zip(u.arg, u.src[0].shape, strict=True)])",
        AUTODIFF_TESTS,
        "the gradient of a shrink is padded back on the wrong sides",
    ),
    Mutant(
        "grad_overwritten_not_summed",
        TENSOR + "autodiff.py",
        "grads[src] = fitted if src not in grads else grads[src] + fitted",
        "grads[src] = fitted",
        AUTODIFF_TESTS,
        "a node used twice keeps the gradient of its last use instead of the sum over its uses",
    ),
    # ---- uopc-tensor: Tensor methods ----
    Mutant(
        "broadcast_left_aligned",
        TENSOR + "tensor.py",
        "padded = [(1,) * (ndim - len(s)) + s for s in shapes]",
        "padded = [s + (1,) * (ndim - len(s)) for s in shapes]",
        (TENSOR_T + "test_ops.py", "-k", "broadcast"),
        "shapes broadcast aligned on the left: (3,) against (2, 3) is refused, (2,) against (2, 3) accepted",
    ),
    Mutant(
        "negative_step_not_reversed",
        TENSOR + "tensor.py",
        "    if step < 0:\n        out = out.flip(axis)\n",
        "",
        (TENSOR_T + "test_movement.py", "-k", "indexing"),
        "a slice with a negative step takes the right elements in ascending order: t[::-1] is t",
    ),
    # ---- uopc-tensor: ops built from other ops ----
    Mutant(
        "pick_by_product",
        TENSOR + "tensor.py",
        "return hit.where(values, 0).sum(-1).cast(values.dtype)",
        "return (hit.cast(values.dtype) * values).sum(-1).cast(values.dtype)",
        PORTED_TESTS,
        "gather and sort select with a product by the one-hot instead of a where: 0 * NaN spreads a NaN",
    ),
    Mutant(
        "cumsum_mask_strict",
        TENSOR + "tensor.py",
        "lower = upto.reshape(n, 1) >= upto.reshape(1, n)",
        "lower = upto.reshape(n, 1) > upto.reshape(1, n)",
        PORTED_TESTS,
        "cumsum leaves out each element's own term: an exclusive scan",
    ),
    Mutant(
        "max_pool_ties_share",
        TENSOR + "tensor.py",
        "out = _pick(flat, first)",
        "out = flat.max(-1)",
        PORTED_TESTS,
        "max_pool2d shares the gradient among tied maxima (the max reduction's rule) instead of PyTorch's first",
    ),
    # ---- uopc-tensor: optimizers ----
    Mutant(
        "adam_bias_one_step_ahead",
        TENSOR + "optim.py",
        "self.bias1, self.bias2 = 1.0 - self.b1**t, 1.0 - self.b2**t",
        "self.bias1, self.bias2 = 1.0 - self.b1 ** (t + 1.0), 1.0 - self.b2 ** (t + 1.0)",
        OPTIM_TESTS,
        "Adam's bias correction is one step ahead of the step count",
    ),
    Mutant(
        "sgd_momentum_dampened",
        TENSOR + "optim.py",
        "b = self.momentum * state[0] + g",
        "b = self.momentum * state[0] + (1.0 - self.momentum) * g",
        OPTIM_TESTS,
        "SGD's momentum buffer averages the gradient in (an EMA) instead of adding it, as PyTorch does",
    ),
    Mutant(
        "adamw_decay_coupled",
        TENSOR + "optim.py",
        "    decoupled = True\n",
        "    decoupled = False\n",
        OPTIM_TESTS,
        "AdamW adds its weight decay to the gradient (L2, Adam's way) instead of decaying the weights",
    ),
    Mutant(
        "optimizer_state_not_kept",
        TENSOR + "optim.py",
        "            self.state[i] = st\n",
        "",
        OPTIM_TESTS,
        "the new moments are computed but not kept: every step starts from zero momentum",
    ),
    # ---- uopc-tensor: layers and checkpoints ----
    Mutant(
        "layernorm_unbiased_variance",
        TENSOR + "nn.py",
        "y = centered * (centered.square().mean(axes, keepdim=True) + self.eps).rsqrt()",
        "y = centered * (x.var(axes, keepdim=True) + self.eps).rsqrt()",
        NN_TESTS,
        "LayerNorm divides by the unbiased standard deviation (n - 1) where PyTorch uses the biased one",
    ),
    Mutant(
        "linear_init_fan_out",
        TENSOR + "nn.py",
        "bound = 1.0 / math.sqrt(in_features)",
        "bound = 1.0 / math.sqrt(out_features)",
        NN_TESTS,
        "Linear draws its weights with the bound of its fan-out instead of its fan-in",
    ),
    Mutant(
        "dropout_not_rescaled",
        TENSOR + "nn.py",
        "return keep.where(x / (1.0 - self.p), 0.0)",
        "return keep.where(x, 0.0)",
        NN_TESTS,
        "dropout zeroes elements but does not scale the kept ones by 1/(1-p)",
    ),
    Mutant(
        "checkpoint_shape_by_size",
        TENSOR + "nn.py",
        "if tuple(state[k].shape) != own[k].shape",
        "if int(np.prod(state[k].shape)) != own[k].numel()",
        NN_TESTS,
        "load_state_dict compares element counts only: a transposed weight loads without an error",
    ),
]


# ---------------------------------------------------------------------------------------------------------
# Applying a mutant: a shadow copy of the sources, the snippet replaced in it
# ---------------------------------------------------------------------------------------------------------


class NoLongerApplies(ValueError):
    """A mutant whose snippet does not occur exactly once in its file, or whose result is not Python."""


def mutated_source(m: Mutant) -> str:
    """The text of m.file with the mutant applied; raises NoLongerApplies when it cannot be."""
    path = ROOT / m.file
    if not path.is_file():
        raise NoLongerApplies(f"{m.name}: {m.file} does not exist; update the mutant's file")
    text = path.read_text()
    count = text.count(m.original)
    if count != 1:
        where = "does not occur" if count == 0 else f"occurs {count} times"
        raise NoLongerApplies(f"{m.name}: its snippet {where} in {m.file}; update it:\n{m.original!r}")
    if m.original == m.mutated:
        raise NoLongerApplies(f"{m.name}: the mutated text equals the original")
    source = text.replace(m.original, m.mutated)
    try:
        compile(source, m.file, "exec")
    except SyntaxError as e:
        raise NoLongerApplies(f"{m.name}: the mutated {m.file} is not valid Python: {e}") from None
    return source


def make_shadow(folder: Path, mutant: Mutant | None) -> Path:
    """Copy every package's `uopc` sources into folder/uopc (the namespace portions merge) and apply `mutant`."""
    for src in sorted(ROOT.glob("packages/*/src/uopc")):
        shutil.copytree(src, folder / "uopc", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    if mutant is not None:
        target = folder / mutant.file.split("/src/", 1)[1]
        target.write_text(mutated_source(mutant))
    return folder


# ---------------------------------------------------------------------------------------------------------
# The child process: check the shadow is what it imports, run pytest -x, write down what failed
# ---------------------------------------------------------------------------------------------------------


class _Recorder:
    """A pytest plugin: each test's id as it starts (a crash leaves the last one), and every failure."""

    def __init__(self, progress: Path) -> None:
        self.progress = progress
        self.failed: list[str] = []
        self.passed = 0

    def pytest_configure(self, config: Any) -> None:
        """Hypothesis without shrinking: the first failing example is verdict enough, and shrinking took minutes.

        Derived from the profile the suite's conftest loaded (derandomized), so only the phases change; a
        test's own @settings override only what they name."""
        from hypothesis import Phase, settings

        settings.register_profile(
            "mutants", parent=settings.default, phases=[Phase.explicit, Phase.reuse, Phase.generate]
        )
        settings.load_profile("mutants")

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self.progress.write_text(nodeid)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed:
            self.failed.append(report.nodeid if report.when == "call" else f"{report.nodeid} ({report.when})")
        elif report.passed and report.when == "call":
            self.passed += 1

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.failed.append(f"{report.nodeid} (collection)")


def check_shadow(shadow: Path, mutant: Mutant | None) -> None:
    """Fail loudly unless `uopc` (and the mutated module) are imported from the shadow copy."""
    import uopc

    first = Path(next(iter(uopc.__path__)))
    if first != shadow / "uopc":
        raise SystemExit(f"the shadow copy does not come first: uopc.__path__ starts with {first}")
    if mutant is not None:
        module = importlib.import_module(mutant.module_name)
        loaded = Path(module.__file__ or "")
        if loaded != shadow / mutant.file.split("/src/", 1)[1] or mutant.mutated not in loaded.read_text():
            raise SystemExit(f"{mutant.module_name} was imported from {loaded}, not from the mutated shadow copy")


def run_child(mutant_name: str, shadow: Path, tests: list[str], result: Path) -> None:
    import pytest

    mutant = None if mutant_name == "baseline" else BY_NAME[mutant_name]
    check_shadow(shadow, mutant)
    recorder = _Recorder(result.with_suffix(".progress"))
    # a temporary folder of its own: pytest prunes the numbered folders of other sessions running at once
    basetemp = f"--basetemp={result.parent / 'pytest'}"
    code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", basetemp, *tests], plugins=[recorder])
    result.write_text(json.dumps({"exit": int(code), "failed": recorder.failed, "passed": recorder.passed}))


# ---------------------------------------------------------------------------------------------------------
# The parent: one child per run, two at a time; baselines first, then the mutants
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one child run found: the tests that failed, or why there is no verdict."""

    failed: list[str]
    passed: int
    seconds: float
    error: str = ""  # the run said nothing about the mutant: a setup failure, a timeout, no tests
    output: str = ""  # the end of what a crashed run printed

    @property
    def killed(self) -> bool:
        return not self.error and bool(self.failed)


def run_one(mutant: Mutant | None, tests: Sequence[str], timeout: float) -> Outcome:
    """Make a shadow copy with `mutant` applied (None: the baseline), run a child process on it, read its result."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="uopc-mutant-") as tmp:
        shadow = make_shadow(Path(tmp, "src"), mutant)
        result = Path(tmp, "result.json")
        paths = [str(shadow), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        name = "baseline" if mutant is None else mutant.name
        cmd = [sys.executable, __file__, "--child", name, "--shadow", str(shadow), "--result", str(result)]
        # a session of its own, so that a timeout ends the tests' compilers and subprocesses too
        proc = subprocess.Popen(
            [*cmd, "--", *tests],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome([], 0, time.perf_counter() - start, f"timed out after {timeout:.0f} s")
        return _read_result(result, output, proc.returncode, time.perf_counter() - start)


def _read_result(result: Path, output: str, returncode: int, seconds: float) -> Outcome:
    progress = result.with_suffix(".progress")
    if result.is_file():
        found = json.loads(result.read_text())
        failed, passed, code = list(found["failed"]), int(found["passed"]), int(found["exit"])
        if code not in (0, 1, 2) or (code != 0 and not failed) or (code == 0 and not passed):
            return Outcome([], passed, seconds, f"pytest exit status {code}, {passed} passed:\n{output[-3000:]}")
        return Outcome(failed, passed, seconds)
    if progress.is_file():  # the tests had started: the process died inside one of them
        return Outcome([f"{progress.read_text()} (crashed, exit status {returncode})"], 0, seconds, "", output[-3000:])
    return Outcome([], 0, seconds, f"the child failed before running any test:\n{output[-3000:]}")


# ---------------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------------


def catalogue_lines(mutants: Sequence[Mutant]) -> list[str]:
    return [f"{m.name:32} {m.module:10} {m.breaks}" for m in mutants]


def select(parser: argparse.ArgumentParser, names: list[str], module: str | None) -> list[Mutant]:
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown mutant(s) {', '.join(unknown)}; see --list")
    chosen = [BY_NAME[n] for n in names] if names else MUTANTS
    return [m for m in chosen if module is None or m.module == module]


def run_baselines(mutants: Sequence[Mutant], jobs: int, timeout: float) -> set[tuple[str, ...]]:
    """Run each distinct set of tests unmutated; the sets whose baseline failed."""
    groups = list(dict.fromkeys(m.tests for m in mutants))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(lambda t: run_one(None, t, timeout), groups))
    bad = set()
    for tests, out in zip(groups, outcomes, strict=True):
        ok = not out.error and not out.failed
        print(f"baseline {' '.join(tests)}: {out.passed} passed in {out.seconds:.1f} s{'' if ok else ': FAILED'}")
        if not ok:
            print(out.error or "\n".join(f"  FAILED {t}" for t in out.failed))
            bad.add(tests)
    return bad


def run_mutants(mutants: Sequence[Mutant], jobs: int, timeout: float) -> list[Outcome]:
    def one(m: Mutant) -> Outcome:
        out = run_one(m, m.tests, timeout)
        verdict = "killed" if out.killed else out.error.splitlines()[0] if out.error else "SURVIVED"
        print(f"  {m.name}: {verdict} ({out.seconds:.1f} s)\n{out.output}".rstrip(), flush=True)
        return out

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, mutants))


def print_table(mutants: Sequence[Mutant], outcomes: Sequence[Outcome]) -> None:
    rows = [("mutant", "module", "killed by", "time")]
    for m, out in zip(mutants, outcomes, strict=True):
        verdict = out.failed[0] if out.killed else f"ERROR: {out.error.splitlines()[0]}" if out.error else "SURVIVED"
        rows.append((m.name, m.module, verdict, f"{out.seconds:.1f} s"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3].rjust(7))


def markdown_table(mutants: Sequence[Mutant], outcomes: Sequence[Outcome]) -> str:
    """The run's verdicts as a markdown table, for docs/outputs/ (Appendix B reads it)."""
    rows = ["| mutant | package | killed by |", "| --- | --- | --- |"]
    for m, out in zip(mutants, outcomes, strict=True):
        verdict = f"`{out.failed[0]}`" if out.killed else "no verdict" if out.error else "SURVIVED"
        rows.append(f"| {m.name} | {m.module} | {verdict} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--child"]:
        child = argparse.ArgumentParser()
        for flag in ("--child", "--shadow", "--result"):
            child.add_argument(flag, required=True)
        child.add_argument("tests", nargs="*")
        c = child.parse_args(args_in)
        run_child(c.child, Path(c.shadow), c.tests, Path(c.result))
        return 0
    parser = argparse.ArgumentParser(
        description="Put plausible bugs back into a shadow copy of uopc's sources and check that the tests fail.",
        epilog="mutants:\n" + "\n".join("  " + line for line in catalogue_lines(MUTANTS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("mutants", nargs="*", metavar="MUTANT", help="mutants to run (default: all of them)")
    parser.add_argument("--module", choices=sorted({m.module for m in MUTANTS}), help="only the mutants of one package")
    parser.add_argument("--list", action="store_true", help="list the mutants, what each breaks and its tests; exit")
    parser.add_argument("--tests", help="pytest arguments to run instead of each mutant's own tests, e.g. 'packages'")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default: 2)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one test run may take (default: 600)")
    parser.add_argument("--out", type=output_file, help="also write the table of verdicts, stamped, to this file")
    args = parser.parse_args(args_in)
    chosen = select(parser, args.mutants, args.module)
    if args.tests:
        chosen = [replace(m, tests=tuple(shlex.split(args.tests))) for m in chosen]
    if args.list:
        for m, line in zip(chosen, catalogue_lines(chosen), strict=True):
            print(f"{line}\n{'':43} tests: {' '.join(m.tests)}")
        return 0
    stale = stale_mutants(chosen)
    if stale:
        print("\n".join(stale) + f"\n{len(stale)} mutant(s) no longer apply: update them to the code as it is now")
        return 1
    failing = run_baselines(chosen, args.jobs, args.timeout)
    runnable = [m for m in chosen if m.tests not in failing]
    outcomes = run_mutants(runnable, args.jobs, args.timeout)
    print_table(runnable, outcomes)
    if args.out:
        killed = sum(o.killed for o in outcomes)
        text = f"{killed} of {len(chosen)} mutants killed, each by the first test that failed under it\n\n"
        stamp.write(args.out, text + markdown_table(runnable, outcomes), ["packages", __file__])
    return summarize(chosen, runnable, outcomes, len(failing))


def stale_mutants(mutants: Sequence[Mutant]) -> list[str]:
    """Why each mutant that no longer applies to the code does not."""
    stale = []
    for m in mutants:
        try:
            mutated_source(m)
        except NoLongerApplies as e:
            stale.append(str(e))
    return stale


def summarize(chosen: Sequence[Mutant], ran: Sequence[Mutant], outcomes: Sequence[Outcome], bad_baselines: int) -> int:
    """Print what was missed and return the exit status: 0 when every mutant was killed."""
    missed = [(m, o) for m, o in zip(ran, outcomes, strict=True) if not o.killed]
    for m, o in missed:
        what = "the run gave no verdict" if o.error else "no test failed: a test is missing"
        print(f"{m.name} ({m.file}): {what}\n  it breaks: {m.breaks}\n  tests run: {' '.join(m.tests)}")
    print(f"{len(ran) - len(missed)} of {len(chosen)} mutants killed", end="")
    print(f"; {bad_baselines} baseline(s) failed, their mutants were not run" if bad_baselines else "")
    return 0 if not missed and not bad_baselines else 1


BY_NAME = {m.name: m for m in MUTANTS}

if __name__ == "__main__":
    sys.exit(main())
