"""The thin process executor: a command run with a timeout in its own process group, its output bounded.

Used by doctor's probe (npu-smi, hccn_tool, the target's Python) and the collectives' vendor tools (hccl_test,
ascend-dmi). It never raises: what went wrong is the result's `error`.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
from dataclasses import dataclass

MAX_READ = 1 << 20  # a file (or a command's output) read past this is refused as too large


@dataclass
class CommandResult:
    """A command's answer: run here, or read from its recording in a root (``recorded`` names the file)."""

    argv: list[str]
    returncode: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    error: str | None = None
    recorded: str | None = None

    @property
    def display(self) -> str:
        if self.recorded:
            return f"{self.recorded} (recorded output of {' '.join(self.argv)})"
        return " ".join(self.argv)

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()


def run_command(argv: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
    """Run a command with a timeout, in its own process group (killed whole at the timeout, so a
    child that keeps the output open cannot hold us), reading at most MAX_READ bytes of each
    output; never raises."""
    import time

    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return CommandResult(argv, error=exc.strerror or str(exc))
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs: dict[int, bytearray] = {out_fd: bytearray(), err_fd: bytearray()}
    error = None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for stream in (proc.stdout, proc.stderr):
            sel.register(stream, selectors.EVENT_READ)
        while sel.get_map() and error is None:
            left = deadline - time.monotonic()
            if left <= 0:
                error = f"timed out after {timeout:g} s"
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = bufs[key.fd]
                buf += chunk
                if len(buf) > MAX_READ:
                    error = f"printed more than {MAX_READ} bytes"
    if error is not None:
        kill_group(proc)
    try:
        returncode = proc.wait(timeout=max(deadline - time.monotonic(), 0) if error is None else 5)
    except subprocess.TimeoutExpired:  # closed its output, yet still running
        kill_group(proc)
        returncode = proc.wait()
        error = f"timed out after {timeout:g} s"
    finally:
        proc.stdout.close()
        proc.stderr.close()
    out, err = bytes(bufs[out_fd][:MAX_READ]), bytes(bufs[err_fd][:MAX_READ])
    if error is not None:
        return CommandResult(argv, stdout=out, stderr=err, error=error)
    return CommandResult(argv, returncode, out, err)
