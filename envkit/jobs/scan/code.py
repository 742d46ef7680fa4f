"""The code rules: CUDA-specific calls and silent fallbacks in a Python file, read with `ast` (nothing imported or run).

One pass over the tree in source order. Names are resolved through the file's imports (`import torch as th`,
`from torch.cuda.amp import GradScaler`), so a rule matches what the code calls, not what it spells. Each finding
names its rule in matrices/migration.yaml, which holds its severity, the Ascend way and the source; here are only
the patterns. Precision first (a false positive is a failure):

- a rule marked `npu_aware` is not reported inside a scope that also handles npu: a function or an if/elif chain of
  at most 60 lines, or the statement itself, that mentions npu (`torch.npu`, `'npu'`, `is_torch_npu_available`);
- a file that enables transfer_to_npu gets each rule's `with_ttn` severity;
- an import in a `try: ... except ImportError` (or under an `if is_..._available()`) is optional: info, not block;
- a device chosen on `torch.cuda.is_available()` is a silent CPU fallback (block); the same test guarding anything
  else is a gate (warn); a `'cuda'` comparison is a warn unless its result picks autocast's device_type (block).
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
from dataclasses import dataclass

from envkit.artifacts.project.findings import Finding, make
from envkit.artifacts.project.table import Table

SCOPE_LINES = 60
_NPU = re.compile(rb"(?i)(?<![a-z])npu|npu(?![a-z])")
_CUDA_DEVICE = re.compile(r"^cuda(:\d+)?$")
_DEVICE_LIKE = re.compile(r"^(cuda(:\d+)?|cpu|mps)$")
_ENV = re.compile(r"^(CUDA_VISIBLE_DEVICES|CUDA_LAUNCH_BLOCKING|PYTORCH_CUDA_ALLOC_CONF|(TORCH_)?NCCL_[A-Z0-9_]+)$")
_ENV_NPU = {
    "CUDA_VISIBLE_DEVICES": "ASCEND_RT_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING": "ASCEND_LAUNCH_BLOCKING",
    "PYTORCH_CUDA_ALLOC_CONF": "PYTORCH_NPU_ALLOC_CONF",
    "NCCL_SOCKET_IFNAME": "HCCL_SOCKET_IFNAME (HCCL_IF_IP wins)",
    "NCCL_BUFFSIZE": "HCCL_BUFFSIZE",
    "NCCL_TIMEOUT": "HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT",
}
_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
_AMP_SCALER = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})
_DATAPARALLEL = frozenset(
    {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel"}
)
_TF32 = {
    "torch.backends.cuda.matmul.allow_tf32": "torch.npu.matmul.allow_hf32 = True (its default is False)",
    "torch.backends.cudnn.allow_tf32": "torch.npu.conv.allow_hf32 (its default is True)",
}
_BACKENDS_UNSUPPORTED = frozenset({"enable_flash_sdp", "sdp_kernel", "preferred_linalg_library"})
_UNMAPPED = {
    "nvtx": "no NPU mapping: remove the NVTX ranges, or mark ranges with torch_npu.profiler",
    "comm": "torch.distributed collectives with backend='hccl'",
}
_TV_OPS = frozenset({"nms", "batched_nms", "roi_align", "roi_pool", "deform_conv2d", "ps_roi_align", "ps_roi_pool"})
_FEATURE_GATES = frozenset(
    {
        "is_flash_attn_2_available",
        "is_flash_attn_available",
        "is_bitsandbytes_available",
        "is_mamba_ssm_available",
        "is_causal_conv1d_available",
    }
)
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})

# a file none of these words appear in (case-insensitively) has nothing any rule looks for: it is not parsed
_TRIGGER_WORDS = (
    "cuda",
    "nccl",
    "cudnn",
    "tf32",
    "dataparallel",
    "jit",
    "triton",
    "flash",
    "extension",
    "channels_last",
    "compile",
    "amp_c",
    "bf16",
    "autocast",
    "gradscaler",
    "torchvision",
    "_available",
)


@functools.lru_cache(maxsize=4)
def _trigger(modules: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(sorted({w.encode() for w in (*_TRIGGER_WORDS, *(m.lower() for m in modules))}))


def _may_match(source: bytes, words: tuple[bytes, ...]) -> bool:
    lowered = source.lower()
    return any(w in lowered for w in words)


# fields that never hold a node a rule looks at: expression contexts, operators, names and scalars
_NOT_CHILDREN = frozenset(
    {"ctx", "op", "ops", "id", "attr", "name", "names", "module", "asname", "arg", "level", "kind", "type_comment",
     "conversion", "is_async", "simple", "lineno", "col_offset", "end_lineno", "end_col_offset"}
)  # fmt: skip


_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}  # Constant's value is a Python value, never a node


def _child_fields(cls: type) -> tuple[str, ...]:
    """The fields of an AST class that may hold nodes, last first."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple(reversed([f for f in getattr(cls, "_fields", ()) if f not in _NOT_CHILDREN]))
    return fields


@dataclass
class _Raw:
    rule: str
    node: ast.AST
    subject: str
    fill: dict[str, str]
    severity: str | None = None  # an override (a guarded import: info)


def scan_file(rel: str, source: bytes, table: Table) -> list[Finding]:
    """The findings of one Python file. A file that does not parse is one `info` finding; no exception leaves."""
    if not _may_match(source, _trigger(tuple(table.modules))):
        return []
    try:
        tree = ast.parse(source, filename=rel)
    except SyntaxError as exc:
        return [
            make(
                table, "scan-syntax-error", "code", rel, exc.lineno, f"{rel} does not parse: {exc.msg}: its code was not checked"
            )
        ]
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, nesting too deep for the parser
        return [make(table, "scan-syntax-error", "code", rel, None, f"{rel} does not parse ({type(exc).__name__}): not checked")]
    scan = _FileScan(rel, source, table)
    try:
        scan.run(tree)
    except RecursionError:  # pragma: no cover - the walk is iterative; ast.unparse of a pathological node
        pass
    return scan.findings()


class _FileScan:
    def __init__(self, rel: str, source: bytes, table: Table) -> None:
        self.rel = rel
        self.lines = source.split(b"\n")
        self.table = table
        self.aliases: dict[str, str] = {}
        self.parent: dict[int, ast.AST] = {}
        self.consumed: set[int] = set()
        self.raw: list[_Raw] = []
        self.ttn = False
        self.torchvision_npu = False
        self.gate_names: set[str] = set()
        self.device_type_vars: dict[str, list[int]] = {}  # a name assigned from a 'cuda' test -> its raw findings
        self.autocast_names: set[str] = set()
        self.route_imports: set[str] = set()

    # --- the walk ----------------------------------------------------------------------------------------------
    def run(self, tree: ast.Module) -> None:
        handlers = {
            ast.Import: self._import,
            ast.ImportFrom: self._import,
            ast.Call: self._call,
            ast.Attribute: self._attribute,
            ast.Name: self._name,
            ast.Constant: self._constant,
            ast.JoinedStr: self._joined,
            ast.Compare: self._compare,
            ast.IfExp: self._test_owner,
            ast.If: self._test_owner,
        }
        parent = self.parent
        stack: list[ast.AST] = [tree]
        node_type = ast.AST
        push = stack.append
        while stack:
            node = stack.pop()
            cls = type(node)
            handler = handlers.get(cls)
            if handler is not None:
                handler(node)
            for name in _child_fields(cls):  # last field first: the stack pops them in source order
                value = getattr(node, name, None)
                if type(value) is list:
                    for child in reversed(value):
                        if isinstance(child, node_type):
                            parent[id(child)] = node
                            push(child)
                elif isinstance(value, node_type):
                    parent[id(value)] = node
                    push(value)
        self._settle_device_types()

    def add(self, rule: str, node: ast.AST, subject: str, fill: dict[str, str] | None = None, severity: str | None = None) -> int:
        """Record a finding of `rule` at `node` (judged at the end: npu-aware scopes, transfer_to_npu); its index."""
        self.raw.append(_Raw(rule, node, subject, fill or {}, severity=severity))
        return len(self.raw) - 1

    # --- names ---------------------------------------------------------------------------------------------------
    def qual(self, node: ast.AST) -> str | None:
        """The dotted name a Name/Attribute chain resolves to through the file's imports; None for other bases."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.aliases.get(node.id, node.id)
        parts.append(base)
        return ".".join(reversed(parts))

    def _import(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                self.aliases[alias.asname or top] = alias.name if alias.asname else top
                self._module(alias.name, node)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = {alias.name for alias in node.names}
            for alias in node.names:
                if alias.name != "*":
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            if node.module == "torch_npu.contrib" and "transfer_to_npu" in names:
                self.ttn = True
            self._module(node.module, node)

    def _module(self, module: str, node: ast.AST) -> None:
        """An imported module: transfer_to_npu, the Torchvision Adapter, or a package of the dependency table."""
        if module.startswith("torch_npu.contrib.transfer_to_npu"):
            self.ttn = True
        top = module.split(".")[0]
        if top == "torchvision_npu":
            self.torchvision_npu = True
        if top == "amp_C":
            self.add("apex-amp-c", node, "import amp_C", severity="info" if self._guarded(node) else None)
            return
        row = self.table.modules.get(top)
        if row is None:
            return
        if row.class_ == "no-ascend-build":
            self.add(
                "import-no-ascend-build",
                node,
                f"import {top} ({row.name})",
                {"fix": row.fix},
                severity="info" if self._guarded(node) else None,
            )
        elif row.class_ == "ascend-route" and row.severity == "warn" and top not in self.route_imports:
            self.route_imports.add(top)
            self.add("import-ascend-route", node, f"import {top} ({row.name})", {"fix": row.fix})

    def _guarded(self, node: ast.AST) -> bool:
        """Inside `try:` with an `except ImportError` (or broader), or under an `if` testing availability."""
        child, p = node, self.parent.get(id(node))
        while p is not None:
            if isinstance(p, ast.Try) and child in p.body:
                for h in p.handlers:
                    names = [h.type] if not isinstance(h.type, ast.Tuple) else list(h.type.elts)
                    if h.type is None or any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names):
                        return True
            if isinstance(p, ast.If) and re.search(r"availab|installed", ast.unparse(p.test)):
                return True
            child, p = p, self.parent.get(id(p))
        return False

    # --- calls ---------------------------------------------------------------------------------------------------
    def _call(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        func = node.func
        q = self.qual(func)
        for kw in node.keywords:
            if kw.arg == "attn_implementation" and isinstance(kw.value, ast.Constant) and kw.value.value == "flash_attention_2":
                self.add("flash-attention-2", kw.value, 'attn_implementation="flash_attention_2"')
                self.consumed.add(id(kw.value))
        if q == "torch.cuda.is_available":
            self.consumed.add(id(func))
            self._is_available(node)
            return
        if q in _AUTOCAST:
            device = _arg(node, 0, "device_type")
            if isinstance(device, ast.Constant) and isinstance(device.value, str) and _CUDA_DEVICE.match(device.value):
                self.consumed.add(id(device))
                self.add("cuda-autocast", node, f"{q}({device.value!r})", {"npu": "torch.autocast('npu')"})
            elif isinstance(device, ast.Name):
                self.autocast_names.add(device.id)
            return
        if q in _AMP_SCALER:
            device = _arg(node, 0, "device")
            if device is None or (isinstance(device, ast.Constant) and device.value == "cuda"):
                if device is not None:
                    self.consumed.add(id(device))
                self.add("amp-gradscaler-cuda", node, f"{q}({'' if device is None else repr('cuda')})")
            return
        if q == "torch.utils.cpp_extension.load":
            self.add("cpp-extension-load", node, "torch.utils.cpp_extension.load(...)")
            self.consumed.add(id(func))
            return
        if q == "torch.utils.cpp_extension.load_inline":
            cuda = _arg(node, 99, "cuda_sources")
            with_cuda = _arg(node, 99, "with_cuda")
            if (cuda is not None and not (isinstance(cuda, ast.Constant) and cuda.value is None)) or (
                isinstance(with_cuda, ast.Constant) and with_cuda.value is True
            ):
                self.add("cpp-extension-load", node, "torch.utils.cpp_extension.load_inline(cuda_sources=...)")
            self.consumed.add(id(func))
            return
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and q != "torch.cuda":
            self.add("cuda-method", func, f"{_short(func.value)}.cuda()")
            self.consumed.add(id(func))
            return
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name in _FEATURE_GATES:
            self.add("feature-gate", node, f"{name}()")
            self.consumed.add(id(func))

    # --- torch.cuda.is_available() -------------------------------------------------------------------------------
    def _test_root(self, node: ast.AST) -> tuple[ast.AST, ast.AST | None]:
        """The whole test expression `node` is part of (through and/or/not/comparisons) and what holds it."""
        p = self.parent.get(id(node))
        while isinstance(p, (ast.BoolOp, ast.UnaryOp, ast.Compare)):
            node, p = p, self.parent.get(id(p))
        return node, p

    def _is_available(self, call: ast.Call) -> None:
        test, owner = self._test_root(call)
        if _mentions_call(test, "is_bf16_supported"):
            return  # the dtype choice: cuda-bf16-check reports it
        if isinstance(owner, (ast.IfExp, ast.If)) and owner.test is test:
            if self._device_choice(owner):
                self.add("cuda-device-fallback", owner, self._line_text(owner), {"npu": "torch.npu.is_available()"})
                return
        elif isinstance(owner, ast.Assign) and len(owner.targets) == 1 and isinstance(owner.targets[0], ast.Name):
            self.gate_names.add(owner.targets[0].id)
        self.add("cuda-availability-gate", call, "torch.cuda.is_available()")

    def _test_owner(self, node: ast.AST) -> None:
        """An `if` / conditional expression testing a name bound to torch.cuda.is_available() that picks a device."""
        assert isinstance(node, (ast.If, ast.IfExp))
        if not self.gate_names:
            return
        names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
        if names & self.gate_names and self._device_choice(node):
            self.add("cuda-device-fallback", node, self._line_text(node), {"npu": "torch.npu.is_available()"})

    def _device_choice(self, owner: ast.If | ast.IfExp) -> bool:
        """Whether the branches pick a device: a device string or torch.device(...), or move a model/tensor there;
        the device strings found are consumed (one finding for the choice)."""
        if isinstance(owner, ast.IfExp):
            exprs: list[ast.AST] = [owner.body, owner.orelse]
        else:  # the branches' simple statements (an elif chain followed), not whatever a long block holds
            exprs = []
            todo = list(owner.body) + list(owner.orelse)
            while todo:
                stmt = todo.pop()
                if isinstance(stmt, ast.If):
                    todo += list(stmt.body) + list(stmt.orelse)
                elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Expr)):
                    exprs.append(stmt)
        found = False
        for expr in exprs:
            for n in ast.walk(expr):
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and _DEVICE_LIKE.match(n.value):
                    self.consumed.add(id(n))
                    found = True
                elif isinstance(n, ast.JoinedStr) and _joined_prefix(n).startswith("cuda"):
                    self.consumed.add(id(n))
                    found = True
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("cuda", "to"):
                    found = found or n.func.attr == "cuda" or any(_is_device_literal(a) for a in n.args)
        return found

    # --- attributes and names --------------------------------------------------------------------------------
    def _attribute(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Attribute)
        p = self.parent.get(id(node))
        if isinstance(p, ast.Attribute) and p.value is node:
            return  # only the whole chain is looked at
        if id(node) in self.consumed:
            return
        q = self.qual(node)
        if q is None:
            return
        if node.attr == "is_cuda" and not q.startswith("torch."):
            self.add("cuda-is-cuda", node, f"{_short(node)}", {"npu": "is_npu"})
            return
        self._on_qual(q, node)

    def _name(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Name)
        q = self.aliases.get(node.id)  # most names are no import of interest: looked at first
        if q is None or q == node.id or id(node) in self.consumed or not isinstance(node.ctx, ast.Load):
            return
        p = self.parent.get(id(node))
        if isinstance(p, ast.Attribute) and p.value is node:
            return  # the chain is looked at whole
        self._on_qual(q, node)

    def _on_qual(self, q: str, node: ast.AST) -> None:
        p = self.parent.get(id(node))
        called = isinstance(p, ast.Call) and p.func is node
        if q.startswith("torch.cuda."):
            self._torch_cuda(q[len("torch.cuda.") :], node, called)
        elif q in _TF32:
            self.add("cuda-tf32", node, q, {"npu": _TF32[q]})
        elif q.startswith("torch.backends.cuda.") and q.rsplit(".", 1)[-1] in _BACKENDS_UNSUPPORTED:
            self.add("cuda-backends-unsupported", node, q)
        elif q in _DATAPARALLEL:
            self.add("dataparallel", node, q)
        elif q in ("torch.jit.script", "torch.jit.script_method"):
            self.add("jit-script", node, q)
        elif q == "torch.channels_last":
            self.add("channels-last", node, q)
        elif q == "torch.compile" and (called or isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))):
            self.add("torch-compile", node, "torch.compile(...)")
        elif q == "torch.utils.cpp_extension.CUDAExtension":
            self.add("cuda-extension", node, "CUDAExtension(...)")
        elif q == "torch.distributed.is_nccl_available":
            self.add("nccl-backend", node, q)
        elif q.startswith("torchvision.ops.") and q.rsplit(".", 1)[-1] in _TV_OPS and not self.torchvision_npu:
            self.add("torchvision-ops-cpu", node, q)
        elif q in ("triton.jit", "triton.autotune"):
            self.add("triton-kernel", node, f"@{q}")

    def _torch_cuda(self, rest: str, node: ast.AST, called: bool) -> None:
        name = rest.split(".")[0]
        api = f"torch.cuda.{rest}"
        if name == "is_available":
            if not called:
                self.add("cuda-availability-gate", node, api)
            return
        if rest == "amp.autocast":
            self.add("cuda-autocast", node, api, {"npu": "torch.npu.amp.autocast() / torch.autocast('npu')"})
        elif rest == "amp.GradScaler":
            self.add("cuda-gradscaler", node, api)
        elif name == "is_bf16_supported":
            self.add("cuda-bf16-check", node, f"{api}()")
        elif name in ("manual_seed", "manual_seed_all"):
            self.add("cuda-manual-seed", node, api)
        elif name in _UNMAPPED:
            self.add("cuda-api-unmapped", node, api, {"npu": _UNMAPPED[name]})
        else:
            self.add("cuda-api", node, api, {"npu": f"torch.npu.{rest}", "api": api})

    # --- strings and comparisons -------------------------------------------------------------------------------
    def _constant(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Constant)
        value = node.value
        if not isinstance(value, str) or len(value) > 64 or id(node) in self.consumed:
            return
        if isinstance(self.parent.get(id(node)), ast.Expr):
            return  # a docstring or a bare string
        if _CUDA_DEVICE.match(value):
            self.add("cuda-device-string", node, repr(value), {"npu": repr("npu" + value[4:])})
        elif value == "nccl":
            self.add("nccl-backend", node, "'nccl'")
        elif _ENV.match(value):
            npu = _ENV_NPU.get(value) or (
                value.replace("NCCL", "HCCL") if value.startswith("TORCH_NCCL") else "the HCCL_* variable of the same role"
            )
            self.add("cuda-env-var", node, value, {"npu": npu})

    def _joined(self, node: ast.AST) -> None:
        assert isinstance(node, ast.JoinedStr)
        if id(node) in self.consumed:
            for v in node.values:
                self.consumed.add(id(v))
            return
        prefix = _joined_prefix(node)
        if prefix == "cuda" or prefix.startswith("cuda:"):
            self.add("cuda-device-string", node, _short(node), {"npu": "f'npu:{...}'"})
            for v in node.values:
                self.consumed.add(id(v))

    def _compare(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Compare)
        operands = [node.left, *node.comparators]
        cuda = [o for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str) and _CUDA_DEVICE.match(o.value)]
        if not cuda:
            return
        for c in cuda:
            self.consumed.add(id(c))
        index = self.add("cuda-device-compare", node, _short(node))
        test, owner = self._test_root(node)
        if isinstance(owner, ast.IfExp) and owner.test is test:
            for branch in (owner.body, owner.orelse):
                if isinstance(branch, ast.Constant) and isinstance(branch.value, str) and _DEVICE_LIKE.match(branch.value):
                    self.consumed.add(id(branch))
            holder = self.parent.get(id(owner))
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
                self.device_type_vars.setdefault(holder.targets[0].id, []).append(index)

    def _settle_device_types(self) -> None:
        """A name set from a 'cuda' test and then given to autocast as its device_type: the test picks autocast's
        device, a silent fp32 run on an npu device (block)."""
        for name, indexes in self.device_type_vars.items():
            if name in self.autocast_names:
                for i in indexes:
                    self.raw[i].rule = "cuda-autocast-device-type"

    # --- scopes and output -------------------------------------------------------------------------------------
    def _line_text(self, node: ast.AST) -> str:
        line = getattr(node, "lineno", 0)
        if 0 < line <= len(self.lines):
            text = self.lines[line - 1].decode("utf-8", "replace").strip()
            return text if len(text) <= 100 else text[:97] + "..."
        return ""

    @functools.cached_property
    def _npu_lines(self) -> list[int]:
        """The (sorted) numbers of the lines that mention npu."""
        out: list[int] = []
        for n, line in enumerate(self.lines, 1):
            if b"npu" in line or b"NPU" in line or b"Npu" in line:
                if _NPU.search(line):
                    out.append(n)
        return out

    def _mentions_npu(self, node: ast.AST) -> bool:
        first = getattr(node, "lineno", 0)
        last = getattr(node, "end_lineno", None) or first
        lines = self._npu_lines
        i = bisect.bisect_left(lines, first)
        return i < len(lines) and lines[i] <= last

    def _npu_aware(self, node: ast.AST) -> bool:
        """The statement holding `node`, or an enclosing function or if/elif chain of at most SCOPE_LINES lines,
        mentions npu."""
        stmt: ast.AST | None = node if isinstance(node, ast.stmt) else None
        p = self.parent.get(id(node))
        while p is not None:
            if stmt is None and isinstance(p, ast.stmt):
                stmt = p
            scope: ast.AST | None = None
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope = p
            elif isinstance(p, ast.If) and not _main_guard(p):
                scope = p
                up = self.parent.get(id(p))
                while isinstance(up, ast.If) and up.orelse == [scope]:  # an elif: the whole chain
                    scope, up = up, self.parent.get(id(up))
            if scope is not None:
                span = (getattr(scope, "end_lineno", 0) or 0) - getattr(scope, "lineno", 0) + 1
                if span <= SCOPE_LINES and self._mentions_npu(scope):
                    return True
            p = self.parent.get(id(p))
        return stmt is not None and self._mentions_npu(stmt)

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        seen: set[tuple[int, str, str]] = set()
        for raw in self.raw:
            row = self.table.rule(raw.rule)
            if row.npu_aware and self._npu_aware(raw.node):
                continue
            line = getattr(raw.node, "lineno", None)
            key = (line or 0, raw.rule, raw.subject)
            if key in seen:
                continue
            seen.add(key)
            severity = raw.severity or (row.with_ttn if self.ttn and row.with_ttn else row.severity)
            message = f"{raw.subject}: {row.message}" if raw.subject else row.message
            if self.ttn and row.with_ttn and row.with_ttn != row.severity:
                message += " (this file enables transfer_to_npu)"
            col = getattr(raw.node, "col_offset", None)
            out.append(
                make(
                    self.table,
                    raw.rule,
                    "code",
                    self.rel,
                    line,
                    message,
                    severity=severity,
                    fill=raw.fill,
                    column=None if col is None else col + 1,
                )
            )
        return out


# --- helpers -----------------------------------------------------------------------------------------------------
def _arg(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return call.args[position]
    return None


def _joined_prefix(node: ast.JoinedStr) -> str:
    first = node.values[0] if node.values else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""


def _is_device_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_CUDA_DEVICE.match(node.value))
    return isinstance(node, ast.JoinedStr) and _joined_prefix(node).startswith("cuda")


def _mentions_call(expr: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr for n in ast.walk(expr))


def _main_guard(node: ast.If) -> bool:
    t = node.test
    return (
        isinstance(t, ast.Compare)
        and isinstance(t.left, ast.Name)
        and t.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in t.comparators)
    )


def _short(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):  # pragma: no cover
        return "..."
    return text if len(text) <= 80 else text[:77] + "..."
