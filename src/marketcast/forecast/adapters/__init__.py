"""Adapters: forecasters that wrap a model through its official package instead of an in-project copy.

An adapter implements the :class:`~marketcast.forecast.base.Forecaster` protocol (batched over windows, device
and dtype handled, quantiles as a first-class output, sample paths drawn from them) for a model whose package
is an optional extra (``pip install 'marketcast[chronos]'``, ``[timesfm]``, ``[tirex]``). The package is imported
only when the model is chosen (:func:`marketcast.forecast.adapters.extras.require`), so a missing extra never
breaks ``import_models()`` or ``marketcast --help``; choosing the model without it is one line and exit 2.
"""
