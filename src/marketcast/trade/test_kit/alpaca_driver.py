"""A loop process for the Alpaca crash test:
``python -m marketcast.trade.test_kit.alpaca_driver URL STATE_DIR FROM TO``.

For each trading day of the embedded SP500 in [FROM, TO] it asks the fake Alpaca at URL to play that day's
bar (``POST /_test/session``, once per day) and runs the real TradingLoop over the real AlpacaBroker for it,
skipping days its journal has done. Killed anywhere, a restart carries on where the journal says.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(url: str, state: str, start: str, end: str) -> int:
    import requests

    from marketcast.data import load_symbol
    from marketcast.trade.journal.lock import StateLock

    from marketcast.trade.test_kit.alpaca_env import KEY, SECRET, alpaca_loop
    from marketcast.trade.test_kit.chaos import CLASSES, SYMBOLS

    class Fake:  # what alpaca_loop needs of the fake: where it is
        pass

    fake = Fake()
    fake.url = url
    with StateLock(state):
        loop = alpaca_loop(fake, Path(state), SYMBOLS, CLASSES, monitor=True, strategies=("maxdiff",))
        for ts in load_symbol("SP500").frame.loc[start:end].index:
            key = ts.isoformat()
            if loop.journal.cycle_done(key):
                continue
            requests.post(f"{url}/_test/session", json={"day": key}, timeout=30,
                          headers={"APCA-API-KEY-ID": KEY, "APCA-API-SECRET-KEY": SECRET}).raise_for_status()
            loop.run_cycle(key)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
