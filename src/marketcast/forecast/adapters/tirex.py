"""TiRex (NX-AI, xLSTM, 35M) through its official package ``tirex-ts`` (the ``tirex`` extra).

TiRex is univariate, so close, high and low are three series per window and every window of a call goes to the
package's own ``forecast`` as one ``[B*3, T]`` tensor. Left padding is NaN: the package itself left-pads every
context with NaN to its training length and masks NaN patches, so a padded window forecasts as its real bars
alone would. The sLSTM runs on the package's pure-torch backend (``backend="torch"``): no CUDA kernels, no
``xlstm`` build, so it runs on CPU; on CUDA the ``xlstm`` kernels are used only when that package is installed.

The nine quantiles 0.1..0.9 are sorted per step before use: the package does not enforce monotonicity, and
sorting is the rearrangement of Chernozhukov, Fernández-Val & Galichon (2010, "Quantile and probability curves
without crossing", Econometrica 78(3)), which never worsens the quantile loss. A trained TiRex rarely crosses,
so on real weights it is (nearly) a no-op. Runs eagerly: the package's ``compile`` of the sLSTM cell is unused.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import numpy as np
import torch

from marketcast.errors import ModelLoadError, first_line
from marketcast.forecast.adapters.extras import require
from marketcast.forecast.adapters.common import FIELDS, QuantileAdapter, fill_random, package_version
from marketcast.forecast.base import ContextBatch, masked_prices
from marketcast.forecast.hub import Checkpoint, download_advice, not_found, offline, register
from marketcast.forecast.quantiles import NINE
from marketcast.runtime.devices import torch_device, torch_dtype

NAME = "tirex"
LABEL = "TiRex"
DEFAULT_REPO = "NX-AI/TiRex"
CHECKPOINT = "model.ckpt"  # a Lightning checkpoint: hyper_parameters + state_dict
CHUNK_ROWS = 512  # series per package batch (the package's default batch size)
# ``--weights random``: the smallest sensible TiRexZero (its architecture is configurable): two sLSTM blocks of
# width 64, the public model's 32-step patches and nine quantiles, a 512-step training context.
RANDOM_CONFIG = dict(input_patch_size=32, output_patch_size=32, quantiles=list(NINE),
                     block_kwargs=dict(embedding_dim=64, num_heads=4, num_blocks=2, ffn_proj_factor=2.6667),
                     input_ff_dim=128)
RANDOM_CONTEXT = 512


def package():
    """The ``tirex`` module, or one line naming the extra."""
    return require("tirex", "tirex", NAME)


def backend_for(device: torch.device) -> str:
    """``torch`` (pure PyTorch sLSTM) everywhere but on CUDA with ``xlstm`` installed (its CUDA kernels)."""
    if device.type != "cuda":
        return "torch"
    from tirex.base import xlstm_available

    return "cuda" if xlstm_available() else "torch"


def checkpoint_path(weights: str | None) -> Path:
    """The ``model.ckpt`` for ``--weights``: a file, a folder holding it, or a repo id (HF cache first; the hub
    only when online)."""
    source = DEFAULT_REPO if weights in (None, "auto") else str(weights)
    path = Path(source).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if not (path / CHECKPOINT).is_file():
            raise ModelLoadError(f"{LABEL} weights {source!r}: the folder has no {CHECKPOINT}; put the checkpoint "
                                 f"of {DEFAULT_REPO} there (`hf download {DEFAULT_REPO} {CHECKPOINT}`)")
        return path / CHECKPOINT
    if path.exists() or source.count("/") != 1 or source.startswith((".", "/", "~")):
        raise ModelLoadError(f"{LABEL} weights {source!r}: not a file, a folder or a Hugging Face repo id "
                             f"(owner/name); pass a folder holding {CHECKPOINT}")
    from huggingface_hub import hf_hub_download

    is_offline = offline()
    try:
        return Path(hf_hub_download(source, CHECKPOINT, local_files_only=is_offline))
    except Exception as exc:  # offline and not cached, 401/404, network
        advice = (download_advice(source, LABEL) if source == DEFAULT_REPO else  # another repo: no catalogue entry
                  f"run `hf download {source} {CHECKPOINT}` on a connected machine, or pass --weights DIR with a "
                  f"folder holding {CHECKPOINT}")
        raise ModelLoadError(f"{not_found(LABEL, source, exc, is_offline)}; {advice}") from None


def random_model(device: torch.device, seed: int = 0):
    """:data:`RANDOM_CONFIG` with seeded random weights (every parameter drawn; the package leaves its sLSTM
    kernels uninitialised)."""
    from tirex.models.tirex import TiRexZero

    with torch.device("meta"):
        model = TiRexZero(backend=backend_for(device), model_config=RANDOM_CONFIG, train_ctx_len=RANDOM_CONTEXT)
    model.to_empty(device=torch.device("cpu"))
    return fill_random(model, seed).to(device)


def load_model(weights: str | None, device: torch.device, seed: int = 0):
    """(package model, source) for ``--weights``: None/"auto" (NX-AI/TiRex), a folder, a ``.ckpt`` file, a repo
    id or ``random`` (:data:`RANDOM_CONFIG`)."""
    package()
    if str(weights or "").lower() == "random":
        model, source = random_model(device, seed), f"random:tiny(seed={seed})"
    else:
        from tirex.models.tirex import TiRexZero

        path = checkpoint_path(weights)
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the package prints "Loading weights ..." to stdout
                model = TiRexZero.from_pretrained(str(path), backend=backend_for(device), device=str(device))
        except Exception as exc:  # torch.load, a missing hyper_parameters key, load_state_dict
            raise ModelLoadError(f"{path}: not a {LABEL} checkpoint ({type(exc).__name__}: {first_line(exc, 120)}); "
                                 f"pass the {CHECKPOINT} of {DEFAULT_REPO}") from None
        source = str(path)
    return model.eval().requires_grad_(False), source


def locate(weights: str | None) -> str:
    """Where ``--weights`` would load from (:func:`checkpoint_path`, no tensor read): the checkpoint file, or
    ``random``; weights that are not here raise the loader's own line."""
    return "random" if str(weights or "").lower() == "random" else str(checkpoint_path(weights))


class TiRexForecaster(QuantileAdapter):
    """Forecaster protocol for TiRex (:class:`~marketcast.forecast.adapters.common.QuantileAdapter`)."""

    name, label, quantile_levels = NAME, LABEL, NINE

    def __init__(self, model, *, device: str | torch.device = "cpu", dtype: str = "float32",
                 compile: str | None = None, source: str = "", chunk: int = CHUNK_ROWS) -> None:
        super().__init__(device=device, dtype=dtype, compile=compile, source=source, chunk=chunk)
        self.model = model
        self.context_limit = int(model.config.train_ctx_len)

    @torch.inference_mode()
    def raw_quantiles(self, batch: ContextBatch, horizon: int) -> np.ndarray:
        """``[B, 3, 9, horizon]`` float64: the package's quantiles of close/high/low as it returns them."""
        values, mask = masked_prices(batch, FIELDS, LABEL)  # [B, 3, T]
        b, f, t = values.shape
        context = torch.as_tensor(np.where(mask, values, np.nan).reshape(b * f, t), dtype=torch.float32)
        autocast = torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype != torch.float32)
        with autocast:
            q, _ = self.model.forecast(context, output_type="torch", batch_size=self.chunk,
                                       prediction_length=horizon)  # [B*3, H, 9]
        q = q.double().numpy().reshape(b, f, horizon, len(NINE))
        return q.transpose(0, 1, 3, 2).copy()

    def package_meta(self, batch: ContextBatch) -> dict:
        backend = self.model.blocks[0].slstm_layer.slstm_cell.backend if len(self.model.blocks) else "torch"
        return {"package": f"tirex-ts {package_version('tirex-ts')}", "slstm_backend": backend,
                "context_used": min(batch.length, self.context_limit)}


def create(*, weights: str | None = None, device: str = "cpu", dtype: str = "float32",
           compile: str | None = None, seed: int = 0) -> TiRexForecaster:
    """Registry factory: weights None/"auto" = NX-AI/TiRex (HF cache or hub), a folder holding model.ckpt, the
    file itself, a repo id, or ``random`` (a tiny TiRexZero)."""
    dev = torch_device(device, LABEL)
    torch_dtype(dtype, LABEL)
    model, source = load_model(weights, dev, seed)
    if source.startswith("random"):
        warnings.warn(f"{NAME}: weights={weights!r} uses a randomly initialised tiny TiRex; its forecasts are "
                      "meaningless (use it for speed and plumbing tests only)", stacklevel=2)
    return TiRexForecaster(model, device=dev, dtype=dtype, compile=compile, source=source)


register(Checkpoint(NAME, NAME, {"": DEFAULT_REPO}, "auto", files=(CHECKPOINT,)))
