"""Every URL a user may copy from README.md, docs/*.md or a command's help into a config or command line points at
a name that can never be delivered (RFC 2606 / RFC 6761 reserved names: ``.invalid``, ``.example``, ``.test``,
``.localhost``, ``example.com``, loopback), or at a read-only package registry the docs fetch from. The
README's webhook used to be a live public ntfy topic: ``trade run --once`` with the README's config posted to it."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RESERVED_SUFFIXES = (".invalid", ".example", ".test", ".localhost")
RESERVED_NAMES = {"example.com", "example.net", "example.org", "localhost", "127.0.0.1", "::1", "host"}
#: hosts a fenced block may name because the docs download from them, never post to them
READ_ONLY = {"registry.npmjs.org"}
URL = re.compile(r"""https?://[^\s"'`)<>\]]+""")


def reserved(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host in RESERVED_NAMES or host.endswith(RESERVED_SUFFIXES) or \
        any(host.endswith("." + name) for name in ("example.com", "example.net", "example.org"))


def copyable_urls() -> list[tuple[str, str]]:
    """(where, url) of every URL inside a fenced block of README and docs, and on any line naming a webhook."""
    out = []
    for path in DOCS:
        fenced = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced or "webhook" in line.lower():
                out += [(f"{path.name}:{number}", url) for url in URL.findall(line)]
    return out


def test_the_scan_finds_the_documented_webhook():
    """The scan is not empty: the README's config block carries its example webhook."""
    assert any(where.startswith("README.md") and "/your-secret-topic" in url for where, url in copyable_urls())


@pytest.mark.parametrize(("where", "url"), copyable_urls())
def test_every_copyable_url_cannot_reach_a_real_service(where, url):
    host = urlsplit(url).hostname or ""
    assert reserved(host) or host in READ_ONLY, f"{where}: {url} names a real host; use a reserved name such as " \
                                                 f"example.invalid"


def test_the_help_of_every_setting_uses_reserved_names():
    """The config example in ``trade run --help`` (commands/trade_settings.py) is the README's block."""
    from marketcast.commands import trade_settings

    urls = URL.findall(Path(trade_settings.__file__).read_text(encoding="utf-8"))
    assert urls and all(reserved(urlsplit(u).hostname or "") for u in urls), urls


@pytest.mark.parametrize(("host", "expected"), [("ntfy.example.invalid", True), ("ntfy.sh", False),
                                                ("hooks.slack.com", False), ("api.example.com", True),
                                                ("example.invalid.com", False), ("127.0.0.1", True)])
def test_reserved_names(host, expected):
    assert reserved(host) is expected
