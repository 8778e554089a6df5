"""Where a Docker worker's round trip goes, against bwrap's, in one run (issue 19's "sandboxed step within 5x").

    python bench/bench_docker_path.py [--calls 2000] [--rounds 5]

Three layers, each measured on bwrap and on Docker in alternating rounds (medians of per-round means):

* raw round trip: the echo env process started as a worker is, but without the shim (the backend's
  ``_spawn_worker``: on Docker an exec attached over the daemon's hijacked socket, on bwrap pipes to the
  sandbox), one ~200-byte request line written and its reply line read back through the backend's own
  ``Channel`` (its ``pump``, Docker's stream demultiplexing included), no host ``Worker`` code;
* host-side demultiplexing alone: Docker's ``Demux`` on a reply already framed (what Python
  spends per reply, without waiting);
* a worker call: ``echo`` on the shipped worker (shim + env process), the protocol as every env step uses it;
  on Docker (as root, local daemon) it runs over the worker's FIFOs (:mod:`sandbox.docker_fifo`), not the
  attach stream.

The Docker-minus-bwrap difference of the raw round trip (attach stream) is what the daemon's relay costs per
round trip (client socket -> dockerd -> containerd-shim -> the exec's pipes, and back, with Docker's 8-byte
stream framing); the host-side row shows how little of that is Python's; the worker-call row shows what is
left once the protocol bypasses the relay. Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REQUEST = (json.dumps({"id": 1, "method": "echo", "params": {"x": "y" * 150}}) + "\n").encode()


def raw_round_trip(box, calls: int) -> float:
    """Mean seconds per request/reply line with the echo worker started directly (no shim) on the backend's own
    channel (its ``pump``; Docker's stream demultiplexing included), without the host's ``Worker`` protocol code."""
    channel = box._spawn_worker(box.worker_argv("sandbox.handlers.echo"))  # noqa: SLF001 - the bare transport
    got = bytearray()
    channel.on_stdout = got.extend
    channel.start()
    try:
        deadline = time.monotonic() + 60
        while b"\n" not in got and time.monotonic() < deadline:  # the ready line
            channel.pump(1.0)
        started = time.perf_counter()
        for _ in range(calls):
            del got[:]
            channel.write(REQUEST)
            while b"\n" not in got:
                channel.pump(5.0)
        return (time.perf_counter() - started) / calls
    finally:
        channel.kill()


def host_side(calls: int) -> float:
    """Mean seconds to demultiplex one framed 200-byte reply (Docker's host-side work per reply, no waiting)."""
    import struct

    from sandbox.docker_exec import Demux

    line = b"x" * 199 + b"\n"
    framed = bytes([1, 0, 0, 0]) + struct.pack(">I", len(line)) + line
    demux = Demux()
    sink = bytearray()
    started = time.perf_counter()
    for _ in range(calls):
        for _stream, payload in demux.feed(framed):
            sink.extend(payload)
        del sink[:]
    return (time.perf_counter() - started) / calls


def worker_call(box, calls: int) -> float:
    worker = box.start_worker("sandbox.handlers.echo")
    try:
        started = time.perf_counter()
        for _ in range(calls):
            worker.call("echo", {"x": "y" * 150})
        return (time.perf_counter() - started) / calls
    finally:
        worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import sandbox
    from sandbox import SandboxLimits

    boxes = {name: sandbox.construct(name, SandboxLimits(wall_timeout_s=120)) for name in ("bwrap", "docker")}
    for box in boxes.values():
        box.open()
    rows: dict[str, list[float]] = {}
    try:
        for _ in range(args.rounds):
            for name, box in boxes.items():
                box.shimmed = False  # the raw round trip: the env process speaks to the host itself
                rows.setdefault(f"{name} raw round trip", []).append(raw_round_trip(box, args.calls))
                box.shimmed = True  # as shipped
                rows.setdefault(f"{name} worker call", []).append(worker_call(box, args.calls // 4))
            rows.setdefault("docker host-side demux", []).append(host_side(args.calls))
    finally:
        for box in boxes.values():
            box.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"median of {args.rounds} alternating rounds (per round: {args.calls} lines, {args.calls // 4} calls)")
    for key, value in med.items():
        print(f"  {key:28s} {value * 1e6:8.1f} us")
    relay = med["docker raw round trip"] - med["bwrap raw round trip"]
    call = med["docker worker call"] - med["bwrap worker call"]
    print(f"  docker - bwrap, raw trip    {relay * 1e6:8.1f} us ({med['docker raw round trip'] / med['bwrap raw round trip']:.2f}x)")
    print(f"  docker - bwrap, worker call {call * 1e6:8.1f} us ({med['docker worker call'] / med['bwrap worker call']:.2f}x)")
    print(f"  share of the call difference that the raw round trip explains: {relay / call:.0%}" if call > 0 else "")


if __name__ == "__main__":  # pragma: no cover
    main()
