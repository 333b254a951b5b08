"""The public checkpoints by name, and how to get them onto this machine.

``marketcast models download NAME`` puts a model's repos into the Hugging Face cache, where ``--weights auto``
(or the repo id) finds them, and with ``--to DIR`` also lays them out as the folder ``--weights DIR`` reads
(each ``config.json`` naming its repo under ``marketcast_checkpoint``, so the folder is known as that checkpoint):
Toto's ``config.json`` + ``model.safetensors`` in DIR, Kronos's model in ``DIR/model`` and its tokenizer in
``DIR/tokenizer``. Every "weights not found" message gives the same advice, with the ``hf`` command that
huggingface_hub installs (``huggingface-cli`` is gone from it).

This is the bottom of the loading layer: checkpoint.py imports it, it imports no marketcast.forecast module, and
each model package registers its checkpoints here (:func:`register`) as it is imported.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from marketcast.errors import ConfigError, ModelLoadError, first_line

FILES = ("config.json", "model.safetensors")


@dataclass(frozen=True)
class Checkpoint:
    """A downloadable model: its repos by subfolder ("" = the folder itself), the ``--weights`` that loads
    it from the Hugging Face cache, and the files of each repo it reads (TiRex ships one ``model.ckpt``)."""

    name: str
    model: str
    repos: dict[str, str]
    weights: str
    files: tuple[str, ...] = FILES


_CATALOGUE: dict[str, Checkpoint] = {}


def register(*checkpoints: Checkpoint, aliases: dict[str, str] | None = None) -> None:
    """Called by each model package as it is imported: its public checkpoints, and other names for them
    (``{"kronos": "kronos-small"}``). This module sits below the model packages and never imports them."""
    for c in checkpoints:
        _CATALOGUE[c.name] = c
    for alias, name in (aliases or {}).items():
        _CATALOGUE[alias] = _CATALOGUE[name]


def catalogue() -> dict[str, Checkpoint]:
    """The checkpoints of the model packages imported so far (:func:`marketcast.forecast.registry.import_models`
    imports them all)."""
    return dict(_CATALOGUE)


def names_text() -> str:
    """Every downloadable name, an alias with what it stands for (``kronos (= kronos-small)``): the one list
    that ``models download``'s help and its "unknown model" line both print."""
    models = catalogue()
    return ", ".join(n if models[n].name == n else f"{n} (= {models[n].name})" for n in sorted(models))


def offline() -> bool:
    """``HF_HUB_OFFLINE`` as huggingface_hub reads it (its constant is fixed at import, so read both)."""
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return env in {"1", "true", "yes", "on"} or bool(getattr(constants, "HF_HUB_OFFLINE", False))


def _hf(repo: str, files: tuple[str, ...] = FILES) -> str:
    return f"`hf download {repo} {' '.join(files)}`"


def not_found(model: str, repo: str, exc: BaseException, is_offline: bool) -> str:
    """The head of the one line for weights ``repo`` that are neither a local folder nor to be had from the hub:
    ``weights/toto`` is a valid owner/name too, so both readings are said."""
    from marketcast.errors import first_line

    hub = (f"no hub repo {repo!r} in the Hugging Face cache (offline: HF_HUB_OFFLINE / local_files_only)"
           if is_offline else
           f"hub repo {repo!r} could not be downloaded ({type(exc).__name__}: {first_line(exc, 120)})")
    return f"{model} weights {repo!r}: no folder {repo!r} here ({Path.cwd()}), and {hub}"


def download_advice(repo: str, model: str) -> str:
    """What to run when ``repo`` is not on this machine (``model``: "Toto" or "Kronos")."""
    known = next((c for c in catalogue().values() if repo in c.repos.values()), None)
    if known is None:
        commands = _hf(repo)
    else:
        each = " and ".join(_hf(r, known.files) for r in known.repos.values())
        commands = f"`marketcast models download {known.name}` (or {each})"
    files = " and ".join(known.files if known else FILES)
    layout = ("a folder with model/ and tokenizer/ subfolders, each holding config.json and model.safetensors"
              if model.lower() == "kronos" else f"a folder holding {files}")
    return f"run {commands} on a connected machine, or pass --weights DIR with {layout}"


def _place(source: Path, target: Path) -> None:
    """``target`` as a hard link to the cached file (a copy across file systems), written atomically."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source.resolve(), tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def download(name: str, to: str | os.PathLike | None = None) -> tuple[dict[str, Path], str]:
    """Fetch ``name``'s repos into the HF cache (offline: find them there) and, with ``to``, lay them out in
    that folder. Returns the folder of each repo and the ``--weights`` value that loads the model."""
    from huggingface_hub import snapshot_download

    models = catalogue()
    if name not in models:
        raise ConfigError(f"unknown model {name!r}; choose one of {names_text()}")
    checkpoint, folders = models[name], {}
    for sub, repo in checkpoint.repos.items():
        try:
            files = list(checkpoint.files)
            folders[repo] = Path(snapshot_download(repo, allow_patterns=files, local_files_only=offline()))
        except Exception as exc:  # the hub raises many types: offline, 401/404, network
            raise ModelLoadError(f"{repo}: could not be downloaded ({type(exc).__name__}: {first_line(exc, 160)}); "
                                 "check the network (HF_HUB_OFFLINE must be unset) and HF_TOKEN, or "
                                 f"{download_advice(repo, checkpoint.model)}") from None
        missing = [f for f in checkpoint.files if not (folders[repo] / f).is_file()]
        if missing:
            raise ModelLoadError(f"{repo}: has no {', '.join(missing)}; it is not a {checkpoint.model} checkpoint")
    if to is None:
        return folders, checkpoint.weights
    root = Path(to)
    for sub, repo in checkpoint.repos.items():
        target = root / sub if sub else root
        target.mkdir(parents=True, exist_ok=True)
        for file in checkpoint.files:
            if file == "config.json":
                _named_config(folders[repo] / file, target / file, repo)
            else:
                _place(folders[repo] / file, target / file)
        folders[repo] = target
    return folders, str(root)


NAME_KEY = "marketcast_checkpoint"  # the hub id a --to folder names in its config.json (forecast/cards.py reads it)


def _named_config(source: Path, target: Path, repo: str) -> None:
    """The cached ``config.json`` with :data:`NAME_KEY` = ``repo`` added, written atomically: the folder then says
    which public checkpoint it is, as the cache path does for a repo id (a config that is not a JSON object is
    placed as it is)."""
    import json

    try:
        config = json.loads(source.read_text())
    except (OSError, ValueError):
        config = None
    if not isinstance(config, dict):
        _place(source, target)
        return
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({**config, NAME_KEY: repo}, indent=2) + "\n")
    os.replace(tmp, target)
