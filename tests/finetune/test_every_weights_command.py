"""Every command that loads weights asks the one tuned-weights guard (marketcast.forecast.tuning.guard_weights):
the commands are found from the CLI itself (every option named --weights or --shadow), so a new command that
loads weights fails here until it has an in-sample case below, refused in one line naming the tuning period
or labelled "in sample", or a stated reason to be exempt."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from marketcast.commands import app, main
from tests.finetune.conftest import UNTIL

FAST = ["-m", "toto", "-s", "8", "-c", "32"]
WEIGHT_OPTIONS = ("--weights", "--shadow")
EXEMPT = {  # command -> why an in-sample run cannot happen
    "compile check": "compares compiled with eager forecasts of the same weights (speed, memory, output delta); "
                     "nothing is scored against the bars",
}
FROM_A_FILE = {"sweep"}  # weights named in the spec, not by an option: found by hand


def weights_commands() -> dict[str, set[str]]:
    """Every command line (``trade replay``) with an option that names weights -> all its options."""
    root = typer.main.get_command(app)
    ctx = root.make_context("marketcast", ["--help"], resilient_parsing=True)
    found: dict[str, set[str]] = {}

    def walk(command, path: str) -> None:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), f"{path} {name}")
            return
        opts = {o for p in command.params for o in getattr(p, "opts", ())}
        if opts & set(WEIGHT_OPTIONS):
            found[path] = opts

    for name in root.list_commands(ctx):
        walk(root.load(name), name)
    return found


def _spec(tmp_path: Path, data_dir: Path, tuned: Path, symbol: str = "SYN") -> str:
    path = tmp_path / "tuned.toml"
    path.write_text(f'name = "tuned"\n[data]\nsymbols = ["{symbol}"]\ndir = "{data_dir}"\nstart = "2021-02-01"\n'
                    'end = "2021-03-05"\n[options]\nnum_samples = 8\ncontext = 32\n[grid]\nmodel = ["toto"]\n'
                    f'[models.toto]\nweights = "{tuned}"\n')
    return str(path)


def _clock(tmp_path: Path, when: str) -> str:
    (tmp_path / "clock").write_text(when)
    return str(tmp_path / "clock")


def in_sample_cases(tuned: Path, dd: Path, tmp: Path, symbol: str = "SYN") -> dict[str, list[list[str]]]:
    """Each command's in-sample runs of the tuned fixture (tuned on SYN through UNTIL = 2021-02-24); ``symbol``:
    the name the bars go by (the same bars under another name are still the tuned bars)."""
    d, w = ["--data-dir", str(dd)], ["--weights", str(tuned)]
    cases = {
        "backtest": [["backtest", "SYN", *d, *FAST, *w, "--start", "2021-02-01", "--end", "2021-03-05",
                      "--output-dir", str(tmp / "bt")]],
        "forecast": [["forecast", "SYN", *d, *FAST, *w, "--end", "2021-02-10"],  # the fan from a tuned bar
                     ["forecast", "SYN", *d, *FAST, *w, "--calibration", "--start", "2021-02-01", "--end",
                      "2021-03-05"]],
        "models compare": [["models", "compare", "--symbols", "SYN", "--models", "toto", "--weights",
                            f"toto={tuned}", *d, "--windows", "200", "-s", "8", "-c", "32", "--store", "off"]],
        "sweep": [["sweep", _spec(tmp, dd, tuned, symbol), "--store", str(tmp / "store"), "--local"]],
        "finetune": [["finetune", *w, *d, "--symbols", "SYN", "--until", "2021-01-29", "--steps", "2", "--context",
                      "32", "--horizon", "4", "--evaluate", "--out", str(tmp / "again")]],  # tuned again, earlier
        "trade replay": [["trade", "replay", "--start", "2021-02-01", "--end", "2021-03-05", "--symbols", "SYN", *d,
                          *FAST[:2], *w, "--state-dir", str(tmp / "replay")]],
        "trade run": [["trade", "run", "--dry-run", "--symbols", "SYN", *d, *FAST[:2], *w, "--state-dir",
                       str(tmp / "run"), "--clock-file", _clock(tmp, "2021-02-10T21:30:00Z")],
                      ["trade", "run", "--dry-run", "--symbols", "SYN", *d, "--shadow-model", "toto", "--shadow",
                       str(tuned), "--state-dir", str(tmp / "run"), "--clock-file", _clock(tmp, "2021-02-10T21:30:00Z")]],
    }
    return {command: [[symbol if a == "SYN" else a for a in argv] for argv in runs] for command, runs in cases.items()}


def test_every_command_that_takes_weights_has_an_in_sample_case_or_a_reason(tuned, data_dir, tmp_path):
    found = weights_commands()
    assert {"backtest", "forecast", "models compare", "trade run", "trade replay", "finetune"} <= set(found)
    assert set(found) | FROM_A_FILE == set(in_sample_cases(tuned, data_dir, tmp_path)) | set(EXEMPT), (
        "a command that loads weights needs an in-sample case in this file (or a reason in EXEMPT)")


RECORDS = ["tuned", "carried"]  # the record in tuning.json only (written before it moved into the weights), or in
# model.safetensors' header only (config.json and model.safetensors copied to another folder)


@pytest.mark.parametrize("record", RECORDS)
@pytest.mark.parametrize("command", ["backtest", "forecast", "models compare", "sweep", "finetune", "trade replay",
                                     "trade run"])
def test_an_in_sample_run_is_refused_in_one_line_naming_the_tuning_period(command, record, data_dir, tmp_path,
                                                                          monkeypatch, capsys, request):
    tuned = request.getfixturevalue(record)
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    monkeypatch.chdir(tmp_path)  # trade commands read ./marketcast.toml and ./.env.compile: none here
    for argv in in_sample_cases(tuned, data_dir, tmp_path)[command]:
        code = main(argv)
        err = capsys.readouterr().err.splitlines()
        errors = [line for line in err if line.startswith("error: ")]
        assert code == 2 and len(errors) == 1, (argv, err)
        assert all(line.startswith("warning: ") for line in err if line not in errors), err
        assert f"{tuned}" in errors[0] and (f"on or before {UNTIL}" in errors[0] or f"up to {UNTIL}" in errors[0])
        assert not any(p.exists() for p in (tmp_path / "bt", tmp_path / "store", tmp_path / "again",
                                            tmp_path / "replay", tmp_path / "run")), "refused after some work"


@pytest.mark.parametrize("record", RECORDS)
def test_commands_with_allow_in_sample_label_the_same_run_in_sample(record, data_dir, tmp_path, monkeypatch, capsys,
                                                                    request):
    tuned = request.getfixturevalue(record)
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    allowing = sorted(c for c, opts in weights_commands().items() if "--allow-in-sample" in opts)
    assert allowing == ["backtest"]
    (argv,) = in_sample_cases(tuned, data_dir, tmp_path)["backtest"]
    assert main([*argv, "--allow-in-sample"]) == 0
    captured = capsys.readouterr()
    # decision bars 2021-02-01 .. 2021-03-05: 18 weekdays through 2021-02-24 (5 + 5 + 5 + 3), then 2 + 5 after it
    assert f"SYN: in sample: 18 of 25 windows have a decision bar on or before {UNTIL}" in " ".join(
        captured.out.split()), captured.out


def test_the_new_guards_say_what_was_in_sample_and_how_to_fix_it(tuned, data_dir, tmp_path, monkeypatch, capsys):
    """The fan, the replay's cycles and trade run's newest bar: their exact lines."""
    monkeypatch.chdir(tmp_path)
    cases = in_sample_cases(tuned, data_dir, tmp_path)
    head = "error: SYN: {what} is on or before 2021-02-24, the last day the weights in " + str(tuned) + \
           " were tuned on; {fix}"
    want = [
        (cases["forecast"][0], head.format(what="the fan's last bar 2021-02-10",
                                           fix="forecast from a later bar (--end 2021-02-25 or after, or no --end)")),
        (cases["trade replay"][0], head.format(what="cycle 1 (decision bar 2021-02-01)",
                                               fix="replay after it (--start 2021-02-25)")),
        (cases["trade run"][1], head.format(what="the newest bar 2021-02-10",
                                            fix="trade on bars after it (the paper broker's --clock-file at "
                                                "2021-02-25 or later) or with weights tuned to an earlier --until")),
    ]
    for argv, line in want:
        assert main(argv) == 2
        assert capsys.readouterr().err.splitlines()[-1] == line


def test_the_same_commands_run_once_every_decision_is_after_the_tuning(tuned, data_dir, tmp_path, monkeypatch,
                                                                       capsys):
    """Out of sample (every decision bar after 2021-02-24) the guard lets each new path through."""
    monkeypatch.chdir(tmp_path)
    d, w = ["--data-dir", str(data_dir)], ["--weights", str(tuned)]
    assert main(["forecast", "SYN", *d, *FAST, *w, "--end", "2021-02-25", "-H", "2"]) == 0
    assert "SYN toto forecast from 2021-02-25" in " ".join(capsys.readouterr().out.split())
    assert main(["trade", "replay", "--start", "2021-02-25", "--end", "2021-03-03", "--symbols", "SYN", *d,
                 *FAST[:2], *w, "--state-dir", str(tmp_path / "replay")]) == 0
    assert "4 cycles run" in capsys.readouterr().out
    assert main(["trade", "run", "--dry-run", "--symbols", "SYN", *d, *FAST[:2], *w, "--state-dir",
                 str(tmp_path / "run"), "--clock-file", _clock(tmp_path, "2021-02-25T21:30:00Z")]) == 0
    assert "dry run, nothing sent" in capsys.readouterr().out


# the same bars under another name: matched by their fingerprint up to until, wherever the bars are read (trade run:
# the paper broker's files; Alpaca's feed holds only its latest bars, so there its newest bar is checked by name);
# finetune tunes tuned weights again only with every symbol they were tuned on (by name)
BY_CONTENT = ["backtest", "forecast", "models compare", "sweep", "trade replay", "trade run"]


def _renamed(data_dir: Path, tmp_path: Path) -> Path:
    """SYN's bars as ALIAS.csv in a folder of their own."""
    import shutil

    folder = tmp_path / "renamed"
    folder.mkdir()
    shutil.copyfile(data_dir / "SYN.csv", folder / "ALIAS.csv")
    return folder


@pytest.mark.parametrize("command", BY_CONTENT)
def test_the_same_bars_under_another_name_are_refused_as_the_tuned_ones(command, carried, data_dir, tmp_path,
                                                                       monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    monkeypatch.chdir(tmp_path)
    for argv in in_sample_cases(carried, _renamed(data_dir, tmp_path), tmp_path, "ALIAS")[command]:
        code = main(argv)
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        assert code == 2 and len(errors) == 1, (argv, errors)
        assert "ALIAS (the bars the weights were tuned on as SYN): " in errors[0], errors[0]
        assert f"on or before {UNTIL}" in errors[0], errors[0]


def test_the_same_bars_under_another_name_are_labelled_in_sample(carried, data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    (argv,) = in_sample_cases(carried, _renamed(data_dir, tmp_path), tmp_path, "ALIAS")["backtest"]
    assert main([*argv, "--allow-in-sample"]) == 0
    assert f"ALIAS: in sample: 18 of 25 windows have a decision bar on or before {UNTIL}" in " ".join(
        capsys.readouterr().out.split())
