"""Chapter 15: one kernel, rendered for the CPU and mapped onto a GPU: the C loop nest beside the CUDA thread
program, and the launch that runs it; then a row sum long enough that a block shares each row."""

from uopc.backend.c import render_c
from uopc.backend.cuda import choose_gpu_opts, lower_gpu, render_cuda
from uopc.ir import Ops, UOp
from uopc.lower import linearize, make_plan, normalize

# --8<-- [start:both]
x = UOp.buffer(0, 64 * 48).reshape((64, 48))
graph, _ = normalize([(x * 2.0 + 1.0).exp()])
(kernel,) = make_plan(graph).kernels
print(render_c(linearize(kernel)))
gpu = lower_gpu(kernel)
print(render_cuda([gpu]))
print(f"grid {gpu.launch.grid}, block {gpu.launch.block}: {gpu.launch.threads} threads a block")
# --8<-- [end:both]

# --8<-- [start:cooperative]
rows = UOp.buffer(0, 4 * 4096).reshape((4, 4096)).reduce(Ops.ADD, [1])
graph, _ = normalize([rows])
(kernel,) = make_plan(graph).kernels
print(choose_gpu_opts(kernel.ast))
gpu = lower_gpu(kernel)
print(f"grid {gpu.launch.grid}, block {gpu.launch.block}")
print(render_cuda([gpu]))
# --8<-- [end:cooperative]
