"""Hostile files given where envkit reads a user's file (`envkit.io.untrusted`): a FIFO, `/dev/zero`, a folder, a
socket, a link out of the folder it must stay in, a file one byte over its cap, bytes that are not UTF-8, JSON too
deep. Each is refused promptly (a FIFO never blocks) with exit 2 naming the file; each cap is tested at the cap and
one byte over. Then through the commands that read such files: `matrix refresh --snapshot` and the model folder
`smoke --serve` reads (whose links may leave it: a Hugging Face cache snapshot)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.io import jsonread as J
from envkit.io import untrusted as U

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "pypi-snapshot"
SMALL = U.Kind("a test file", 100)


def prompt(fn, *args, **kwargs):
    """What `fn` returned or raised, run in a thread that must end within 10 s (a FIFO opened blocking would not)."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), f"{fn.__name__} blocked"
    return box


def refused(path, kind=SMALL, **kw) -> BadInput:
    box = prompt(U.read_bytes, path, kind, **kw)
    assert isinstance(box.get("error"), BadInput), box
    return box["error"]


@pytest.fixture
def corpus(tmp_path):
    """A folder `root` with one hostile entry per name, and a file outside it."""
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("outside")
    os.mkfifo(root / "fifo")
    os.symlink("/dev/zero", root / "zero")
    os.symlink(outside, root / "link-out")
    os.symlink("../secret.txt", root / "relative-link-out")
    (root / "inside.txt").write_text("inside")
    os.symlink("inside.txt", root / "link-in")
    (root / "folder").mkdir()
    os.symlink("loop", root / "loop")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "socket"))
    yield root, outside
    sock.close()


@pytest.mark.parametrize(
    "name, message",
    [
        ("fifo", "is a FIFO, not a regular file"),
        ("zero", "leads out of"),  # /dev/zero, outside the root
        ("folder", "is a directory, not a regular file"),
        ("socket", "is a socket, not a regular file"),
        ("link-out", "leads out of"),
        ("relative-link-out", "leads out of"),
        ("../secret.txt", "leads out of"),
        ("missing", "does not exist"),
        ("loop", "cannot be read"),
    ],
)
def test_a_hostile_entry_is_refused_promptly_with_exit_2(corpus, name, message):
    root, _ = corpus
    err = refused(name, root=root)
    assert message in err.message and err.exit_code == 2 and err.hint
    assert err.where is not None and err.where.file


def test_the_same_without_a_root(corpus):
    root, outside = corpus
    for name, message in [("fifo", "a FIFO"), ("zero", "a character device"), ("folder", "a directory")]:
        assert message in refused(root / name).message
    assert prompt(U.read_bytes, "/dev/zero", SMALL)["error"].message.startswith("/dev/zero is a character device")
    assert "/dev/zero is a character device" in refused("zero", root="/dev").message  # a device inside its root
    assert U.read_bytes(root / "link-out", SMALL) == b"outside"  # no root: a link is the user's to follow


def test_links_inside_the_root_are_followed(corpus):
    root, _ = corpus
    assert U.read_text("link-in", SMALL, root=root) == "inside"
    assert U.read_text(root / "inside.txt", SMALL, root=root) == "inside"  # an absolute path inside the root


def test_a_file_at_the_cap_is_read_and_one_byte_more_is_refused(tmp_path):
    at, over = tmp_path / "at", tmp_path / "over"
    at.write_bytes(b"x" * SMALL.max_bytes)
    over.write_bytes(b"x" * (SMALL.max_bytes + 1))
    assert len(U.read_bytes(at, SMALL)) == SMALL.max_bytes
    err = refused(over)
    assert "is too large for a test file (over 100 bytes)" in err.message


def test_text_must_be_utf8(corpus):
    root, _ = corpus
    with pytest.raises(BadInput, match=r"is not UTF-8 text \(byte 3\)"):
        U.read_text("latin1.txt", SMALL, root=root)


def test_json_depth_at_the_cap_is_read_and_one_level_more_is_refused(tmp_path):
    for depth, ok in [(J.MAX_DEPTH, True), (J.MAX_DEPTH + 1, False), (200_000, False)]:
        (tmp_path / "doc.json").write_text("[" * depth + "]" * depth)
        if ok:
            assert J.read_json(tmp_path / "doc.json") == J.parse_json("[" * depth + "]" * depth, "x")
        else:
            with pytest.raises(BadInput, match=f"nested deeper than {J.MAX_DEPTH} levels"):
                J.read_json(tmp_path / "doc.json")


@pytest.mark.parametrize(
    "text, depth",
    [('{"a": "[[[[["}', 1), (r'["\"[[[", [[]]]', 3), ("[]", 1), ('"]]]]"', 0), ("[{}, [{}]]", 3)],
)
def test_json_depth_skips_strings(text, depth):
    """Brackets inside strings do not count: `depth` levels are read at a cap of `depth`, refused at one less."""
    J.parse_json(text, "x", max_depth=depth)
    if depth:
        with pytest.raises(BadInput, match="nested deeper"):
            J.parse_json(text, "x", max_depth=depth - 1)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_constants_are_refused(constant):
    with pytest.raises(BadInput, match=f"{constant} is not a JSON number"):
        J.parse_json(f'{{"a": {constant}}}', "doc.json")


# --- through the commands -------------------------------------------------------------------------------
@pytest.fixture
def snapshot(tmp_path) -> Path:
    copy = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, copy)
    return copy


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p, out: os.mkfifo(p), "is a FIFO, not a regular file"),
        (lambda p, out: os.symlink("/dev/zero", p), "leads out of"),
        (lambda p, out: os.symlink(out, p), "leads out of"),
        (lambda p, out: p.mkdir(), "is a directory"),
        (lambda p, out: p.write_text("[" * 100_000), "nested deeper than 64 levels"),
        (lambda p, out: p.write_bytes(b" " * (J.MAX_BYTES + 1)), "is too large for a PyPI snapshot document"),
    ],
)
def test_matrix_refresh_refuses_a_hostile_snapshot_document(snapshot, tmp_path, run_cli, make, message):
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    target = snapshot / "numpy.json"
    target.unlink()
    make(target, outside)
    r = run_cli("matrix", "refresh", "--snapshot", str(snapshot))
    assert r.code == 2, r.out + r.err
    assert message in r.err and "numpy.json" in r.err and "Traceback" not in r.err + r.out


def test_matrix_refresh_reads_a_snapshot_document_at_the_cap(snapshot):
    from envkit.jobs.matrix import refresh

    doc = (snapshot / "numpy.json").read_bytes()
    padded = doc + b" " * (J.MAX_BYTES - len(doc))
    (snapshot / "numpy.json").write_bytes(padded)
    assert refresh.Source(snapshot=snapshot).project("numpy", "1.24.0")["info"]


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
@pytest.mark.parametrize("kind", ["fifo", "zero", "folder", "too-large"])
def test_the_serving_smoke_reads_a_model_folder_without_blocking(tmp_path, name, kind):
    from envkit.jobs.smoke import serving as S

    model = tmp_path / "model"
    model.mkdir()
    path = model / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        os.symlink("/dev/zero", path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b" " * (U.MODEL_CONFIG.max_bytes + 1))
    # unreadable: the defaults (the cap on the model length; no template of its own)
    assert prompt(S.max_model_len, model, 2048)["value"] == 2048
    assert prompt(S.has_chat_template, model)["value"] is False


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
def test_the_serving_smoke_follows_a_link_out_of_the_model_folder(tmp_path, name):
    """A Hugging Face cache snapshot links each file to its blob, outside the snapshot folder."""
    from envkit.jobs.smoke import serving as S

    model, blobs = tmp_path / "snapshots" / "rev", tmp_path / "blobs"
    model.mkdir(parents=True)
    blobs.mkdir()
    (blobs / "sha").write_text('{"max_position_embeddings": 7, "chat_template": "{{ x }}"}')
    os.symlink("../../blobs/sha", model / name)
    assert S.max_model_len(model, 2048) == (7 if name == "config.json" else 2048)
    assert S.has_chat_template(model) is (name == "tokenizer_config.json")


# Stack files and locks come from the user's own command line, where a pipe is meant (`-f <(make-stack)`): a pipe
# with a writer is read; a named FIFO nobody writes is refused at once instead of blocking the command forever.
@pytest.mark.parametrize(
    "argv",
    [["validate", "{f}"], ["resolve", "-f", "{f}", "-o", "{out}/x.lock"], ["image", "render", "--lock", "{f}", "-o", "{out}/ctx"],
     ["bundle", "build", "--lock", "{f}", "-o", "{out}/b"]],
    ids=["validate", "resolve", "image-render", "bundle-build"],
)  # fmt: skip
def test_a_fifo_without_a_writer_given_as_a_stack_or_lock_is_refused_at_once(argv, tmp_path, run_cli):
    fifo = tmp_path / "stack.yaml"
    os.mkfifo(fifo)
    args = [a.format(f=fifo, out=tmp_path) for a in argv]
    box = prompt(run_cli, *args)
    r = box["value"]
    assert r.code == 2 and f"{fifo} is a pipe that gave nothing" in r.err, r.err


def test_a_pipe_with_a_writer_is_read_as_the_stack(tmp_path, run_cli):
    read_end, write_end = os.pipe()
    os.write(write_end, b"chip: 910b\nos: ubuntu22.04\n")
    os.close(write_end)
    try:
        r = run_cli("validate", f"/dev/fd/{read_end}")
    finally:
        os.close(read_end)
    assert r.code == 0 and "valid" in r.out, r.err
