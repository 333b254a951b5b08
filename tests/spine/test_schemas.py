"""The JSON Schemas ship in the package (:mod:`marketcast.schemas`): ``marketcast schema [NAME]`` prints them, a
``referencing`` registry built from the package resolves every ``$id`` across files, and docs/schemas holds no copy
that could drift (only a README pointing at the package)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from importlib.resources import files
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable

from marketcast.commands import main
from marketcast.schemas import load, names, registry

ROOT = Path(__file__).resolve().parents[2]
PACKAGED = files("marketcast.schemas")


def test_schema_lists_every_packaged_schema_with_its_id(capsys):
    assert main(["schema"]) == 0
    lines = capsys.readouterr().out.splitlines()
    on_disk = sorted(p.name.removesuffix(".schema.json") for p in PACKAGED.iterdir() if p.name.endswith(".schema.json"))
    assert [line.split() for line in lines] == [[n, f"urn:marketcast:schema:{n}"] for n in on_disk]
    assert len(lines) == 25


def test_schema_name_prints_the_packaged_file_as_is(capsys):
    assert main(["schema", "models_compare"]) == 0
    out = capsys.readouterr().out
    assert out == PACKAGED.joinpath("models_compare.schema.json").read_text(encoding="utf-8").rstrip("\n") + "\n"
    assert json.loads(out)["$id"] == "urn:marketcast:schema:models_compare"


def test_an_unknown_schema_is_one_line_and_exit_2(capsys):
    assert main(["schema", "backtests"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert "unknown schema 'backtests'" in captured.err and "models_compare" in captured.err


def test_a_real_json_output_validates_through_a_ref_into_another_packaged_schema(capsys):
    """``forecast --calibration --json`` is ``backtest``'s ``calibration_only`` object, which the forecast schema
    reaches only by ``$ref: urn:marketcast:schema:backtest#/$defs/calibration_only``: the package's registry must
    resolve that id to the packaged backtest schema."""
    assert main(["forecast", "SP500", "--calibration", "--windows", "12", "--samples", "32", "--context", "64",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["calibration_only"] is True
    assert list(Draft202012Validator(load("forecast"), registry=registry()).iter_errors(doc)) == []
    # the same registry built by hand from the package's files, as a consumer would, holds the same resources
    by_hand = Registry().with_resources(
        (json.loads(p.read_text())["$id"], Resource.from_contents(json.loads(p.read_text())))
        for p in PACKAGED.iterdir() if p.name.endswith(".schema.json"))
    assert sorted(by_hand) == sorted(registry()) == sorted(f"urn:marketcast:schema:{n}" for n in names())
    # without the backtest schema the $ref cannot be followed: the validation above went through it
    alone = Registry().with_resource("urn:marketcast:schema:forecast", Resource.from_contents(load("forecast")))
    with pytest.raises(Unresolvable):
        Draft202012Validator(load("forecast"), registry=alone).validate(doc)
    # and what it found there is checked: a calibration_only object without its skill fails
    broken = {k: v for k, v in doc.items() if k != "skill"}
    assert list(Draft202012Validator(load("forecast"), registry=registry()).iter_errors(broken))


def test_the_schemas_are_read_from_a_built_wheel(tmp_path):
    """Build the wheel (from a copy, so no build/ lands in the checkout) and read the schemas from it, as an
    installed package: a pure-Python wheel is importable as a zip, so ``importlib.resources`` reads them there."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(project)], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("marketcast-*.whl")
    read = ("import json, marketcast.schemas as s; "
            "print(json.dumps([s.__file__, s.names(), s.load('backtest')['$id']]))")
    out = subprocess.run([sys.executable, "-c", read], env={"PYTHONPATH": str(wheel), "PATH": ""}, cwd=tmp_path,
                         check=True, capture_output=True, text=True, timeout=120).stdout
    where, found, backtest_id = json.loads(out)
    assert where.startswith(str(wheel))  # read from the wheel, not from this checkout
    assert found == names() and len(found) == 25 and backtest_id == "urn:marketcast:schema:backtest"


def test_the_wheel_carries_the_schemas_and_docs_keeps_no_copy():
    """setuptools installs package data by the globs of ``[tool.setuptools.package-data]``: every packaged schema
    matches one; docs/schemas holds only the README that points at the package (one source of truth)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["marketcast.schemas"]
    shipped = [p.name for p in PACKAGED.iterdir() if p.name.endswith(".json")]
    assert len(shipped) == 25 and all(any(fnmatch(n, g) for g in globs) for n in shipped)
    assert sorted(p.name for p in (ROOT / "docs" / "schemas").iterdir()) == ["README.md"]
    assert "src/marketcast/schemas/" in (ROOT / "docs" / "schemas" / "README.md").read_text()
