"""May this order go? Every check an order meets before it leaves the loop, in the order they run: fresh data
(``freshness``), the entry ``gates``, the ``portfolio`` caps that size it, the venue's ``rules`` and
``protections`` asked by the ``precheck`` with what the broker shows now, and the risk ``limits`` (the halted
state a breach puts the loop in); ``check`` runs them for the loop. Before all of them, ``markets``: which
symbols the loop may trade at all and on which of their bars (``trade run`` and ``trade replay`` alike)."""
