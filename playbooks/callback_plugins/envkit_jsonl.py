# envkit: a stdout callback that writes one JSON object per line (read by envkit.executor.ansible).
from __future__ import annotations

DOCUMENTATION = """
    name: envkit_jsonl
    type: stdout
    short_description: one JSON object per event, for envkit provision
    description:
      - Writes play, task, per-host result and final stats events as JSON lines on stdout.
      - Results of tasks named "... | Report ..." carry their message (plans, smoke verdicts).
"""

import json
import sys
import time

from ansible.plugins.callback import CallbackBase

_KEEP = ("msg", "rc", "stderr", "reboot", "elapsed")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "envkit_jsonl"

    def __init__(self) -> None:
        super().__init__()
        self._start = time.monotonic()

    def _emit(self, event: str, **data: object) -> None:
        data["event"] = event
        data["t"] = round(time.monotonic() - self._start, 3)
        sys.stdout.write(json.dumps(data, default=str, sort_keys=True) + "\n")
        sys.stdout.flush()

    def v2_playbook_on_play_start(self, play):  # noqa: D102
        hosts = None
        try:  # the hosts this play targets (after --limit, every --serial batch), so hosts never reached still show up
            inventory = play.get_variable_manager()._inventory
            hosts = [h.name for h in inventory.get_hosts(play.hosts, ignore_restrictions=True)]
        except Exception:  # noqa: BLE001 - best effort
            hosts = None
        from ansible import context

        check = bool(context.CLIARGS.get("check")) or bool(play.check_mode)
        self._emit("play", name=play.get_name(), check=check, hosts=hosts)

    def v2_playbook_on_task_start(self, task, is_conditional):  # noqa: D102
        self._emit("task", name=task.get_name())

    def v2_playbook_on_handler_task_start(self, task):  # noqa: D102
        self._emit("task", name=task.get_name(), handler=True)

    def _result(self, status: str, result, **extra: object) -> None:
        res = result._result
        data: dict = {k: res[k] for k in _KEEP if k in res}
        if isinstance(data.get("msg"), str) and len(data["msg"]) > 4000:
            data["msg"] = data["msg"][:4000] + "..."
        if isinstance(data.get("stderr"), str):
            data["stderr"] = data["stderr"][-2000:]
        if status == "failed" and "stdout" in res and isinstance(res["stdout"], str):
            data["stdout"] = res["stdout"][-2000:]
        item = res.get("item") if "item" in res else None
        if item is not None:
            data["item"] = item if isinstance(item, (str, int, float)) else str(item)[:200]
        host = result._host.get_name()
        self._emit("result", host=host, task=result._task.get_name(), status=status, **data, **extra)

    def v2_runner_on_ok(self, result):  # noqa: D102
        self._result("changed" if result._result.get("changed") else "ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):  # noqa: D102
        self._result("ignored" if ignore_errors else "failed", result)

    def v2_runner_on_unreachable(self, result):  # noqa: D102
        self._result("unreachable", result)

    def v2_runner_on_skipped(self, result):  # noqa: D102
        self._emit("result", host=result._host.get_name(), task=result._task.get_name(), status="skipped")

    def v2_runner_item_on_failed(self, result):  # noqa: D102
        self._result("item_failed", result)

    def v2_runner_on_async_failed(self, result):  # noqa: D102
        self._result("failed", result)

    def v2_playbook_on_no_hosts_remaining(self):  # noqa: D102
        self._emit("no_hosts_remaining")

    def v2_playbook_on_stats(self, stats):  # noqa: D102
        hosts = {}
        for h in sorted(stats.processed.keys()):
            s = stats.summarize(h)
            hosts[h] = {
                "ok": s.get("ok", 0),
                "changed": s.get("changed", 0),
                "failed": s.get("failures", 0),
                "unreachable": s.get("unreachable", 0),
                "skipped": s.get("skipped", 0),
                "rescued": s.get("rescued", 0),
                "ignored": s.get("ignored", 0),
            }
        self._emit("stats", hosts=hosts)

    def v2_playbook_on_warning(self, msg):  # pragma: no cover - older cores only
        self._emit("warning", msg=str(msg))
