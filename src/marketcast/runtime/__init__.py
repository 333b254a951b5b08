"""What the models import to compile: settings (:mod:`.settings`, no torch), guarded compiled steps
(:mod:`.guard`, :mod:`.steps`), persistent artifacts (:mod:`.cache`) and counters (:mod:`.counters`).

Nothing here imports a forecaster or the compile toolkit (:mod:`marketcast.compile`); importing this
package imports no torch, its modules do as they need it.
"""
