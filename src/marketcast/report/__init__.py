"""Pages people look at: the HTML tearsheet of a backtest run and the status page of the live loop.

Both are single self-contained HTML files (Plotly's JavaScript inlined, no network needed) written
atomically. The package sits above the run store and the trading loop and below the CLI.
"""
