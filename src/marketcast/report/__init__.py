"""Pages people look at: the HTML tearsheet of a backtest run and the status page of the live loop.

Both are HTML files that load Plotly from one shared file beside them (no network needed), written
atomically. The package sits above the run store and the trading loop and below the CLI.
"""
