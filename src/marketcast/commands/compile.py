"""``marketcast compile ...``: enable | disable | mode | status | check | analyze | compare.

The CLI layer of the toolkit: it parses flags and prints; the work is in the modules it imports lazily (so
``compile enable`` never imports torch).

Bad input raises :class:`~marketcast.errors.ConfigError` before anything is written; the root CLI turns it
into one line on stderr and exit code 2. ``check --mode production-check`` exits 1 when the configured mode
fails its verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from marketcast.commands import options
from marketcast.commands.help import choice_list
from marketcast.compile.thresholds import Thresholds
from marketcast.compile.toggle import TOGGLE_MODELS
from marketcast.console import console, err_console, print_json
from marketcast.errors import ExitCode
from marketcast.runtime.compile_settings import ENV_FILE, MODES

app = typer.Typer(no_args_is_help=True)
CHECK_MODES = ("quick", "full", "production-check")  # marketcast.compile.plan.CHECK_ITERATIONS (numpy-free)

ENV_FILE_OPT = typer.Option(Path(ENV_FILE), "--env-file", help="The settings file to edit or read.")
MODEL_OPT = typer.Option("all", "--model", "-m", callback=options.one_of(TOGGLE_MODELS),
                         metavar=choice_list(TOGGLE_MODELS), help="Whose compile setting: toto, kronos or all (both).")


def _print_switch(updates: dict[str, str], path: Path, as_json: bool = False) -> None:
    """The lines written to ``path``; a setting the environment overrides is a note on stderr (and, with --json,
    in ``overridden``: src/marketcast/schemas/compile_switch.schema.json)."""
    from marketcast.runtime.compile_settings import describe_sources

    overridden = {row.key: row.value for row in describe_sources(path=path)
                  if row.key in updates and row.source == "env" and row.value != updates[row.key]}
    if as_json:
        print_json({"file": str(path), "updates": updates, "overridden": overridden})
    else:
        console.print(f"{path}: " + ", ".join(f"{k}={v}" for k, v in updates.items()), highlight=False)
    for key, value in overridden.items():
        err_console.print(f"[yellow]note:[/yellow] {key}={value} in the environment overrides the file",
                          highlight=False)


@app.command()
def enable(model: str = MODEL_OPT, env_file: Path = ENV_FILE_OPT, as_json: options.AsJson = False) -> None:
    """Turn torch.compile on: Toto (TOTO_COMPILE=1, TOTO_DISABLE_COMPILE=0) and/or Kronos (KRONOS_COMPILE=1)."""
    from marketcast.compile.toggle import set_enabled

    _print_switch(set_enabled(env_file, model, True), env_file, as_json)


@app.command()
def disable(model: str = MODEL_OPT, env_file: Path = ENV_FILE_OPT, as_json: options.AsJson = False) -> None:
    """Turn torch.compile off: Toto (TOTO_COMPILE=0, TOTO_DISABLE_COMPILE=1) and/or Kronos (KRONOS_COMPILE=0)."""
    from marketcast.compile.toggle import set_enabled

    _print_switch(set_enabled(env_file, model, False), env_file, as_json)


@app.command("mode")
def set_mode_cmd(
    mode: str = typer.Argument(..., help=f"The torch.compile mode: {', '.join(MODES)}."),
    model: str = MODEL_OPT,
    env_file: Path = ENV_FILE_OPT,
    as_json: options.AsJson = False,
) -> None:
    """Select the compile mode (TOTO_COMPILE_MODE / KRONOS_COMPILE_MODE); other lines are kept."""
    from marketcast.compile.toggle import set_mode

    _print_switch(set_mode(env_file, model, mode), env_file, as_json)


@app.command()
def status(env_file: Path = ENV_FILE_OPT, device: options.Device = "cpu", as_json: options.AsJson = False
           ) -> None:
    """Effective settings and where each came from (env, file, default)."""
    from marketcast.runtime.compile_settings import describe_sources, load_settings

    if as_json:
        settings = load_settings(path=env_file)
        print_json({"file": str(env_file), "exists": env_file.exists(), "device": device,
                    "settings": [{"key": r.key, "value": r.value, "source": r.source,
                                  "file_value": r.shadowed_file_value} for r in describe_sources(path=env_file)],
                    "modes": {m: settings.mode_for(m, device) for m in ("toto", "kronos")}})
        return
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


CheckMode = Annotated[str, typer.Option(
    "--mode", callback=options.one_of(CHECK_MODES), metavar=choice_list(CHECK_MODES),
    help="quick (3 repeats), full (10) or production-check (20; exits 1 when the configured mode fails).")]
Iterations = Annotated[Optional[int], typer.Option(
    "--iterations", min=1, help="Repeats per symbol and mode (default: --mode's, 3, 10 or 20).")]
Modes = Annotated[Optional[str], typer.Option("--modes", help="Compile modes to test, comma separated "
                                              "(default: 'default' on CPU, 'default,reduce-overhead' on CUDA).")]
Symbols = Annotated[Optional[str], typer.Option("--symbols", help="Symbols to study, comma separated (default: "
                                                "every file in --data-dir, else the embedded SP500,NASDAQ).")]
Batch = Annotated[int, typer.Option("--batch", min=1, help="Windows per forecast call; every repeat forecasts the "
                                    "same windows.")]
MaxRecompiles = Annotated[int, typer.Option("--max-recompiles", min=0, help="Gate: recompiles allowed after warm-up.")]
MinSpeedup = Annotated[float, typer.Option("--min-speedup", min=0.0,
                                           help="Gate: eager p50 latency / compiled p50 latency, at least.")]
MaxOutputDelta = Annotated[float, typer.Option(
    "--max-output-delta", min=0.0,
    help="Gate: max relative difference of compiled vs eager median forecasts (strictly below).")]
MaxMemoryDelta = Annotated[float, typer.Option(
    "--max-memory-delta", min=0.0, help="Gate: extra peak memory over eager, as a fraction of eager's footprint.")]
OutputDir = Annotated[Path, typer.Option("--output-dir",
                                         help="Where compile_check.json and compile_check.md are written.")]
Apply = Annotated[bool, typer.Option("--apply", help="Write the recommended mode into --env-file.")]
StartProbe = Annotated[bool, typer.Option("--start-probe", help="Also time cold vs warm start of each compiled "
                                          "mode in two fresh processes (persistent artifacts).")]
DEFAULT_GATES = Thresholds()


@app.command()
def check(
    model: options.Model, mode: CheckMode = "quick", iterations: Iterations = None, modes: Modes = None,
    symbols: Symbols = None, data_dir: options.DataDir = None, asset_class: options.AssetClass = None,
    periods_per_year: options.PeriodsPerYear = None, on_bad_line: options.OnBadLine = "error",
    weights: options.Weights = None, device: options.Device = "cpu", dtype: options.Dtype = "float32",
    context: options.Context = 512, horizon: options.Horizon = 8, samples: options.Samples = 64,
    batch: Batch = 2, seed: options.Seed = 0,
    max_recompiles: MaxRecompiles = DEFAULT_GATES.max_recompiles, min_speedup: MinSpeedup = DEFAULT_GATES.min_speedup,
    max_output_delta: MaxOutputDelta = DEFAULT_GATES.max_output_delta,
    max_memory_delta: MaxMemoryDelta = DEFAULT_GATES.max_memory_delta,
    output_dir: OutputDir = Path("out/compile_check"), apply: Apply = False, start_probe: StartProbe = False,
    env_file: Path = ENV_FILE_OPT, as_json: options.AsJson = False,
) -> None:
    """Stress test eager vs compile modes on each symbol's real windows; writes compile_check.json/.md, prints
    the verdicts and a recommended mode per symbol."""
    from marketcast.compile.stress import CheckRequest, stress_check

    from marketcast.fileio import check_writable, refuse_special

    check_writable(output_dir, "--output-dir")  # a file, a FIFO or a device there: exit 3 before the stress runs
    if apply:
        refuse_special(env_file, "--env-file")
    gates = Thresholds(max_output_delta=max_output_delta, max_recompiles=max_recompiles, min_speedup=min_speedup,
                       max_memory_delta=max_memory_delta)
    outcome = stress_check(CheckRequest(
        model, mode, iterations, modes, symbols, data_dir, asset_class, periods_per_year, on_bad_line, weights,
        device, dtype, context, horizon, samples, batch, seed, gates, output_dir, apply, start_probe, env_file,
    ), on_mode=None if as_json else _print_rows)
    report = outcome.report
    if as_json:  # the report itself, as written to compile_check.json
        print_json(report)
    else:
        plan = report["plan"]
        _print_report(report, f"compile check: {model} ({mode}, {plan['iterations']} repeats x "
                              f"{len(plan['symbols'])} symbols, {device})")
    (err_console if as_json else console).print(
        f"recommended: {report['recommended_mode']}; configured: {report['configured_mode']} "
        f"({'OK' if report['production_ok'] else 'NOT OK'}); wrote {outcome.json_path} and {outcome.md_path}",
        highlight=False)
    if outcome.applied is not None:
        _print_switch(outcome.applied, env_file, err_console if as_json else console)
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
