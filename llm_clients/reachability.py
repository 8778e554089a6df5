"""Fail fast on a self-hosted LLM server that is not there, instead of after minutes of retries."""

from __future__ import annotations

import socket
from urllib.parse import urlparse


def unreachable(base_url: str, timeout_s: float = 3.0) -> str | None:
    """None when a TCP connection to the URL's host and port opens, else the reason in a few words."""
    parsed = urlparse(base_url)
    host = parsed.hostname
    if not host:
        return "the URL has no host"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except socket.timeout:
        return f"no answer from {host}:{port} within {timeout_s:.0f} s"
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"
