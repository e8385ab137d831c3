"""get_backend: a backend is a `Backend` registered under the entry-point group `uopc.backends`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import uopc.lower.backend as backend_module
from uopc.lower import Backend, BackendNotFound, get_backend


@dataclass
class FakeEntryPoint:
    name: str
    value: Any

    def load(self) -> Any:
        return self.value


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeEntryPoint]]:
    """The entry points get_backend sees: an empty list for the test to fill."""
    points: list[FakeEntryPoint] = []
    monkeypatch.setattr(backend_module, "entry_points", lambda group: points if group == "uopc.backends" else [])
    get_backend.cache_clear()
    yield points
    get_backend.cache_clear()


class Parts:
    """Stands for a renderer, a compiler and a runtime: get_backend only hands the Backend over."""


def test_a_registered_backend_is_found_by_name_in_any_case(registered: list[FakeEntryPoint]) -> None:
    mine = Backend("MINE", Parts(), Parts(), Parts())  # type: ignore[arg-type]
    registered.append(FakeEntryPoint("MINE", mine))
    assert get_backend("mine") is mine


def test_an_unknown_name_lists_the_installed_backends(registered: list[FakeEntryPoint]) -> None:
    registered.append(FakeEntryPoint("MINE", Backend("MINE", Parts(), Parts(), Parts())))  # type: ignore[arg-type]
    with pytest.raises(BackendNotFound, match="no backend named 'TPU'; installed backends: MINE"):
        get_backend("TPU")


def test_an_entry_point_that_is_not_a_backend_is_refused(registered: list[FakeEntryPoint]) -> None:
    """A class registered the old way (instantiated by the caller) is named, not called."""
    registered.append(FakeEntryPoint("OLD", Parts))
    with pytest.raises(BackendNotFound, match=r"names <class .*Parts.>, which is not a Backend"):
        get_backend("OLD")
