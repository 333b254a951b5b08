"""The loading layer of forecast/ (checkpoint.py, hub.py) sits below the model packages (the import rule is a
contract in pyproject.toml): importing it loads no model package, and the packages register their public
checkpoints with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import marketcast.forecast as forecast_pkg

FORECAST = Path(forecast_pkg.__file__).parent
MODEL_PACKAGES = sorted(p.name for p in FORECAST.iterdir() if (p / "__init__.py").is_file())


def test_the_model_packages_are_the_ones_the_registry_builds():
    from marketcast.forecast.registry import FACTORIES

    assert {"toto", "kronos", "toto2"} <= set(MODEL_PACKAGES)
    assert {spec.split(":")[0].split(".")[2] for spec in FACTORIES.values()} - {"baseline"} <= set(MODEL_PACKAGES)


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
