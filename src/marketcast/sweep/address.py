"""A Ray cluster's address checked before Ray is asked to join it: one line, within a deadline.

``ray.init(address="banana:99999")`` printed Ray's raw log lines and gave no answer for 60 s: Ray retries its
GCS connection for a minute whatever the address. So the address is read first (``HOST:PORT``, or
``ray://HOST:PORT`` for Ray Client; ``auto`` and ``local`` are Ray's own words and pass), the port must be
1..65535 (exit 2), and the host must answer a TCP connection on that port within :data:`CONNECT_TIMEOUT_S`
(else exit 6, the service is unavailable). The name lookup runs on a worker thread so that it too keeps the
deadline (``getaddrinfo`` has no timeout of its own). A port that answers but is not a Ray GCS passes this check
and is left to Ray's own retries (minutes): bounding those means Ray's internal timeouts, which also govern a
running sweep's reconnections.
"""

from __future__ import annotations

import socket
import threading
import time

from marketcast.errors import ConfigError, UnavailableError

CONNECT_TIMEOUT_S = 10.0
RAY_WORDS = ("auto", "local")


def split_address(address: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` or ``ray://HOST:PORT`` (``[::1]:6379`` for an IPv6 host); one line, exit
    2, for anything else."""
    rest = address.strip()
    if rest.startswith("ray://"):
        rest = rest[len("ray://"):]
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"Ray address {address!r}: give HOST:PORT (e.g. 10.0.0.5:6379), ray://HOST:PORT, or auto")
    if not 1 <= int(port) <= 65535:
        raise ConfigError(f"Ray address {address!r}: port {port} is not 1 to 65535; give the cluster's GCS port "
                          "(ray start --head prints it, 6379 by default)")
    return host, int(port)


def _resolve(host: str, port: int, seconds: float) -> list:
    found: dict[str, object] = {}
    done = threading.Event()

    def look_up() -> None:
        try:
            found["value"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            found["error"] = exc
        finally:
            done.set()

    threading.Thread(target=look_up, name="marketcast-ray-lookup", daemon=True).start()
    if not done.wait(seconds):
        raise TimeoutError(f"no answer for the name {host} within {seconds:g} s")
    if "error" in found:
        raise found["error"]  # type: ignore[misc]
    return found["value"]  # type: ignore[return-value]


def check_reachable(address: str | None, seconds: float = CONNECT_TIMEOUT_S) -> None:
    """Nothing when ``address`` is None (a local Ray), Ray's ``auto``/``local``, or answers on its port within
    ``seconds``; else one line: exit 2 for an address that is not one, exit 6 for a cluster that does not answer."""
    if address is None or address.strip().lower() in RAY_WORDS:
        return
    host, port = split_address(address)
    deadline = time.monotonic() + seconds
    try:
        infos = _resolve(host, port, seconds)
        last: OSError | None = None
        for family, kind, proto, _, where in infos:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {seconds:g} s")
            try:
                with socket.socket(family, kind, proto) as sock:
                    sock.settimeout(left)
                    sock.connect(where)
                return
            except OSError as exc:
                last = exc
        raise last or OSError(f"{host} has no address")
    except OSError as exc:  # TimeoutError and socket.gaierror are OSErrors
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise UnavailableError(f"cannot reach the Ray cluster at {address} ({reason}); check --address or "
                               "RAY_ADDRESS, that the cluster runs (ray status on its head node) and that this "
                               "machine may connect to its port") from None
