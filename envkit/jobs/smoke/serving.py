"""`envkit smoke --serve`: an OpenAI-compatible server on the device, checked against the model run in-process.

The stage runs after the in-process smoke checks:
1. start the server in its own process group (`vllm serve` on npu, and on cuda when vLLM is installed;
   `transformers serve` on cpu, where vLLM cannot run) on 127.0.0.1 and a free port, offline;
2. wait for readiness (`/health`, then `/v1/models`), bounded by a timeout;
3. send completion and chat requests at temperature 0, each twice without streaming and once streamed (SSE);
4. stop the server whatever happens (SIGTERM then SIGKILL to its process group and every descendant; a
   `finally`, an `atexit` hook, SIGTERM turned into an exit, and a parent-death signal on the server);
5. run the same greedy generations in-process and compare: exactly on cpu (text and token count), the
   token agreement fraction on a device.

The client is `envkit.io.httpclient` (the standard library's http.client underneath): every request has a
deadline for the whole of it (`--serve-timeout` bounds the readiness wait as a whole, each poll included;
`REQUEST_TIMEOUT` each request, its stream included), and every answer a size cap (`MAX_BODY`). The SSE reader is
strict (a garbled line, a missing end of stream, an oversized line or an error event fails the check).
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from envkit.errors import CannotRun, EnvkitError
from envkit.executor.dist import free_port  # a free loopback port, chosen by binding port 0
from envkit.export.container import NPU_SERVING_ENV  # the serving image bakes the same block
from envkit.io import httpclient, jsonread, untrusted
from envkit.jobs.smoke.device import DeviceSpec, parse_device
from envkit.jobs.smoke.prompts import EN, FA
from envkit.models.smoke import Check

HOST = "127.0.0.1"
SERVED_MODEL_NAME = "envkit-smoke"
ENGINES = ("auto", "vllm", "transformers")
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "VLLM_NO_USAGE_STATS": "1"}
TORCH_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DEFAULT_READY_TIMEOUT = 300.0
DEFAULT_MAX_TOKENS = 32
DEFAULT_MAX_MODEL_LEN = 2048
GPU_MEMORY_UTILIZATION = 0.5  # the in-process smoke already holds a device context; a smoke needs little KV cache
REQUEST_TIMEOUT = 120.0
POLL_TIMEOUT = 2.0
STOP_GRACE = 10.0
MAX_SSE_LINE = 1 << 20
MAX_BODY = 16 << 20
LOG_FILE = "server.log"
VIEW_DIR = "serve-model"
# ChatML, whose markers are special tokens of the embedded tokenizer; used only when the model has no template.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass
class ServeOptions:
    engine: str = "auto"
    ready_timeout: float = DEFAULT_READY_TIMEOUT
    max_tokens: int = DEFAULT_MAX_TOKENS
    request_timeout: float = REQUEST_TIMEOUT

    def check(self) -> ServeOptions:
        """Exit 2 for options the serving stage would refuse, before any model runs (the CLI calls it first)."""
        from envkit.errors import BadInput

        _check_engine(self.engine)
        if self.max_tokens < 1:
            raise BadInput(f"--serve-tokens must be at least 1, not {self.max_tokens}")
        if not self.ready_timeout > 0:
            raise BadInput(f"--serve-timeout must be more than 0 seconds, not {self.ready_timeout}")
        return self


@dataclass(frozen=True)
class ServerCommand:
    """A server command line and the environment variables it adds."""

    engine: str
    argv: list[str]
    env: dict[str, str]
    expects_done: bool  # whether the stream must end with `data: [DONE]` (vLLM does; transformers serve does not)

    def shell(self) -> str:
        import shlex

        return " ".join([f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())] + [shlex.quote(a) for a in self.argv])


# --- command lines (pure) --------------------------------------------------------------------------


def _check_engine(requested: str) -> None:
    if requested not in ENGINES:
        from envkit.errors import BadInput

        raise BadInput(f"unknown server '{requested}'", hint=f"use one of {', '.join(ENGINES)}")


def choose_engine(spec: DeviceSpec, requested: str = "auto", which: Callable[[str], str | None] = shutil.which) -> str:
    """vllm on npu; on cuda vllm when installed, else transformers; transformers on cpu (vLLM cannot run there)."""
    _check_engine(requested)
    if requested != "auto":
        return requested
    if spec.type == "npu":
        return "vllm"
    if spec.type == "cuda" and which("vllm"):
        return "vllm"
    return "transformers"


def _visible_devices(spec: DeviceSpec) -> dict[str, str]:
    if spec.index is None:
        return {}
    if spec.type == "npu":
        return {"ASCEND_RT_VISIBLE_DEVICES": str(spec.index)}
    if spec.type == "cuda":
        return {"CUDA_VISIBLE_DEVICES": str(spec.index)}
    return {}


def _serve_args(model_dir: Path, port: int) -> list[str]:
    """`serve MODEL --host 127.0.0.1 --port PORT`: how both `vllm serve` and `transformers serve` take the model and address."""
    return ["serve", str(model_dir), "--host", HOST, "--port", str(port)]


def vllm_command(
    model_dir: Path,
    port: int,
    dtype: str,
    spec: DeviceSpec,
    max_model_len: int = DEFAULT_MAX_MODEL_LEN,
    chat_template: Path | None = None,
    vllm: str = "vllm",
) -> ServerCommand:
    """`vllm serve` on loopback with the served name `envkit-smoke`, offline; on npu, the serving env block."""
    argv = [
        vllm,
        *_serve_args(model_dir, port),
        "--served-model-name",
        SERVED_MODEL_NAME,
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        TORCH_DTYPE_NAMES[dtype],
        "--seed",
        "0",
        "--gpu-memory-utilization",
        str(GPU_MEMORY_UTILIZATION),
    ]
    if chat_template is not None:
        argv += ["--chat-template", str(chat_template)]
    env = dict(OFFLINE_ENV)
    if spec.type == "npu":
        env.update(NPU_SERVING_ENV)
    env.update(_visible_devices(spec))
    return ServerCommand("vllm", argv, env, expects_done=True)


def transformers_command(
    model_dir: Path, port: int, dtype: str, spec: DeviceSpec, threads: int | None = None, python: str | None = None
) -> ServerCommand:
    """`transformers serve MODEL` pinned to the model, on the device, eager attention (as the in-process model)."""
    python = python or sys.executable
    script = Path(python).parent / "transformers"
    launcher = (
        [str(script)]
        if script.is_file()
        else [python, "-c", "import sys; from transformers.cli.transformers import main; sys.exit(main())"]
    )
    argv = launcher + [
        *_serve_args(model_dir, port),
        "--device",
        str(spec) if spec.type != "cpu" else "cpu",
        "--dtype",
        TORCH_DTYPE_NAMES[dtype],
        "--attn-implementation",
        "eager",
    ]
    env = dict(OFFLINE_ENV)
    if spec.type == "npu":
        env.update(NPU_SERVING_ENV)
    if threads:  # the same intra-op thread count as the in-process reference: bitwise-equal results on cpu
        env["OMP_NUM_THREADS"] = str(threads)
    return ServerCommand("transformers", argv, env, expects_done=False)


def _model_json(model_dir: Path, name: str) -> Any:
    """A JSON file of the model folder (a regular file, capped, never blocking); None when it cannot be read. Its
    links may leave the folder: a Hugging Face cache snapshot links each file to its blob."""
    try:
        return jsonread.read_json(model_dir / name, what="model's JSON configuration", max_bytes=untrusted.MODEL_CONFIG.max_bytes)
    except EnvkitError:
        return None


def max_model_len(model_dir: Path, cap: int = DEFAULT_MAX_MODEL_LEN) -> int:
    config = _model_json(Path(model_dir), "config.json")
    value = config.get("max_position_embeddings") if isinstance(config, dict) else None
    return min(int(value), cap) if isinstance(value, int) and value > 0 else cap


def has_chat_template(model_dir: Path) -> bool:
    model_dir = Path(model_dir)
    if (model_dir / "chat_template.jinja").is_file() or (model_dir / "chat_template.json").is_file():
        return True
    config = _model_json(model_dir, "tokenizer_config.json")
    return isinstance(config, dict) and bool(config.get("chat_template"))


def serving_view(model_dir: Path, out_dir: Path) -> tuple[Path, Path | None]:
    """The folder to serve: the model itself when it has a chat template; else a folder of symlinks to its
    files plus a ChatML `chat_template.jinja` (the weights are neither copied nor changed)."""
    model_dir = Path(model_dir).resolve()
    if has_chat_template(model_dir):
        return model_dir, None
    view = (Path(out_dir) / VIEW_DIR).resolve()
    if view.exists():
        shutil.rmtree(view)
    view.mkdir(parents=True)
    for item in sorted(model_dir.iterdir()):
        os.symlink(item, view / item.name)
    template = view / "chat_template.jinja"
    template.write_text(CHATML_TEMPLATE + "\n", encoding="utf-8")
    return view, template


# --- the requests -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    name: str
    kind: str  # "completion" or "chat"
    prompt: str

    @property
    def path(self) -> str:
        return "/v1/completions" if self.kind == "completion" else "/v1/chat/completions"

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.prompt}]

    def body(self, model: str, max_tokens: int, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
        if self.kind == "completion":
            body["prompt"] = self.prompt
        else:
            body["messages"] = self.messages()
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body


REQUESTS = (Request("completion", "completion", EN), Request("chat", "chat", FA))


def normalize(kind: str, text: str) -> str:
    """Chat content is compared without surrounding whitespace: servers strip the assistant message
    (transformers serve does when not streaming), the streamed deltas keep it."""
    return text.strip() if kind == "chat" else text


def stream_key(kind: str, text: str) -> str:
    """What a stream must reproduce of the non-streamed text: a streaming decoder holds back a trailing
    partial UTF-8 character, which the one-shot decode renders as U+FFFD."""
    return normalize(kind, text.rstrip("\ufffd"))


# --- the HTTP client (stdlib only) ------------------------------------------------------------------


class ServeError(Exception):
    """A request failed or its answer is malformed: a failed check, never a traceback."""


@dataclass
class Answer:
    name: str
    kind: str
    stream: bool
    ok: bool = False
    text: str = ""
    completion_tokens: int | None = None
    finish_reason: str | None = None
    seconds: float = 0.0
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    chunks: int = 0
    done_marker: bool | None = None
    error: str | None = None


def _url(port: int, path: str) -> str:
    return f"http://{HOST}:{port}{path}"


def _limits(timeout: float) -> httpclient.Limits:
    return httpclient.SERVER_ANSWER.but(deadline=timeout, max_bytes=MAX_BODY)


def http_get_json(port: int, path: str, timeout: float) -> tuple[int, Any]:
    """(status, the JSON document or None when the body is not JSON envkit accepts), within `timeout` seconds
    for the whole request; HTTPFailure when there is no complete answer in time."""
    with httpclient.open_url(_url(port, path), _limits(timeout), headers={"Accept": "application/json"}) as resp:
        raw = resp.body()
        try:
            data = jsonread.parse_json(raw, _url(port, path), what="server answer") if raw else None
        except EnvkitError:  # not JSON, nested too deep, NaN
            data = None
        return resp.status, data


def _post(port: int, path: str, body: dict[str, Any], timeout: float) -> AbstractContextManager[httpclient.Response]:
    payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
    return httpclient.open_url(
        _url(port, path),
        _limits(timeout),
        method="POST",
        body=payload,
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )


def _error_body(resp: httpclient.Response) -> str:
    try:
        return resp.read(4096).decode("utf-8", "replace").strip()[:300]
    except EnvkitError:
        return ""


def _usage_tokens(doc: dict[str, Any]) -> int | None:
    usage = doc.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return int(usage["completion_tokens"])
    return None


def _first_choice(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ServeError(f"the answer is not a JSON object: {str(doc)[:120]}")
    if "error" in doc:
        raise ServeError(f"the server answered an error: {str(doc['error'])[:300]}")
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ServeError(f"no choices in the answer: {json.dumps(doc)[:200]}")
    return choices[0]


def complete(port: int, req: Request, model: str, max_tokens: int, timeout: float) -> Answer:
    """One non-streaming request within `timeout` seconds for the whole of it; a malformed or failed answer
    raises ServeError."""
    t0 = time.perf_counter()
    try:
        with _post(port, req.path, req.body(model, max_tokens, stream=False), timeout) as resp:
            if resp.status != 200:
                raise ServeError(f"HTTP {resp.status} from {req.path}: {_error_body(resp)}")
            raw = resp.body()
        seconds = time.perf_counter() - t0
    except EnvkitError as exc:  # HTTPFailure: unreachable, the deadline, over MAX_BODY
        raise ServeError(f"{req.path}: {exc.message}") from exc
    try:
        doc = jsonread.parse_json(raw, req.path, what="server answer")
    except EnvkitError as exc:
        raise ServeError(f"the answer of {req.path} is not JSON envkit accepts: {exc.message}: {raw[:120]!r}") from exc
    choice = _first_choice(doc)
    if req.kind == "completion":
        text = choice.get("text")
    else:
        message = choice.get("message")
        text = message.get("content", 0) if isinstance(message, dict) else None
        text = "" if text is None else text  # null content (only tool calls) is an empty answer; a missing one is malformed
    if not isinstance(text, str):
        raise ServeError(f"no text in the answer of {req.path}: {json.dumps(choice)[:200]}")
    tokens = _usage_tokens(doc)
    return Answer(
        name=req.name,
        kind=req.kind,
        stream=False,
        ok=True,
        text=text,
        completion_tokens=tokens,
        finish_reason=choice.get("finish_reason"),
        seconds=seconds,
        tokens_per_s=(tokens / seconds) if tokens and seconds > 0 else None,
    )


# --- SSE -----------------------------------------------------------------------------------------------

_SSE_FIELDS = (b"data", b"event", b"id", b"retry")


@dataclass
class StreamResult:
    text: str = ""
    chunks: int = 0
    first_content_s: float | None = None  # since the request was sent
    last_content_s: float | None = None
    total_s: float = 0.0
    completion_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False


def _stream_delta(doc: Any, kind: str) -> tuple[str, str | None, int | None]:
    """(text delta, finish_reason, usage tokens) of one streamed chunk; a malformed chunk raises ServeError."""
    if not isinstance(doc, dict):
        raise ServeError(f"a streamed chunk is not a JSON object: {str(doc)[:120]}")
    if "error" in doc:
        raise ServeError(f"the stream carried an error: {str(doc['error'])[:300]}")
    tokens = _usage_tokens(doc)
    choices = doc.get("choices")
    if choices is None or choices == []:  # the usage-only chunk (stream_options.include_usage)
        if tokens is None:
            raise ServeError(f"a streamed chunk has neither choices nor usage: {json.dumps(doc)[:200]}")
        return "", None, tokens
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise ServeError(f"a streamed chunk has malformed choices: {json.dumps(doc)[:200]}")
    choice = choices[0]
    if kind == "completion":
        text = choice.get("text", "")
    else:
        delta = choice.get("delta", {})
        if not isinstance(delta, dict):
            raise ServeError(f"a streamed chunk has a malformed delta: {json.dumps(choice)[:200]}")
        text = delta.get("content") or ""
    if not isinstance(text, str):
        raise ServeError(f"a streamed chunk has non-text content: {json.dumps(choice)[:200]}")
    reason = choice.get("finish_reason")
    return text, reason if isinstance(reason, str) else None, tokens


def read_sse(
    readline: Callable[[int], bytes],
    kind: str,
    *,
    expects_done: bool,
    t0: float,
    deadline: float,
    clock: Callable[[], float] = time.perf_counter,
) -> StreamResult:
    """Read an OpenAI-style SSE stream to its end, strictly. Raises ServeError on: a line over
    MAX_SSE_LINE bytes, bytes that are not UTF-8, a line that is no SSE field, data that is not JSON, an
    error event, data after [DONE], an event cut by the end of the stream, a stream that ends without
    [DONE] (when the server sends one) or without a finish_reason, and the deadline."""
    res = StreamResult()
    data_lines: list[str] = []

    def dispatch() -> None:
        payload = "\n".join(data_lines)
        data_lines.clear()
        if res.done:
            raise ServeError(f"data after [DONE]: {payload[:120]!r}")
        if payload.strip() == "[DONE]":
            res.done = True
            return
        try:
            doc = json.loads(payload)
        except (ValueError, RecursionError):
            raise ServeError(f"a streamed event is not JSON: {payload[:120]!r}") from None
        text, reason, tokens = _stream_delta(doc, kind)
        now = clock() - t0
        if text:
            res.chunks += 1
            res.text += text
            if res.first_content_s is None:
                res.first_content_s = now
            res.last_content_s = now
        if reason is not None:
            res.finish_reason = reason
        if tokens is not None:
            res.completion_tokens = tokens

    while True:
        if clock() > deadline:
            raise ServeError("the stream did not end before the request timeout")
        try:
            raw = readline(MAX_SSE_LINE + 1)
        except TimeoutError:
            raise ServeError("no data from the server within the request timeout") from None
        except EnvkitError as exc:  # HTTPFailure: the request's deadline, a broken connection, over MAX_BODY
            raise ServeError(f"the stream broke: {exc.message}") from None
        except OSError as exc:
            raise ServeError(f"the stream broke: {type(exc).__name__}: {exc}") from None
        if not raw:
            break
        if len(raw) > MAX_SSE_LINE:
            raise ServeError(f"a stream line is longer than {MAX_SSE_LINE} bytes")
        if not raw.endswith(b"\n"):
            raise ServeError(f"the stream ended in the middle of a line: {raw[:80]!r}")
        line = raw.rstrip(b"\n").rstrip(b"\r")
        if not line:
            if data_lines:
                dispatch()
            continue
        if line.startswith(b":"):
            continue  # a comment (keep-alive)
        name, sep, value = line.partition(b":")
        if not sep or name not in _SSE_FIELDS:
            raise ServeError(f"a stream line is not an SSE field: {line[:80]!r}")
        try:
            text = value[1:] if value.startswith(b" ") else value
            decoded = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ServeError(f"a stream line is not UTF-8: {line[:80]!r}") from None
        if name == b"data":
            data_lines.append(decoded)
    res.total_s = clock() - t0
    if data_lines:
        raise ServeError("the stream ended in the middle of an event (no blank line after its data)")
    if expects_done and not res.done:
        raise ServeError("the stream ended without data: [DONE]")
    if not res.done and res.finish_reason is None:
        raise ServeError("the stream ended without [DONE] and without a finish_reason (cut short?)")
    return res


def stream(port: int, req: Request, model: str, max_tokens: int, timeout: float, expects_done: bool) -> Answer:
    """One streamed request within `timeout` seconds for the whole of it: the text, time to first token, tokens/s."""
    t0 = time.perf_counter()
    try:
        with _post(port, req.path, req.body(model, max_tokens, stream=True), timeout) as resp:
            if resp.status != 200:
                raise ServeError(f"HTTP {resp.status} from {req.path} (stream): {_error_body(resp)}")
            ctype = resp.headers.get("Content-Type", "")
            if "text/event-stream" not in ctype:
                raise ServeError(f"the stream of {req.path} is {ctype or 'untyped'}, not text/event-stream")
            res = read_sse(resp.readline, req.kind, expects_done=expects_done, t0=t0, deadline=t0 + timeout)
    except EnvkitError as exc:  # HTTPFailure: unreachable, the deadline
        raise ServeError(f"{req.path} (stream): {exc.message}") from exc
    tokens = res.completion_tokens if res.completion_tokens is not None else res.chunks
    decode = None
    if (
        res.first_content_s is not None
        and res.last_content_s is not None
        and tokens > 1
        and res.last_content_s > res.first_content_s
    ):
        decode = (tokens - 1) / (res.last_content_s - res.first_content_s)
    return Answer(
        name=req.name,
        kind=req.kind,
        stream=True,
        ok=True,
        text=res.text,
        completion_tokens=res.completion_tokens,
        finish_reason=res.finish_reason,
        seconds=res.total_s,
        ttft_s=res.first_content_s,
        tokens_per_s=(tokens / res.total_s) if tokens and res.total_s > 0 else None,
        decode_tokens_per_s=decode,
        chunks=res.chunks,
        done_marker=res.done,
    )


# --- the server process -------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) from /proc/PID/stat, or None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[1]), int(rest[2])
    except (IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def family(pid: int, pgid: int | None = None) -> set[int]:
    """The live descendants of `pid` and the members of process group `pgid` (pid included when alive)."""
    stats = {p: st for p in _all_pids() if (st := _stat(p)) is not None and st[0] not in ("Z", "X")}
    found = {p for p, st in stats.items() if pgid is not None and st[2] == pgid}
    if pid in stats:
        found.add(pid)
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for p, st in stats.items():
            if st[1] == parent and p not in found:
                found.add(p)
                frontier.append(p)
    return found


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec hook that asks Linux to SIGKILL the server when envkit dies (even by SIGKILL)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG

    return hook


_LIVE: set[ServerProcess] = set()
_LIVE_LOCK = threading.Lock()


def _stop_all() -> None:
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        server.stop()


atexit.register(_stop_all)


class ServerProcess:
    """One server in its own session (process group); `stop` leaves no process of it behind."""

    def __init__(self, command: ServerCommand, log_path: Path, base_env: dict[str, str] | None = None):
        self.command = command
        self.log_path = Path(log_path)
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pgid: int | None = None
        self.known: set[int] = set()
        self.stopped: dict[str, Any] | None = None

    def start(self) -> None:
        env = dict(self.base_env)
        env.update(self.command.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            try:
                self.proc = subprocess.Popen(
                    self.command.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    preexec_fn=_parent_death_signal(),
                    close_fds=True,
                )
            except OSError as exc:
                raise CannotRun(
                    f"cannot start the server ({self.command.argv[0]}): {exc}", hint=install_hint(self.command.engine)
                ) from exc
        self.pgid = self.proc.pid
        self.known = {self.proc.pid}
        with _LIVE_LOCK:
            _LIVE.add(self)

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def remaining(self) -> set[int]:
        if self.proc is None:
            return set()
        return {p for p in (self.known | family(self.proc.pid, self.pgid)) if alive(p)}

    def stop(self, grace: float = STOP_GRACE) -> dict[str, Any]:
        """SIGTERM to the group and every descendant, SIGKILL after `grace` seconds; idempotent."""
        if self.stopped is not None or self.proc is None:
            return self.stopped or {"seconds": 0.0, "signal": None, "left": []}
        t0 = time.perf_counter()
        self.known |= family(self.proc.pid, self.pgid)
        sent = "SIGTERM"
        self._signal(signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end and self.remaining():
            self.proc.poll()
            time.sleep(0.05)
        if self.remaining():
            sent = "SIGKILL"
            self.known |= family(self.proc.pid, self.pgid)
            self._signal(signal.SIGKILL)
            end = time.monotonic() + 5.0
            while time.monotonic() < end and self.remaining():
                self.proc.poll()
                time.sleep(0.05)
        try:
            self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        left = sorted(self.remaining())
        self.stopped = {
            "seconds": time.perf_counter() - t0,
            "signal": sent,
            "left": left,
            "returncode": self.proc.returncode,
            "pids": sorted(self.known),
        }
        with _LIVE_LOCK:
            _LIVE.discard(self)
        return self.stopped

    def _signal(self, sig: signal.Signals) -> None:
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in sorted(self.remaining()):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def install_hint(engine: str) -> str:
    if engine == "vllm":
        return "install vLLM (and vllm-ascend on an NPU: pip install vllm==X, then vllm-ascend==X), or pick --server transformers"
    return "pip install 'envkit[serve]' (fastapi, uvicorn, openai) with Transformers 5.x, which ships `transformers serve`"


def check_prerequisites(command: ServerCommand) -> None:
    if command.engine == "vllm":
        if shutil.which(command.argv[0]) is None:
            raise CannotRun(
                "`vllm` not found on PATH: the serving smoke on this device runs `vllm serve`", hint=install_hint("vllm")
            )
        return
    from importlib.util import find_spec

    missing = [m for m in ("fastapi", "uvicorn", "openai") if find_spec(m) is None]
    if find_spec("transformers.cli.serve") is None:
        missing.insert(0, "transformers>=5 (transformers serve)")
    if missing:
        raise CannotRun(f"`transformers serve` cannot run here: missing {', '.join(missing)}", hint=install_hint("transformers"))


def wait_ready(
    server: ServerProcess,
    port: int,
    timeout: float,
    expected: str | None,
    poll: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[str, float]:
    """Poll /health, then /v1/models, until ready; returns (model id to request, seconds). CannotRun when the
    server exits first or the timeout passes: `timeout` bounds the wait as a whole, each poll included (a poll
    has POLL_TIMEOUT seconds for the whole of it, and never more than the wait has left)."""
    t0 = clock()
    deadline = t0 + timeout
    while True:
        code = server.exited()
        if code is not None:
            raise CannotRun(
                f"the server exited with status {code} before it was ready ({server.command.engine})",
                hint=f"its log ({server.log_path}) ends with:\n{server.log_tail()}",
                details={"command": server.command.argv, "log": str(server.log_path)},
            )
        try:
            status, _ = http_get_json(port, "/health", min(POLL_TIMEOUT, max(0.01, deadline - clock())))
            if status == 200:
                status, doc = http_get_json(port, "/v1/models", min(POLL_TIMEOUT, max(0.01, deadline - clock())))
                data = doc.get("data") if isinstance(doc, dict) else None  # any JSON: a malformed list is "not ready"
                listed = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) else []
                ids = [i for i in listed if isinstance(i, str)]
                if status == 200 and ids:
                    return (expected if expected in ids else ids[0]), clock() - t0
        except httpclient.HTTPFailure:  # not listening yet, too slow, too large: not ready
            pass
        if clock() >= deadline:
            raise CannotRun(
                f"the server was not ready within {timeout:g} s ({server.command.engine} on 127.0.0.1:{port})",
                hint=f"raise --serve-timeout, or read its log ({server.log_path}):\n{server.log_tail()}",
                details={"command": server.command.argv, "log": str(server.log_path)},
            )
        time.sleep(poll)


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """While the server runs, SIGTERM/SIGHUP raise SystemExit so that the `finally` stops the server."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# --- the in-process reference ----------------------------------------------------------------------------


@dataclass
class Reference:
    ids: list[int]
    text: str
    decode: Callable[[list[int]], str] = field(repr=False)


def reference_generations(model_dir: Path, spec: DeviceSpec, dtype: str, max_tokens: int) -> dict[str, Reference]:
    """Greedy generation of each request in-process, the way the server does it (the model's generation
    config, the same tokenization and chat template, eager attention, `skip_special_tokens` decoding)."""
    from envkit.jobs.smoke.device import require_device
    from envkit.jobs.smoke.runner import _import_transformers, _load_kwargs

    device = require_device(spec)
    torch = sys.modules["torch"]
    transformers = _import_transformers(os.environ, str(spec))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, **_load_kwargs(transformers, getattr(torch, TORCH_DTYPE_NAMES[dtype]))
    )
    model.to(device.torch_device)
    model.eval()

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, skip_special_tokens=True))  # one sequence: a str

    out: dict[str, Reference] = {}
    for req in REQUESTS:
        if req.kind == "completion":
            inputs = tokenizer(req.prompt, return_tensors="pt")
        else:
            inputs = tokenizer.apply_chat_template(
                req.messages(), add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
            )
        inputs = {k: v.to(device.torch_device) for k, v in inputs.items()}
        config = copy.deepcopy(model.generation_config)
        config.do_sample = False
        config.max_new_tokens = max_tokens
        with torch.no_grad():
            seq = model.generate(**inputs, generation_config=config)
        ids = [int(t) for t in seq[0, inputs["input_ids"].shape[-1] :].tolist()]
        out[req.name] = Reference(ids=ids, text=decode(ids), decode=decode)
    del model
    _release(spec)
    return out


def _release(spec: DeviceSpec) -> None:
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    backend = getattr(torch, spec.type, None) if torch is not None and spec.type != "cpu" else None
    if backend is not None and hasattr(backend, "empty_cache"):
        backend.empty_cache()


def prefix_agreement(ref_ids: list[int], text: str, decode: Callable[[list[int]], str], kind: str = "completion") -> int:
    """How many leading reference tokens the server's text reproduces: the largest k such that the decoding
    of the first k reference tokens (a trailing partial UTF-8 character aside) is a prefix of the text."""
    target = normalize(kind, text).lstrip() if kind == "chat" else text
    for k in range(1, len(ref_ids) + 1):
        piece = decode(ref_ids[:k]).rstrip("\ufffd")
        if kind == "chat":
            piece = piece.lstrip()
        if not target.startswith(piece):
            return k - 1
    return len(ref_ids)


# --- the checks -------------------------------------------------------------------------------------------


def _fmt_rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def check_agreement(req: Request, answer: Answer | None, ref: Reference | None, exact: bool) -> Check:
    name = f"serve:{req.name}"
    if answer is None or not answer.ok:
        return Check(name=name, ok=False, figure=f"no answer: {answer.error if answer else 'not sent'}", data={})
    if ref is None:
        return Check(name=name, ok=False, figure="no in-process reference to compare with", data={})
    matched = prefix_agreement(ref.ids, answer.text, ref.decode, req.kind)
    fraction = matched / len(ref.ids) if ref.ids else (1.0 if not normalize(req.kind, answer.text) else 0.0)
    same_text = normalize(req.kind, answer.text) == normalize(req.kind, ref.text)
    same_count = answer.completion_tokens is None or answer.completion_tokens == len(ref.ids)
    data = {
        "exact_required": exact,
        "text_equal": same_text,
        "token_count_equal": same_count,
        "agreement": fraction,
        "matched_tokens": matched,
        "reference_tokens": len(ref.ids),
        "server_tokens": answer.completion_tokens,
        "reference_text": ref.text,
        "server_text": answer.text,
    }
    if exact:
        ok = same_text and same_count
        figure = (
            f"{req.kind}: the server's {len(ref.ids)} greedy tokens equal the in-process generation"
            if ok
            else f"{req.kind}: the server differs from the in-process generation after {matched} of {len(ref.ids)} tokens "
            f"(text equal: {same_text}, token count {answer.completion_tokens} vs {len(ref.ids)})"
        )
    else:
        ok = True
        figure = f"{req.kind}: token agreement with the in-process generation {fraction:.3f} ({matched}/{len(ref.ids)}), reported, not gated"
    return Check(name=name, ok=ok, figure=figure, data=data)


def check_stream(req: Request, streamed: Answer | None, plain: Answer | None) -> Check:
    name = f"serve:stream:{req.name}"
    if streamed is None or not streamed.ok:
        return Check(name=name, ok=False, figure=f"stream failed: {streamed.error if streamed else 'not sent'}", data={})
    data = asdict(streamed)
    problems = []
    if plain is not None and plain.ok and stream_key(req.kind, streamed.text) != stream_key(req.kind, plain.text):
        problems.append("streamed text differs from the non-streamed answer")
    if streamed.ttft_s is None:
        problems.append("no content streamed")
    ttft = "n/a" if streamed.ttft_s is None else f"{streamed.ttft_s * 1e3:.1f} ms"
    figure = (
        f"SSE {streamed.chunks} chunks, {streamed.completion_tokens} tokens, time to first token {ttft}, "
        f"{_fmt_rate(streamed.tokens_per_s)} tokens/s end to end, {_fmt_rate(streamed.decode_tokens_per_s)} decode"
    )
    if problems:
        figure += " -- " + "; ".join(problems)
    return Check(name=name, ok=not problems, figure=figure, data=data)


def check_determinism(pairs: dict[str, tuple[Answer | None, Answer | None]]) -> Check:
    same: dict[str, bool] = {}
    for name, (a, b) in pairs.items():
        same[name] = bool(a and b and a.ok and b.ok and a.text == b.text and a.completion_tokens == b.completion_tokens)
    ok = bool(same) and all(same.values())
    figure = (
        "two identical requests (temperature 0) gave identical answers: "
        if ok
        else "identical requests gave different answers or failed: "
    ) + ", ".join(f"{n} {'same' if s else 'DIFFERENT'}" for n, s in same.items())
    return Check(name="serve:determinism", ok=ok, figure=figure, data={"same": same})


def check_stop(stopped: dict[str, Any]) -> Check:
    left = stopped.get("left") or []
    figure = (
        f"server stopped by {stopped.get('signal')} in {stopped.get('seconds', 0.0):.2f} s, "
        f"{len(stopped.get('pids') or [])} process(es), none left"
        if not left
        else f"server processes still alive after SIGKILL: {left}"
    )
    return Check(name="serve:stop", ok=not left, figure=figure, data=stopped)


def _guarded_answer(fn: Callable[[], Answer], req: Request, stream_: bool) -> Answer:
    try:
        return fn()
    except ServeError as exc:
        return Answer(name=req.name, kind=req.kind, stream=stream_, ok=False, error=str(exc))


def serve_stage(
    model_dir: Path,
    spec: DeviceSpec,
    dtype: str,
    out_dir: Path,
    sopts: ServeOptions,
    progress: Callable[[str], None] = lambda _m: None,
) -> tuple[list[Check], dict[str, Any]]:
    """Start the server, query it, stop it, compare with the in-process generation. Returns the checks and
    the `serve` section; CannotRun when the server cannot start or become ready (it is stopped then too)."""
    engine = choose_engine(spec, sopts.check().engine)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    served_dir, template = serving_view(model_dir, out_dir)
    port = free_port()
    if engine == "vllm":
        command = vllm_command(served_dir, port, dtype, spec, max_model_len(served_dir), template)
    else:
        torch = sys.modules.get("torch")
        threads = int(torch.get_num_threads()) if torch is not None and spec.type == "cpu" else None
        command = transformers_command(served_dir, port, dtype, spec, threads)
    check_prerequisites(command)
    section: dict[str, Any] = {
        "engine": engine,
        "command": command.argv,
        "env": command.env,
        "shell": command.shell(),
        "model_dir": str(served_dir),
        "chat_template_added": template is not None,
        "host": HOST,
        "port": port,
        "log": str(out_dir / LOG_FILE),
        "max_tokens": sopts.max_tokens,
        "exact": spec.type == "cpu",
    }
    server = ServerProcess(command, out_dir / LOG_FILE)
    answers: dict[tuple[str, str], Answer] = {}
    progress(f"smoke: starting {engine} serve on {HOST}:{port}")
    try:
        with _sigterm_as_exit():
            server.start()
            model_id, ready_s = wait_ready(server, port, sopts.ready_timeout, SERVED_MODEL_NAME if engine == "vllm" else None)
            section.update({"ready_s": ready_s, "model_id": model_id})
            progress(f"smoke: server ready in {ready_s:.1f} s; sending requests")
            for req in REQUESTS:
                for tag in ("first", "second"):
                    answers[(req.name, tag)] = _guarded_answer(
                        partial(complete, port, req, model_id, sopts.max_tokens, sopts.request_timeout), req, False
                    )
                answers[(req.name, "stream")] = _guarded_answer(
                    partial(stream, port, req, model_id, sopts.max_tokens, sopts.request_timeout, command.expects_done), req, True
                )
    except CannotRun as exc:
        stopped = server.stop()
        section.update({"ok": False, "error": exc.message, "stop": stopped})
        exc.details = {**exc.details, "serve": section}
        raise
    finally:
        stopped = server.stop()
    section["stop"] = stopped
    section["requests"] = [{"tag": tag, **asdict(a)} for (_n, tag), a in answers.items()]

    progress("smoke: the same generations in-process")
    refs: dict[str, Reference] | None = None
    ref_error = None
    try:
        refs = reference_generations(served_dir, spec, dtype, sopts.max_tokens)  # with the served chat template
    except Exception as exc:  # noqa: BLE001 - a reference that cannot run is a failed check, not a crash
        ref_error = f"{type(exc).__name__}: {exc}"[:300]
    checks = [
        Check(
            name="serve:ready",
            ok=True,
            figure=f"{engine} serve ready in {ready_s:.2f} s on {HOST}:{port} (model '{model_id}')",
            data={"ready_s": ready_s, "command": command.argv},
        )
    ]
    for req in REQUESTS:
        check = check_agreement(req, answers.get((req.name, "first")), (refs or {}).get(req.name), spec.type == "cpu")
        if ref_error:
            check = Check(
                name=check.name, ok=False, figure=f"the in-process reference failed: {ref_error}", data={"error": ref_error}
            )
        checks.append(check)
    for req in REQUESTS:
        checks.append(check_stream(req, answers.get((req.name, "stream")), answers.get((req.name, "first"))))
    checks.append(
        check_determinism({r.name: (answers.get((r.name, "first")), answers.get((r.name, "second"))) for r in REQUESTS})
    )
    checks.append(check_stop(stopped))
    streamed = [answers[(r.name, "stream")] for r in REQUESTS if answers[(r.name, "stream")].ok]
    section.update(
        {
            "ttft_s": {a.name: a.ttft_s for a in streamed},
            "tokens_per_s": {a.name: a.tokens_per_s for a in streamed},
            "decode_tokens_per_s": {a.name: a.decode_tokens_per_s for a in streamed},
            "agreement": {
                c.name.split(":", 1)[1]: c.data.get("agreement") for c in checks if c.name in ("serve:completion", "serve:chat")
            },
            "deterministic": checks[-2].ok,
            "reference_error": ref_error,
            "checks": [c.name for c in checks],
            "ok": all(c.ok for c in checks),
        }
    )
    return checks, section


def add_serve(result: Any, sopts: ServeOptions, progress: Callable[[str], None] = lambda _m: None) -> Any:
    """`envkit smoke --serve`: the serving checks appended to a finished smoke run, `serve` in report.json."""
    from envkit.io.outputs import SMOKE, claim_output, update_output
    from envkit.jobs.smoke.runner import SmokeResult
    from envkit.models.smokerun import REPORT_FILE, report_text

    report = result.report
    spec = parse_device(report.device)
    claim_output(result.out_dir, SMOKE)  # still the smoke run's folder, before the server writes into it
    written = (LOG_FILE, VIEW_DIR)  # server.log and the serving view, recorded as this run's
    try:
        checks, section = serve_stage(Path(report.model.path), spec, report.dtype, result.out_dir, sopts, progress)
    except CannotRun as exc:
        failed = report.model_copy(update={"serve": exc.details.get("serve") or {"ok": False, "error": exc.message}, "ok": False})
        update_output(result.out_dir, SMOKE, {REPORT_FILE: report_text(failed)}, adopt=written)
        raise
    updated = report.model_copy(
        update={"checks": list(report.checks) + checks, "serve": section, "ok": report.ok and section["ok"]}
    )
    update_output(result.out_dir, SMOKE, {REPORT_FILE: report_text(updated)}, adopt=written)
    return SmokeResult(updated, result.out_dir)
