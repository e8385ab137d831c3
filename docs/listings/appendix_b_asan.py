"""Appendix B: the mutant gate_not_rendered (a padded load without its gate) run under AddressSanitizer.

The mutant is applied to a shadow copy of the sources, as scripts/mutants.py applies it, and a child process
that imports that copy builds a padded kernel with the sanitize environment's CFLAGS and libasan preloaded. The
kernel's values would be right (the WHERE discards what the stray read returns); ASan stops it at the read.
Addresses, process ids and temporary paths change from run to run and are replaced by placeholders.
"""

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # scripts/ is a folder of scripts, not a package
import mutants  # noqa: E402

# --8<-- [start:child]
CHILD = r"""
import numpy as np
from uopc.backend.c import Program, render_c
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, rangeify

x = UOp.buffer(0, 4)
source = render_c(linearize(Kernel("padded", rangeify([(UOp.buffer(1, 7), x.pad(((2, 1),)))]))))
print("\n".join(f"{n:3} | {line}" for n, line in enumerate(source.splitlines(), 1) if n > 3))  # after #includes
out = np.zeros(7, np.float32)
Program(source, "padded")(np.arange(1, 5, dtype=np.float32), out)
print("finished:", out)
"""
# --8<-- [end:child]


def sanitize_settings() -> dict[str, str]:
    """The sanitize environment's CFLAGS and sanitizer options, from hatch.toml, and libasan to preload."""
    settings = tomllib.loads((ROOT / "hatch.toml").read_text())["envs"]["sanitize"]["env-vars"]
    cc = os.environ.get("CC", "gcc")
    libasan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True, check=True)
    return {**settings, "LD_PRELOAD": libasan.stdout.strip()}


def steady(report: str) -> str:
    """The report with what differs between runs replaced: addresses, the process id, the build folder."""
    report = re.sub(r"\S*/kernel\.c", "kernel.c", report)
    report = re.sub(r"0x[0-9a-f]+", "0x…", report)
    return re.sub(r"==\d+==", "==PID==", report)


# the error, the read, the innermost frame (the kernel), where the address lies, and the summary
SHOWN = ("ERROR: AddressSanitizer", "READ of size", "#0 ", "is located", "SUMMARY")

with tempfile.TemporaryDirectory(prefix="uopc-asan-") as tmp:
    shadow = mutants.make_shadow(Path(tmp, "src"), mutants.BY_NAME["gate_not_rendered"])
    env = {**os.environ, **sanitize_settings(), "PYTHONPATH": str(shadow), "UOPC_CACHE": str(Path(tmp, "cache"))}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=False)
    if "AddressSanitizer" not in done.stderr:
        raise SystemExit(f"ASan did not report (exit status {done.returncode}):\n{done.stdout}\n{done.stderr}")
    print(done.stdout.strip())
    wanted = list(SHOWN)
    for line in steady(done.stderr).splitlines():
        found = next((s for s in wanted if s in line), None)
        if found:  # each once: the allocation's stack has a frame #0 too
            print(line.rstrip())
            wanted.remove(found)
    print(f"(exit status {done.returncode}: the process stopped at the read)")
