"""A registered pretrained checkpoint scored on windows it may have seen: a local folder of random tiny Kronos
weights that names itself NeoQuasar/Kronos-small in its config (as a download does), backtested offline on the
embedded S&P 500 bars (up to 2018, before Kronos's release in 2025-08, and its corpus holds market prices).
Every surface labels the windows "possibly inside pretraining data", the leaderboard splits the record there,
and --require-clean refuses them in one line. Random and weight-free models carry no label."""

from __future__ import annotations

import json
import shutil

import pytest

from marketcast.commands import main
from marketcast.forecast.cards import POSSIBLY
from marketcast.forecast.kronos import Kronos, KronosConfig, KronosTokenizer, TokenizerConfig, from_config
from marketcast.forecast.kronos.loading import save_pretrained
from tests.spine.test_json_output import errors

TOKENIZER = TokenizerConfig(d_model=32, n_heads=4, ff_dim=64, n_enc_layers=2, n_dec_layers=2, s1_bits=4, s2_bits=4,
                            group_size=4)
MODEL = KronosConfig(s1_bits=4, s2_bits=4, n_layers=2, d_model=32, n_heads=4, ff_dim=64, max_context=512)
FAST = ["SP500", "-m", "kronos", "-s", "8", "-c", "32", "--windows", "6"]
LINE = (f"SP500: {POSSIBLY}: 6 of 6 windows have a decision bar on or before 2025-08-31, the end of its release "
        "month (corpora hold market prices) for NeoQuasar/Kronos-small")


@pytest.fixture(scope="module")
def kronos_small(tmp_path_factory):
    """Random tiny Kronos weights whose model/config.json names the public Kronos-small."""
    folder = tmp_path_factory.mktemp("kronos") / "downloaded"
    save_pretrained(from_config(Kronos, MODEL, 1), folder / "model")
    save_pretrained(from_config(KronosTokenizer, TOKENIZER, 2), folder / "tokenizer")
    config = json.loads((folder / "model" / "config.json").read_text())
    (folder / "model" / "config.json").write_text(json.dumps({**config, "_name_or_path": "NeoQuasar/Kronos-small"}))
    return folder


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)


def test_every_backtest_surface_labels_the_windows_and_runs_show_keeps_it(kronos_small, tmp_path, monkeypatch,
                                                                          capsys):
    store = tmp_path / "store"
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(store))
    out = tmp_path / "bt"
    assert main(["backtest", *FAST, "--weights", str(kronos_small), "--html", "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    run = printed.strip().splitlines()[-1].removeprefix("run ")  # the backtest's last line names its run
    terminal = " ".join(printed.split())
    assert LINE in terminal  # the line under the table
    strip = f"pretraining {POSSIBLY}: 6 windows to 2025-08-31 (NeoQuasar/Kronos-small)"
    assert strip in terminal  # the verdict strip's fourth line
    doc = json.loads((out / "latest" / "SP500.json").read_text())
    assert (doc["checkpoint"], doc["pretraining"], doc["pretraining_windows"], doc["pretraining_until"]) == (
        "NeoQuasar/Kronos-small", POSSIBLY, 6, "2025-08-31")
    assert doc["verdict"]["pretraining"]["pretraining_windows"] == 6 and errors("backtest", [doc]) == []
    page = " ".join((out / "latest" / "report.html").read_text().split())
    assert 'data-key="pretraining" data-status="amber"' in page and LINE.split(": ", 1)[1] in page
    assert f"> warning: {LINE.split(': ', 1)[1]}" in (out / "latest" / "summary.md").read_text()
    assert main(["runs", "show", run, "--store", str(store)]) == 0
    assert strip in " ".join(capsys.readouterr().out.split())


def test_json_output_carries_the_label(kronos_small, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    assert main(["backtest", *FAST, "--weights", str(kronos_small), "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["pretraining"] == POSSIBLY and doc["pretraining_windows"] == 6 and errors("backtest", [doc]) == []


def test_the_leaderboard_splits_the_record_at_the_boundary(kronos_small, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    argv = ["models", "compare", "--symbols", "SP500", "--models", "baseline,kronos", "--weights",
            f"kronos={kronos_small}", "--windows", "6", "-s", "8", "-c", "32", "--store", "off"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert errors("models_compare", doc) == []
    rows = {r["model"]: r for r in doc["models"]}
    assert rows["baseline"]["pretraining"] is None
    split = rows["kronos"]["pretraining"]
    assert (split["checkpoint"], split["label"], split["until"]) == ("NeoQuasar/Kronos-small", POSSIBLY, "2025-08-31")
    assert split["before"]["windows"] == 6 and split["after"] == {"windows": 0, "return": None, "sharpe": None}
    kronos = [v["verdict"] for v in doc["verdicts"] if v["model"] == "kronos"]
    assert kronos[0]["pretraining"]["pretraining"] == POSSIBLY
    assert all("pretraining" not in v["verdict"] for v in doc["verdicts"] if v["model"] == "baseline")
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"kronos: {POSSIBLY} of NeoQuasar/Kronos-small up to 2025-08-31: before 6 windows, return" in text
    assert "; after 0 windows" in text


def test_require_clean_refuses_in_one_line_and_writes_nothing(kronos_small, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    out = tmp_path / "clean"
    assert main(["backtest", *FAST, "--weights", str(kronos_small), "--require-clean", "--output-dir", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert err == [f"error: --require-clean: SP500: 6 windows (the first with decision bar 2018-12-20) are {POSSIBLY} "
                   "of NeoQuasar/Kronos-small (on or before 2025-08-31); test after it (--start 2025-09-01) or leave "
                   "out --require-clean"]
    assert not out.exists()


@pytest.fixture
def anonymous(kronos_small, tmp_path):
    """The same weights with a config that names no checkpoint, and no tuning record: provenance unknown."""
    import shutil

    folder = tmp_path / "anonymous"
    shutil.copytree(kronos_small, folder)
    config = json.loads((folder / "model" / "config.json").read_text())
    del config["_name_or_path"]
    (folder / "model" / "config.json").write_text(json.dumps(config))
    return folder


def test_weights_of_unknown_provenance_say_so_on_every_surface(anonymous, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    out = tmp_path / "bt"
    assert main(["backtest", *FAST, "--weights", str(anonymous), "--html", "--output-dir", str(out)]) == 0
    terminal = " ".join(capsys.readouterr().out.split())
    line = (f"provenance unknown: the weights {anonymous} are neither a known public checkpoint nor fine-tuned "
            "weights with a tuning record")
    assert f"SP500: {line}" in terminal and "weights provenance unknown" in terminal  # the line, the strip's cell
    doc = json.loads((out / "latest" / "SP500.json").read_text())
    assert doc["provenance"] == "unknown" and doc["verdict"]["provenance"] == "unknown" and "pretraining" not in doc
    assert errors("backtest", [doc]) == []
    assert line in " ".join((out / "latest" / "report.html").read_text().split())
    assert f"> warning: {line}" in (out / "latest" / "summary.md").read_text()
    argv = ["models", "compare", "--symbols", "SP500", "--models", "kronos", "--weights", f"kronos={anonymous}",
            "--windows", "6", "-s", "8", "-c", "32", "--store", "off", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdicts"][0]["verdict"]["provenance"] == "unknown" and errors("models_compare", doc) == []


def test_require_clean_refuses_weights_of_unknown_provenance(anonymous, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    assert main(["backtest", *FAST, "--weights", str(anonymous), "--require-clean", "--output-dir",
                 str(tmp_path / "x")]) == 2
    assert f"--require-clean: the weights {anonymous} are of unknown provenance" in capsys.readouterr().err


@pytest.mark.parametrize("model", ["kronos", "baseline"])
def test_random_and_weight_free_models_carry_no_label(model, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    weights = ["--weights", "random"] if model == "kronos" else []
    argv = ["backtest", "SP500", "-m", model, *weights, "-s", "8", "-c", "32", "--windows", "6", "--json",
            "--require-clean"]
    assert main(argv) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    assert "pretraining" not in doc and "checkpoint" not in doc and "pretraining" not in doc["verdict"]


def _spec(tmp_path, weights) -> str:
    path = tmp_path / "kronos.toml"
    path.write_text('name = "kronos"\n[data]\nsymbols = ["SP500"]\n[options]\nwindows = 3\nnum_samples = 8\n'
                    f'context = 32\n[grid]\nmodel = ["kronos"]\n[models.kronos]\nweights = "{weights}"\n')
    return str(path)


def _clock(tmp_path) -> str:
    (tmp_path / "clock").write_text("2018-12-20T21:30:00Z")
    return str(tmp_path / "clock")


OTHERS = {  # every other command that takes --weights, on embedded SP500 bars before Kronos's release
    "forecast": lambda w, tmp: ["forecast", "SP500", "-m", "kronos", "--weights", w, "-s", "8", "-c", "32", "-H", "2"],
    "forecast --calibration": lambda w, tmp: ["forecast", "SP500", "-m", "kronos", "--weights", w, "-s", "8", "-c",
                                              "32", "--calibration", "--windows", "3"],
    "sweep": lambda w, tmp: ["sweep", _spec(tmp, w), "--store", str(tmp / "store"), "--local"],
    "trade replay": lambda w, tmp: ["trade", "replay", "--start", "2018-12-17", "--end", "2018-12-19", "--symbols",
                                    "SP500", "-m", "kronos", "--weights", w, "--state-dir", str(tmp / "replay")],
    "trade run": lambda w, tmp: ["trade", "run", "--dry-run", "--symbols", "SP500", "--model", "kronos", "--weights",
                                 w, "--state-dir", str(tmp / "run"), "--clock-file", _clock(tmp)],
}


@pytest.mark.parametrize("command", list(OTHERS))
def test_every_other_command_labels_the_pretraining_windows_and_require_clean_refuses_them(command, kronos_small,
                                                                                           tmp_path, monkeypatch,
                                                                                           capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    argv = OTHERS[command](str(kronos_small), tmp_path)
    assert main(argv) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    said = " ".join((captured.out + captured.err).split())  # trade run: a warning line on stderr
    if command == "sweep":  # once per weights; the cells' strips in runs show
        assert ("kronos: a window with a decision bar on or before 2025-08-31 is possibly inside pretraining data "
                "of NeoQuasar/Kronos-small") in said, said
        run = captured.out.split()[-1]  # stdout's last line: run RUN
        assert main(["runs", "show", run, "--store", str(tmp_path / "store")]) == 0
        said = " ".join(capsys.readouterr().out.split())
        assert f"pretraining {POSSIBLY}: 3 windows to 2025-08-31 (NeoQuasar/Kronos-small)" in said, said
    else:
        assert f"SP500: {POSSIBLY}: " in said and "on or before 2025-08-31, the end of its release month" in said, said
    for made in ("store", "replay"):  # what the labelled run wrote
        shutil.rmtree(tmp_path / made, ignore_errors=True)
    assert main([*argv, "--require-clean"]) == 2
    refusals = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(refusals) == 1 and "--require-clean: SP500: " in refusals[0], refusals
    assert f"{POSSIBLY} of NeoQuasar/Kronos-small (on or before 2025-08-31)" in refusals[0], refusals
    assert not any((tmp_path / p).exists() for p in ("store", "replay")), "refused after some work"
