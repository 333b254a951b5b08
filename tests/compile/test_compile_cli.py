"""``marketcast compile ...`` through the real root CLI (in process): outputs, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marketcast.commands import main
from marketcast.compile.analyze import analyze_paths
from marketcast.compile.schema import validate_report
from marketcast.data import load_symbol
from marketcast.runtime.compile_settings import load_settings
from marketcast.forecast import registry

LOGS = Path(__file__).resolve().parents[1] / "data" / "compile_logs"
SMALL = ["--context", "64", "--horizon", "5", "--samples", "16", "--batch", "2"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in ("TOTO_COMPILE", "TOTO_DISABLE_COMPILE", "TOTO_COMPILE_MODE", "KRONOS_COMPILE",
                "KRONOS_COMPILE_MODE", "TORCHDYNAMO_RECOMPILE_LIMIT", "TOTO_COMPILE_BACKEND"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("COLUMNS", "220")


def run(capsys, *args):
    code = main(["compile", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_baseline_quick_writes_valid_report(tmp_path, capsys):
    out_dir = tmp_path / "cc"
    code, out, err = run(capsys, "check", "--model", "baseline", "--mode", "quick", "--output-dir", out_dir,
                         "--env-file", tmp_path / ".env.compile", *SMALL)
    assert code == 0, err
    report = json.loads((out_dir / "compile_check.json").read_text())
    assert validate_report(report) == []
    assert [m["mode"] for m in report["modes"]] == ["eager"] and report["compile_applicable"] is False
    assert report["plan"]["iterations"] == 3 and report["plan"]["symbols"] == ["SP500", "NASDAQ"]
    assert report["modes"][0]["calls"] == 6 and report["modes"][0]["success_rate"] == 1.0
    assert sorted(report["symbol_recommendations"]) == ["NASDAQ", "SP500"]
    assert report["modes"][0]["repeat_delta_rel"] == 0.0
    assert "compile modes are not applicable" in out and "PASS eager" in out
    assert (out_dir / "compile_check.md").read_text().startswith("# Compile check: baseline (quick)")


def test_production_check_fails_with_exit_1_and_apply_writes_eager(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry.FACTORIES, "toto", "tests.compile.tiny_forecaster:create")
    env_file = tmp_path / ".env.compile"
    env_file.write_text("# mine\nADD_LATEST=1\nexport TOTO_COMPILE=1\nTOTO_COMPILE_MODE=default\n")
    code, out, err = run(capsys, "check", "--model", "toto", "--mode", "production-check", "--iterations", "2",
                         "--weights", "shift", "--output-dir", tmp_path / "cc", "--env-file", env_file,
                         "--apply", *SMALL)
    assert code == 1, err
    report = json.loads((tmp_path / "cc" / "compile_check.json").read_text())
    assert report["configured_mode"] == "default" and report["production_ok"] is False
    assert report["modes"][1]["fallback_reason"].startswith("RuntimeError: Detected recompile")
    assert "FAIL default" in out and "recommended: eager" in out
    text = env_file.read_text()
    assert text.startswith("# mine\nADD_LATEST=1\nexport TOTO_COMPILE=0\n") and "TOTO_DISABLE_COMPILE=1" in text
    assert load_settings(env={}, path=env_file).toto_compile is False


def test_check_symbols_prints_the_per_symbol_study_and_gates_come_from_flags(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry.FACTORIES, "toto", "tests.compile.tiny_forecaster:create")
    common = ["check", "--model", "toto", "--symbols", "SP500,NASDAQ", "--env-file", tmp_path / ".env.compile",
              "--max-memory-delta", "1000", *SMALL]
    code, out, err = run(capsys, *common, "--min-speedup", "0", "--output-dir", tmp_path / "a")
    assert code == 0, err
    report = json.loads((tmp_path / "a" / "compile_check.json").read_text())
    assert report["thresholds"] == {"max_output_delta": 1e-3, "max_recompiles": 0, "min_speedup": 0.0,
                                    "max_memory_delta": 1000.0}
    assert "per symbol" in out and "SP500: recommended default (" in out and "NASDAQ: recommended default (" in out
    assert {r["recommended_mode"] for r in report["symbol_recommendations"].values()} == {"default"}
    code, out, err = run(capsys, *common, "--min-speedup", "1000", "--output-dir", tmp_path / "b")
    assert code == 0, err
    report = json.loads((tmp_path / "b" / "compile_check.json").read_text())
    reason = report["symbol_recommendations"]["SP500"]["reason"]
    assert reason.startswith("no compiled mode passed on SP500 (default: speedup ") and reason.endswith(
        "(needs >= 1000))")
    assert f"SP500: recommended eager ({reason})" in out
    assert report["recommended_mode"] == "eager" and report["modes"][1]["failed_checks"] == ["speedup"]


def test_check_data_dir_studies_every_file_in_it(tmp_path, capsys):
    folder = tmp_path / "bars"
    folder.mkdir()
    for name, source in (("aaa.csv", "SP500"), ("BBB.parquet", "NASDAQ")):
        frame = load_symbol(source).frame.head(300).reset_index()
        frame.to_csv(folder / name, index=False) if name.endswith(".csv") else frame.to_parquet(folder / name)
    (folder / "notes.txt").write_text("not bars")
    with open(folder / "aaa.csv", "a") as fh:  # one line too many fields: skipped with --on-bad-line skip
        fh.write("2030-01-02,1,2,0.5,1.5,100,1,extra\n")
    code, out, err = run(capsys, "check", "--model", "baseline", "--data-dir", folder, "--iterations", "2",
                         "--asset-class", "BBB=stock", "--periods-per-year", "252", "--on-bad-line", "skip",
                         "--output-dir", tmp_path / "cc", "--env-file", tmp_path / ".env.compile", *SMALL)
    assert code == 0, err
    assert "skipped 1 malformed line" in err, err
    report = json.loads((tmp_path / "cc" / "compile_check.json").read_text())
    assert report["plan"]["symbols"] == ["AAA", "BBB"] and validate_report(report) == []
    assert all(report["modes"][0]["per_symbol"][s]["calls"] == 2 for s in ("AAA", "BBB"))
    assert "AAA: recommended eager (no compile mode was measured" in out
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, "check", "--model", "baseline", "--data-dir", tmp_path / "empty",
                         "--output-dir", tmp_path / "none", "--env-file", tmp_path / ".env.compile")
    assert code == 2 and "no .csv/.parquet/.pq files in it" in err and not (tmp_path / "none").exists()


@pytest.mark.parametrize("args,needle", [
    (["check", "--model", "toto", "--modes", "turbo"], "unknown compile mode 'turbo'"),
    (["check", "--model", "chronos"], "--model 'chronos'"),
    (["check", "--model", "baseline", "--mode", "fast"], "'--mode': 'fast' is not one of 'quick', 'full'"),
    (["check", "--model", "baseline", "--apply"], "baseline has no compile setting"),
    (["check", "--model", "baseline", "--symbols", "NOPE"], "no embedded data for 'NOPE'"),
    (["check", "--model", "baseline", "--symbols", " , "], "--symbols: give at least one symbol"),
    (["check", "--model", "baseline", "--symbols", "SP500,sp500"], "repeats a symbol"),
    (["check", "--model", "baseline", "--asset-class", "bond"], "bond"),
    (["check", "--model", "baseline", "--asset-class", "GOOG=crypto"], "GOOG is not among the symbols given"),
    (["check", "--model", "baseline", "--periods-per-year", "-252"], "-252 is not a positive number of periods"),
    (["check", "--model", "toto", "--symbols", "SP500", "--weights", "./no-such-weights"],  # eager cannot load:
     "Toto weights './no-such-weights': not a folder"),  # one line, not the IndexError of an empty report
    (["mode", "turbo"], "unknown compile mode 'turbo'"),
    (["analyze", "/nonexistent/recompile.log"], "no such log file or folder"),
])
def test_bad_input_one_line_exit_2_no_output(tmp_path, capsys, args, needle):
    out_dir = tmp_path / "cc"
    code, out, err = run(capsys, *args, *(["--output-dir", out_dir] if args[0] == "check" else []),
                         *(["--env-file", tmp_path / ".env.compile"] if args[0] in ("check", "mode") else []))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not out_dir.exists() and not (tmp_path / ".env.compile").exists()


def test_bad_env_value_exits_2(tmp_path, capsys):
    env_file = tmp_path / ".env.compile"
    env_file.write_text("TOTO_COMPILE=perhaps\n")
    code, out, err = run(capsys, "check", "--model", "baseline", "--env-file", env_file,
                         "--output-dir", tmp_path / "cc")
    assert code == 2 and "TOTO_COMPILE='perhaps'" in err and not (tmp_path / "cc").exists()


def test_enable_disable_mode_status(tmp_path, capsys, monkeypatch):
    env_file = tmp_path / ".env.compile"
    env_file.write_text("ADD_LATEST=1\n")
    assert run(capsys, "enable", "--env-file", env_file)[0] == 0  # both models, as its help says
    assert run(capsys, "mode", "max-autotune", "--model", "toto", "--env-file", env_file)[0] == 0
    assert env_file.read_text() == ("ADD_LATEST=1\nexport TOTO_COMPILE=1\nexport TOTO_DISABLE_COMPILE=0\n"
                                    "export KRONOS_COMPILE=1\nexport TOTO_COMPILE_MODE=max-autotune\n")
    assert run(capsys, "enable", "--model", "prophet", "--env-file", env_file)[0] == 2
    monkeypatch.setenv("TOTO_COMPILE_MODE", "default")
    code, out, err = run(capsys, "status", "--env-file", env_file, "--device", "cuda")
    assert code == 0
    row = next(line for line in out.splitlines() if "TOTO_COMPILE_MODE" in line)
    assert "default" in row and "env" in row and "file has max-autotune" in row
    assert "toto on cuda: compiled, mode default" in out
    code, out, err = run(capsys, "disable", "--model", "all", "--env-file", env_file)
    assert code == 0 and "KRONOS_COMPILE=0" in out
    assert load_settings(env={}, path=env_file).toto_compile is False


def test_analyze_cli_json_and_table(capsys, reference_logs):
    code, out, err = run(capsys, "analyze", LOGS / "seed_000_production.log", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["totals"]["recompile_limit"] == 1 and data["totals"]["cudagraph_skip"] == 1 and data["events"] == 2
    assert data["groups"][0]["function"] == "positional_embedding"
    assert data["causes"]["mutated_inputs"]["counts"] == {"cudagraph_skip": 1}
    code, out, err = run(capsys, "analyze", reference_logs["toto"], reference_logs["kronos"])
    assert code == 0, err
    a = analyze_paths([reference_logs["toto"], reference_logs["kronos"]])
    assert out.startswith(f"2 log file(s), {a.lines} lines: {a.totals()['frame_skipped']} frames skipped, "
                          f"{a.totals()['recompile_limit']} recompile-limit hits")
    item = a.causes()["item_call"]
    assert (f"- item_call ({item['frame_skipped']} frames skipped + {item['graph_break']} graph breaks): "
            ".item()/data-dependent") in out
    assert "frame_skipped torch_dynamo_resume_in_forward_at_329 (toto/model/transformer.py:329): dynamo " in out
    assert "k, v = kv_cache[layer_idx]" in out  # source comments are printed as text, not read as markup


def test_analyze_cli_empty_folder_exits_2(tmp_path, capsys):
    code, out, err = run(capsys, "analyze", tmp_path)
    assert code == 2 and "holds no log files" in err and len(err.strip().splitlines()) == 1
