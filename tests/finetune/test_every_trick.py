"""Every trick of issue 55 on every command that takes --weights: refused or labelled, never silent.

Where the record travels inside model.safetensors the tricks change nothing (tests/finetune/
test_record_in_weights.py: the record in the header is read, the in-sample run refused). Here the weights carry no
record the tools can read: an old checkpoint whose record was only tuning.json, copied without it, or with it
renamed, recased or made a folder; weights given as a hub repo id whose cache copy holds config.json and
model.safetensors only; and such weights laundered by tuning them again for 2 steps with an earlier --until
(their record then says "base: provenance unknown"). Each is neither a known public checkpoint nor tuned weights
of a known base, so every command says "provenance unknown" beside the model, and --require-clean refuses it in
one line (exit 2). The same bars under another name are matched by content on every command that reads the
bars' history (test_every_weights_command.py), trade run's paper broker included (there, and --once below).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from marketcast.commands import main
from marketcast.forecast.tuning import read_tuning, record_text
from tests.finetune.conftest import UNTIL, syn_record
from tests.finetune.test_every_weights_command import _renamed, in_sample_cases
from tests.spine.test_json_output import errors

TRICKS = ["copied", "renamed", "recased", "folder", "repo id", "laundered"]
LAUNDER_UNTIL = "2020-06-30"  # earlier than the original tuning's UNTIL: the windows of 2021 read "out of sample"
REPO = "someone/anonymous-toto"
UNKNOWN = "provenance unknown: the weights {weights} are neither a known public checkpoint nor fine-tuned weights"
REFUSED = "--require-clean: the weights {weights} are of unknown provenance"  # sweep: after the spec's path
# each command's runs of in_sample_cases (tuned on SYN through UNTIL: here the record is gone, so they run)
COMMANDS = {"backtest": 0, "forecast": 0, "forecast --calibration": 1, "models compare": 0, "sweep": 0,
            "trade replay": 0, "trade run": 0}


@pytest.fixture(scope="module")
def old_tuned(tiny_base, data_dir, tmp_path_factory) -> Path:
    """Tuned weights as written before the record moved into the weights: the tiny base with a tuning.json."""
    folder = tmp_path_factory.mktemp("old") / "tuned"
    shutil.copytree(tiny_base, folder)
    (folder / "tuning.json").write_text(record_text(syn_record(tiny_base, data_dir)))
    return folder


def _copied(old_tuned: Path, where: Path) -> Path:
    """config.json and model.safetensors of ``old_tuned`` copied to ``where``: the record stayed behind."""
    where.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(old_tuned / name, where / name)
    return where


@pytest.fixture(scope="module")
def laundered(old_tuned, data_dir, tmp_path_factory) -> Path:
    """The copy without its record tuned again for 2 steps up to LAUNDER_UNTIL: its record says so, and that its
    base is of unknown provenance."""
    copy = _copied(old_tuned, tmp_path_factory.mktemp("launder") / "copy")
    out = copy.parent / "laundered"
    with pytest.MonkeyPatch.context() as patch:  # module-scoped: before the autouse fixture of each test
        patch.setenv("MARKETCAST_RUN_STORE", "off")
        patch.chdir(copy.parent)
        assert main(["finetune", "--weights", str(copy), "--data-dir", str(data_dir), "--symbols", "SYN", "--until",
                     LAUNDER_UNTIL, "--steps", "2", "--context", "32", "--horizon", "4", "--out", str(out)]) == 0
    return out


@pytest.fixture
def tricked(request, old_tuned, laundered, tmp_path, monkeypatch) -> str:
    """The weights of one trick, as --weights names them."""
    trick = request.param
    if trick == "laundered":
        return str(laundered)
    if trick == "repo id":
        import huggingface_hub.constants

        from tests.spine.test_models import cache_repo

        cache = tmp_path / "hf-cache"
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        _copied(old_tuned, tmp_path / "download")
        snapshot = cache_repo(cache, REPO)
        for name in ("config.json", "model.safetensors"):
            shutil.copyfile(tmp_path / "download" / name, snapshot / name)
        return REPO
    if trick == "copied":
        return str(_copied(old_tuned, tmp_path / "copied"))
    folder = tmp_path / trick
    shutil.copytree(old_tuned, folder)
    sidecar = folder / "tuning.json"
    if trick == "renamed":
        sidecar.rename(folder / "tuning.json.bak")
    elif trick == "recased":
        sidecar.rename(folder / "TUNING.JSON")
    else:  # a folder where the record was
        sidecar.unlink()
        sidecar.mkdir()
    return str(folder)


def _argv(command: str, weights: str, data_dir: Path, tmp_path: Path) -> list[str]:
    name = command.removesuffix(" --calibration")
    return in_sample_cases(weights, data_dir, tmp_path)[name][COMMANDS[command]]


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    monkeypatch.chdir(tmp_path)  # trade commands read ./marketcast.toml and ./.env.compile: none here


@pytest.mark.parametrize("tricked", TRICKS, indirect=True)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_weights_without_a_readable_record_are_labelled_and_refused_by_require_clean(command, tricked, data_dir,
                                                                                      tmp_path, capsys):
    assert read_tuning(tricked) is None or read_tuning(tricked).raw["base_provenance"] == "unknown"
    argv = _argv(command, tricked, data_dir, tmp_path)
    assert main(argv) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    said = " ".join((captured.out + captured.err).split())
    if command == "models compare":  # the verdict strip beside the model's name
        assert "toto SYN" in said and "weights provenance unknown" in said, said
    else:
        assert UNKNOWN.format(weights=tricked) in said, said
    shutil.rmtree(tmp_path / "store", ignore_errors=True)
    for path in ("bt", "replay", "run"):
        shutil.rmtree(tmp_path / path, ignore_errors=True)
    assert main([*_argv(command, tricked, data_dir, tmp_path), "--require-clean"]) == 2
    refusals = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(refusals) == 1 and REFUSED.format(weights=tricked) in refusals[0], refusals
    assert not any((tmp_path / p).exists() for p in ("bt", "store", "replay")), "refused after some work"


def test_laundering_records_the_unknown_base_and_cannot_hide_the_original_tuning(laundered, old_tuned, data_dir,
                                                                                 tmp_path, capsys):
    """Tuned again without its record, the laundered weights' record says "base: provenance unknown" (so every
    command labels them, above); tuned again with their record, the earlier --until is refused before any work."""
    record = json.loads((laundered / "tuning.json").read_text())
    assert (record["until"], record["base_provenance"], record["base_checkpoint"]) == (LAUNDER_UNTIL, "unknown",
                                                                                        None)
    assert main(["finetune", "--weights", str(old_tuned), "--data-dir", str(data_dir), "--symbols", "SYN",
                 "--until", LAUNDER_UNTIL, "--steps", "2", "--context", "32", "--horizon", "4", "--out",
                 str(tmp_path / "again")]) == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert f"were tuned on SYN up to {UNTIL} (their tuning record)" in line and not (tmp_path / "again").exists()


@pytest.mark.parametrize("tricked", ["copied"], indirect=True)
def test_the_json_documents_carry_the_mark(tricked, data_dir, tmp_path, capsys):
    """forecast, trade replay and trade run --json: ``provenance: "unknown"`` where the document names the
    symbol's bars; sweep --json: the line once for the weights; each valid against its command's schema."""
    fan = _argv("forecast", tricked, data_dir, tmp_path)
    assert main([*fan, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["provenance"] == "unknown" and errors("forecast", doc) == []
    assert main([*_argv("forecast --calibration", tricked, data_dir, tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["provenance"] == "unknown" and doc["calibration_only"] and errors("forecast", doc) == []
    for command, schema in (("trade replay", "trade_replay"), ("trade run", "trade_run")):
        assert main([*_argv(command, tricked, data_dir, tmp_path), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["exposure"] == {"SYN": {"provenance": "unknown"}} and errors(schema, doc) == [], doc
    assert main([*_argv("sweep", tricked, data_dir, tmp_path), "--json"]) == 0  # once per weights
    doc = json.loads(capsys.readouterr().out)
    assert [line.split(": ", 1)[0] for line in doc["exposure"]] == ["toto"] and errors("sweep", doc) == []
    assert doc["exposure"][0].startswith(f"toto: {UNKNOWN.format(weights=tricked)}"), doc["exposure"]


@pytest.mark.parametrize("tricked", ["renamed"], indirect=True)
def test_trade_run_keeps_the_mark_in_its_log(tricked, data_dir, tmp_path, capsys):
    """A cycle traded for real (--once on the paper broker): the warning line is in trade.log too."""
    (argv,) = in_sample_cases(tricked, data_dir, tmp_path)["trade run"][:1]
    assert main([a for a in argv if a != "--dry-run"] + ["--once"]) == 0
    assert f"warning: SYN: {UNKNOWN.format(weights=tricked)}" in " ".join(capsys.readouterr().err.split())
    assert UNKNOWN.format(weights=tricked) in " ".join((tmp_path / "run" / "trade.log").read_text().split())


def test_trade_run_once_matches_the_paper_brokers_bars_by_content(carried, data_dir, tmp_path, capsys):
    """SYN's bars as ALIAS.csv, traded for real on the paper broker (--once; the dry runs and --shadow are in
    test_every_weights_command.py): refused as the bars the weights were tuned on."""
    (argv,) = in_sample_cases(carried, _renamed(data_dir, tmp_path), tmp_path, "ALIAS")["trade run"][:1]
    assert main([a for a in argv if a != "--dry-run"] + ["--once"]) == 2
    refusals = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert refusals == [f"error: ALIAS (the bars the weights were tuned on as SYN): the newest bar 2021-02-10 is on "
                        f"or before {UNTIL}, the last day the weights in {carried} were tuned on; trade on bars after "
                        "it (the paper broker's --clock-file at 2021-02-25 or later) or with weights tuned to an "
                        "earlier --until"], refusals


@pytest.mark.parametrize("tricked", TRICKS, indirect=True)
def test_finetune_records_each_trick_as_a_base_of_unknown_provenance(tricked, data_dir, tmp_path):
    """finetune's surface is the record it writes: tuning any of these weights says "base: provenance unknown",
    so the new weights are labelled on every command too (the laundered case above)."""
    out = tmp_path / "again"
    assert main(["finetune", "--weights", tricked, "--data-dir", str(data_dir), "--symbols", "SYN", "--until",
                 "2021-03-31", "--steps", "2", "--context", "32", "--horizon", "4", "--out", str(out)]) == 0
    record = json.loads((out / "tuning.json").read_text())
    assert (record["base_provenance"], record["base_checkpoint"]) == ("unknown", None)
    assert read_tuning(out).raw == record  # the header's copy says the same


def test_finetune_refuses_tuning_the_same_bars_again_under_another_name(carried, data_dir, tmp_path, capsys):
    """finetune of tuned weights must name every symbol they were tuned on (by name: the new record then holds
    each one's fingerprint), so SYN's bars as ALIAS, even with a later --until, are refused before any work."""
    out = tmp_path / "again"
    assert main(["finetune", "--weights", str(carried), "--data-dir", str(_renamed(data_dir, tmp_path)), "--symbols",
                 "ALIAS", "--until", "2021-03-31", "--steps", "2", "--context", "32", "--horizon", "4", "--out",
                 str(out)]) == 2
    refusals = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(refusals) == 1 and f"were tuned on SYN up to {UNTIL} (their tuning record)" in refusals[0], refusals
    assert "--symbols ALIAS,SYN" in refusals[0] and not out.exists()
