"""``marketcast models``: ``download NAME [--to DIR]`` fetches public weights and says where they went;
``compare`` is the leaderboard (:mod:`marketcast.commands.compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from marketcast.commands import options
from marketcast.commands.compare import compare
from marketcast.console import console, print_json

app = typer.Typer(no_args_is_help=True)


def _names() -> str:
    """The downloadable names from the model packages' own registrations (:mod:`marketcast.forecast.hub`), so
    the help cannot miss a model; importing them costs the ``models`` group a second, no other command."""
    from marketcast.forecast.hub import names_text
    from marketcast.forecast.registry import import_models

    import_models()
    return names_text()


NAMES = _names()


@app.command("download")
def download_cmd(
    name: Annotated[str, typer.Argument(help=f"Model to fetch: {NAMES}.")],
    to: Annotated[Optional[Path], typer.Option(
        "--to", help="Also lay the files out in this folder, to pass as --weights DIR (Kronos: DIR/model and "
                     "DIR/tokenizer). Default: the Hugging Face cache only.")] = None,
    as_json: options.AsJson = False,
) -> None:
    """Download NAME's config.json and model.safetensors (HF_HUB_OFFLINE=1: find them in the cache)."""
    from marketcast.forecast.hub import catalogue, download

    folders, weights = download(name, to)
    model = catalogue()[name].model
    if as_json:
        print_json({"name": name, "model": model, "folders": {repo: str(f) for repo, f in folders.items()},
                    "weights": weights, "use": ["--model", model] + ([] if weights == "auto" else ["--weights", weights])})
        return
    for repo, folder in folders.items():  # one line each, never wrapped: the paths are for copying
        console.print(f"{repo}: {folder}", highlight=False, soft_wrap=True)
    console.print(f"use it with: --model {model}" + ("" if weights == "auto" else f" --weights {weights}"),
                  highlight=False, soft_wrap=True)


app.command("compare")(compare)
