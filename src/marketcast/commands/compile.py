"""``marketcast compile ...``: enable | disable | mode | status | check | analyze | compare.

The CLI layer of the toolkit: it parses flags and prints; the work is in the modules it imports lazily (so
``compile enable`` never imports torch).

Bad input raises :class:`~marketcast.errors.ConfigError` before anything is written; the root CLI turns it
into one line on stderr and exit code 2. ``check --mode production-check`` exits 1 when the configured mode
fails its verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from marketcast.commands import options
from marketcast.commands.help import choice_list
from marketcast.compile.thresholds import Thresholds
from marketcast.compile.toggle import TOGGLE_MODELS
from marketcast.console import console, err_console, print_json, progress_steps
from marketcast.data.asset import asset_classes
from marketcast.errors import ConfigError, ExitCode
from marketcast.runtime.settings import ENV_FILE, MODES

app = typer.Typer(no_args_is_help=True)
CHECK_MODES = ("quick", "full", "production-check")  # marketcast.compile.plan.CHECK_ITERATIONS (numpy-free)

ENV_FILE_OPT = typer.Option(Path(ENV_FILE), "--env-file", help="The settings file to edit or read.")
MODEL_OPT = typer.Option("all", "--model", "-m", callback=options.one_of(TOGGLE_MODELS),
                         metavar=choice_list(TOGGLE_MODELS), help="Whose compile setting: toto, kronos or all (both).")


def _print_switch(updates: dict[str, str], path: Path, out=console) -> None:
    from marketcast.runtime.settings import describe_sources

    out.print(f"{path}: " + ", ".join(f"{k}={v}" for k, v in updates.items()), highlight=False)
    for row in describe_sources(path=path):
        if row.key in updates and row.source == "env" and row.value != updates[row.key]:
            err_console.print(f"[yellow]note:[/yellow] {row.key}={row.value} in the environment overrides the file",
                              highlight=False)


@app.command()
def enable(model: str = MODEL_OPT, env_file: Path = ENV_FILE_OPT) -> None:
    """Turn torch.compile on: Toto (TOTO_COMPILE=1, TOTO_DISABLE_COMPILE=0) and/or Kronos (KRONOS_COMPILE=1)."""
    from marketcast.compile.toggle import set_enabled

    _print_switch(set_enabled(env_file, model, True), env_file)


@app.command()
def disable(model: str = MODEL_OPT, env_file: Path = ENV_FILE_OPT) -> None:
    """Turn torch.compile off: Toto (TOTO_COMPILE=0, TOTO_DISABLE_COMPILE=1) and/or Kronos (KRONOS_COMPILE=0)."""
    from marketcast.compile.toggle import set_enabled

    _print_switch(set_enabled(env_file, model, False), env_file)


@app.command("mode")
def set_mode_cmd(
    mode: str = typer.Argument(..., help=f"The torch.compile mode: {', '.join(MODES)}."),
    model: str = MODEL_OPT,
    env_file: Path = ENV_FILE_OPT,
) -> None:
    """Select the compile mode (TOTO_COMPILE_MODE / KRONOS_COMPILE_MODE); other lines are kept."""
    from marketcast.compile.toggle import set_mode

    _print_switch(set_mode(env_file, model, mode), env_file)


@app.command()
def status(env_file: Path = ENV_FILE_OPT, device: options.Device = "cpu"
           ) -> None:
    """Effective settings and where each came from (env, file, default)."""
    from marketcast.runtime.settings import describe_sources, load_settings

    table = Table(title=f"compile settings ({env_file}{'' if env_file.exists() else ', absent'})")
    for col in ("key", "value", "source", "note"):
        table.add_column(col)
    for row in describe_sources(path=env_file):
        note = f"file has {row.shadowed_file_value}" if row.shadowed_file_value is not None else ""
        table.add_row(row.key, row.value, row.source, note)
    console.print(table)
    settings = load_settings(path=env_file)  # raises ConfigError on a bad value, after showing where it is
    for model in ("toto", "kronos"):
        mode = settings.mode_for(model, device)
        console.print(f"{model} on {device}: {'eager' if mode is None else 'compiled, mode ' + mode}",
                      highlight=False)


def _parse_modes(text: Optional[str], device: str) -> list[str]:
    if text is None:
        return ["default", "reduce-overhead"] if device.startswith("cuda") else ["default"]
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise ConfigError(f"--modes: unknown compile mode {m!r}; use one of {', '.join(MODES)}")
    return list(dict.fromkeys(modes))


def _symbols(symbols: Optional[str], data_dir: Optional[Path]) -> list[str]:
    """--symbols as given; else every bars file in --data-dir; else the embedded SP500 and NASDAQ."""
    from marketcast.data import DEFAULT_SYMBOLS
    from marketcast.data.load import SUFFIXES

    if symbols is not None:
        names = [s.strip().upper() for s in symbols.split(",") if s.strip()]
        if not names:
            raise ConfigError("--symbols: give at least one symbol, e.g. --symbols SP500,NASDAQ")
        if len(set(names)) != len(names):
            raise ConfigError(f"--symbols: {', '.join(names)} repeats a symbol")
        return names
    if data_dir is None:
        return list(DEFAULT_SYMBOLS)
    if not data_dir.is_dir():
        raise ConfigError(f"--data-dir {data_dir}: no such folder; pass a folder of <SYMBOL>.csv/.parquet files")
    names = sorted({f.stem.upper() for f in data_dir.iterdir() if f.is_file() and f.suffix.lower() in SUFFIXES})
    if not names:
        raise ConfigError(f"--data-dir {data_dir}: no {'/'.join(SUFFIXES)} files in it; add bars or pass --symbols")
    return names


def _print_report(report: dict, title: str) -> None:
    from marketcast.compile.report import summary_rows, symbol_rows

    for rows, name in ((summary_rows(report), title), (symbol_rows(report), "per symbol")):
        table = Table(title=name)
        for col in rows[0]:
            table.add_column(col, justify="left" if col in ("symbol", "mode", "verdict") else "right")
        for r in rows:
            table.add_row(*r.values())
        console.print(table)
    for m in report["modes"]:
        why = f" - failed: {', '.join(m['failed_checks'])}" if m["failed_checks"] else ""
        colour = {"PASS": "green", "FAIL": "red"}.get(m["verdict"], "yellow")
        console.print(f"[{colour}]{m['verdict']}[/{colour}] {m['mode']}{why}", highlight=False)
        if m.get("fallback_reason"):
            console.print(f"  fell back to eager: {escape(m['fallback_reason'])}", highlight=False)
    for sym, rec in report["symbol_recommendations"].items():
        console.print(f"{sym}: recommended {rec['recommended_mode']} ({escape(rec['reason'])})", highlight=False,
                      soft_wrap=True)
    for n in report["notes"]:
        console.print(f"note: {escape(n)}", highlight=False, soft_wrap=True)


def _print_rows(result: dict, symbols: list[str]) -> None:
    """One judged mode's rows, a line each, as soon as it is judged (stdout is a log, not a terminal)."""
    from marketcast.compile.report import row_line, summary_rows, symbol_rows

    one = {"modes": [result], "plan": {"symbols": symbols}}
    for row in summary_rows(one) + symbol_rows(one):
        console.print(row_line(row), markup=False, highlight=False, soft_wrap=True)


@app.command()
def check(
    model: options.Model,
    mode: str = typer.Option("quick", "--mode", callback=options.one_of(CHECK_MODES),
                             metavar=choice_list(CHECK_MODES),
                             help="quick (3 repeats), full (10) or production-check (20; "
                             "exits 1 when the configured mode fails)."),
    iterations: Optional[int] = typer.Option(None, "--iterations", min=1,
                                             help="Repeats per symbol and mode (default: --mode's, 3, 10 or 20)."),
    modes: Optional[str] = typer.Option(None, "--modes", help="Compile modes to test, comma separated "
                                        "(default: 'default' on CPU, 'default,reduce-overhead' on CUDA)."),
    symbols: Optional[str] = typer.Option(None, "--symbols", help="Symbols to study, comma separated (default: "
                                          "every file in --data-dir, else the embedded SP500,NASDAQ)."),
    data_dir: options.DataDir = None,
    asset_class: options.AssetClass = None,
    periods_per_year: options.PeriodsPerYear = None,
    on_bad_line: options.OnBadLine = "error",
    weights: options.Weights = None,
    device: options.Device = "cpu",
    dtype: options.Dtype = "float32",
    context: options.Context = 512,
    horizon: options.Horizon = 8,
    samples: options.Samples = 64,
    batch: int = typer.Option(2, "--batch", min=1, help="Windows per forecast call; every repeat forecasts the "
                              "same windows."),
    seed: options.Seed = 0,
    max_recompiles: int = typer.Option(Thresholds.max_recompiles, "--max-recompiles", min=0,
                                       help="Gate: recompiles allowed after warm-up."),
    min_speedup: float = typer.Option(Thresholds.min_speedup, "--min-speedup", min=0.0,
                                      help="Gate: eager p50 latency / compiled p50 latency, at least."),
    max_output_delta: float = typer.Option(Thresholds.max_output_delta, "--max-output-delta", min=0.0,
                                           help="Gate: max relative difference of compiled vs eager median "
                                           "forecasts (strictly below)."),
    max_memory_delta: float = typer.Option(Thresholds.max_memory_delta, "--max-memory-delta", min=0.0,
                                           help="Gate: extra peak memory over eager, as a fraction of eager's "
                                           "footprint."),
    output_dir: Path = typer.Option(Path("out/compile_check"), "--output-dir",
                                    help="Where compile_check.json and compile_check.md are written."),
    apply: bool = typer.Option(False, "--apply", help="Write the recommended mode into --env-file."),
    start_probe: bool = typer.Option(False, "--start-probe", help="Also time cold vs warm start of each "
                                     "compiled mode in two fresh processes (persistent artifacts)."),
    env_file: Path = ENV_FILE_OPT,
    as_json: options.AsJson = False,
) -> None:
    """Stress test eager vs compile modes on each symbol's real windows; writes compile_check.json/.md, prints
    the verdicts and a recommended mode per symbol."""
    from marketcast.compile.check import run_check
    from marketcast.compile.plan import CHECK_ITERATIONS, CheckPlan
    from marketcast.compile.report import write_report
    from marketcast.data import load_symbol
    from marketcast.forecast.registry import MODEL_NAMES, load_forecaster
    from marketcast.runtime.settings import load_settings

    if model not in MODEL_NAMES:  # checked here: a factory that fails inside the check is a failed mode
        raise ConfigError(f"--model {model!r}: choose one of {', '.join(MODEL_NAMES)}")
    if mode not in CHECK_ITERATIONS:
        raise ConfigError(f"--mode {mode!r}: choose one of {', '.join(CHECK_ITERATIONS)}")
    if apply and model == "baseline":
        raise ConfigError("--apply: the baseline has no compile setting to write; use --model toto or kronos")
    settings = load_settings(path=env_file)
    compile_modes = _parse_modes(modes, device)
    configured = settings.mode_for(model, device) if model != "baseline" else None
    note = None
    if model == "baseline":
        compile_modes = []
        note = "baseline runs numpy only (no torch module): compile modes are not applicable, eager measured alone"
    elif configured is not None and configured not in compile_modes:
        compile_modes.append(configured)  # always measure what production runs now
    names = _symbols(symbols, data_dir)
    plan = CheckPlan(iterations=iterations or CHECK_ITERATIONS[mode], context=context, horizon=horizon,
                     num_samples=samples, batch=batch, seed=seed)
    thresholds = Thresholds(max_output_delta=max_output_delta, max_recompiles=max_recompiles,
                            min_speedup=min_speedup, max_memory_delta=max_memory_delta)
    classes = asset_classes(asset_class, names)
    bars = {n: load_symbol(n, data_dir=data_dir, min_rows=plan.min_rows, asset_class=classes[n.upper()],
                           periods_per_year=periods_per_year, on_bad_line=on_bad_line) for n in names}

    def factory(compile_mode: Optional[str]):
        return load_forecaster(model, weights=weights, device=device, dtype=dtype,
                               compile=compile_mode or "eager", seed=seed)

    live = console.is_terminal  # a spinner over the tables to come; else rows as they finish, for a log
    stages = (1 + len(compile_modes)) * (1 + len(names))  # each mode: loaded, then each symbol done
    with console.status("compile check") if live else progress_steps(stages, "compile check") as show:
        report = run_check(
            factory, compile_modes, bars, plan, thresholds, model=model, weights=weights, device=device,
            check_mode=mode, configured_mode=configured, compile_note=note,
            progress=show.update if live else show, on_mode=None if live or as_json else _print_rows,
        )
    if start_probe:
        from marketcast.compile.startprobe import measure_start
        from marketcast.forecast.registry import FACTORIES

        for m in report["modes"][1:]:
            with console.status(f"start probe: {m['mode']} (cold, then warm process)"):
                m["start_probe"] = measure_start(
                    FACTORIES[model], model, m["mode"], weights=weights, device=device, dtype=dtype,
                    symbol=names[0], data_dir=str(data_dir) if data_dir else None, context=context,
                    horizon=horizon, samples=samples, batch=batch, seed=seed)
    json_path, md_path = write_report(report, output_dir)
    if as_json:  # the report itself, as written to compile_check.json
        print_json(report)
    else:
        _print_report(report, f"compile check: {model} ({mode}, {plan.iterations} repeats x {len(names)} symbols, "
                              f"{device})")
    (err_console if as_json else console).print(
        f"recommended: {report['recommended_mode']}; configured: {report['configured_mode']} "
        f"({'OK' if report['production_ok'] else 'NOT OK'}); wrote {json_path} and {md_path}", highlight=False)
    if apply:
        from marketcast.compile.toggle import set_enabled, set_mode

        if report["recommended_mode"] == "eager":
            updates = set_enabled(env_file, model, False)
        else:
            updates = {**set_enabled(env_file, model, True), **set_mode(env_file, model, report["recommended_mode"])}
        _print_switch(updates, env_file, err_console if as_json else console)
    if mode == "production-check" and not report["production_ok"]:
        raise typer.Exit(ExitCode.CHECK_FAILED)


def _short(path: str | None) -> str:
    """A location without its site-packages prefix (the table is for reading; --json keeps full paths)."""
    return (path or "").split("site-packages/")[-1]


@app.command()
def analyze(
    logs: list[Path] = typer.Argument(..., help="Logs captured with TORCH_LOGS=recompiles,graph_breaks: files "
                                      "and/or folders (every file in a folder); events are grouped across them."),
    as_json: options.AsJson = False,
) -> None:
    """Group recompiles, recompile-limit hits, skipped frames, graph breaks and CUDA-graph skips; a fix per cause."""
    from marketcast.compile.analyze import KINDS, analyze_paths
    from marketcast.compile.causes import FIXES

    result = analyze_paths(logs)
    if as_json:
        print_json(result.to_dict())
        return
    totals = result.totals()
    replaced = f" ({result.undecodable} undecodable byte sequences replaced)" if result.undecodable else ""
    console.print(f"{len(result.sources)} log file(s), {result.lines} lines{replaced}: "
                  + ", ".join(f"{n} {KINDS[k]}" for k, n in totals.items()), highlight=False)
    if not result.groups:
        console.print("no recompiles, graph breaks or CUDA-graph skips found "
                      "(was the log captured with TORCH_LOGS=recompiles,graph_breaks?)")
        return
    table = Table(title="grouped by kind, place and guard (most severe first)")
    for col in ("kind", "where", "guard / reason", "count", "cause"):
        table.add_column(col, overflow="fold")
    for g in result.groups:
        count = f"{g.count} ({g.instances} inst.)" if g.kind == "cudagraph_skip" else str(g.count)
        kind = f"{g.kind} ({g.limit})" if g.limit else g.kind
        where = escape(f"{g.function or '?'} {_short(g.location)}".strip())
        text = "\n".join([escape(g.pattern)] + [f"[dim]{escape(x)}[/dim]" for x in (g.detail, g.context) if x])
        table.add_row(kind, where, text, count, g.cause)
    console.print(table)
    for g in result.groups:
        if g.effect:
            console.print(f"[red]{g.kind}[/red] {escape(g.function or '?')} ({escape(_short(g.location))}): {g.effect}",
                          highlight=False)
    console.print("fixes:")
    for cause, per_kind in result.causes().items():
        counts = " + ".join(f"{n} {KINDS[k]}" for k, n in per_kind.items())
        console.print(f"- {cause} ({counts}): {FIXES[cause]}", highlight=False)


@app.command()
def compare(
    a: Path = typer.Argument(..., help="Backtest JSON (e.g. eager)."),
    b: Path = typer.Argument(..., help="Backtest JSON (e.g. compiled)."),
    as_json: options.AsJson = False,
) -> None:
    """Compare two backtest JSONs per symbol and strategy: return delta > 0.05 FAIL, > 0.01 WARN."""
    from marketcast.compile.compare import compare_files

    print_comparison(compare_files(a, b), f"{a.name} vs {b.name}", as_json)


def print_comparison(result: dict, title: str, as_json: bool = False) -> None:
    """A comparison of backtests (``compare_backtests``' result) as JSON or a table; exit 1 on FAIL."""
    if as_json:
        print_json(result)
    else:
        table = Table(title=title)
        for col in ("symbol", "strategy", "return A", "return B", "Δ return", "Δ sharpe", "status"):
            table.add_column(col, justify="left" if col in ("symbol", "strategy", "status") else "right")
        for r in result["rows"]:
            colour = {"PASS": "green", "WARN": "yellow", "FAIL": "red"}[r["status"]]
            table.add_row(r["symbol"], r["strategy"], _num(r["return_a"]), _num(r["return_b"]),
                          _num(r["return_delta"]), _num(r["sharpe_delta"]), f"[{colour}]{r['status']}[/{colour}]")
        console.print(table)
        for sym, metrics in result["metric_deltas"].items():
            if metrics:
                console.print(f"{sym} metric deltas (B - A): "
                              + ", ".join(f"{k} {_num(v)}" for k, v in metrics.items()), highlight=False)
        for n in result["notes"]:
            console.print(f"note: {n}", highlight=False)
        console.print(f"overall: {result['status']}", highlight=False)
    if result["status"] == "FAIL":
        raise typer.Exit(1)


def _num(v) -> str:
    return "–" if v is None else f"{v:+.4f}" if isinstance(v, float) else str(v)
