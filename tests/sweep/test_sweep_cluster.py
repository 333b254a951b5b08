"""A sweep joins a real two-node Ray cluster with token authentication through ``--address`` (both nodes on this
machine, started and stopped by the test; skipped only where ``ray start`` fails)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from marketcast.runs.store import RunStore
from marketcast.sweep.cluster_kit import NODES, free_port, stop

from .helpers import small_spec, write_bars

RAY = str(Path(sys.executable).with_name("ray"))
SPEC = small_spec()


def _run(args: list[str], env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_sweep_runs_on_a_two_node_cluster_with_token_auth(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    auth = {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    port, temp = free_port(), tempfile.mkdtemp(prefix="rc-", dir="/tmp")  # short: Ray's socket paths
    address = f"127.0.0.1:{port}"
    head = subprocess.Popen([RAY, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                             f"--temp-dir={temp}", "--block"], env=auth, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    nodes = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and head.poll() is None:
            if _run([sys.executable, "-c", NODES.format(address=address)], auth, timeout=60).returncode == 0:
                break
            time.sleep(1)
        if head.poll() is not None:
            pytest.skip(f"Ray cannot start here: {head.stdout.read().strip().splitlines()[-1:]}")
        nodes.append(subprocess.Popen([RAY, "start", f"--address={address}", "--num-cpus=2", "--block"], env=auth,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        found = ""
        while time.monotonic() < deadline + 60 and not found.startswith("2 "):
            found = _run([sys.executable, "-c", NODES.format(address=address)], auth, timeout=60).stdout.strip()
            time.sleep(0.5)
        assert found == "2 3", found  # the head (1 CPU) and the second node (2 CPUs)

        write_bars(tmp_path / "bars", ["AAA", "BBB", "CCC"])
        (tmp_path / "spec.toml").write_text(SPEC)
        store = RunStore(tmp_path / "store")
        sweep = [sys.executable, "-m", "marketcast.commands", "sweep", str(tmp_path / "spec.toml"), "--store",
                 str(store.root), "--address", address]
        done = _run(sweep, auth)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "6 cells, 6 ok, 0 failed" in done.stdout
        assert set(store.query("SELECT status FROM cells")["status"]) == {"ok"}

        refused = _run([*sweep, "--run-id", "no-token"], env, timeout=180)  # the same cluster without the token
        assert refused.returncode == 6 and "RAY_AUTH_MODE=token" in refused.stderr.splitlines()[-1]
    finally:
        for proc in nodes:
            stop(proc)
        stop(head)
        shutil.rmtree(temp, ignore_errors=True)
