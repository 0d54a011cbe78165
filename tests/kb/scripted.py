"""Model endpoints scripted over real HTTP for the knowledge-base tests: a server whose
``answer(body)`` gives (status, JSON answer), recording each call (path, Authorization,
body). Two run at once, the first listed by the test's settings, the second not."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any]], tuple[int, Any]]


def _handler(answer: Answer) -> type[BaseHTTPRequestHandler]:
    class Endpoint(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the name http.server calls
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.server.calls.append((self.path, self.headers.get("Authorization"), body))
            status, reply = answer(body)
            data = json.dumps(reply).encode() if reply is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass
    return Endpoint


@contextmanager
def endpoint_pair(answer: Answer) -> Iterator[tuple[list[str], list[ThreadingHTTPServer]]]:
    """Two servers answering with ``answer``: their base URLs (…/v1) and the servers."""
    servers = []
    for _ in range(2):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(answer))
        server.calls = []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        yield [f"http://127.0.0.1:{s.server_address[1]}/v1" for s in servers], servers
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
