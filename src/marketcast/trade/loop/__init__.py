"""The decision loop: cycle, supervisor, planner, orders, reconcile, ownership, exits, quotes, feed, warmup, shadow.
It reaches a broker only through :class:`marketcast.trade.interface.Broker`, never a venue, and asks
:mod:`marketcast.trade.risk` whether each order may go."""
