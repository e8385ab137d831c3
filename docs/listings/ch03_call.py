"""Chapter 3: CALL and PARAM, a function body with its parameters bound to arguments."""

from uopc.ir import UOp, call, inline_call, param, run, to_uir

# --8<-- [start:call]
p0, p1 = param(0), param(1)
square_plus = p0 * p0 + p1  # the body: PARAM 0 and PARAM 1 are its parameters
c = call("square_plus", square_plus, UOp.const(3), UOp.const(4))
print(to_uir(c))
print(to_uir(inline_call(c)))
print("run:", run(c).arg)
# --8<-- [end:call]
