"""Provenance for the measurements the book prints: a stamp that says what was measured, where and when.

Every file a script writes into docs/outputs/ starts with one stamp line (a PNG carries it as metadata):

    stamp: commit 1a2b3c4d5e6f (committed 2026-05-02 10:11:12 UTC), measured 2026-05-02 10:30:01 UTC on
    AMD EPYC 7B13 with 2 threads, load 1.35; measures packages/uopc-ir/src, scripts/bench_gemm.py

(on one line). The commit is the checkout's HEAD, the load is the machine's one-minute load average when
the measurement ended (its own threads included: above the thread count, something else was running, and
timings are slower than on an idle machine), and "measures" lists the code the numbers depend on. The
docs build (docs/hooks.py) calls `stale_reason` for each output and fails when a commit that is not in the
stamp's history changed that code, so a number in the book is never older than the code it describes.
"""

from __future__ import annotations

import datetime
import os
import re
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PNG_KEY = "uopc-stamp"  # the PNG text chunk that holds a picture's stamp
_TIME = "%Y-%m-%d %H:%M:%S UTC"
_LINE = re.compile(
    r"^stamp: commit (?P<commit>[0-9a-f]{7,40})(?P<dirty> \+ uncommitted changes)? \(committed (?P<committed>[^)]+)\), "
    r"measured (?P<measured>.+?) on (?P<cpu>.+) with (?P<threads>\d+) threads?, load (?P<load>[\d.]+); "
    r"measures (?P<measures>.+)$"
)


@dataclass(frozen=True)
class Stamp:
    commit: str  # HEAD when measured, 12 hex digits
    committed: datetime.datetime  # that commit's committer time
    dirty: bool  # the measured code had uncommitted changes
    measured: datetime.datetime
    cpu: str
    threads: int  # threads the measurement could use: OMP_NUM_THREADS, else the CPUs this process may run on
    load: float  # the one-minute load average when the measurement ended
    measures: tuple[str, ...]  # repository paths of the code the numbers depend on

    def line(self) -> str:
        dirty = " + uncommitted changes" if self.dirty else ""
        return (
            f"stamp: commit {self.commit}{dirty} (committed {self.committed.strftime(_TIME)}), "
            f"measured {self.measured.strftime(_TIME)} on {self.cpu} with {self.threads} "
            f"thread{'s' if self.threads != 1 else ''}, load {self.load:.2f}; measures {', '.join(self.measures)}"
        )


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def thread_count() -> int:
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return int(os.environ["OMP_NUM_THREADS"])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _relative(path: str | Path) -> str:
    full = (ROOT / path).resolve()
    if not full.exists():
        raise ValueError(f"stamp: {path} does not exist, so it cannot be what a measurement depends on")
    return full.relative_to(ROOT).as_posix()


def make(measures: list[str | Path]) -> Stamp:
    """The stamp for a measurement taken now, in this checkout, of the code at the paths `measures`."""
    paths = tuple(_relative(p) for p in measures)
    commit, committed = _git("log", "-1", "--format=%h %ct", "--abbrev=12").split()
    return Stamp(
        commit=commit,
        committed=datetime.datetime.fromtimestamp(int(committed), datetime.UTC),
        dirty=bool(_git("status", "--porcelain", "--", *paths)),
        measured=datetime.datetime.now(datetime.UTC).replace(microsecond=0),
        cpu=cpu_model(),
        threads=thread_count(),
        load=round(os.getloadavg()[0], 2),
        measures=paths,
    )


def parse(line: str) -> Stamp | None:
    found = _LINE.match(line.strip())
    if found is None:
        return None

    def when(text: str) -> datetime.datetime:
        return datetime.datetime.strptime(text, _TIME).replace(tzinfo=datetime.UTC)

    return Stamp(
        commit=found["commit"],
        committed=when(found["committed"]),
        dirty=found["dirty"] is not None,
        measured=when(found["measured"]),
        cpu=found["cpu"],
        threads=int(found["threads"]),
        load=float(found["load"]),
        measures=tuple(found["measures"].split(", ")),
    )


def png_text(data: bytes) -> dict[str, str]:
    """The tEXt chunks of a PNG file, as {keyword: text}."""
    chunks, pos = {}, 8  # after the 8-byte signature: length, type, data, CRC, repeated
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"tEXt":
            key, _, text = data[pos + 8 : pos + 8 + length].partition(b"\0")
            chunks[key.decode("latin-1")] = text.decode("latin-1")
        pos += 12 + length
    return chunks


def png_with_stamp(data: bytes, line: str) -> bytes:
    """A PNG's bytes with `line` added as its `uopc-stamp` text chunk, right after the header chunk (IHDR),
    for pictures that no plotting library wrote (a browser's screenshots)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("png_with_stamp: not a PNG file (no signature and header chunk)")
    body = PNG_KEY.encode("latin-1") + b"\0" + line.encode("latin-1")
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    after_header = 8 + 12 + struct.unpack(">I", data[8:12])[0]  # the signature, then IHDR's length, type, data, CRC
    return data[:after_header] + chunk + data[after_header:]


def read(path: Path) -> Stamp | None:
    """The stamp of an output file: its first line, or a PNG's `uopc-stamp` text chunk."""
    if path.suffix == ".png":
        return parse(png_text(path.read_bytes()).get(PNG_KEY, ""))
    lines = path.read_text().splitlines()
    return parse(lines[0]) if lines else None


def _newer_change(stamp: Stamp) -> str | None:
    """A commit that changed the measured code and that the measurement did not include, if there is one."""
    try:
        _git("cat-file", "-e", f"{stamp.commit}^{{commit}}")
        return _git("log", "-1", "--format=%h %cs %s", "HEAD", f"^{stamp.commit}", "--", *stamp.measures) or None
    except subprocess.CalledProcessError:  # the stamp's commit is not here (history rewritten): compare times
        after = stamp.committed + datetime.timedelta(seconds=1)
        return _git("log", "-1", "--format=%h %cs %s", f"--since={after.isoformat()}", "--", *stamp.measures) or None


def stale_reason(path: Path) -> str | None:
    """Why the numbers in `path` may not describe the code in this checkout; None when they do."""
    stamp = read(path)
    if stamp is None:
        return "it has no stamp (write it with its script, which stamps it)"
    if stamp.dirty:
        return f"it measured uncommitted changes on top of {stamp.commit}: commit the code, then measure"
    newer = _newer_change(stamp)
    if newer is not None:
        return f"it measured commit {stamp.commit}, and commit {newer} changed {', '.join(stamp.measures)} since"
    return None


def emit(text: str, out: Path | None, measures: list[str | Path]) -> None:
    """A benchmark's ending: print its `text`, and with an `out` file, write it there under a stamp."""
    print(text, end="" if text.endswith("\n") else "\n")
    if out is not None:
        write(out, text, measures)
        print(f"wrote {out}")


def write(path: Path, text: str, measures: list[str | Path]) -> Stamp:
    """Write `text` to `path` under a stamp line for a measurement of `measures`; returns the stamp."""
    stamp = make(measures)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{stamp.line()}\n\n{text}")
    return stamp
