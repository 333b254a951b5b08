"""A loop process for the Alpaca crash test:
``python -m marketcast.trade.test_kit.alpaca_driver URL STATE_DIR FROM TO``.

For each calendar day in [FROM, TO] (:func:`marketcast.trade.test_kit.chaos.cycles`: crypto every day, the stock
on SP500's sessions) it asks the fake Alpaca at URL to play that day's bars (``POST /_test/session``, once per
day) and runs the real TradingLoop over the real AlpacaBroker for each clock due, skipping the cycles its journal
has done. Killed anywhere, a restart carries on where the journal says.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(url: str, state: str, start: str, end: str) -> int:
    import requests

    from marketcast.trade.journal.lock import StateLock

    from marketcast.trade.test_kit.alpaca_env import KEY, SECRET
    from marketcast.trade.test_kit.chaos import chaos_loop, cycles

    class Fake:  # what alpaca_loop needs of the fake: where it is
        pass

    fake = Fake()
    fake.url = url
    with StateLock(state):
        loop = chaos_loop(fake, Path(state))
        for key, clocks in cycles(start, end):
            due = [c for c in clocks if not loop.journal.cycle_done(key, c)]
            if not due:
                continue
            requests.post(f"{url}/_test/session", json={"day": key}, timeout=30,
                          headers={"APCA-API-KEY-ID": KEY, "APCA-API-SECRET-KEY": SECRET}).raise_for_status()
            for clock in due:
                loop.run_cycle(key, clock=clock)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
