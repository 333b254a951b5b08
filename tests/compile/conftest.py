"""Real recompile logs, made once per test session by running the reference implementations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REFERENCE_LOG = Path(__file__).with_name("reference_log.py")


@pytest.fixture(scope="session")
def reference_logs(tmp_path_factory) -> dict[str, Path]:
    """``TORCH_LOGS=recompiles,graph_breaks`` stderr of toto-ts and upstream Kronos (``reference_log.py``, its
    default tiny configs), both processes at once (~35 s on 2 busy cores); nothing is committed."""
    folder = tmp_path_factory.mktemp("reference_logs")
    env = {**os.environ, "TORCH_LOGS": "recompiles,graph_breaks"}
    running = {}
    for model in ("toto", "kronos"):
        log = folder / f"{model}.log"
        with log.open("wb") as err:
            running[model] = subprocess.Popen([sys.executable, str(REFERENCE_LOG), model], env=env, stderr=err,
                                              stdout=subprocess.DEVNULL)
    logs = {}
    for model, proc in running.items():
        log = folder / f"{model}.log"
        assert proc.wait(timeout=900) == 0, log.read_text(errors="replace")[-3000:]
        logs[model] = log
    return logs
