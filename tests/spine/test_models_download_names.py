"""``models download`` names every checkpoint a model package registered with the hub, in its help and in the
line that refuses an unknown name: the two lists come from the registrations, so a new model cannot be missed."""

from __future__ import annotations

from click.testing import CliRunner

from marketcast.commands import main
from marketcast.forecast.hub import catalogue
from marketcast.forecast.registry import MODEL_NAMES, import_models


def _help() -> str:
    from typer.main import get_command

    from marketcast.commands.models import app

    result = CliRunner().invoke(get_command(app), ["download", "--help"], terminal_width=400)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_help_and_the_unknown_name_line_list_every_registered_checkpoint(capsys):
    import_models()
    names = sorted(catalogue())
    # every model of the registry but the weight-free baseline has a public checkpoint
    assert {catalogue()[n].model for n in names} == set(MODEL_NAMES) - {"baseline"}
    assert {"chronos2", "toto2", "timesfm", "tirex", "kronos-base"} <= set(names)
    text = _help()
    assert all(n in text for n in names), text
    assert "kronos (= kronos-small)" in text
    assert main(["models", "download", "no-such-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(n in err[0] for n in names) and "'no-such-model'" in err[0]
