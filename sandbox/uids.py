"""Private host uids for bwrap sandboxes: never two live sandboxes on one uid, on this whole host. Host side.

Every bwrap sandbox runs as a uid of its own, and its ``close()`` kills every process of that uid; two live
sandboxes on one uid would kill (and could signal) each other. A random draw alone collides: with dozens of
live pooled workers and thousands of opens an hour across the host's processes, sooner or later.

A uid is *held* by binding the abstract unix socket ``@trace-factory/sandbox-uid/N`` in the host's network
namespace. The kernel lets one socket hold a name at a time, across every process, and frees the name when
the socket is closed or its process dies (``kill -9`` included), so a hold needs no file, no lock and no
clean-up. Sandboxed code cannot take a name: every sandbox has a network namespace of its own. A held uid is
used only when no process runs as it (a dead owner's stragglers keep it out of use until the lease reaper
has ended them). Processes in another network namespace (a checkout running inside a container that shares
this host's uids) do not see these names; they draw from the same span at random, as before.
"""

from __future__ import annotations

import random
import socket

from sandbox import procfs

#: uids handed to sandboxes: far above anything a distro allocates, below the 16-bit overflow id.
UID_BASE, UID_SPAN = 1_500_000, 1_000_000
#: Draws before giving up (each a bind; a busy span of a million uids needs very few).
_TRIES = 256


class UidHold:
    """One held uid; :meth:`release` (or the process ending) frees it."""

    def __init__(self, uid: int, sock: socket.socket) -> None:
        self.uid = uid
        self._sock: socket.socket | None = sock

    def release(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    @property
    def held(self) -> bool:
        return self._sock is not None


def _name(uid: int) -> bytes:
    return b"\0trace-factory/sandbox-uid/%d" % uid


def hold(uid: int) -> UidHold | None:
    """Hold ``uid`` if no other process holds it (not checked: whether a process runs as it)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not inherited by children (close-on-exec)
    try:
        sock.bind(_name(uid))
    except OSError:  # EADDRINUSE: another live sandbox's uid
        sock.close()
        return None
    return UidHold(uid, sock)


def allocate() -> UidHold:
    """A uid no live sandbox holds and no process runs as, held until released.

    Raises :class:`RuntimeError` with one line when none is found (the span is full, or names are squatted).
    """
    span = range(UID_BASE, UID_BASE + UID_SPAN)
    candidates = random.sample(span, min(_TRIES, len(span)))
    for uid in candidates:
        held = hold(uid)
        if held is None:
            continue
        if procfs.of_uid(uid):  # stragglers of a sandbox whose owner died: not free yet
            held.release()
            continue
        return held
    raise RuntimeError(f"no free sandbox uid in {UID_BASE}-{UID_BASE + UID_SPAN - 1} after {len(candidates)} draws: "
                       "close sandboxes, or run `factory sandbox reap` to end those of dead processes")
