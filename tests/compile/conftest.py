"""Real recompile logs, made once per test session by running the reference implementations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REFERENCE_LOG = Path(__file__).with_name("reference_log.py")


@pytest.fixture(scope="session")
def reference_logs(once_per_session) -> dict[str, Path]:
    """``TORCH_LOGS=recompiles,graph_breaks`` stderr of toto-ts and upstream Kronos (``reference_log.py``, its
    default tiny configs), both processes at once (~35 s on 2 busy cores), once for all workers; nothing is
    committed."""
    return once_per_session("reference_logs", _write_logs)


def _write_logs(folder: Path) -> dict[str, Path]:
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
