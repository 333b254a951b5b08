"""The decision loop: cycle, supervisor, planner, orders, reconcile, ownership, freshness, gates, quotes, feed.
It reaches a broker only through :class:`marketcast.trade.broker.interface.Broker`, never an adapter."""
