"""Chapter 4: the Mermaid text of a shipped example; the chapter draws it inside a mermaid fence."""

import sys
from pathlib import Path

from uopc.ir import parse, to_mermaid

# --8<-- [start:mermaid]
program = parse(Path("examples/uir/matrix.uir").read_text())
sys.stdout.write(to_mermaid(program))
# --8<-- [end:mermaid]
