"""The broker side: the interface the loop uses, the plain types it passes, the rules model every venue
enforces (rules.py), and the adapters (paper, alpaca with its data and endpoints) that only the wiring imports."""
