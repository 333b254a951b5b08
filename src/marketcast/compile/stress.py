"""``marketcast compile check``'s work, from its options to the written report: which modes and symbols, the
bars, the stress run (:func:`marketcast.compile.check.run_check`), the optional start probe, compile_check.json
and .md, and with ``apply`` the recommended mode written into the settings file.

Kept out of the command so the command only parses and prints, and so the whole check runs without the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from marketcast.compile.plan import CHECK_ITERATIONS, CheckPlan
from marketcast.compile.thresholds import Thresholds
from marketcast.console import console, progress_steps
from marketcast.data.asset import asset_classes
from marketcast.errors import ConfigError
from marketcast.runtime.compile_settings import ENV_FILE, MODES


@dataclass(frozen=True)
class CheckRequest:
    """What ``compile check`` was asked: the model, the check's size, the bars, and the gates."""

    model: str
    mode: str = "quick"  # quick | full | production-check
    iterations: Optional[int] = None  # default: the mode's
    modes: Optional[str] = None  # comma separated compile modes; default: by device
    symbols: Optional[str] = None  # comma separated; default: every file in data_dir, else the embedded
    data_dir: Optional[Path] = None
    asset_class: Optional[list[str]] = None
    periods_per_year: Optional[float] = None
    on_bad_line: str = "error"
    weights: Optional[str] = None
    device: str = "cpu"
    dtype: str = "float32"
    context: int = 512
    horizon: int = 8
    samples: int = 64
    batch: int = 2
    seed: int = 0
    thresholds: Thresholds = Thresholds()
    output_dir: Path = Path("out/compile_check")
    apply: bool = False
    start_probe: bool = False
    env_file: Path = Path(ENV_FILE)  # read for the configured mode; written by apply


@dataclass(frozen=True)
class CheckOutcome:
    """The report (as written to compile_check.json), where it went, and the settings ``apply`` wrote."""

    report: dict
    json_path: Path
    md_path: Path
    applied: Optional[dict[str, str]]  # None unless asked to apply


def parse_modes(text: Optional[str], device: str) -> list[str]:
    """``--modes`` as a list without repeats; default: ``default``, plus ``reduce-overhead`` on CUDA."""
    if text is None:
        return ["default", "reduce-overhead"] if device.startswith("cuda") else ["default"]
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise ConfigError(f"--modes: unknown compile mode {m!r}; use one of {', '.join(MODES)}")
    return list(dict.fromkeys(modes))


def symbols_to_check(symbols: Optional[str], data_dir: Optional[Path]) -> list[str]:
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


def _refuse(request: CheckRequest) -> None:
    from marketcast.forecast.registry import MODEL_NAMES

    if request.model not in MODEL_NAMES:  # checked here: a factory that fails inside the check is a failed mode
        raise ConfigError(f"--model {request.model!r}: choose one of {', '.join(MODEL_NAMES)}")
    if request.mode not in CHECK_ITERATIONS:
        raise ConfigError(f"--mode {request.mode!r}: choose one of {', '.join(CHECK_ITERATIONS)}")
    if request.apply and request.model == "baseline":
        raise ConfigError("--apply: the baseline has no compile setting to write; use --model toto or kronos")


def _probe_starts(report: dict, request: CheckRequest, symbol: str) -> None:
    """Each compiled mode's cold and warm start, in two fresh processes, into its result."""
    from marketcast.compile.startprobe import measure_start
    from marketcast.forecast.registry import FACTORIES

    r = request
    for m in report["modes"][1:]:
        with console.status(f"start probe: {m['mode']} (cold, then warm process)"):
            m["start_probe"] = measure_start(
                FACTORIES[r.model], r.model, m["mode"], weights=r.weights, device=r.device, dtype=r.dtype,
                symbol=symbol, data_dir=str(r.data_dir) if r.data_dir else None, context=r.context,
                horizon=r.horizon, samples=r.samples, batch=r.batch, seed=r.seed)


def _apply(report: dict, model: str, env_file: Path) -> dict[str, str]:
    from marketcast.compile.toggle import set_enabled, set_mode

    if report["recommended_mode"] == "eager":
        return set_enabled(env_file, model, False)
    return {**set_enabled(env_file, model, True), **set_mode(env_file, model, report["recommended_mode"])}


def stress_check(request: CheckRequest, on_mode: Callable[[dict, list[str]], None] | None = None) -> CheckOutcome:
    """Stress test eager vs compile modes on each symbol's real windows and write the report (a spinner on a
    terminal, else a step per line); ``on_mode`` hears of each mode as soon as it is judged."""
    from marketcast.compile.check import run_check
    from marketcast.compile.report import write_report
    from marketcast.data import load_symbol
    from marketcast.forecast.registry import load_forecaster
    from marketcast.runtime.compile_settings import load_settings

    r = request
    _refuse(r)
    settings = load_settings(path=r.env_file)
    compile_modes = parse_modes(r.modes, r.device)
    configured = settings.mode_for(r.model, r.device) if r.model != "baseline" else None
    note = None
    if r.model == "baseline":
        compile_modes = []
        note = "baseline runs numpy only (no torch module): compile modes are not applicable, eager measured alone"
    elif configured is not None and configured not in compile_modes:
        compile_modes.append(configured)  # always measure what production runs now
    names = symbols_to_check(r.symbols, r.data_dir)
    plan = CheckPlan(iterations=r.iterations or CHECK_ITERATIONS[r.mode], context=r.context, horizon=r.horizon,
                     num_samples=r.samples, batch=r.batch, seed=r.seed)
    classes = asset_classes(r.asset_class, names)
    bars = {n: load_symbol(n, data_dir=r.data_dir, min_rows=plan.min_rows, asset_class=classes[n.upper()],
                           periods_per_year=r.periods_per_year, on_bad_line=r.on_bad_line) for n in names}

    def factory(compile_mode: Optional[str]):
        return load_forecaster(r.model, weights=r.weights, device=r.device, dtype=r.dtype,
                               compile=compile_mode or "eager", seed=r.seed)

    live = console.is_terminal  # a spinner over the tables to come; else rows as they finish, for a log
    stages = (1 + len(compile_modes)) * (1 + len(names))  # each mode: loaded, then each symbol done
    with console.status("compile check") if live else progress_steps(stages, "compile check") as show:
        report = run_check(
            factory, compile_modes, bars, plan, r.thresholds, model=r.model, weights=r.weights, device=r.device,
            check_mode=r.mode, configured_mode=configured, compile_note=note,
            progress=show.update if live else show, on_mode=None if live else on_mode,
        )
    if r.start_probe:
        _probe_starts(report, r, names[0])
    json_path, md_path = write_report(report, r.output_dir)
    return CheckOutcome(report, json_path, md_path, _apply(report, r.model, r.env_file) if r.apply else None)
