"""What a sandbox can leave on the host, found on the host itself rather than read from its lease (a process
killed between creating something and writing it down leaves exactly what its lease does not name)."""

from __future__ import annotations

import glob
import os
from pathlib import Path


def sandbox_cgroups(names: list[str]) -> list[str]:
    """Cgroup dirs ``.../trace-factory/<name>`` on any controller, v1 or v2."""
    wanted = set(names)
    return sorted(d for group in glob.glob("/sys/fs/cgroup/**/trace-factory", recursive=True)
                  for d in glob.glob(os.path.join(group, "*")) if os.path.basename(d) in wanted)


def mounts_under(folder: Path) -> list[str]:
    """Mount points at or below ``folder`` (a sandbox's tmpfs work dir that outlived it)."""
    prefix = str(folder).rstrip("/") + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    return sorted(p for p in points if p.startswith(prefix))
