"""Pieces for starting a local multi-node Ray cluster (``ray start --block`` processes on this machine), shared
by the cluster test and the sweep benchmark so both start and stop it the same way."""

from __future__ import annotations

import signal
import socket
import subprocess

NODES = """
import ray
ray.init(address="{address}", logging_level="ERROR", log_to_driver=False)
print(sum(1 for n in ray.nodes() if n["Alive"]), int(ray.cluster_resources()["CPU"]))
"""  # a script printing the live nodes and CPUs of the cluster at {address}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """End a ``ray start --block`` (it stops the Ray processes it started, and only those)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
