"""The loading layer of forecast/ (checkpoint.py, hub.py) sits below the model packages: it imports none of
them, the packages register their public checkpoints with it, and no model package imports a sibling's code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import marketcast.forecast as forecast_pkg

FORECAST = Path(forecast_pkg.__file__).parent
MODEL_PACKAGES = sorted(p.name for p in FORECAST.iterdir() if (p / "__init__.py").is_file())
LOADING = ("checkpoint.py", "hub.py")


def _imported(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside functions."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _packages_named(modules: set[str]) -> set[str]:
    return {m.split(".")[2] for m in modules if m.startswith("marketcast.forecast.") and m.split(".")[2]
            in MODEL_PACKAGES}


def test_the_model_packages_are_the_ones_the_registry_builds():
    from marketcast.forecast.registry import FACTORIES

    assert {"toto", "kronos", "toto2"} <= set(MODEL_PACKAGES)
    assert {spec.split(":")[0].split(".")[2] for spec in FACTORIES.values()} - {"baseline"} <= set(MODEL_PACKAGES)


def test_the_loading_layer_names_no_model_package_and_runs_one_way():
    for name in LOADING:
        assert _packages_named(_imported(FORECAST / name)) == set(), name
    assert not [m for m in _imported(FORECAST / "hub.py") if m.startswith("marketcast.forecast")]  # checkpoint -> hub


def test_no_model_package_imports_a_sibling():
    for package in MODEL_PACKAGES:
        for path in (FORECAST / package).glob("*.py"):
            assert _packages_named(_imported(path)) <= {package}, path


def test_importing_the_loading_layer_loads_no_model_package():
    code = ("import sys, marketcast.forecast.checkpoint, marketcast.forecast.hub as h; "
            "h.download_advice('Datadog/Toto-Open-Base-1.0', 'Toto'); "
            f"print(sorted(m for m in sys.modules if m.split('.')[:3][-1] in {MODEL_PACKAGES!r} "
            "and m.startswith('marketcast.forecast.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_model_package_registers_its_checkpoints():
    from marketcast.forecast.hub import catalogue, download_advice
    from marketcast.forecast.registry import import_models

    import_models()
    found = catalogue()
    assert {"toto", "toto2", "kronos", "kronos-mini", "kronos-small", "kronos-base"} <= set(found)
    assert found["kronos"] is found["kronos-small"] and found["kronos"].weights == "auto"
    assert found["toto"].repos == {"": "Datadog/Toto-Open-Base-1.0"} and found["toto2"].model == "toto2"
    assert found["kronos-base"].repos == {"model": "NeoQuasar/Kronos-base", "tokenizer": "NeoQuasar/Kronos-Tokenizer-base"}
    assert "`marketcast models download toto`" in download_advice("Datadog/Toto-Open-Base-1.0", "Toto")
