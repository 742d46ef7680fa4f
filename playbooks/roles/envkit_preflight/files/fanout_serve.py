#!/usr/bin/python3
"""envkit fan-out: a group head's read-only mirror of the bundle files it has staged and verified.

Started by envkit_preflight (tasks/fanout.yml) as a transient systemd unit with a bounded lifetime, stopped at the
end of the run. Python 3 standard library only (the hosts need not have envkit). It serves the files listed in
--files (JSON: [{path, sha256, role, name}]; the file is --dir ROLE=FOLDER / name) whose sha256 it has checked
itself at start: a file that does not match is not served (404), nor is any other path. It keeps each served
file open from the check on and reads it from that descriptor: a file replaced afterwards is not served in its
place. GET and HEAD only, no listing, no ranges; at most --max-clients requests at once (503 beyond); each
request is logged as `CLIENT "METHOD PATH HTTP/x" STATUS BYTES` (the bytes of content sent). It exits after
--lifetime seconds whatever happens.
"""

import argparse
import hashlib
import json
import os
import re
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

_PATH = re.compile(r"^[A-Za-z0-9._+~-]+(/[A-Za-z0-9._+~-]+)*$")
CHUNK = 1 << 20


def load(files_json, dirs, log):
    """{url path: (fd, size)} of the files whose sha256 matches; a mismatch or a missing file is logged, not served."""
    with open(files_json, encoding="utf-8") as fh:
        entries = json.load(fh)
    served = {}
    for e in entries:
        path, name, role, want = str(e.get("path", "")), str(e.get("name", "")), str(e.get("role", "")), str(e.get("sha256", ""))
        if not _PATH.match(path) or ".." in path.split("/") or "/" in name or name in ("", ".", "..") or role not in dirs:
            log(f"refused {path!r}: not a bundle path, file name or role")
            continue
        try:
            fd = os.open(os.path.join(dirs[role], name), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            log(f"not served {path}: {exc.strerror}")
            continue
        st = os.fstat(fd)
        h = hashlib.sha256()
        offset = 0
        while stat.S_ISREG(st.st_mode):
            block = os.pread(fd, CHUNK, offset)
            if not block:
                break
            h.update(block)
            offset += len(block)
        if not stat.S_ISREG(st.st_mode) or offset != st.st_size or h.hexdigest() != want.lower():
            os.close(fd)
            log(f"not served {path}: its sha256 is not the bundle's")
            continue
        served[path] = (fd, st.st_size)
    return served


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--files", required=True)
    p.add_argument("--dir", action="append", default=[], help="ROLE=FOLDER")
    p.add_argument("--log", required=True)
    p.add_argument("--lifetime", type=int, default=14400)
    p.add_argument("--max-clients", type=int, default=64)
    a = p.parse_args(argv)
    logf = open(a.log, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - for the process's life
    lock = threading.Lock()

    def log(line):
        with lock:
            logf.write(line.replace("\n", " ") + "\n")

    dirs = dict(d.split("=", 1) for d in a.dir if "=" in d)
    served = load(a.files, dirs, log)
    slots = threading.BoundedSemaphore(a.max_clients)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"
        timeout = 60

        def log_message(self, format, *args):  # noqa: A002
            pass

        def _answer(self, body):
            sent = 0
            path = unquote(self.path.split("?", 1)[0]).lstrip("/")
            hit = served.get(path)
            if not slots.acquire(blocking=False):
                self.send_error(503)
                status = 503
            elif hit is None:
                slots.release()
                self.send_error(404)
                status = 404
            else:
                try:
                    fd, size = hit
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    status = 200
                    while body and sent < size:
                        block = os.pread(fd, min(CHUNK, size - sent), sent)
                        if not block:
                            break
                        self.wfile.write(block)
                        sent += len(block)
                except OSError:
                    pass
                finally:
                    slots.release()
            log(f'{self.client_address[0]} "{self.command} /{path} {self.request_version}" {status} {sent}')

        def do_GET(self):  # noqa: N802
            self._answer(True)

        def do_HEAD(self):  # noqa: N802
            self._answer(False)

    server = ThreadingHTTPServer((a.bind, a.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log(f"serving {len(served)} verified file(s) at http://{a.bind}:{a.port} for at most {a.lifetime} s")
    time.sleep(max(a.lifetime, 1))
    log("lifetime over: stopping")
    return 0


if __name__ == "__main__":
    sys.exit(main())
