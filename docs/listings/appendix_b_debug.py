"""Appendix B: one program under DEBUG=1, 2 and 3, and under OPT=0, each run as a fresh process.

Each setting is put in the child's environment, as you would set it in the shell. The times are measured
while the page is built, so they vary from run to run.
"""

import os
import subprocess
import sys

# --8<-- [start:program]
PROGRAM = """
import numpy as np
from uopc.tensor import Tensor

rng = np.random.default_rng(0)
x = Tensor(rng.standard_normal((256, 256)).astype(np.float32))
w = Tensor(rng.standard_normal((256, 64)).astype(np.float32))
print((x @ w).softmax(1).numpy()[0, :4])
"""
# --8<-- [end:program]

for settings in ({"DEBUG": "1"}, {"DEBUG": "2"}, {"DEBUG": "3"}, {"DEBUG": "2", "OPT": "0"}):
    shown = " ".join(f"{k}={v}" for k, v in settings.items())
    env = {**os.environ, **settings}
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True)
    print(f"$ {shown} python program.py\n{done.stdout}")
