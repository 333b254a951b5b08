"""marketcast.commands.coercion answers plain option values as typer's own (pydantic) coercion does, and hands
every other value to it: the same values come out, the same errors (typer's words) are said."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Annotated

import pytest
import typer

from marketcast.commands import coercion, main
from marketcast.commands.coercion import _UNSURE, quick_value

pytestmark = pytest.mark.skipif(coercion.RuntimeParam is None, reason="typer before 0.29 coerces through click")


def _command():
    app = typer.Typer()

    @app.command()
    def cmd(count: Annotated[int, typer.Option(min=3)] = 512, seed: Annotated[int, typer.Option(min=0, max=9)] = 0,
            rate: float = 0.4, word: str = "x", where: Path = Path("out"), names: list[str] | None = None,
            clamped: Annotated[int, typer.Option(min=0, max=5, clamp=True)] = 1) -> None:
        pass

    command = typer.main.get_command(app)
    return command, typer.Context(command)


def _typers(param, ctx, value):
    """typer's own coercion of ``value`` (its adapter), or the message of the error it raises."""
    from typer._coercion import build_runtime_param

    try:
        return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)
    except typer.BadParameter as exc:
        return f"error: {exc.format_message()}"


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


CASES = {  # option -> values the quick path must answer, values it must leave to typer
    "count": (["512", "007", "3", "10000000000000000000000", 512, 4], ["2", "+5", " 5", "1_000", "5.0", True, 2]),
    "seed": (["0", "-0", "9", 9], ["10", "-1", 10]),
    "rate": (["0.5", "1e-3", ".5", "1.", "-2.5E+2", "00.5", "1.0000000000000000000001", 0.4],
             ["inf", "nan", "1e999", float("nan"), float("inf"), "1_0.0", " 1.0", "0x10", 1, "e5"]),
    "word": (["x", "", "a b"], [3, b"x"]),
    "where": (["out/x", "", "-", "~/x", Path("out")], [3]),
    "names": ([["a", "b"], ("a",), []], ["a", [1]]),
    "clamped": ([], ["3", 9, "-4"]),
}


def test_plain_values_come_out_as_typers_own_and_the_rest_is_left_to_it(tmp_path):
    command, ctx = _command()
    params = {p.name: p for p in command.params}
    for name, (answered, left) in CASES.items():
        param, info = params[name], params[name].type_descriptor.parameter_info
        for value in answered:
            quick = quick_value(param.type_descriptor.annotation, info, value, param, ctx)
            assert quick is not _UNSURE, (name, value)
            assert _same(quick, _typers(param, ctx, value)), (name, value, quick)
        for value in left:
            assert quick_value(param.type_descriptor.annotation, info, value, param, ctx) is _UNSURE, (name, value)


def test_random_numbers_as_text_come_out_as_typers_own():
    command, ctx = _command()
    params = {p.name: p for p in command.params}
    rng = random.Random(0)
    alphabet = "0123456789.-+eE_ x"
    answered = 0
    for _ in range(600):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        for name in ("count", "rate"):
            param = params[name]
            quick = quick_value(param.type_descriptor.annotation, param.type_descriptor.parameter_info, text,
                                param, ctx)
            if quick is not _UNSURE:
                answered += 1
                assert _same(quick, _typers(param, ctx, text)), (name, text, quick)
    assert answered > 100  # the draw reached the quick path, not only typer's


@pytest.mark.parametrize("args", [
    ["backtest", "--context", "2"], ["backtest", "--windows", "x1"], ["backtest", "--samples", "0"],
    ["backtest", "--ci-low", "nan?"], ["backtest", "--trades-per-page", "5"],
])
def test_a_bad_value_gets_typers_own_line_and_exit_code(args, capsys, monkeypatch, tmp_path):
    args = [*args, "--output-dir", str(tmp_path / "o")]
    code = main(args)
    quick = capsys.readouterr().err
    monkeypatch.setattr(coercion, "install", lambda params: None)  # typer's coercion for every value
    assert main(args) == code == 2
    assert capsys.readouterr().err == quick
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999", "-1e400"])
def test_a_number_that_is_not_finite_is_refused_in_one_line_every_time(value, capsys, tmp_path):
    """Typer reads ``inf``, ``nan`` and ``1e999`` as floats and ``inf`` passes every ``min=``: ``trade replay
    --cash inf`` ran with a numpy warning. Asked twice in one process (the second call meets the coercion the
    first one built), each time one line, exit 2, nothing written."""
    for _ in range(2):
        assert main(["backtest", "--fee", value, "--output-dir", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "'--fee'" in err[0] and ("not a finite number" in err[0] or "greater" in err[0])
    assert main(["trade", "replay", "--cash", value, "--state-dir", str(tmp_path / "s")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() and not (tmp_path / "s").exists()
