"""Chapter 13: the C of a ReLU whose output is 8 MiB, large enough that lowering streams its stores."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import linearize, make_plan, normalize
from uopc.lower.opt import STREAM_MIN_BYTES

n = STREAM_MIN_BYTES // 4  # float32 elements
x = UOp.buffer(0, n)
plan = make_plan(normalize([(x <= 0.0).where(0.0, x)])[0])
(program,) = (linearize(k) for k in plan.kernels)
print(f"{program.name}: {plan.kernels[0].opts}, streamed slots {sorted(program.streamed)}")
print(render_c(program).split("void E_", 1)[1].join(["void E_", ""]))  # the kernel, without the helpers
