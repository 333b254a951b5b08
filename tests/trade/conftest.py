"""The fake Alpaca server as a fixture (tests only, 127.0.0.1)."""

from __future__ import annotations

import pytest

from marketcast.trade.test_kit.alpaca_env import KEY, SECRET
from marketcast.fake_alpaca.server import FakeAlpaca


@pytest.fixture
def fake():
    with FakeAlpaca(KEY, SECRET) as server:
        yield server
