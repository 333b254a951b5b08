"""``marketcast report RUN``: a stored run's reports again, with its HTML tearsheet.

The one command that re-makes reports from the run store: JSON, Markdown, trades.csv and (``--plots``) the PNGs through
the backtest's own writer (byte for byte what ``marketcast backtest`` wrote), and ``report.html`` equal to
what ``marketcast backtest --html`` wrote for the same run. They go into the run's own folder under
``--output-dir`` (``out/report/<run id>/``, with ``out/report/latest`` linking it), replaced whole when the run is
reported again (:func:`marketcast.fileio.run_folder`), and the pages share one Plotly file in that root. A run with
grid axes (a sweep) gets a sub-folder per grid point; a ``models compare`` run's pages open with a verdict strip row per model (its leaderboard table
follows the symbols). The page draws the fans the run stored;
only fans it lacks (another ``--fan-date``, a run recorded before fans were stored) are forecast here, by the run's
model, and handed to the report as data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Callable, Optional

import typer

from marketcast.commands import options
from marketcast.commands.runs import RUN_ARG, STORE_OPT, open_store
from marketcast.console import console, print_json
from marketcast.errors import ConfigError
from marketcast.fileio import LATEST, check_root, run_folder
from marketcast.report.paging import TRADES_PER_PAGE

DEFAULT_OUTPUT = Path("out/report")


def leaderboard_rows(info: dict) -> list[dict]:
    """The rows a ``models compare`` run keeps in its ``run.json`` (none for other runs)."""
    rows = (info.get("spec") or {}).get("leaderboard") if info.get("kind") == "leaderboard" else None
    return rows if isinstance(rows, list) else []


def leaderboard_benchmark(info: dict) -> dict | None:
    """Buy and hold's row of a ``models compare`` run (None for other runs and runs stored before it)."""
    found = (info.get("spec") or {}).get("benchmark") if info.get("kind") == "leaderboard" else None
    return found if isinstance(found, dict) else None


def leaderboard_skipped(info: dict) -> list[dict]:
    """The models ``models compare --skip-missing`` left out of a run ({model, reason}; none for other runs)."""
    found = (info.get("spec") or {}).get("skipped") if info.get("kind") == "leaderboard" else None
    return found if isinstance(found, list) else []


def fan_forecaster() -> Callable:
    """The fans a stored run lacks (another ``--fan-date``, a run recorded before fans were stored), from the
    cell's own model loaded again with the run's options (each model once): the report layer only draws."""
    from marketcast.backtest.fans import result_fans
    from marketcast.forecast.registry import load_forecaster
    from marketcast.runs.cells import MODEL_OPTIONS, Cell
    from marketcast.runs.overview import plain

    loaded: dict[tuple, object] = {}

    def forecast(row, result, bars, dates):
        given = {name: plain(row.get(name)) for name in MODEL_OPTIONS}
        cell = Cell(symbol=result.symbol, config=result.config, **given)
        if cell.model_key not in loaded:
            loaded[cell.model_key] = load_forecaster(**cell.model_options())
        return result_fans(loaded[cell.model_key], result, bars, dates)

    return forecast


def _write_folder(root: Path, run_id: str, results: dict, pages: dict, plots: bool, by_model: bool,
                  out: Path) -> list[Path]:
    """Every report of the run into ``root/<run id>/`` all or nothing (:func:`marketcast.fileio.run_folder`),
    pages beside their JSON; the paths as ``out`` (the folder as the user named it) will hold them."""
    from marketcast.backtest.report import write_outputs
    from marketcast.report.page import write_page
    from marketcast.report.tearsheet import PAGE_NAME
    from marketcast.runs.remake import folder

    staged = []
    with run_folder(root, run_id, ConfigError) as stage:
        for key, group in results.items():
            staged += write_outputs(group, folder(stage.path, key, by_model), plots)
            if key in pages:
                staged.append(folder(stage.path, key, by_model) / PAGE_NAME)
                write_page(staged[-1], pages[key], bundle_dir=root)
        stage.commit()
    return [out / path.relative_to(stage.path) for path in staged]


def report(
    run: str = RUN_ARG,
    symbol: Annotated[Optional[str], typer.Argument(help="Only this symbol's reports (only its records are "
                                                         "read).")] = None,
    output_dir: Annotated[Path, typer.Option(
        "--output-dir", "-o", help=f"Root of the run folders: the reports go into ROOT/<run id>/, and ROOT/latest "
                                   f"links it (default: {DEFAULT_OUTPUT}).")] = DEFAULT_OUTPUT,
    html: Annotated[bool, typer.Option(
        "--html/--no-html", help="Write the HTML tearsheet, report.html (with the fans the run stored; another "
                                 "--fan-date loads the run's model again).")] = True,
    fan_date: options.FanDates = None,
    trades_per_page: options.TradesPerPage = TRADES_PER_PAGE,
    plots: options.Plots = False,
    store: Optional[Path] = STORE_OPT,
    as_json: options.AsJson = False,
) -> None:
    """Re-make a run's reports from the run store: report.html, JSON, Markdown, trades.csv and PNGs."""
    from marketcast.backtest.fans import parse_dates
    from marketcast.runs.remake import cell_results

    dates = parse_dates(fan_date)
    if dates and not html:
        raise ConfigError("--fan-date draws a fan in the HTML tearsheet; drop --no-html")
    runs = open_store(store)
    with runs.one_warning():  # the store is read here, and only here
        run_id = runs.open_run(run)
        root = check_root(output_dir, "--output-dir")
        info = runs.info(run_id)
        pages = {}
        if html:  # every page drawn before any file is written
            from marketcast.report.stored import stored_reports
            from marketcast.report.tearsheet import tearsheet_html

            groups = stored_reports(runs, run_id, fan_forecaster(), dates, symbol=symbol)
            board, benchmark = leaderboard_rows(info), leaderboard_benchmark(info)
            pages = {key: tearsheet_html(reps, board, benchmark, trades_per_page, list(groups.values()),
                                         leaderboard_skipped(info))
                     for key, reps in groups.items()}
            results = {key: [rep.result for rep in reps] for key, reps in groups.items()}
        else:
            results = {key: [result for _, result in group]
                       for key, group in cell_results(runs, run_id, symbol).items()}
    if not results:
        what = f"no finished cell of {symbol}" if symbol is not None else "no finished cells"
        raise ConfigError(f"run {run_id} has {what}; there is nothing to report")
    out = output_dir / run_id
    written = _write_folder(root, run_id, results, pages, plots, info.get("kind") == "leaderboard", out)
    if as_json:  # src/marketcast/schemas/report.schema.json
        print_json({"run_id": run_id, "out": str(out), "files": [str(p) for p in written],
                    "tearsheets": [str(p) for p in written if p.suffix == ".html"]})
        return
    console.print(f"wrote {len(written)} files of {run_id} to {out}/ ({output_dir / LATEST} links it)",
                  highlight=False, markup=False, soft_wrap=True)
    for path in written:
        if path.suffix == ".html":
            console.print(f"tearsheet: {path}", highlight=False)
