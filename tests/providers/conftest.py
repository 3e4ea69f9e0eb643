from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_server import FakeProvider


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    server = FakeProvider()
    try:
        yield server
    finally:
        server.close()
