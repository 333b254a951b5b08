"""What ``trade run`` can be told, declared once: each setting's default, flag and help. Layered by
:mod:`marketcast.settings`: defaults < ``marketcast.toml`` ``[trade]`` < ``.env.compile`` < environment
(``MARKETCAST_TRADE_<KEY>``, and ``ADD_LATEST``) < flags. A ``marketcast.toml``::

    [trade]
    symbols = ["ETHUSD", "SP500"]
    broker = "alpaca"
    model = ["toto", "kronos", "baseline"]   # the first that loads and warms up
    dtype = "bfloat16"

    [trade.strategy]        # pinned: traded whatever the walk-forward pick
    ETHUSD = "maxdiff"

    [trade.risk]
    max_daily_loss = 0.03

    [trade.sizing]          # how much of each allowed order: the backtest's --sizing
    policy = "kelly"
    kelly_fraction = 0.25

    [trade.alerts]
    webhook = "https://ntfy.example.invalid/your-secret-topic"   # shown as https://ntfy.example.invalid/*** everywhere
"""

from __future__ import annotations

from dataclasses import replace

from marketcast.backtest.config import STRATEGY_NAMES, BacktestConfig
from marketcast.backtest.costs import defaults_text
from marketcast.backtest.execution import DEFAULT_EXIT, EXIT_RULES
from marketcast.backtest.selection import DEFAULT_LOOKBACK, DEFAULT_MIN_TRADES, SelectionRule
from marketcast.backtest.sizing import POLICIES
from marketcast.commands import options
from marketcast.data.asset import ASSET_CLASSES
from marketcast.data.load import ON_DUPLICATE
from marketcast.forecast.registry import MODEL_NAMES
from marketcast.settings import Setting, Settings, boolean, choice, items, number, optional, pairs, text
from marketcast.trade.ops.alerts import AlertThresholds
from marketcast.trade.ops.redact import redact_secret
from marketcast.trade.risk.freshness import Freshness
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.risk.limits import RiskLimits
from marketcast.trade.risk.portfolio import PortfolioConfig
from marketcast.trade.start import TradeRules

SECTION = "trade"
OFF = " (0: no limit)"


def symbol(raw) -> str:
    value = text(raw).upper()
    if not all(c.isalnum() or c in "/-._=" for c in value):
        raise ValueError(f"{value!r} is not a symbol")
    return value


def asset_entry(raw) -> str:
    """``CLASS`` (every symbol) or ``SYMBOL=CLASS`` (one), as the backtest's ``--asset-class`` takes them."""
    value = text(raw)
    name, _, cls = value.rpartition("=")
    if cls.strip().lower() not in ASSET_CLASSES:
        raise ValueError(f"{value!r}: the class is not one of {', '.join(ASSET_CLASSES)}")
    return f"{symbol(name)}={cls.strip().lower()}" if name else cls.strip().lower()


def positive(raw) -> float:
    value = number(0.0)(raw)
    if value <= 0:
        raise ValueError("not a positive number")
    return value


def unit_fraction(raw) -> float:
    """A fraction in (0, 1]."""
    value = number(0.0, 1.0)(raw)
    if value <= 0:
        raise ValueError("not in (0, 1]")
    return value


def url(raw) -> str:
    value = text(raw)
    if not value.startswith(("http://", "https://")):
        raise ValueError("not an http:// or https:// URL")
    return value


def _defaults(cls) -> dict:
    return {k: getattr(cls(), k) for k in cls.__dataclass_fields__}


G, P, R, F, A = (_defaults(c) for c in (GateConfig, PortfolioConfig, RiskLimits, Freshness, AlertThresholds))
FRACTION = number(0.0, 1.0)

SETTINGS = (
    Setting("symbols", ("SP500", "NASDAQ"), items(symbol), "Symbols to trade, comma separated.", "--symbols",
            shown="SP500,NASDAQ"),
    Setting("broker", "paper", choice("paper", "alpaca"), "paper (the embedded broker) or alpaca.", "--broker"),
    Setting("state_dir", "out/trade", text, "Folder for broker.db, journal.db, records.jsonl, alerts.jsonl, "
            "trade.log (owner-only).", "--state-dir", metavar="PATH"),
    Setting("data_dir", None, optional(text), options.help_of(options.DataDir) + " The paper broker re-reads "
            "a file that grows.", "--data-dir", metavar="PATH"),
    Setting("data.on_duplicate", "error", choice(*ON_DUPLICATE), options.help_of(options.OnDuplicate),
            "--on-duplicate", metavar=options.choice_list(ON_DUPLICATE)),
    Setting("data.asset_class", None, optional(items(asset_entry)), options.help_of(options.AssetClass),
            "--asset-class", list[str], shown="from the bar times", metavar="CLASS|SYMBOL=CLASS"),
    Setting("data.periods_per_year", None, optional(positive), options.help_of(options.PeriodsPerYear),
            "--periods-per-year", float, shown="from the bars"),
    Setting("model", ("baseline",), items(choice(*MODEL_NAMES)), options.help_of(options.Model) + " Or a "
            "fallback chain such as toto,kronos,baseline: a model that fails to load or warm up is logged, recorded "
            "and skipped.", "--model -m", shown="baseline", metavar="MODEL[,MODEL...]"),
    Setting("weights", None, optional(text), options.help_of(options.Weights), "--weights", shown="auto"),
    Setting("device", "cpu", options.check_device, options.help_of(options.Device), "--device"),
    Setting("dtype", "float32", choice(*options.DTYPES), options.help_of(options.Dtype), "--dtype",
            metavar=options.choice_list(options.DTYPES)),
    Setting("seed", 0, number(0, options.MAX_SEED, integer=True), options.help_of(options.Seed), "--seed", int),
    Setting("strategy", {}, pairs(symbol, choice(*STRATEGY_NAMES)), "Pin a strategy to a symbol, SYMBOL=NAME "
            f"(repeatable; {', '.join(STRATEGY_NAMES)}): it is traded whatever the walk-forward pick.",
            "--strategy", list[str], shown="none (the walk-forward pick)", metavar="SYMBOL=NAME"),
    Setting("selection.min_trades", DEFAULT_MIN_TRADES, number(1, DEFAULT_LOOKBACK, integer=True), "The walk-forward "
            f"pick: a strategy needs this many trades in the last {DEFAULT_LOOKBACK} windows to be picked (the "
            "backtest's --min-trades; its rule, marketcast.backtest.selection).", "--min-trades", int),
    Setting("sizing.policy", "fixed", choice(*POLICIES), "How much of each order the portfolio allows: fixed (all "
            "of it), kelly or cvar from the forecast's samples and the skill measured on the planner's settled windows "
            "(the backtest's --sizing; marketcast.backtest.sizing); the risk limits still cap it.", "--sizing",
            metavar=options.choice_list(POLICIES)),
    Setting("sizing.kelly_cap", 1.0, unit_fraction, "kelly sizing: the largest fraction, in (0, 1] (the "
            "backtest's --kelly-cap).", "--kelly-cap", float),
    Setting("sizing.kelly_fraction", 0.25, unit_fraction, "kelly sizing: the fraction of the Kelly size b* mu / "
            "sigma^2 taken, in (0, 1] (the backtest's --kelly-fraction).", "--kelly-fraction", float),
    Setting("sizing.risk_per_trade", 0.01, unit_fraction, "cvar and kelly sizing: the equity fraction a trade's 95% "
            "tail may lose, in (0, 1] (the backtest's --risk-per-trade).", "--risk-per-trade", float),
    Setting("exit", DEFAULT_EXIT, choice(*EXIT_RULES), "Where a position leaves (the backtest's --exit; "
            "docs/trading.md#exit-rule): close = a stock on daily bars at its entry's session close by a "
            "market-on-close (cls) order, next-open = at the next decision, queued to the next open; 24/7 bars at "
            "the next bar's open either way. A state folder keeps the rule it was made with.", "--exit",
            metavar=options.choice_list(EXIT_RULES)),
    Setting("hold", False, boolean, "Hold a position while the next decision stays on its side, its take-profit "
            "resting, bought up beyond a 10% band (the backtest's --hold; docs/trading.md#holding): costs only when "
            "the position changes. The paper broker then holds as Alpaca does. A state folder keeps the setting it "
            "was made with.", "--hold/--no-hold", bool),
    Setting("add_latest", None, optional(boolean), "Real bid/ask from the broker: the mid replaces the last "
            "close, the spread goes into the costs.", "--add-latest/--no-add-latest", bool, env=("ADD_LATEST",),
            shown="auto: on when the broker has quotes (alpaca); the paper broker's are synthetic"),
    Setting("interval_s", 60.0, number(0.01), "Seconds between two looks at the market in a continuous run.",
            "--interval", float),
    Setting("fee", None, optional(number(*options.FEE_RANGE)), "Fee per side as a fraction, the cost the planner "
            "assumes.", "--fee", float, shown=f"per asset class, spread and slippage on top: {defaults_text()}",
            bounds=options.FEE_RANGE),
    Setting("gates.min_edge", G["min_edge"], number(-1.0, 1.0), "Entry gate: expected return after costs.",
            "--min-edge", float),
    Setting("gates.min_sharpe", G["min_sharpe"], number(), "Entry gate: the pick's walk-forward Sharpe must "
            "exceed this.", "--min-sharpe", float),
    Setting("gates.max_drawdown", G["max_drawdown"], number(0.0, 1.01), "Entry gate: walk-forward drawdown must "
            "stay below this.", "--max-drawdown", float),
    Setting("gates.min_dollar_volume", G["min_dollar_volume"], number(0.0), "Entry gate: mean close x volume "
            "of the last 20 bars.", "--min-dollar-volume", float),
    Setting("gates.require_quote", G["require_quote"], boolean, "With ADD_LATEST on a broker that has quotes: "
            "no entry without a real quote.", "--require-quote/--no-require-quote", bool),
    Setting("portfolio.max_positions", P["max_positions"], number(1, integer=True), "Most symbols held or "
            "working at once.", "--max-positions", int),
    Setting("portfolio.max_exposure", P["max_exposure"], number(0.0), "Gross exposure cap, fraction of equity.",
            "--max-exposure", float),
    Setting("portfolio.per_symbol_cap", P["per_symbol_cap"], FRACTION, "One symbol's notional at most this "
            "fraction of equity.", "--per-symbol-cap", float),
    Setting("risk.max_daily_loss", R["max_daily_loss"], FRACTION, "Halt when equity falls this fraction below "
            "the day's starting equity" + OFF + ".", "--max-daily-loss", float),
    Setting("risk.max_orders_per_cycle", R["max_orders_per_cycle"], number(0, integer=True), "Halt beyond this "
            "many orders in one cycle" + OFF + ".", "--max-orders-per-cycle", int),
    Setting("risk.max_orders_per_day", R["max_orders_per_day"], number(0, integer=True), "Halt beyond this many "
            "orders in one day" + OFF + ".", "--max-orders-per-day", int),
    Setting("risk.max_notional_per_order", R["max_notional_per_order"], number(0.0), "Largest entry in account "
            "currency; sizing stays inside it, and an order beyond it halts" + OFF + ".",
            "--max-notional-per-order", float),
    Setting("risk.max_notional_per_symbol", R["max_notional_per_symbol"], number(0.0), "Most the loop may carry "
            "in one symbol, in account currency" + OFF + ".", "--max-notional-per-symbol", float),
    Setting("risk.flatten_on_halt", R["flatten_on_halt"], boolean, "When a risk limit halts the loop, cancel all its "
            "orders and close its quantities at market (never foreign shares), instead of cancelling only its entries "
            "and keeping the exits (take-profits) of what it holds.", "--flatten-on-halt/--no-flatten-on-halt", bool),
    Setting("data.stale_after_s", F["stale_after_s"], number(0.0), "No entry on a symbol whose last bar is older "
            "than the calendar's bar complete this many seconds ago.", "--stale-after", float),
    Setting("data.max_quote_age_s", F["max_quote_age_s"], number(0.0), "No entry on a real quote older than "
            "this (seconds).", "--max-quote-age", float),
    Setting("data.max_spread", F["max_spread"], FRACTION, "No entry on a real quote wider than this (ask / bid "
            "- 1).", "--max-spread", float),
    Setting("alerts.webhook", None, optional(url), "POST every alert as JSON to this URL (also in alerts.jsonl "
            "and the log; shown as its scheme and host only: its path and query are its secret).", "--webhook",
            shown="none", secret=redact_secret),
    Setting("alerts.max_latency_s", A["max_latency_s"], number(0.0), "Alert: one symbol's forecast slower than "
            "this (seconds).", "--alert-latency", float),
    Setting("alerts.max_memory_growth_mb", A["max_memory_growth_mb"], number(0.0), "Alert: peak memory grew "
            "more than this since the warm-up (MB).", "--alert-memory-growth", float),
    Setting("alerts.max_recompiles", A["max_recompiles"], number(0, integer=True), "Alert: more recompiles than "
            "this after the warm-up.", "--alert-recompiles", int),
    Setting("alerts.min_return", A["min_return"], number(-1.0), "Alert: the chosen strategy's walk-forward "
            "return below this.", "--alert-min-return", float),
    Setting("alerts.min_sharpe", A["min_sharpe"], number(), "Alert: the chosen strategy's walk-forward Sharpe "
            "below this.", "--alert-min-sharpe", float),
)


def _group(settings: Settings, prefix: str, cls):
    """The ``prefix.*`` settings as ``cls`` (a frozen dataclass whose fields they are)."""
    fields = cls.__dataclass_fields__
    return cls(**{name: settings[k] for k in settings.values
                  if (name := k.partition(".")[2]) in fields and k.startswith(f"{prefix}.")})


def selection(settings: Settings, base: SelectionRule) -> SelectionRule:
    """The planner's selection rule: ``base`` (its lookback) with ``selection.min_trades``."""
    return replace(base, min_trades=settings["selection.min_trades"])


def sizing(settings: Settings, base: BacktestConfig) -> BacktestConfig:
    """The planner's backtest settings ``base`` with the ``sizing.*`` settings."""
    return replace(base, sizing=settings["sizing.policy"], kelly_cap=settings["sizing.kelly_cap"],
                   risk_per_trade=settings["sizing.risk_per_trade"], kelly_fraction=settings["sizing.kelly_fraction"])


def gates(settings: Settings) -> GateConfig:
    return _group(settings, "gates", GateConfig)


def portfolio(settings: Settings) -> PortfolioConfig:
    return _group(settings, "portfolio", PortfolioConfig)


def risk(settings: Settings) -> RiskLimits:
    return _group(settings, "risk", RiskLimits)


def freshness(settings: Settings) -> Freshness:
    return _group(settings, "data", Freshness)


def thresholds(settings: Settings) -> AlertThresholds:
    return _group(settings, "alerts", AlertThresholds)


def config_rows(settings: Settings, broker_name: str, live: bool) -> list[tuple[str, str, str, str, str]]:
    """What ``trade run --print-config`` shows: (key, value, source, from, overrides), the mode first (it comes
    from the flags only), ``add_latest``'s automatic value resolved for the broker, and every URL redacted."""
    from marketcast.trade.ops.redact import redact
    from marketcast.trade.venues.alpaca import AlpacaBroker
    from marketcast.trade.venues.paper import PaperBroker

    rows = [("mode", "live" if live else "paper", "flag" if live else "default", "--live" if live else "", "")]
    for v in settings.rows():
        shown = v.shown
        if v.key == "add_latest" and v.value is None:
            quotes = (AlpacaBroker if broker_name == "alpaca" else PaperBroker).has_quotes
            shown += f" -> {'on' if quotes else 'off (synthetic quotes)'}"
        rows.append((v.key, shown, v.source, "" if v.source == "default" else v.origin, "; ".join(v.shadowed)))
    return [tuple(map(redact, row)) for row in rows]  # a webhook's URL is its secret (ops/redact.py)


def rules(settings: Settings, seed: int) -> TradeRules:
    """Every rule the loop takes from the settings; the planner's backtest settings with ``seed``."""
    from marketcast.trade.loop.planner import PLANNER_CONFIG

    base = PLANNER_CONFIG
    planner = sizing(settings, replace(base, seed=seed, selection=selection(settings, base.selection),
                                       exit=settings["exit"]))
    return TradeRules(planner, gates(settings), portfolio(settings), risk(settings), freshness(settings),
                      thresholds(settings))
