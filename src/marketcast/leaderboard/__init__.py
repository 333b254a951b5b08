"""``marketcast models compare``: the same windows through every model, one table, one run in the run store.

Each model runs through the backtest engine (:func:`marketcast.backtest.engine.run_many`), never a second
engine, so a leaderboard row holds exactly what ``marketcast backtest --model X`` over the same windows gives.
"""
