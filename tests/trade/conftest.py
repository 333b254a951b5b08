"""The fake Alpaca server as a fixture (tests only, 127.0.0.1)."""

from __future__ import annotations

import pytest

from .alpaca_env import KEY, SECRET
from .fake_alpaca import FakeAlpaca


@pytest.fixture
def fake():
    with FakeAlpaca(KEY, SECRET) as server:
        yield server
