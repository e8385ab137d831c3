"""The CUDA package's placement: it imports, sits in the shared namespaces, and registers CUDA and EMU."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import uopc
import uopc.backend
import uopc.backend.cuda
from uopc.lower import BackendNotFound, get_backend


def test_namespaces_are_pep420() -> None:
    assert getattr(uopc, "__file__", None) is None
    assert getattr(uopc.backend, "__file__", None) is None


def test_version_matches_metadata() -> None:
    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert uopc.backend.cuda.__version__ == meta["project"]["version"]


def test_cuda_and_emu_are_registered_backends() -> None:
    """Found through the entry points, as the Tensor library finds them; loading them touches no driver."""
    get_backend.cache_clear()
    assert get_backend("CUDA") is uopc.backend.cuda.CUDA_BACKEND
    assert get_backend("emu") is uopc.backend.cuda.EMU_BACKEND
    with pytest.raises(BackendNotFound, match="installed backends: C, CUDA, EMU"):
        get_backend("TPU")
