"""Run a reference implementation under ``torch.compile`` so torch writes a real recompile log.

Not our models: toto-ts 0.2.0 (``TotoBackbone`` + its ``TotoForecaster`` with the KV cache) and upstream Kronos
as vendored in kronos-finance 0.1.5 (``auto_regressive_inference``), tiny random configs on the CPU, compiled
the way the original system did (the whole backbone / the decode functions), ``backend="eager"`` so only
dynamo runs (its guards, recompiles and graph breaks are what the analyzer reads), ``dynamic=False``.

    TORCH_LOGS=recompiles,graph_breaks python tests/compile/reference_log.py toto 2> toto.log
    TORCH_LOGS=recompiles,graph_breaks python tests/compile/reference_log.py kronos --layers 3 2> kronos.log

The sizes are flags so the same script makes logs of other configs (see ``--help``).
"""

from __future__ import annotations

import argparse
import warnings

import torch


def run_toto(a: argparse.Namespace) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from toto.data.util.dataset import MaskedTimeseries
        from toto.inference.forecaster import TotoForecaster
        from toto.model.backbone import TotoBackbone

    torch.manual_seed(0)
    backbone = TotoBackbone(
        patch_size=a.patch, stride=a.patch, embed_dim=a.width, num_layers=a.layers, num_heads=a.heads,
        mlp_hidden_dim=2 * a.width, dropout=0.0, spacewise_every_n_layers=a.spacewise_every,
        scaler_cls="<class 'model.scaler.CausalPatchStdMeanScaler'>",
        output_distribution_classes=["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
        output_distribution_kwargs={"k_components": 2}, use_memory_efficient_attention=False,
        spacewise_first=not a.spacewise_last,
    ).eval()
    compiled = torch.compile(backbone, backend="eager", dynamic=False)
    series = torch.randn(a.batch, a.variates, a.context).cumsum(-1) + 100.0
    inputs = MaskedTimeseries(
        series=series, padding_mask=torch.ones_like(series, dtype=torch.bool),
        id_mask=torch.zeros_like(series, dtype=torch.int), timestamp_seconds=torch.zeros_like(series, dtype=torch.int),
        time_interval_seconds=torch.full((a.batch, a.variates), 86400, dtype=torch.int), num_exogenous_variables=0)
    with torch.inference_mode():
        out = TotoForecaster(compiled).forecast(inputs, a.horizon, num_samples=a.samples,
                                                samples_per_batch=a.samples, use_kv_cache=True)
    print(tuple(out.samples.shape))


def run_kronos(a: argparse.Namespace) -> None:
    from kronos_finance._vendor.kronos_model import Kronos, KronosTokenizer
    from kronos_finance._vendor.kronos_model.kronos import auto_regressive_inference

    torch.manual_seed(0)
    tokenizer = KronosTokenizer(
        d_in=6, d_model=a.width, n_heads=a.heads, ff_dim=2 * a.width, n_enc_layers=2, n_dec_layers=2,
        ffn_dropout_p=0.0, attn_dropout_p=0.0, resid_dropout_p=0.0, s1_bits=4, s2_bits=4, beta=0.05, gamma0=1.0,
        gamma=1.1, zeta=0.05, group_size=4).eval()
    model = Kronos(s1_bits=4, s2_bits=4, n_layers=a.layers, d_model=a.width, n_heads=a.heads, ff_dim=2 * a.width,
                   ffn_dropout_p=0.0, attn_dropout_p=0.0, resid_dropout_p=0.0, token_dropout_p=0.0,
                   learn_te=True).eval()
    model.decode_s1 = torch.compile(model.decode_s1, backend="eager", dynamic=False)
    model.decode_s2 = torch.compile(model.decode_s2, backend="eager", dynamic=False)
    g = torch.Generator().manual_seed(0)

    def stamps(n: int) -> torch.Tensor:  # minute, hour, weekday, day, month
        cols = [torch.randint(lo, hi, (a.batch, n), generator=g) for lo, hi in ((0, 60), (0, 24), (0, 7), (1, 32),
                                                                                (1, 13))]
        return torch.stack(cols, -1)

    x = torch.randn(a.batch, a.context, 6, generator=g)
    out = auto_regressive_inference(tokenizer, model, x, stamps(a.context), stamps(a.horizon),
                                    max_context=a.max_context, pred_len=a.horizon, sample_count=a.samples)
    print(out.shape)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", choices=("toto", "kronos"))
    p.add_argument("--layers", type=int, default=None, help="toto 3, kronos 2")
    p.add_argument("--width", type=int, default=32, help="embedding width")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--context", type=int, default=None, help="toto 32 steps, kronos 8 bars")
    p.add_argument("--horizon", type=int, default=None, help="toto 36 steps, kronos 10 bars")
    p.add_argument("--samples", type=int, default=None, help="toto 4, kronos 2")
    p.add_argument("--patch", type=int, default=4, help="toto: patch size and stride")
    p.add_argument("--variates", type=int, default=3, help="toto: series per item")
    p.add_argument("--spacewise-every", type=int, default=3, help="toto: one space-wise layer every N layers")
    p.add_argument("--spacewise-last", action="store_true", help="toto: the space-wise layer last in its block")
    p.add_argument("--max-context", type=int, default=15, help="kronos: the window it slides once full")
    a = p.parse_args(argv)
    toto = a.model == "toto"
    a.layers = a.layers or (3 if toto else 2)
    a.context = a.context or (32 if toto else 8)
    a.horizon = a.horizon or (36 if toto else 10)
    a.samples = a.samples or (4 if toto else 2)
    (run_toto if toto else run_kronos)(a)


if __name__ == "__main__":
    main()
