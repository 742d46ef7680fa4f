#!/usr/bin/python
# envkit: fetch a bundle's files from this host's mirrors, in one module run per host (pull mode).
from __future__ import annotations

DOCUMENTATION = r"""
module: envkit_fetch
short_description: Fetch files from a host's mirrors, each checked against its sha256 before it is in place
description:
  - One module run per host does what a get_url per file and mirror did, with no async job and no polling from
    the controller. A file already in place with its sha256 is not fetched (C(changed=false) for it).
  - Each download goes to C(.NAME.envkit-part) beside its destination. A later try (of the same mirror or the
    next one) resumes it with a C(Range) header (C(bytes=N-)) when the mirror answers 206 with a matching
    C(Content-Range), and starts over when it answers 200 or another range. The sha256 is computed over the whole file before it
    is renamed into place (fsync, rename), so nothing is used before its hash matches. A part whose hash is wrong
    is removed; when it had been resumed (its start came from an earlier try, perhaps another mirror), the file is
    fetched whole from the same mirror at once, so a bad start never costs a good mirror its try.
  - Each download is bounded by C(deadline) seconds in all (a mirror that drips) and by C(timeout) seconds of
    silence (a mirror that stalls), then the next try; C(attempts) tries per mirror, the mirrors in the order given.
  - Files are fetched side by side, at most C(parallel) at a time. No proxy is used. A redirect is followed only to
    http(s) (never from https to http), at most 5 hops. A body larger than the file's C(size) (or C(max_size) where
    the size is not given), a malformed or contradictory C(Content-Length) or C(Content-Range), and an encoded body
    are refused.
  - In check mode a file in place with its sha256 is unchanged; for another, each mirror is asked in turn (HEAD,
    nothing written) until one has the file, and where none has it the module fails as it would have.
options:
  files:
    description: The files, each C(path) (in the bundle, relative to a mirror's root), C(sha256), and optionally
      C(name) (the file name in C(dest); default the path's last part) and C(size) (bytes; 0 or none unknown).
    type: list
    elements: dict
    required: true
  dest:
    description: The folder the files are put in (it must exist).
    type: path
    required: true
  mirrors:
    description: The mirrors (bundle root URLs, http or https), tried in this order.
    type: list
    elements: str
    required: true
  attempts:
    description: Tries of each mirror for a file before the next mirror.
    type: int
    default: 2
  deadline:
    description: Seconds one download may take in all (connect, headers and body).
    type: int
    default: 1800
  timeout:
    description: Seconds a mirror may stay silent (connect or read).
    type: int
    default: 30
  parallel:
    description: Downloads run side by side at most.
    type: int
    default: 8
  max_size:
    description: Bytes a file of unknown size may have at most.
    type: int
    default: 68719476736
  mode:
    description: The files' mode.
    type: raw
    default: "0600"
author: envkit developers
"""

RETURN = r"""
files:
  description: Per file, C(path), C(dest), C(changed), C(mirror) (the one that served it, or none), C(fetched) (bytes
    received), C(resumed) (bytes of a part kept from an earlier try), C(errors) (one line per failed try).
  returned: always
  type: list
errors:
  description: "Every failed try, C(MIRROR: PATH: why), each once."
  returned: always
  type: list
"""

import hashlib
import http.client
import os
import re
import socket
import ssl
import stat as stat_mod
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote, urljoin, urlsplit

CHUNK = 1 << 16
MAX_REDIRECTS = 5
PART_SUFFIX = ".envkit-part"
USER_AGENT = "envkit-fetch"
REDIRECTS = (301, 302, 303, 307, 308)
_DIGITS = re.compile(r"[0-9]{1,20}\Z")
_RANGE = re.compile(r"bytes ([0-9]{1,20})-([0-9]{1,20})/([0-9]{1,20})\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


class Failed(Exception):
    """One try failed; the message says why."""


class BadHash(Failed):
    """The whole file did not hash to the bundle's sha256 (its part is removed); `resumed`: bytes of its start that
    came from an earlier try."""

    def __init__(self, msg, resumed=0):
        super().__init__(msg)
        self.resumed = resumed


def url_of(mirror, path):
    """The URL of `path` on `mirror`: the mirror without trailing slashes, then the path quoted as Ansible's
    `urlencode` filter quotes a string (urllib's quote, `/` kept)."""
    return mirror.rstrip("/") + "/" + quote(path, safe="/")


def part_of(dest):
    """The part file of a destination: `.NAME.envkit-part` in the same folder."""
    folder, name = os.path.split(dest)
    return os.path.join(folder, "." + name + PART_SUFFIX)


def sha256_of(path, limit=None):
    """The sha256 of a regular file (None: it is not one, or it is longer than `limit`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat_mod.S_ISREG(st.st_mode) or (limit is not None and st.st_size > limit):
            return None
        h = hashlib.sha256()
        while True:
            block = fh.read(1 << 20)
            if not block:
                return h.hexdigest()
            h.update(block)


class Clock:
    """The time one download has: `deadline` seconds in all, `silence` without a byte. A watchdog shuts the
    connection's socket at the deadline, so a mirror that drips its headers is stopped too."""

    def __init__(self, deadline, silence):
        self.deadline, self.silence = deadline, silence
        self.end = time.monotonic() + deadline
        self.expired = False
        self.deadline_bound = False  # whether the last timeout given was the time left, not the silence timeout
        self._socks = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self):
        with self._lock:
            self.expired = True
            for sock in self._socks:
                try:  # the plain socket's shutdown (an SSLSocket's own would drop its state under a reading thread)
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass

    def watch(self, sock):
        with self._lock:
            self._socks.append(sock)
            if self.expired:
                raise Failed(self.overdue())

    def left(self):
        """Seconds the next socket operation may wait; Failed once the deadline has passed."""
        left = self.end - time.monotonic()
        if left <= 0 or self.expired:
            self.expired = True
            raise Failed(self.overdue())
        self.deadline_bound = left <= self.silence
        return min(left, self.silence)

    def overdue(self):
        return "stopped at the deadline (%g s for one download)" % self.deadline

    def stop(self):
        self._timer.cancel()


def _connect(url, clock, ctx):
    """An open connection to `url`'s host (no proxy) and the request target."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Failed("not an http(s) URL: %s" % url[:200])
    if parts.username is not None or parts.query or parts.fragment:
        raise Failed("a URL with credentials, a query or a fragment is refused: %s" % url[:200])
    try:
        port = parts.port
    except ValueError:
        raise Failed("bad port in %s" % url[:200]) from None
    timeout = clock.left()
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname, port, timeout=timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(parts.hostname, port, timeout=timeout)
    try:
        conn.connect()
        conn.envkit_sock = conn.sock  # http.client drops conn.sock once an answer that closes is read
        clock.watch(conn.sock)
        conn.sock.settimeout(clock.left())
    except Exception:
        conn.close()
        raise
    return conn, parts.path or "/"


def _request(url, start, clock, ctx):
    """(connection, response, final URL) of a GET (from byte `start` when > 0), redirects followed."""
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        conn, target = _connect(current, clock, ctx)
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if start:
            headers["Range"] = "bytes=%d-" % start
        try:
            conn.request("GET", target, headers=headers)
            resp = conn.getresponse()
        except Exception:
            conn.close()
            raise
        if resp.status not in REDIRECTS:
            return conn, resp, current
        location = resp.getheader("Location")
        conn.close()
        if not location:
            raise Failed("HTTP %d redirect without a Location" % resp.status)
        current = _next_hop(current, location)
    raise Failed("more than %d redirects" % MAX_REDIRECTS)


def _next_hop(current, location):
    """The URL a redirect from `current` to `location` leads to; Failed where it leaves http(s) or https."""
    nxt = urljoin(current, location.strip())
    scheme = urlsplit(nxt).scheme
    if scheme not in ("http", "https"):
        raise Failed("redirects to %s, not an http(s) URL: refused" % nxt[:200])
    if current.startswith("https:") and scheme == "http":
        raise Failed("redirects from https to %s (plain http): refused" % nxt[:200])
    return nxt


def _one_header(resp, name):
    """The value of a header sent once (None: not sent); Failed when sent twice with different values."""
    values = resp.headers.get_all(name) or []
    if len(set(v.strip() for v in values)) > 1:
        raise Failed("%s sent twice with different values %r: refused" % (name, values[:4]))
    return values[0].strip() if values else None


def plan_body(resp, start, size, cap):
    """What to read from a response to a GET from byte `start`: (offset the body starts at, its length or None).
    Failed for an answer that is not the file, or lies about it."""
    if resp.status not in (200, 206):
        raise Failed(("HTTP %d %s" % (resp.status, resp.reason or "")).strip())
    encoding = (_one_header(resp, "Content-Encoding") or "identity").lower()
    if encoding != "identity":
        raise Failed("a %s-encoded body, which was not asked for: refused" % encoding[:40])
    raw_length = _one_header(resp, "Content-Length")
    length = None
    if raw_length is not None:
        if not _DIGITS.match(raw_length):
            raise Failed("a malformed Content-Length %r: refused" % raw_length[:40])
        length = int(raw_length)
    limit = size if size else cap
    if resp.status == 200:
        if length is not None and (length > limit or (size and length != size)):
            raise Failed("announces %d bytes; the file has %s: refused" % (length, size if size else "at most %d" % cap))
        return 0, length
    # 206: only an answer to the range asked for, up to the file's end
    if not start:
        raise Failed("HTTP 206 to a request for the whole file: refused")
    crange = _one_header(resp, "Content-Range") or ""
    m = _RANGE.match(crange)
    first, last, total = (int(g) for g in m.groups()) if m else (-1, -1, -1)
    if not m or first != start or last != total - 1 or total > limit or (size and total != size):
        raise Failed("Content-Range %r does not answer bytes=%d- of the file" % (crange[:80], start))
    if length is not None and length != last - first + 1:
        raise Failed("Content-Length %d does not match Content-Range %r: refused" % (length, crange[:80]))
    return start, last - first + 1


class Part:
    """The part file of one destination, open for writing, with the sha256 of what it holds."""

    def __init__(self, path, keep):
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        self.fh = os.fdopen(fd, "r+b")
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            self.fh.close()
            raise Failed("%s is not a regular file" % path)
        self.hash = hashlib.sha256()
        self.size = 0
        if keep:
            while True:
                block = self.fh.read(1 << 20)
                if not block:
                    break
                self.hash.update(block)
                self.size += len(block)
        else:
            self.restart()

    def restart(self):
        self.fh.seek(0)
        self.fh.truncate()
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data):
        self.fh.write(data)
        self.hash.update(data)
        self.size += len(data)

    def close(self, sync=False):
        if sync:
            self.fh.flush()
            os.fsync(self.fh.fileno())
        self.fh.close()


def download(url, dest, want, size, clock, cap, ctx, tally=None):
    """One try: `url` into the part file of `dest`, resumed from what the part holds. (bytes received, bytes
    resumed) once the part holds the whole file with the sha256 `want`; Failed otherwise (BadHash: the whole file
    came and its hash is wrong; the part is removed). `tally[0]` counts the bytes received, a failed try's too."""
    tally = tally if tally is not None else [0]
    part_path = part_of(dest)
    held = 0
    try:
        st = os.lstat(part_path)
        if not stat_mod.S_ISREG(st.st_mode):
            raise Failed("%s is not a regular file: refused" % part_path)
        held = st.st_size
    except FileNotFoundError:
        pass
    if held > (size or cap):
        held = 0  # longer than the file: of no use
    part = None
    received = 0
    try:
        if held and held == size:  # a part already whole needs no request
            part = Part(part_path, keep=True)
        else:
            conn, resp, _ = _request(url, held, clock, ctx)
            try:
                try:
                    start, length = plan_body(resp, held, size, cap)
                except Failed:
                    if not held or resp.status not in (206, 416):
                        raise
                    # a range that is not the one asked for, or none the mirror can send (416: the part is as long
                    # as its file, of unknown size): none of it is used, the file is asked for whole
                    conn.close()
                    held = 0
                    conn, resp, _ = _request(url, 0, clock, ctx)
                    start, length = plan_body(resp, 0, size, cap)
                if not os.path.isdir(os.path.dirname(part_path)):
                    raise Failed("the folder %s does not exist" % os.path.dirname(part_path))
                # kept when the mirror sends the rest (206); the whole file (200): start over
                part = Part(part_path, keep=start > 0)
                if part.size != start:
                    raise Failed("the part changed during the request: %d bytes, not %d" % (part.size, start))
                limit = (size or cap) - part.size  # bytes the body may bring
                while True:
                    conn.envkit_sock.settimeout(clock.left())
                    block = resp.read1(min(CHUNK, limit + 1 - received))
                    clock.left()  # the deadline, checked at every block (a mirror that drips)
                    if not block:
                        break
                    received += len(block)
                    tally[0] += len(block)
                    if received > limit:
                        raise Failed("sends more than the file's %d bytes: refused" % (size or cap))
                    part.write(block)
                if length is not None and received != length:
                    raise Failed("the connection ended after %d of %d bytes" % (received, length))
                if size and part.size != size:
                    raise Failed("the body ended at %d of the file's %d bytes" % (part.size, size))
            except http.client.IncompleteRead as exc:
                partial = len(exc.partial)  # not kept: the part holds exactly the bytes read before
                tally[0] += partial
                raise Failed("the connection ended after %d of %s bytes" % (received + partial, length)) from None
            finally:
                conn.close()
        got = part.hash.hexdigest()
        part.close(sync=True)
    except BaseException as exc:
        if part is not None:
            part.close()
        if clock.expired or (isinstance(exc, (socket.timeout, TimeoutError)) and clock.deadline_bound):
            raise Failed(clock.overdue()) from None
        raise
    resumed = part.size - received
    if got != want:
        os.unlink(part_path)
        raise BadHash(
            "checksum mismatch: the %d bytes%s hash to sha256 %s, not the bundle's %s (removed)"
            % (part.size, " (%d of them resumed)" % resumed if resumed else "", got, want),
            resumed,
        )
    return received, resumed


def place(part_path, dest, mode):
    """The verified part renamed into place, its mode set, the folder synced."""
    os.chmod(part_path, mode)
    os.replace(part_path, dest)
    dfd = os.open(os.path.dirname(dest) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _why(exc):
    if isinstance(exc, Failed):
        return str(exc)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "no data for the silence timeout (stalled)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "TLS certificate not trusted: %s" % (exc.verify_message or exc)
    return ("%s: %s" % (type(exc).__name__, exc))[:300]


def head(url, size, clock, ctx):
    """Check mode: whether the mirror has the file (a HEAD request, nothing written). Failed: it has not."""
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        conn, target = _connect(current, clock, ctx)
        try:
            conn.request("HEAD", target, headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})
            resp = conn.getresponse()
            location = resp.getheader("Location")
        finally:
            conn.close()
        if resp.status in REDIRECTS and location:
            current = _next_hop(current, location)
            continue
        if resp.status != 200:
            raise Failed(("HTTP %d %s" % (resp.status, resp.reason or "")).strip())
        length = _one_header(resp, "Content-Length")
        if size and length is not None and length != str(size):
            raise Failed("announces %s bytes; the file has %d" % (length[:40], size))
        return
    raise Failed("more than %d redirects" % MAX_REDIRECTS)


def _try(url, dest, spec, opts, tally):
    """One try of one mirror, bounded by its own clock: (bytes received, bytes resumed), the file in place."""
    clock = Clock(opts["deadline"], opts["timeout"])
    try:
        if opts["check_mode"]:
            head(url, spec["size"], clock, opts["ctx"])
            return 0, 0
        got, resumed = download(url, dest, spec["sha256"], spec["size"], clock, opts["max_size"], opts["ctx"], tally)
        place(part_of(dest), dest, opts["mode"])
        return got, resumed
    finally:
        clock.stop()


def fetch_file(spec, opts):
    """Every try for one file, mirror after mirror, until it is in place with its sha256: its result entry."""
    dest = os.path.join(opts["dest"], spec["name"])
    out = {"path": spec["path"], "dest": dest, "changed": False, "mirror": None, "fetched": 0, "resumed": 0}
    out.update(received={}, errors=[])
    if sha256_of(dest, spec["size"] or None) == spec["sha256"]:
        return out
    out["changed"] = True
    for mirror in opts["mirrors"]:
        url = url_of(mirror, spec["path"])
        tally = [0]  # bytes this mirror sent for the file, failed tries included
        try:
            for _ in range(opts["attempts"]):
                try:
                    try:
                        got, resumed = _try(url, dest, spec, opts, tally)
                    except BadHash as exc:
                        if not exc.resumed:
                            raise
                        # its start came from an earlier try (perhaps another mirror): the whole file, from here, at once
                        out["errors"].append("%s: %s: %s" % (mirror, spec["path"], exc))
                        got, resumed = _try(url, dest, spec, opts, tally)
                    out.update(mirror=mirror, fetched=got, resumed=resumed)
                    return out
                except Exception as exc:  # noqa: BLE001 - every failure of a try is reported, none raised
                    out["errors"].append("%s: %s: %s" % (mirror, spec["path"], _why(exc)))
        finally:
            if tally[0]:
                out["received"][mirror] = tally[0]
    return out


def _spec(raw, max_size):
    """A file of the `files` option, checked: path, sha256, name, size."""
    if not isinstance(raw, dict):
        raise ValueError("each file is a mapping with path and sha256, not %r" % (raw,))
    path, sha = str(raw.get("path") or ""), str(raw.get("sha256") or "").lower()
    name = str(raw.get("name") or path.rsplit("/", 1)[-1])
    if not path or path.startswith("/") or "\0" in path:
        raise ValueError("not a path in the bundle: %r" % path[:200])
    if not _SHA256.match(sha):
        raise ValueError("%s: not a sha256: %r" % (path[:200], sha[:80]))
    if "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError("%s: not a plain file name: %r" % (path[:200], name[:200]))
    size = raw.get("size") or 0
    try:
        size = int(size)
    except (TypeError, ValueError):
        raise ValueError("%s: size %r is not a number of bytes" % (path[:200], size)) from None
    if size < 0 or size > max_size:
        raise ValueError("%s: size %d is out of range (0 to %d)" % (path[:200], size, max_size))
    return {"path": path, "sha256": sha, "name": name, "size": size}


def unique_errors(results):
    """The result entries' error lines, each once, in the order they first came."""
    return list(dict.fromkeys(e for r in results for e in r["errors"]))


def fetch_all(files, dest, mirrors, attempts=2, deadline=1800, timeout=30, parallel=8, max_size=64 << 30, mode=0o600,
              check_mode=False):
    """Every file, side by side (at most `parallel`): (result entries in the files' order, failure message or None)."""
    specs = [_spec(f, max_size) for f in files]
    opts = {
        "dest": dest, "mirrors": list(mirrors), "attempts": max(1, int(attempts)), "deadline": max(1, int(deadline)),
        "timeout": max(1, int(timeout)), "max_size": int(max_size), "mode": mode, "check_mode": check_mode,
        "ctx": ssl.create_default_context(),
    }
    if not specs:
        return [], None
    with ThreadPoolExecutor(max_workers=max(1, min(int(parallel), len(specs)))) as pool:
        results = list(pool.map(lambda s: fetch_file(s, opts), specs))
    missing = [r for r in results if r["mirror"] is None and r["changed"]]
    if not missing:
        return results, None
    errors = unique_errors(missing)
    msg = "Could not fetch %s with the bundle's sha256 from %s: %s" % (
        ", ".join(r["path"] for r in missing), ", ".join(opts["mirrors"]) or "(no mirror)", "; ".join(errors) or "no try"
    )
    return results, msg


def main():
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "required": True},
            "dest": {"type": "path", "required": True},
            "mirrors": {"type": "list", "elements": "str", "required": True},
            "attempts": {"type": "int", "default": 2},
            "deadline": {"type": "int", "default": 1800},
            "timeout": {"type": "int", "default": 30},
            "parallel": {"type": "int", "default": 8},
            "max_size": {"type": "int", "default": 64 << 30},
            "mode": {"type": "raw", "default": "0600"},
        },
        supports_check_mode=True,
    )
    p = module.params
    mode = p["mode"]
    try:
        mode = int(mode, 8) if isinstance(mode, str) else int(mode)
    except ValueError:
        module.fail_json(msg="mode %r is not an octal mode" % (p["mode"],))
    try:
        results, failure = fetch_all(
            p["files"], p["dest"], p["mirrors"], p["attempts"], p["deadline"], p["timeout"], p["parallel"], p["max_size"],
            mode, module.check_mode,
        )
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    errors = unique_errors(results)
    changed = any(r["changed"] and (r["mirror"] is not None) for r in results)
    if failure:
        module.fail_json(msg=failure, files=results, errors=errors, changed=changed)
    module.exit_json(changed=changed, files=results, errors=errors)


if __name__ == "__main__":
    main()
