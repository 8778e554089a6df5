"""Atomic exchange of two paths (Linux ``renameat2(RENAME_EXCHANGE)``), which Python's ``os`` does not offer.

Refreshing a stored version replaces its folder. Two renames leave a moment in which the version does not
exist at all; an exchange does not, so a reader finds either the old folder or the new one, never neither.
Hand-written through ctypes because no library in our stack binds this call; where the kernel, libc or file
system lacks it, :func:`exchange` returns False and the caller falls back to two renames.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM}


def _renameat2() -> "ctypes._CFuncPtr | None":
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_FUNCTION = _renameat2()


def exchange(a: str | Path, b: str | Path) -> bool:
    """Swap ``a`` and ``b`` in one step. False (nothing changed) where unsupported; OSError for real failures."""
    if _FUNCTION is None:
        return False
    if _FUNCTION(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))
