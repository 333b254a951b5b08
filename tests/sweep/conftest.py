"""One local Ray for every sweep test (starting Ray costs seconds on a loaded 2-core machine)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def ray_address():
    """Start a local Ray the way ``marketcast sweep`` does; sweeps in this process reuse it and
    subprocesses join it with ``--address``."""
    import ray

    from marketcast.sweep.execute import connect

    assert connect(ray, address=None, num_cpus=2)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
