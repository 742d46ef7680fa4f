"""The path an http: or file: URL names, decoded the way a server or the file system decodes it, and checked.

A lock's http:/file: URLs must lie under a mirror the closure records (`envkit.models.lock.is_mirrored`). The check
is made on what the URL means, not on how it is spelled: the path is percent-decoded again and again until it no
longer changes (at most `MAX_DECODE_ROUNDS` rounds: a server or proxy that decodes twice sees `%252e%252e%252f` as
`../`), and every form on the way must be free of `.`/`..` segments (`..%2f`, `%2e%2e`, `..;`, full-width dots
included), backslashes, NUL and other control characters, and be UTF-8 (no overlong `%c0%ae`). The path that is then
compared with the mirror, and opened for a `file:` URL (`envkit.artifacts.download`), is the path decoded once: what the URL
names.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import unquote, urlsplit

MAX_DECODE_ROUNDS = 3  # `%252B` (a `+` encoded twice) needs two; more than three is refused


def decoded_path(url: str) -> str:
    """The path of `url` decoded once (what it names), after the checks above; ValueError saying why otherwise."""
    forms = [urlsplit(url).path]
    for _ in range(MAX_DECODE_ROUNDS):
        try:
            decoded = unquote(forms[-1], errors="strict")
        except UnicodeDecodeError:
            raise ValueError(f"its path is not UTF-8 once percent-decoded ({forms[-1][:80]!r})") from None
        if decoded == forms[-1]:
            break
        forms.append(decoded)
    else:
        if unquote(forms[-1], errors="replace") != forms[-1]:
            raise ValueError(f"its path is still percent-encoded after {MAX_DECODE_ROUNDS} decodings")
    for form in forms:
        _check(form)
    return forms[1] if len(forms) > 1 else forms[0]


def _check(path: str) -> None:
    bad = next((c for c in path if c == "\\" or ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise ValueError(f"its path holds {'a backslash' if bad == chr(92) else f'the control character {bad!r}'} once decoded")
    for segment in path.split("/"):
        if unicodedata.normalize("NFKC", segment.split(";", 1)[0]) in (".", ".."):
            raise ValueError(f"its path has a {segment[:20]!r} segment once decoded (it could climb out of its mirror)")


def split(url: str) -> tuple[str, str, str]:
    """(scheme, host and port as written, decoded path) of an http:/file: URL; ValueError when its path is refused."""
    parts = urlsplit(url)
    return parts.scheme, parts.netloc, decoded_path(url)


def under(url: str, mirror: str) -> bool:
    """Whether `url` lies under the mirror prefix `mirror` (an http:// origin or a file:/// folder, ending in `/`):
    the same scheme and host, and its decoded path inside the mirror's (or the mirror itself). ValueError when the
    URL's path is refused."""
    scheme, netloc, path = split(url)
    try:
        m_scheme, m_netloc, m_path = split(mirror)
    except ValueError:
        return False
    if scheme not in ("http", "file") or (scheme, netloc) != (m_scheme, m_netloc) or not m_path.endswith("/"):
        return False
    return path.startswith(m_path) or path + "/" == m_path
