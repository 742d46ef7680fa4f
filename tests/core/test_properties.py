"""Property tests of the resolver (hypothesis)."""

import os

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envkit import versions
from envkit.core import resolve as resolve_mod
from envkit.core.derive import build_lock, derive
from envkit.core.matrix import load_matrix
from envkit.core.resolve import pins_from_mapping, solve, validate_pins
from envkit.lock.file import _plain, dump_lock
from envkit.lock.text import lock_text, plain
from envkit.models.lock import Lock
from envkit.models.stack import STACK_KEYS

LM = load_matrix()
M = LM.model

VALUES = {
    "chip": [c.id for c in M.chips],
    "arch": [a.id for a in M.arches],
    "os": [o.id for o in M.operating_systems],
    "python": [p.version for p in M.pythons],
    "driver": [h.version for h in M.hdk],
    "firmware": [h.version for h in M.hdk],
    "cann": [c.version for c in M.cann],
    "torch_npu": [t.version for t in M.torch_npu],
    "torch": sorted({t.torch for t in M.torch_npu}),
    "numpy": ["1.24.4", "1.26.4", "2.0.0", "2.2.6", "2.3.5"],
    "transformers": ["4.31.0", "4.38.0", "4.46.0", "4.50.0", "4.57.1", "5.0.0", "5.24.0"],
    "accelerate": ["0.20.0", "0.26.0", "1.0.0", "1.10.0", "1.15.0"],
}

partial_stacks = st.dictionaries(st.sampled_from(STACK_KEYS), st.none(), min_size=0, max_size=4).flatmap(
    lambda d: st.fixed_dictionaries({k: st.sampled_from(VALUES[k]) for k in d})
)

# Under `make mutation` (tools/mutation.py sets ENVKIT_PROPERTY_EXAMPLES) each mutant reruns these: fewer examples,
# drawn the same way every run, keep a mutant's verdict cheap and reproducible.
_MUTATION_EXAMPLES = int(os.environ.get("ENVKIT_PROPERTY_EXAMPLES", "0"))


def _examples(n: int) -> int:
    return min(n, _MUTATION_EXAMPLES) if _MUTATION_EXAMPLES else n


SETTINGS = settings(
    max_examples=_examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(_MUTATION_EXAMPLES),
)


@SETTINGS
@given(partial_stacks)
def test_partial_stack_resolves_keeping_pins_or_names_a_pin(stack):
    pins = pins_from_mapping(LM, stack)
    res = solve(LM, pins)
    if res is not None:
        for k, pin in pins.items():
            if k in ("chip", "arch", "os"):
                assert res.stack[k] == pin.value
            else:
                assert versions.same(res.stack[k], pin.value)
    else:
        report = validate_pins(LM, pins)
        assert not report.valid
        assert report.conflicts
        for c in report.conflicts:
            assert c.pins and set(c.pins) <= set(pins)


@SETTINGS
@given(partial_stacks)
def test_every_resolved_lock_validates(stack):
    res = solve(LM, pins_from_mapping(LM, stack))
    if res is None:
        return
    lock = build_lock(LM, res, "envkit resolve (test)")
    report = validate_pins(LM, pins_from_mapping(LM, lock.stack.model_dump()))
    assert report.valid, [c.summary for c in report.conflicts]
    assert set(lock.stack.model_dump()) == set(STACK_KEYS)
    # `envkit resolve` writes the plain records `derive` makes, without pydantic: they must pass the schema (build_lock
    # validates them), their plain dump must be exactly pydantic's JSON dump, which reads back as the same lock, and
    # the text must be the very bytes the lockfile writes from the model
    records = derive(LM, res, "envkit resolve (test)")
    dumped = lock.model_dump(mode="json")
    assert plain(records) == _plain(lock) == dumped
    assert lock_text(plain(records)) == dump_lock(lock)
    assert Lock.model_validate(dumped) == Lock.model_validate(yaml.safe_load(dump_lock(lock)))


@settings(max_examples=_examples(25), deadline=None, derandomize=bool(_MUTATION_EXAMPLES))
@given(partial_stacks)
def test_resolve_is_deterministic(stack):
    first = solve(LM, pins_from_mapping(LM, stack))
    resolve_mod._CONSTRAINT_CACHE.clear()
    second = solve(LM, pins_from_mapping(LM, dict(reversed(list(stack.items())))))
    assert (first is None) == (second is None)
    if first is not None:
        assert first.stack == second.stack


def test_every_vendor_validated_row_resolves_to_itself():
    for t in M.torch_npu:
        if not t.validated:
            continue
        res = solve(LM, pins_from_mapping(LM, {"torch_npu": t.version, "cann": t.cann}))
        if res is None:
            # only chips/arches/OS choices can block a validated pair; the default host must not
            raise AssertionError(f"validated row torch_npu {t.version} + CANN {t.cann} does not resolve")
        assert res.stack["torch_npu"] == t.version and versions.same(res.stack["cann"], t.cann)
        assert res.stack["torch"] == t.torch
        assert res.validated_cann


def test_every_vendor_paired_cann_hdk_resolves_validated():
    for c in M.cann:
        for h in c.hdk_paired:
            if h.upper().endswith(".X") or c.prerelease:
                continue
            res = solve(LM, pins_from_mapping(LM, {"cann": c.version, "driver": h}))
            if res is None:
                continue  # e.g. CANN 9.2.0: no torch_npu release works with it yet
            assert res.validated_hdk, (c.version, h)


def test_lock_text_round_trips_byte_for_byte(run_cli):
    """`envkit resolve` writes with the lockfile's own dumper; reading the text back and dumping it again gives
    the same bytes, for a plain stack and for a serving stack (whose framework keys are dropped when unset)."""
    from envkit.lock.file import parse_lock

    for argv in (["resolve", "-o", "-"], ["resolve", "--workload", "serving", "-o", "-"]):
        r = run_cli(*argv)
        assert r.code == 0, r.err
        lock = parse_lock(yaml.safe_load(r.out), {}, "stdout")
        assert dump_lock(lock) == r.out
