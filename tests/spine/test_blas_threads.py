"""A marketcast process runs numpy's OpenBLAS on one thread unless the user set OPENBLAS_NUM_THREADS; a
process that imported numpy before (a test, a notebook) is left as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy  # noqa: F401  (imported: the in-process case below)

from marketcast.commands.runner import BLAS_THREADS_ENV, one_blas_thread

PROBE = """
import json, os, sys
from marketcast.commands import main
code = main(sys.argv[1:])
import numpy
print(json.dumps({"code": code, "threads": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


def _threads(env: dict) -> tuple[int, str | None]:
    clean = {k: v for k, v in os.environ.items() if k != BLAS_THREADS_ENV}
    out = subprocess.run([sys.executable, "-c", PROBE, "data", "--help"], check=False, capture_output=True,
                         text=True, timeout=120, env={**clean, **env})
    last = json.loads(out.stdout.strip().splitlines()[-1])
    return last["code"], last["threads"]


def test_a_fresh_process_gets_one_blas_thread_and_a_users_setting_stands():
    assert _threads({}) == (0, "1")
    assert _threads({BLAS_THREADS_ENV: "3"}) == (0, "3")


def test_numpy_already_imported_leaves_the_environment_alone():
    environ: dict[str, str] = {}
    one_blas_thread(environ)
    assert environ == {}
