#!/usr/bin/python3
"""http_server.py - the local HTTP server weights_spec.lua downloads from.

    /usr/bin/python3 tests/http_server.py DIR PORTFILE LOG [PARENT_PID]

Serves the files of DIR on 127.0.0.1 (a free port, written to PORTFILE once
listening), standard library only, with byte ranges (Range: bytes=N- and
N-M -> 206 with Content-Range; past the end -> 416 bytes */SIZE).  The path's
first component picks a behaviour, so each test names what it wants:

    /files/NAME       the file, ranges honoured
    /norange/NAME     the file, Range ignored (200, the whole file)
    /drop/NAME        the first request for NAME sends the headers of the
                      whole answer and half the bytes, then closes the
                      connection; later ones are /files/
    /slow/NAME        the file in 16 KiB pieces, 20 ms apart
    /stall/NAME       the first request for NAME sends half the bytes, then
                      nothing for 30 s; later ones are /files/
    /nolength/NAME    the whole file without a Content-Length (the end is the
                      connection's close), Range ignored
    /badrange/NAME    a range request answered with 206 and the whole file
                      (Content-Range bytes 0-...: not the range asked for)
    /redirect/K/NAME  302 to /redirect/K-1/NAME, /redirect/0/NAME -> /files/NAME
    /offsite/NAME     302 to ftp://127.0.0.1/NAME (a scheme srgeo refuses)
    /huge/NAME        200 with a Content-Length of 10^13 bytes, then a few bytes
    anything else     404

Every request is one line of LOG: "METHOD PATH RANGE" (RANGE "-" when
absent), so a test can count requests and see which were resumed.  The
server exits when PARENT_PID (the test process) is gone, or after 15 minutes.
"""
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT, PORTFILE, LOG = sys.argv[1], sys.argv[2], sys.argv[3]
PARENT = int(sys.argv[4]) if len(sys.argv) > 4 else None
log_lock = threading.Lock()
dropped = set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self):
        with log_lock, open(LOG, "a") as f:
            f.write("%s %s %s\n" % (self.command, self.path, self.headers.get("Range", "-")))

    def send(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.record()
        parts = self.path.lstrip("/").split("/")
        kind, name = parts[0], parts[-1]
        if kind == "redirect" and len(parts) == 3:
            k = int(parts[1])
            to = "/files/%s" % name if k <= 0 else "/redirect/%d/%s" % (k - 1, name)
            return self.send(302, b"moved\n", [("Location", to)])
        if kind == "offsite":
            return self.send(302, b"moved\n", [("Location", "ftp://127.0.0.1/%s" % name)])
        path = os.path.join(ROOT, name)
        if kind not in ("files", "norange", "drop", "slow", "huge", "stall", "nolength", "badrange") or "/" in name \
                or not os.path.isfile(path):
            return self.send(404, b"not found\n")
        if kind == "huge":
            self.send_response(200)
            self.send_header("Content-Length", str(10**13))
            self.end_headers()
            self.wfile.write(b"x" * 1024)
            self.close_connection = True
            return
        with open(path, "rb") as f:
            data = f.read()
        size, start, end = len(data), 0, len(data)
        rng = self.headers.get("Range")
        code, headers = 200, []
        if kind == "nolength":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True
            return
        if rng and kind != "norange" and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a)
            end = min(int(b) + 1, size) if b else size
            if start >= size:
                return self.send(416, b"", [("Content-Range", "bytes */%d" % size)])
            if kind == "badrange":
                start, end = 0, size
            code, headers = 206, [("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))]
        body = data[start:end]
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if kind in ("drop", "stall") and name not in dropped:
            dropped.add(name)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            if kind == "stall":
                time.sleep(30)
            self.close_connection = True
            return
        if kind == "slow":
            for i in range(0, len(body), 16384):
                self.wfile.write(body[i : i + 16384])
                self.wfile.flush()
                time.sleep(0.02)
            return
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)


def watch():
    t0 = time.time()
    while time.time() - t0 < 900:
        time.sleep(0.5)
        if PARENT is not None:
            try:
                os.kill(PARENT, 0)
            except OSError:
                break
    os._exit(0)


threading.Thread(target=watch, daemon=True).start()
server.serve_forever()
