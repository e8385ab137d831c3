"""The CUDA package's placement: it imports, sits in the shared namespaces, and registers no backend yet."""

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


def test_no_cuda_backend_is_registered_yet() -> None:
    get_backend.cache_clear()
    with pytest.raises(BackendNotFound, match="CUDA"):
        get_backend("CUDA")
