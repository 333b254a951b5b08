"""GuardedCompile: sealed against recompiles, eager fallback with one warning, counters per wrapper."""

from __future__ import annotations

import logging

import torch

from marketcast.runtime.counters import recompile_count
from marketcast.runtime.guard import GuardedCompile, find_guards


class TinyStep(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(x)) * 2.0


def test_forced_recompile_after_seal_falls_back_to_eager_once(caplog):
    torch._dynamo.reset()
    model = TinyStep().eval()
    guard = GuardedCompile(model, "default", name="tiny", fullgraph=True, dynamic=False)
    x = torch.randn(4, 8)
    with torch.no_grad():
        warm = guard(x)
        assert guard.stats.compiled and guard.stats.compiles == 1 and guard.stats.warmup_s > 0
        guard.seal()
        assert torch.allclose(guard(x), model(x), atol=1e-6)  # same shape: no recompile, compiled result
        assert guard.active and guard.stats.recompiles_after_seal == 0
        before = recompile_count()
        with caplog.at_level(logging.WARNING, logger="marketcast.compile"):
            y = guard(torch.randn(5, 8))  # new shape: a recompile the stance refuses
            z = guard(torch.randn(6, 8))
    assert not guard.active
    assert guard.stats.fallback_reason.startswith("RuntimeError: Detected recompile")
    assert guard.stats.refused_recompiles == 1  # the next call never tried: it ran eager
    assert guard.stats.recompiles_after_seal == 0
    assert guard.stats.eager_calls == 2 and guard.stats.calls == 4
    assert recompile_count() == before  # nothing was actually recompiled
    assert y.shape == (5, 8) and z.shape == (6, 8)
    warnings = [r for r in caplog.records if "torch.compile disabled" in r.getMessage()]
    assert len(warnings) == 1 and "tiny" in warnings[0].getMessage()
    with torch.no_grad():
        assert torch.allclose(guard(x), warm, atol=1e-6)  # eager path gives the same numbers


def test_recompiles_during_warmup_are_counted_per_wrapper():
    torch._dynamo.reset()
    model = TinyStep().eval()
    guard = GuardedCompile(model, "default", name="tiny", dynamic=False)
    with torch.no_grad():
        for n in (2, 3, 4):
            guard(torch.randn(n, 8))
    assert guard.stats.compiles == 3 and guard.stats.recompiles == 2
    assert guard.active and guard.stats.fallback_reason is None


def test_eager_mode_never_compiles_and_find_guards_discovers_wrappers():
    model = TinyStep().eval()
    guard = GuardedCompile(model, None, name="eager")
    with torch.no_grad():
        guard(torch.randn(2, 8))
    assert not guard.active and guard.stats.eager_calls == 1 and guard.stats.compiles == 0

    class Holder:
        def __init__(self) -> None:
            self.model = model
            self.steps = {"decode": guard}

    assert find_guards(Holder()) == [guard]


def test_recompile_limit_setting_is_applied_to_dynamo(monkeypatch):
    import torch._dynamo.config as dynamo_config

    from marketcast.runtime import guard

    monkeypatch.setattr(guard, "_DYNAMO_CONFIGURED", False)
    monkeypatch.setenv("TORCHDYNAMO_RECOMPILE_LIMIT", "3")
    before = dynamo_config.recompile_limit  # ConfigModule: restore by hand, monkeypatch would delete it
    try:
        GuardedCompile(TinyStep(), "default", name="limit")
        assert dynamo_config.recompile_limit == 3
    finally:
        dynamo_config.recompile_limit = before


def test_group_failure_sends_every_wrapper_of_the_model_to_eager_with_one_warning(caplog):
    from marketcast.runtime.guard import CompileGroup

    torch._dynamo.reset()
    group = CompileGroup("toy-model")
    prefill = GuardedCompile(TinyStep().eval(), "default", name="prefill", group=group)
    decode = GuardedCompile(TinyStep().eval(), "default", name="decode", group=group)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="marketcast.compile"):
        for g in (prefill, decode):
            g(torch.randn(4, 8))
            g.seal()
        prefill(torch.randn(3, 8))  # refused recompile in one step
        decode(torch.randn(4, 8))  # the other step now runs eager too
    assert not prefill.active and not decode.active
    assert decode.stats.fallback_reason.startswith("toy-model: RuntimeError: Detected recompile")
    assert decode.stats.eager_calls == 1
    warnings = [r.getMessage() for r in caplog.records if "torch.compile disabled" in r.getMessage()]
    assert len(warnings) == 1 and "whole model (prefill failed)" in warnings[0]
