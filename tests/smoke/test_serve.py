"""`envkit smoke --serve`: the command lines, the strict SSE reader, the server lifecycle, and the whole
serving smoke on cpu against the real `transformers serve` (slow)."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envkit.errors import BadInput, CannotRun
from envkit.jobs.smoke import serving as S
from envkit.jobs.smoke.device import DeviceSpec

from .conftest import envkit_subprocess

# --- helpers ---------------------------------------------------------------------------------------


def procs_with(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (read from /proc, independent of envkit)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry))
    return found


def sse(*events: str, done: bool = True) -> bytes:
    body = "".join(f"data: {e}\n\n" for e in events)
    if done:
        body += "data: [DONE]\n\n"
    return body.encode()


def completion_chunk(text: str, finish: str | None = None, usage: int | None = None) -> str:
    choice = {"index": 0, "text": text}
    if finish:
        choice["finish_reason"] = finish
    doc = {"object": "text_completion", "choices": [choice]}
    if usage is not None:
        doc["usage"] = {"completion_tokens": usage}
    return json.dumps(doc)


def chat_chunk(content: str | None, finish: str | None = None) -> str:
    delta = {} if content is None else {"content": content}
    choice = {"index": 0, "delta": delta}
    if finish:
        choice["finish_reason"] = finish
    return json.dumps({"object": "chat.completion.chunk", "choices": [choice]})


def read(data: bytes, kind: str = "completion", expects_done: bool = True, clock=None, deadline: float = 1e18):
    kw = {"clock": clock} if clock else {}
    return S.read_sse(io.BytesIO(data).readline, kind, expects_done=expects_done, t0=0.0, deadline=deadline, **kw)


# --- command lines -----------------------------------------------------------------------------------


def test_vllm_command_on_npu_has_the_serving_env_block(tmp_path):
    cmd = S.vllm_command(
        tmp_path / "m", 41234, "bf16", DeviceSpec("npu", 1), max_model_len=512, chat_template=tmp_path / "t.jinja"
    )
    assert cmd.argv == [
        "vllm",
        "serve",
        str(tmp_path / "m"),
        "--host",
        "127.0.0.1",
        "--port",
        "41234",
        "--served-model-name",
        "envkit-smoke",
        "--max-model-len",
        "512",
        "--dtype",
        "bfloat16",
        "--seed",
        "0",
        "--gpu-memory-utilization",
        "0.5",
        "--chat-template",
        str(tmp_path / "t.jinja"),
    ]
    assert cmd.env["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"
    assert cmd.env["TASK_QUEUE_ENABLE"] == "1" and cmd.env["OMP_PROC_BIND"] == "false"
    assert cmd.env["ASCEND_RT_VISIBLE_DEVICES"] == "1"
    assert cmd.env["HF_HUB_OFFLINE"] == "1" and cmd.env["TRANSFORMERS_OFFLINE"] == "1"
    assert cmd.expects_done is True and cmd.engine == "vllm"
    assert "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in cmd.shell() and "vllm serve" in cmd.shell()


def test_vllm_command_elsewhere_has_no_npu_block(tmp_path):
    cuda = S.vllm_command(tmp_path, 1, "fp16", DeviceSpec("cuda", 2))
    assert "PYTORCH_NPU_ALLOC_CONF" not in cuda.env and cuda.env["CUDA_VISIBLE_DEVICES"] == "2"
    assert cuda.argv[cuda.argv.index("--dtype") + 1] == "float16"
    assert "--chat-template" not in cuda.argv
    plain = S.vllm_command(tmp_path, 1, "fp32", DeviceSpec("npu"))
    assert "ASCEND_RT_VISIBLE_DEVICES" not in plain.env and plain.env["TASK_QUEUE_ENABLE"] == "1"


def test_transformers_command(tmp_path):
    cmd = S.transformers_command(tmp_path / "m", 5000, "fp32", DeviceSpec("cpu"), threads=3)
    i = cmd.argv.index("serve")
    assert cmd.argv[i:] == [
        "serve",
        str(tmp_path / "m"),
        "--host",
        "127.0.0.1",
        "--port",
        "5000",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--attn-implementation",
        "eager",
    ]
    assert cmd.env["OMP_NUM_THREADS"] == "3" and cmd.env["HF_HUB_OFFLINE"] == "1"
    assert cmd.expects_done is False and "PYTORCH_NPU_ALLOC_CONF" not in cmd.env


def test_engine_choice():
    assert S.choose_engine(DeviceSpec("npu")) == "vllm"
    assert S.choose_engine(DeviceSpec("cpu")) == "transformers"
    assert S.choose_engine(DeviceSpec("cuda"), which=lambda _n: None) == "transformers"
    assert S.choose_engine(DeviceSpec("cuda"), which=lambda _n: "/usr/bin/vllm") == "vllm"
    assert S.choose_engine(DeviceSpec("npu"), "transformers") == "transformers"
    with pytest.raises(BadInput):
        S.choose_engine(DeviceSpec("cpu"), "tgi")


def test_max_model_len_is_capped_by_the_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    assert S.max_model_len(tmp_path) == 512
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 131072}))
    assert S.max_model_len(tmp_path) == S.DEFAULT_MAX_MODEL_LEN
    assert S.max_model_len(tmp_path / "absent") == S.DEFAULT_MAX_MODEL_LEN


def test_serving_view_adds_a_template_only_when_missing(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "tokenizer_config.json").write_text(json.dumps({"eos_token": "x"}))
    view, template = S.serving_view(model, tmp_path / "out")
    assert template is not None and template.read_text().startswith("{% for message in messages %}")
    assert (view / "config.json").is_symlink() and (view / "config.json").resolve() == (model / "config.json").resolve()
    assert not (model / "chat_template.jinja").exists()  # the model folder is untouched
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    assert S.serving_view(model, tmp_path / "out2") == (model.resolve(), None)


def test_free_port_is_bindable():
    import socket

    port = S.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


# --- the SSE reader ------------------------------------------------------------------------------------


def test_sse_vllm_style_stream():
    data = sse(
        completion_chunk(" a"),
        ": keep-alive",
        completion_chunk("b", "length"),
        json.dumps({"choices": [], "usage": {"completion_tokens": 2}}),
    )
    data = data.replace(b"data: : keep-alive\n\n", b": keep-alive\n\n")
    res = read(data)
    assert res.text == " ab" and res.chunks == 2 and res.done and res.finish_reason == "length" and res.completion_tokens == 2


def test_sse_transformers_style_stream_without_done_is_accepted_when_not_expected():
    data = sse(chat_chunk(None), chat_chunk("Hi"), chat_chunk(" there"), chat_chunk(None, "stop"), done=False)
    res = read(data.replace(b"\n", b"\r\n"), kind="chat", expects_done=False)
    assert res.text == "Hi there" and res.finish_reason == "stop" and not res.done


def test_sse_multi_line_data_and_ignored_fields():
    payload = completion_chunk("x", "stop").replace(", ", ",\ndata: ")
    data = b"event: message\nid: 1\nretry: 100\ndata: " + payload.encode() + b"\n\ndata: [DONE]\n\n"
    assert read(data).text == "x"


def test_sse_ttft_and_timing_use_the_clock():
    ticks = iter(range(1, 100))  # one tick per clock reading: before each line, at each event, at the end
    res = read(sse(completion_chunk("a"), completion_chunk("b", "stop")), clock=lambda: next(ticks))
    assert (res.first_content_s, res.last_content_s, res.total_s) == (3, 6, 10)


@pytest.mark.parametrize(
    "data, expects_done, message",
    [
        (sse(completion_chunk("a"), done=False), True, "without data: [DONE]"),
        (sse(completion_chunk("a"), done=False), False, "without a finish_reason"),
        (b"data: " + completion_chunk("a").encode() + b"\ngarbage line\n\n", True, "not an SSE field"),
        (b"\xff\xfe\x00garbled\n\n", True, "not an SSE field"),
        (b"data: \xff\xfe{}\n\n", True, "not UTF-8"),
        (b"data: {not json\n\n", True, "not JSON"),
        (b"data: [1, 2]\n\n", True, "not a JSON object"),
        (sse(json.dumps({"error": "CUDA out of memory"})), True, "carried an error"),
        (sse(json.dumps({"id": "x"})), True, "neither choices nor usage"),
        (sse(json.dumps({"choices": [{"text": 5}]})), True, "non-text content"),
        (sse(completion_chunk("a", "stop")) + b"data: " + completion_chunk("b").encode() + b"\n\n", True, "data after [DONE]"),
        (b"data: " + completion_chunk("a", "stop").encode() + b"\n", True, "middle of an event"),
        (b"data: " + completion_chunk("a", "stop").encode(), True, "middle of a line"),
        (b"data: " + b"x" * (S.MAX_SSE_LINE + 10) + b"\n\n", True, "longer than"),
    ],
)
def test_sse_hostile_input_is_a_serve_error(data, expects_done, message):
    with pytest.raises(S.ServeError) as err:
        read(data, expects_done=expects_done)
    assert message in str(err.value)


def test_sse_deadline():
    clock = iter([0.0, 0.0, 5.0, 11.0, 12.0]).__next__
    with pytest.raises(S.ServeError, match="did not end before"):
        read(sse(completion_chunk("a"), completion_chunk("b"), completion_chunk("c", "stop")), clock=clock, deadline=10.0)


class _Hostile(BaseHTTPRequestHandler):
    body = b""
    ctype = "text/event-stream"
    status = 200

    def do_POST(self):  # noqa: N802 - the http.server interface
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(self.status)
        self.send_header("Content-Type", self.ctype)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hostile():
    servers = []

    def make(body: bytes, ctype: str = "text/event-stream", status: int = 200) -> int:
        handler = type("H", (_Hostile,), {"body": body, "ctype": ctype, "status": status})
        srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv.server_address[1]

    yield make
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(
    "body, ctype, status, expected",
    [
        (b"data: {garbled\n\n", "text/event-stream", 200, "not JSON"),
        (sse(completion_chunk("a"), done=False), "text/event-stream", 200, "without data: [DONE]"),
        (b"data: " + b"y" * (S.MAX_SSE_LINE + 1), "text/event-stream", 200, "longer than"),
        (b'{"choices": []}', "application/json", 200, "not text/event-stream"),
        (b"boom", "text/plain", 500, "HTTP 500"),
        (b"data: " + b"[" * 200_000 + b"\n\n", "text/event-stream", 200, "not JSON"),
    ],
)
def test_hostile_server_gives_a_failed_check_not_a_traceback(hostile, body, ctype, status, expected):
    port = hostile(body, ctype, status)
    req = S.REQUESTS[0]
    answer = S._guarded_answer(lambda: S.stream(port, req, "m", 4, 10.0, expects_done=True), req, True)
    assert not answer.ok and expected in answer.error
    check = S.check_stream(req, answer, None)
    assert check.ok is False and expected in check.figure


def test_hostile_non_streaming_answers(hostile):
    req = S.REQUESTS[1]
    for body, expected in [
        (b"not json", "not JSON"),
        (b'{"choices": [{"message": {}}]}', "no text"),
        (b'{"error": {"message": "bad"}}', "answered an error"),
        (b"[" * 200_000, "not JSON"),  # nested past Python's recursion limit
    ]:
        port = hostile(body, "application/json")
        answer = S._guarded_answer(lambda port=port: S.complete(port, req, "m", 4, 10.0), req, False)
        assert not answer.ok and expected in answer.error, answer.error
    port = S.free_port()  # nothing listens there
    answer = S._guarded_answer(lambda: S.complete(port, req, "m", 4, 2.0), req, False)
    assert not answer.ok and "ConnectionRefusedError" in answer.error


# --- agreement and the checks ----------------------------------------------------------------------------

VOCAB = {1: "He", 2: "llo", 3: " wor", 4: "ld", 5: "\u00e9"}


def fake_decode(ids):
    text = "".join(VOCAB[i] for i in ids)
    return text


def test_prefix_agreement():
    assert S.prefix_agreement([1, 2, 3, 4], "Hello world", fake_decode) == 4
    assert S.prefix_agreement([1, 2, 3, 4], "Hello there", fake_decode) == 2
    assert S.prefix_agreement([1, 2, 3, 4], "Nope", fake_decode) == 0
    assert S.prefix_agreement([1, 2], "  Hello", fake_decode, kind="chat") == 2
    # a partial UTF-8 character at the end of a prefix does not count as a divergence
    partial = {(1,): "He", (1, 5): "He\ufffd", (1, 5, 2): "He\u00e9llo"}
    assert S.prefix_agreement([1, 5, 2], "He\u00e9llo", lambda ids: partial[tuple(ids)]) == 3


def _ref(ids):
    return S.Reference(ids=ids, text=fake_decode(ids), decode=fake_decode)


def test_agreement_check_exact_and_reported():
    req = S.REQUESTS[0]
    good = S.Answer(name="completion", kind="completion", stream=False, ok=True, text="Hello world", completion_tokens=4)
    bad = S.Answer(name="completion", kind="completion", stream=False, ok=True, text="Hello there", completion_tokens=4)
    assert S.check_agreement(req, good, _ref([1, 2, 3, 4]), exact=True).ok
    failed = S.check_agreement(req, bad, _ref([1, 2, 3, 4]), exact=True)
    assert not failed.ok and failed.data["agreement"] == 0.5 and "after 2 of 4 tokens" in failed.figure
    reported = S.check_agreement(req, bad, _ref([1, 2, 3, 4]), exact=False)
    assert reported.ok and "0.500" in reported.figure
    miscounted = S.Answer(name="completion", kind="completion", stream=False, ok=True, text="Hello world", completion_tokens=5)
    assert not S.check_agreement(req, miscounted, _ref([1, 2, 3, 4]), exact=True).ok
    assert not S.check_agreement(req, None, _ref([1]), exact=True).ok


def test_stream_check_and_determinism():
    req = S.REQUESTS[0]
    plain = S.Answer(name="completion", kind="completion", stream=False, ok=True, text="ab\ufffd", completion_tokens=3)
    streamed = S.Answer(
        name="completion", kind="completion", stream=True, ok=True, text="ab", completion_tokens=3, ttft_s=0.01, chunks=2
    )
    assert S.check_stream(req, streamed, plain).ok  # a held-back partial character is not a difference
    other = S.Answer(name="completion", kind="completion", stream=True, ok=True, text="ac", completion_tokens=3, ttft_s=0.01)
    assert "differs" in S.check_stream(req, other, plain).figure
    assert S.check_determinism({"completion": (plain, plain)}).ok
    assert not S.check_determinism({"completion": (plain, other)}).ok
    assert not S.check_determinism({"completion": (plain, None)}).ok


# --- the server lifecycle (a stand-in server process, no torch) --------------------------------------------

STUBBORN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # a child in the group, and a grandchild that leaves the group (setsid), both ignoring SIGTERM
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    subprocess.Popen([sys.executable, "-c", code, sys.argv[1] + "-child"])
    subprocess.Popen([sys.executable, "-c", code, sys.argv[1] + "-escaped"], start_new_session=True)
    print("started", flush=True)
    time.sleep(600)
    """
)


def _stub(tmp_path, script: str, marker: str) -> S.ServerProcess:
    path = tmp_path / "stub.py"
    path.write_text(script)
    return S.ServerProcess(
        S.ServerCommand("transformers", [sys.executable, str(path), marker], {}, False), tmp_path / "server.log"
    )


def test_stop_kills_the_group_and_escaped_descendants(tmp_path):
    marker = f"envkit-stub-{os.getpid()}-{time.monotonic_ns()}"
    server = _stub(tmp_path, STUBBORN, marker)
    server.start()
    try:
        deadline = time.monotonic() + 20
        while len(procs_with(marker)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(procs_with(marker)) == 3
    finally:
        stopped = server.stop(grace=1.0)
    assert stopped["signal"] == "SIGKILL" and stopped["left"] == []
    assert procs_with(marker) == []
    assert server.stop() is stopped  # idempotent
    assert S.check_stop(stopped).ok


def test_a_server_that_exits_early_is_cannot_run_with_its_log(tmp_path):
    server = _stub(tmp_path, "import sys; print('OSError: no such model'); sys.exit(3)", "x")
    server.start()
    try:
        with pytest.raises(CannotRun) as err:
            S.wait_ready(server, S.free_port(), 30, None, poll=0.05)
    finally:
        server.stop()
    assert "exited with status 3" in err.value.message and "no such model" in err.value.hint


def test_a_server_never_ready_times_out(tmp_path):
    marker = f"envkit-slow-{time.monotonic_ns()}"
    server = _stub(tmp_path, "import time; time.sleep(600)", marker)
    server.start()
    try:
        with pytest.raises(CannotRun) as err:
            S.wait_ready(server, S.free_port(), 0.5, None, poll=0.05)
    finally:
        server.stop(grace=2.0)
    assert "not ready within 0.5 s" in err.value.message and "--serve-timeout" in err.value.hint
    assert procs_with(marker) == []


class _Models(BaseHTTPRequestHandler):
    models = b""

    def do_GET(self):  # noqa: N802 - the http.server interface
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}" if self.path == "/health" else self.models)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    "models", [b'{"data": null}', b'{"data": 5}', b'{"data": {"id": "m"}}', b"[1]", b'{"data": [{"id": 3}]}']
)
def test_a_malformed_model_list_is_not_ready_not_a_traceback(tmp_path, models):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Models,), {"models": models}))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    server = S.ServerProcess(S.ServerCommand("transformers", ["true"], {}, False), tmp_path / "server.log")
    server.exited = lambda: None  # a server that runs on and never lists a model
    try:
        with pytest.raises(CannotRun) as err:
            S.wait_ready(server, srv.server_address[1], 0.3, None, poll=0.05)
    finally:
        srv.shutdown()
        srv.server_close()
    assert "not ready within 0.3 s" in err.value.message


def test_missing_engine_is_cannot_run(tmp_path):
    cmd = S.vllm_command(tmp_path, 1, "bf16", DeviceSpec("npu"), vllm="envkit-no-such-vllm")
    with pytest.raises(CannotRun, match="not found on PATH"):
        S.check_prerequisites(cmd)


# --- the real server on cpu (slow) ---------------------------------------------------------------------------


def _children() -> list:
    """Live descendants of this test process that are servers (other tests of the same run may leave helpers
    of their own, e.g. a multiprocessing resource tracker, that are not ours to judge)."""
    psutil = pytest.importorskip("psutil")
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "serve" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            continue
    return out


SERVE_CHECKS = [
    "serve:ready",
    "serve:completion",
    "serve:chat",
    "serve:stream:completion",
    "serve:stream:chat",
    "serve:determinism",
    "serve:stop",
]


@pytest.mark.slow
@pytest.mark.torch
def test_whole_serving_smoke_on_cpu(smoke_cache, tiny_model, tmp_path):
    pytest.importorskip("fastapi")
    out = tmp_path / "run"
    res = envkit_subprocess("smoke", "--serve", "--device", "cpu", "--dtype", "fp32", "--out", str(out), "--json", timeout=600)
    assert res.code == 0, res.err[-3000:]
    report = json.loads(res.out)
    assert report["ok"] is True
    by_name = {c["name"]: c for c in report["checks"]}
    assert [n for n in by_name if n.startswith("serve:")] == SERVE_CHECKS
    assert all(by_name[n]["ok"] for n in SERVE_CHECKS), [(n, by_name[n]["figure"]) for n in SERVE_CHECKS]
    serve = report["serve"]
    assert serve["engine"] == "transformers" and serve["ok"] is True and serve["exact"] is True
    assert serve["command"][serve["command"].index("serve") + 1] == str(out.resolve() / "serve-model")
    assert serve["env"]["HF_HUB_OFFLINE"] == "1" and serve["chat_template_added"] is True
    assert serve["ready_s"] > 0 and serve["port"] > 0
    assert serve["agreement"] == {"completion": 1.0, "chat": 1.0} and serve["deterministic"] is True
    assert all(v > 0 for v in serve["ttft_s"].values()) and all(v > 0 for v in serve["tokens_per_s"].values())
    tags = sorted((r["name"], r["tag"], r["stream"]) for r in serve["requests"])
    assert tags == [
        ("chat", "first", False),
        ("chat", "second", False),
        ("chat", "stream", True),
        ("completion", "first", False),
        ("completion", "second", False),
        ("completion", "stream", True),
    ]
    for r in serve["requests"]:
        assert r["ok"] and r["completion_tokens"] == 32 and r["text"]
    for name in ("serve:completion", "serve:chat"):
        data = by_name[name]["data"]
        assert data["server_text"] == data["reference_text"] and data["matched_tokens"] == data["reference_tokens"] == 32
    assert serve["stop"]["left"] == [] and (out / "server.log").is_file()
    written = json.loads((out / "report.json").read_text())
    assert written["serve"]["ok"] is True
    assert procs_with(str(out / "serve-model")) == []


def _second_model(tmp_path) -> Path:
    from envkit.jobs.smoke.model import TinySpec, ensure_tiny_model

    return ensure_tiny_model(TinySpec(num_hidden_layers=2), root=tmp_path / "models")


@pytest.mark.slow
@pytest.mark.torch
def test_a_wrong_answer_is_caught_and_the_server_is_gone(smoke_cache, tiny_model, tmp_path, monkeypatch):
    """The server answers with another model than the in-process reference: the agreement checks fail."""
    pytest.importorskip("fastapi")
    other, _template = S.serving_view(_second_model(tmp_path), tmp_path / "other")  # with the same chat template
    original = S.transformers_command
    monkeypatch.setattr(S, "transformers_command", lambda _model, *a, **kw: original(other, *a, **kw))
    checks, section = S.serve_stage(tiny_model, DeviceSpec("cpu"), "fp32", tmp_path / "out", S.ServeOptions(max_tokens=16))
    by_name = {c.name: c for c in checks}
    assert not by_name["serve:completion"].ok and not by_name["serve:chat"].ok
    assert by_name["serve:completion"].data["agreement"] < 1.0
    assert by_name["serve:determinism"].ok and by_name["serve:stop"].ok  # the server itself behaved
    assert section["ok"] is False and section["model_id"] == str(other)
    assert _children() == [] and procs_with(str(other)) == []


@pytest.mark.slow
@pytest.mark.torch
def test_a_server_that_cannot_load_the_model_leaves_nothing(smoke_cache, tiny_model, tmp_path):
    pytest.importorskip("fastapi")
    broken = tmp_path / "broken-model"
    shutil.copytree(tiny_model, broken)
    (broken / "model.safetensors").write_bytes(b'\x08\x00\x00\x00\x00\x00\x00\x00{"a":1}')
    with pytest.raises(CannotRun) as err:
        S.serve_stage(broken, DeviceSpec("cpu"), "fp32", tmp_path / "out", S.ServeOptions(ready_timeout=120))
    assert "exited with status" in err.value.message
    section = err.value.details["serve"]
    assert section["ok"] is False and section["stop"]["left"] == []
    assert (tmp_path / "out" / "server.log").read_text().strip()
    assert _children() == [] and procs_with(str(tmp_path / "out" / "serve-model")) == []


@pytest.mark.slow
@pytest.mark.torch
def test_cli_without_the_engine_exits_2(smoke_cache, tiny_model, tmp_path):
    out = tmp_path / "run"
    res = envkit_subprocess(
        "smoke",
        "--serve",
        "--server",
        "vllm",
        "--device",
        "cpu",
        "--dtype",
        "fp32",
        "--out",
        str(out),
        "--repeat",
        "1",
        env={"PATH": str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin"},
    )
    assert res.code == 2, res.err[-2000:]
    assert "vllm" in res.err and "Traceback" not in res.err
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] is False and report["serve"]["ok"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--serve-tokens", "0"], "--serve-tokens must be at least 1, not 0"),
        (["--serve-timeout", "0"], "--serve-timeout must be more than 0 seconds"),
        (["--server", "tgi"], "unknown server 'tgi'"),
    ],
)
def test_bad_serving_options_are_exit_2_before_the_smoke_runs(run_cli, tmp_path, args, message):
    """Checked before any model is built: the run folder is never made (the smoke itself would take minutes)."""
    out = tmp_path / "run"
    res = run_cli("smoke", "--serve", "--device", "cpu", "--out", str(out), *args)
    assert res.code == 2 and message in res.err, res.err
    assert not out.exists()
