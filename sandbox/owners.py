"""Who owns a sandbox: ``host:pid:starttime`` of the opening process, and whether that owner is gone. Host side.

Its own module because both the reaper (:mod:`sandbox.leftovers`) and the Docker backend (container labels)
need it, and the reaper calls the Docker backend's cleanup.
"""

from __future__ import annotations

import os
import socket

from sandbox import procfs


def owner_id() -> str:
    """``host:pid:starttime`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}:{procfs.start_time(os.getpid()) or '?'}"


def owner_alive(owner: str) -> bool:
    """False only when the owner certainly is gone (same host, and its pid is dead or reused)."""
    try:
        host, pid, start = owner.rsplit(":", 2)
        number = int(pid)
    except ValueError:
        return True  # unknown format: leave it alone
    if host != socket.gethostname():
        return True  # another machine's process: not ours to judge
    current = procfs.start_time(number)
    return current is not None and (start == "?" or current == start)
