"""The cache of derived arrays, and the market calendars and embedded bars it and its neighbours load fast."""

import numpy as np
import pandas as pd
import pytest

from marketcast.data import cache
from marketcast.data.calendar import MarketCalendar, _calendar, _sessions


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_arrays_are_built_once_then_read_back(cache_dir):
    calls = []

    def build():
        calls.append(1)
        return {"a": np.arange(5), "b": np.array([0.5, -1.0])}

    first = cache.cached_arrays("thing-v1", build)
    again = cache.cached_arrays("thing-v1", build)
    assert len(calls) == 1 and [p.name for p in cache_dir.iterdir()] == ["thing-v1.npz"]
    for key in ("a", "b"):
        np.testing.assert_array_equal(first[key], again[key])
        assert first[key].dtype == again[key].dtype


def test_a_damaged_file_is_rebuilt_and_an_unwritable_folder_skipped(cache_dir, tmp_path, monkeypatch):
    cache_dir.mkdir()
    (cache_dir / "x.npz").write_bytes(b"PK\x03\x04 half a zip")
    assert cache.cached_arrays("x", lambda: {"v": np.ones(2)})["v"].tolist() == [1.0, 1.0]
    assert cache.cached_arrays("x", lambda: {"v": np.zeros(2)})["v"].tolist() == [1.0, 1.0]  # rewritten
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache.ENV, str(blocker / "sub"))
    assert cache.cached_arrays("y", lambda: {"v": np.arange(3)})["v"].tolist() == [0, 1, 2]


def test_fingerprint_changes_with_the_source(tmp_path):
    source = tmp_path / "src.py"
    source.write_text("a")
    before = cache.fingerprint(source)
    source.write_text("ab")
    assert cache.fingerprint(source) != before


@pytest.mark.parametrize("name,next_open", [("XNYS", "2024-07-05 13:30"), ("24/7", "2024-07-04 00:00")])
def test_a_cached_calendar_equals_one_built_from_exchange_calendars(cache_dir, name, next_open):
    _calendar.cache_clear()
    try:
        stored = _calendar(name)  # builds and stores
        _calendar.cache_clear()
        loaded = _calendar(name)  # reads the file
    finally:
        _calendar.cache_clear()
    assert len(list(cache_dir.iterdir())) == 1
    start, end = "1970-01-01", f"{pd.Timestamp.now().year + 5}-12-31"
    fresh = MarketCalendar(name, **_sessions(name, start, end))
    for cal in (stored, loaded):
        for attr in ("labels", "opens", "closes"):
            np.testing.assert_array_equal(getattr(cal, attr), getattr(fresh, attr))
        assert (cal.sessions_per_year, cal.session_length) == (fresh.sessions_per_year, fresh.session_length)
    assert loaded.next_open("2024-07-03 20:00") == pd.Timestamp(next_open, tz="UTC")  # after the 4th of July


def test_embedded_bars_equal_archs_own_loader():
    import arch.data.nasdaq
    import arch.data.sp500

    from marketcast.data.embedded import load_embedded

    for symbol, module in (("SP500", arch.data.sp500), ("NASDAQ", arch.data.nasdaq)):
        raw = module.load()
        frame = load_embedded(symbol).frame
        np.testing.assert_array_equal(frame["close"].to_numpy(), raw["Close"].to_numpy())
        np.testing.assert_array_equal(frame["volume"].to_numpy(), raw["Volume"].to_numpy(dtype=float))
        assert list(frame.index) == list(raw.index.tz_localize("UTC"))


def test_embedded_bars_read_back_from_the_cache_equal_the_parsed_file(cache_dir):
    from marketcast.data.embedded import EMBEDDED, _read_arch_csv, load_embedded

    for symbol, module in EMBEDDED.items():
        raw = _read_arch_csv(module)  # the file parsed, as before the cache
        parsed = raw.rename(columns=str.lower)[["open", "high", "low", "close", "volume"]].astype("float64")
        parsed.index = pd.DatetimeIndex(raw.index, name="timestamp").tz_localize("UTC")
        built, read = load_embedded(symbol).frame, load_embedded(symbol).frame  # the second reads the cache
        for frame in (built, read):
            pd.testing.assert_frame_equal(frame, parsed, check_exact=True)
            assert (frame.to_numpy().view(np.uint64) == parsed.to_numpy().view(np.uint64)).all()  # bit for bit
    assert sorted(p.name.split("-")[1] for p in cache_dir.iterdir()) == ["nasdaq", "sp500"]


def test_storing_a_new_version_drops_the_familys_oldest_beyond_four(cache_dir):
    """Each checkout or upgrade tags a new file (the sources' mtime and size); the old ones went nowhere (176
    calendar files, 189 MB, after a day of clean clones). Six earlier versions written a second apart, then a
    new one: the newest 3 earlier ones and the new one stay, the family next door and a file of another name
    are untouched."""
    import os

    cache_dir.mkdir()
    for k in range(6):
        path = cache_dir / f"calendar-XNYS-1970-2031-v{k}.npz"
        np.savez(path, a=np.arange(k))
        os.utime(path, ns=(10**18 + k * 10**9, 10**18 + k * 10**9))
    np.savez(cache_dir / "calendar-XNYS2-1970-2031-v0.npz", a=np.arange(1))
    np.savez(cache_dir / "other.npz", a=np.arange(1))
    cache.cached_arrays("calendar-XNYS-1970-2031-v9", lambda: {"a": np.arange(9)}, "calendar-XNYS-1970-2031")
    assert sorted(p.name for p in cache_dir.iterdir()) == [
        "calendar-XNYS-1970-2031-v3.npz", "calendar-XNYS-1970-2031-v4.npz", "calendar-XNYS-1970-2031-v5.npz",
        "calendar-XNYS-1970-2031-v9.npz", "calendar-XNYS2-1970-2031-v0.npz", "other.npz"]
    assert cache.cached_arrays("calendar-XNYS-1970-2031-v3", lambda: {"a": np.zeros(1)})["a"].tolist() == [0, 1, 2]
