"""The host comes from the flags; APCA_API_BASE_URL may only agree (alpaca-py would let it win)."""

from __future__ import annotations

import logging

import pytest

from marketcast.errors import ConfigError
from marketcast.trade.venues.endpoints import Endpoint, data_url, trading_endpoint


@pytest.mark.parametrize("live, url, want", [
    (False, "", Endpoint("https://paper-api.alpaca.markets", "paper")),
    (True, "", Endpoint("https://api.alpaca.markets", "live")),
    (False, "https://paper-api.alpaca.markets/v2/", Endpoint("https://paper-api.alpaca.markets", "paper")),
    (True, "https://API.alpaca.markets", Endpoint("https://API.alpaca.markets", "live")),
    (False, "http://127.0.0.1:8080", Endpoint("http://127.0.0.1:8080", "paper", custom=True)),
    (True, "http://localhost:9/v2", Endpoint("http://localhost:9", "live", custom=True)),
])
def test_the_flags_choose_and_the_variable_may_agree(live, url, want):
    assert trading_endpoint(live, {"APCA_API_BASE_URL": url}) == want


@pytest.mark.parametrize("live, url, says", [
    (False, "https://api.alpaca.markets", "is Alpaca's LIVE host but this run is paper (the default); unset "
                                          "APCA_API_BASE_URL, or pass --live --i-understand-live-trading"),
    (True, "https://paper-api.alpaca.markets", "is Alpaca's PAPER host but --live was given"),
    (False, "http://paper-api.alpaca.markets", "must use https://"),
    (False, "https://broker-api.sandbox.alpaca.markets", "is not an Alpaca host"),
    (False, "http://10.0.0.7:8080", "is not an Alpaca host"),
    (False, "paper-api.alpaca.markets", "is not a URL"),
])
def test_anything_else_is_one_error(live, url, says):
    with pytest.raises(ConfigError, match=rf"APCA_API_BASE_URL=.*{says.split('(')[0]}"):
        trading_endpoint(live, {"APCA_API_BASE_URL": url})


def test_a_local_server_is_visible(caplog):
    caplog.set_level(logging.WARNING, "marketcast.trade")
    endpoint = trading_endpoint(False, {"APCA_API_BASE_URL": "http://127.0.0.1:1"})
    assert str(endpoint) == "http://127.0.0.1:1 (paper, local test server)"
    assert caplog.messages == ["APCA_API_BASE_URL=http://127.0.0.1:1 is a local test server, not Alpaca: paper "
                               "orders go there"]
    assert data_url({}) is None and data_url({"APCA_API_DATA_URL": "https://data.alpaca.markets/"}) == (
        "https://data.alpaca.markets")
    with pytest.raises(ConfigError, match="APCA_API_DATA_URL=https://evil.example is not Alpaca's data host"):
        data_url({"APCA_API_DATA_URL": "https://evil.example"})
