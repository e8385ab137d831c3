"""Files the site serves from other projects (docs/assets/vendor/) must be the bytes their SOURCE.txt records."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

VENDOR = Path(__file__).resolve().parent.parent / "assets" / "vendor"
_RECORD = re.compile(r"^sha256\s+([0-9a-f]{64})\s+(\S+)$", re.MULTILINE)


def check_vendored() -> list[str]:
    """One message per vendored file whose SHA-256 is not the recorded one (or that has no record)."""
    problems = []
    for source in sorted(VENDOR.glob("*/SOURCE.txt")):
        records = {name: digest for digest, name in _RECORD.findall(source.read_text())}
        for path in sorted(source.parent.iterdir()):
            if path.name in {"SOURCE.txt", "LICENSE"}:
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if records.get(path.name) != digest:
                where = path.relative_to(VENDOR.parent.parent)
                problems.append(f"{where}: SHA-256 {digest} is not the one recorded in {source.name}")
    return problems
