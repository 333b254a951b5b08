"""A SIGTERM that arrives while the store imports duckdb is raised once the import is done: raised inside the
native module's start-up it aborted the process ("Critical nanobind error", exit -6), the rare failure of
tests/sweep/test_sweep_interrupts.py."""

import subprocess
import sys

SCRIPT = """
import os, signal, sys
from marketcast.signals import Terminated, install_signal_handlers
from marketcast.runs import read

class SignalOnImport:  # SIGTERM as the import of duckdb starts
    def find_spec(self, name, path, target=None):
        if name == "duckdb":
            os.kill(os.getpid(), signal.SIGTERM)
        return None

assert "duckdb" not in sys.modules
install_signal_handlers()
sys.meta_path.insert(0, SignalOnImport())
try:
    read.duckdb_module()
    print("not terminated")
except Terminated:
    print("terminated after the import" if "duckdb" in sys.modules else "terminated inside the import")
"""


def test_a_sigterm_during_the_duckdb_import_is_raised_after_it():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "terminated after the import"
