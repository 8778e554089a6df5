"""A minimal local fake of E2B's in-sandbox daemon (envd), for contract tests of the e2b backend.

With ``E2B_DEBUG=true`` the real ``e2b`` SDK skips the control plane (no API key, no sandbox
creation call) and talks to envd directly at ``E2B_SANDBOX_URL`` (default
``http://localhost:49983``), over plain HTTP/1.1:

* ``GET /health``
* ``POST /files?path=...`` - multipart upload (field ``file``, filename = absolute path)
* Connect-RPC with the JSON codec on ``/process.Process/<Method>``: ``Start`` is a server stream
  (``application/connect+json``: 5-byte envelopes, then an end-of-stream envelope, flag 0x02),
  ``SendInput`` / ``CloseStdin`` / ``SendSignal`` / ``List`` are unary (``application/json``).

This fake implements exactly that subset. It runs commands as plain host subprocesses (the
unsafe runner: no isolation at all - test use only) with literal paths, so the backend under test
is pointed at a temp dir via its ``root`` option. Messages are built and parsed with the SDK's own
generated protobuf classes, so the wire shapes are the SDK's, not our guess.

Not served (the SDK calls them only for features the backend does not use): ``Connect``,
``StreamInput``, ``Update``, PTY, the filesystem RPC service (list/stat/watch/remove), file
download, and the keepalive events.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import struct
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from e2b.envd.process import process_pb
from protobuf import Oneof


class _Proc:
    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.events: queue.Queue = queue.Queue()


class FakeEnvd:
    """Serve envd's process + file upload API on 127.0.0.1:<port> in a background thread."""

    def __init__(self, root: str):
        self.root = root
        self.procs: dict[int, _Proc] = {}
        self.lock = threading.Lock()
        self.requests: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = bytearray()
                    while True:
                        size = int(self.rfile.readline().strip().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            break
                        data += self.rfile.read(size)
                        self.rfile.readline()
                    return bytes(data)
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _connect_error(self, status: int, code: str, message: str) -> None:
                self._send(status, json.dumps({"code": code, "message": message}).encode())

            def do_GET(self) -> None:  # noqa: N802
                fake.requests.append(f"GET {self.path}")
                if urlparse(self.path).path == "/health":
                    self.send_response(204)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._send(404, b'{"message":"not found"}')

            def do_POST(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                fake.requests.append(f"POST {url.path}")
                body = self._body()
                if url.path == "/files":
                    return self._files(url, body)
                method = url.path.rsplit("/", 1)[-1]
                if url.path.startswith("/process.Process/"):
                    handler = getattr(fake, f"rpc_{method}", None)
                    if handler is None:
                        return self._connect_error(404, "unimplemented", f"fake envd does not serve {method}")
                    if method == "Start":
                        return self._start(body)
                    try:
                        res = handler(body)
                    except KeyError as e:
                        return self._connect_error(404, "not_found", f"process {e} not found")
                    return self._send(200, res.encode())
                self._connect_error(404, "unimplemented", url.path)

            def _files(self, url, body: bytes) -> None:  # type: ignore[no-untyped-def]
                ctype = self.headers.get("Content-Type", "")
                q = parse_qs(url.query)
                written = []
                if ctype.startswith("multipart/form-data"):
                    boundary = ctype.split("boundary=", 1)[1].strip().strip('"').encode()
                    for part in body.split(b"--" + boundary)[1:]:
                        if part.startswith(b"--"):
                            break
                        head, _, data = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
                        data = data[:-2] if data.endswith(b"\r\n") else data
                        disp = [h for h in head.split(b"\r\n") if h.lower().startswith(b"content-disposition")]
                        filename = None
                        if disp:
                            for item in disp[0].split(b";"):
                                item = item.strip()
                                if item.startswith(b"filename="):
                                    filename = item[len(b"filename="):].strip(b'"').decode()
                        path = filename or q.get("path", [None])[0]
                        if path is None:
                            return self._send(400, b'{"message":"no path"}')
                        written.append(fake.write_file(path, data))
                else:
                    path = q["path"][0]
                    written.append(fake.write_file(path, body))
                self._send(200, json.dumps(written).encode())

            def _start(self, body: bytes) -> None:
                size = struct.unpack(">I", body[1:5])[0]  # envelope: 1 flag byte, 4-byte length
                req = process_pb.StartRequest.from_json(body[5:5 + size])
                try:
                    pid, proc = fake.start(req)
                except OSError as e:
                    return self._connect_error(400, "invalid_argument", str(e))
                self.send_response(200)
                self.send_header("Content-Type", "application/connect+json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def chunk(payload: bytes, flag: int = 0) -> None:
                    env = bytes([flag]) + struct.pack(">I", len(payload)) + payload
                    self.wfile.write(f"{len(env):x}\r\n".encode() + env + b"\r\n")
                    self.wfile.flush()

                def event(ev: process_pb.ProcessEvent) -> None:
                    chunk(process_pb.StartResponse(event=ev).to_json().encode())

                try:
                    event(process_pb.ProcessEvent(event=Oneof("start", process_pb.ProcessEvent.StartEvent(pid=pid))))
                    while True:
                        kind, value = proc.events.get()
                        if kind == "end":
                            code = value
                            end = process_pb.ProcessEvent.EndEvent(
                                exit_code=code if code >= 0 else -1, exited=code >= 0,
                                status=f"exit status {code}" if code >= 0 else f"signal: {signal.Signals(-code).name.lower()}",
                            )
                            event(process_pb.ProcessEvent(event=Oneof("end", end)))
                            break
                        data = process_pb.ProcessEvent.DataEvent(output=Oneof(kind, value))
                        event(process_pb.ProcessEvent(event=Oneof("data", data)))
                    chunk(b"{}", flag=0x02)
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError, socket.error):
                    pass  # client went away (disconnect); the process keeps running, as in envd

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="fake-envd")

    # -- lifecycle -------------------------------------------------------------------------------------
    def start_server(self) -> "FakeEnvd":
        self.thread.start()
        return self

    def stop(self) -> None:
        with self.lock:
            procs = list(self.procs.values())
        for p in procs:
            try:
                os.killpg(p.popen.pid, signal.SIGKILL)
            except OSError:
                pass
        self.server.shutdown()
        self.server.server_close()

    # -- envd behaviour --------------------------------------------------------------------------------
    def write_file(self, path: str, data: bytes) -> dict:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return {"name": os.path.basename(path), "type": "file", "path": path}

    def start(self, req) -> tuple[int, _Proc]:  # type: ignore[no-untyped-def]
        cfg = req.process
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.root, "LANG": "C.UTF-8"}
        env.update(dict(cfg.envs or {}))
        cwd = cfg.cwd if cfg.has_field("cwd") and cfg.cwd else self.root
        popen = subprocess.Popen(
            [cfg.cmd, *cfg.args], cwd=cwd, env=env,
            stdin=subprocess.PIPE if req.stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        proc = _Proc(popen)
        with self.lock:
            self.procs[popen.pid] = proc
        remaining = [2]
        rlock = threading.Lock()

        def pump(f, kind: str) -> None:  # type: ignore[no-untyped-def]
            fd = f.fileno()
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    break
                proc.events.put((kind, data))
            with rlock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                code = popen.wait()
                proc.events.put(("end", code))
                with self.lock:
                    self.procs.pop(popen.pid, None)

        for f, kind in ((popen.stdout, "stdout"), (popen.stderr, "stderr")):
            threading.Thread(target=pump, args=(f, kind), daemon=True).start()
        return popen.pid, proc

    def _proc(self, selector) -> _Proc:  # type: ignore[no-untyped-def]
        pid = selector.selector.value
        with self.lock:
            return self.procs[pid]

    def rpc_SendInput(self, body: bytes) -> str:  # noqa: N802
        req = process_pb.SendInputRequest.from_json(body)
        proc = self._proc(req.process)
        data = req.input.input.value
        if proc.popen.stdin is not None:
            proc.popen.stdin.write(data)
            proc.popen.stdin.flush()
        return process_pb.SendInputResponse().to_json()

    def rpc_CloseStdin(self, body: bytes) -> str:  # noqa: N802
        req = process_pb.CloseStdinRequest.from_json(body)
        proc = self._proc(req.process)
        if proc.popen.stdin is not None:
            proc.popen.stdin.close()
        return process_pb.CloseStdinResponse().to_json()

    def rpc_SendSignal(self, body: bytes) -> str:  # noqa: N802
        req = process_pb.SendSignalRequest.from_json(body)
        proc = self._proc(req.process)
        sig = signal.SIGKILL if req.signal == process_pb.Signal.SIGKILL else signal.SIGTERM
        try:
            os.killpg(proc.popen.pid, sig)
        except OSError:
            pass
        return process_pb.SendSignalResponse().to_json()

    def rpc_List(self, body: bytes) -> str:  # noqa: N802
        return process_pb.ListResponse().to_json()

    def rpc_Start(self, body: bytes) -> str:  # noqa: N802 - streamed; handled in the request handler
        raise NotImplementedError
