# envkit: `make demo` and `make test` each set up everything they need on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch for the CPU smoke test (the smoke extra). Pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
DEMO_OUT ?= out/demo
PYTEST_ARGS ?=

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test lint venv bench clean schemas mutation fast-cli matrix-records generated refresh

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[test,smoke,serve]' '$(TORCH_SPEC)'
	touch $@

demo: venv
	@mkdir -p $(DEMO_OUT)
	@echo "== envkit resolve: the embedded default (Atlas A2 910b, aarch64, Ubuntu 22.04)"
	$(BIN)/envkit resolve -o $(DEMO_OUT)/envkit.lock
	@echo "== envkit validate"
	$(BIN)/envkit validate $(DEMO_OUT)/envkit.lock
	@echo "== envkit validate: a stack that cannot work, explained"
	-$(BIN)/envkit validate tests/data/stacks/bad-cp311.yaml
	@echo "== envkit matrix check"
	$(BIN)/envkit matrix check
	@echo "== envkit doctor (this machine has no NPU: the report says so)"
	$(BIN)/envkit doctor --lock $(DEMO_OUT)/envkit.lock || test $$? -eq 1
	@echo "== envkit lock: the default target takes torch 2.12.0+cpu from the PyTorch CPU index (the lock's python section),"
	@echo "   which this machine cannot reach (tests/airgap/test_torch_index.py proves that path on a local stand-in index)."
	@echo "   So the demo bundles, whole, a stack this machine can download: the same target with torch 2.10.0"
	@echo "   (torch_npu 2.10.0.post4), whose PyPI aarch64 wheel is torch's CPU build (matrix: torch_builds; no CUDA wheel)"
	$(BIN)/envkit resolve --torch 2.10.0 -o $(DEMO_OUT)/torch210.lock >/dev/null
	$(BIN)/envkit lock --lock $(DEMO_OUT)/torch210.lock -o $(DEMO_OUT)/bundle.lock
	@echo "== envkit bundle build + verify: the complete offline bundle of that lock, torch and torch_npu included"
	@echo "   (~330 MB of wheels; no vendor packages here: it says what it lacks)"
	$(BIN)/envkit bundle build --lock $(DEMO_OUT)/bundle.lock -o $(DEMO_OUT)/bundle
	$(BIN)/envkit bundle verify $(DEMO_OUT)/bundle
	@echo "== envkit image render: the default stack, with fixture vendor packages and stand-in hashed pins (no real CANN here)"
	$(BIN)/python tests/fixtures/installers/make_installers.py --lock $(DEMO_OUT)/envkit.lock --out $(DEMO_OUT)/vendor --zip >/dev/null
	$(BIN)/python tools/stand_in_requirements.py $(DEMO_OUT)/envkit.lock $(DEMO_OUT)/requirements.txt
	$(BIN)/envkit image render --lock $(DEMO_OUT)/envkit.lock --artifacts $(DEMO_OUT)/vendor --requirements $(DEMO_OUT)/requirements.txt -o $(DEMO_OUT)/image
	@echo "== envkit image run-args --chip 910b"
	$(BIN)/envkit image run-args --chip 910b
	@if [ -n "$(INVENTORY)" ]; then \
	  echo "== envkit provision --check ($(INVENTORY))"; \
	  $(BIN)/envkit provision -i $(INVENTORY) --lock $(DEMO_OUT)/bundle.lock --bundle $(or $(BUNDLE),$(DEMO_OUT)/bundle) --check --out $(DEMO_OUT)/provision; \
	else \
	  echo "== envkit provision: give INVENTORY=hosts.ini [BUNDLE=dir] to plan against your hosts, i.e."; \
	  echo "   $(BIN)/envkit provision -i hosts.ini --lock $(DEMO_OUT)/bundle.lock --bundle $(DEMO_OUT)/bundle --check"; \
	fi
	@echo "== envkit smoke --device cpu (embedded tiny Qwen2), with its report"
	$(BIN)/envkit smoke --device cpu --dtype fp32 --out $(DEMO_OUT)/smoke

# The linter and the type checker (settings: pyproject.toml [tool.ruff], [tool.mypy]); `make test` runs them first.
lint: venv
	$(BIN)/ruff check envkit tests benchmarks tools
	$(BIN)/ruff format --check envkit tests benchmarks tools
	$(BIN)/mypy

test: venv lint
	$(BIN)/python tools/run_tests.py $(PYTEST_ARGS)

bench: venv
	$(BIN)/python benchmarks/resolve.py

fast-cli: venv                           # after changing resolve, validate or bundle verify's options
	$(BIN)/python tools/fast_cli.py

matrix-records: venv                     # after changing a model of the matrix, the lock or the report (envkit/models/)
	$(BIN)/python tools/matrix_records.py

schemas: venv
	$(BIN)/envkit matrix schema -o envkit/schemas

generated: matrix-records schemas        # after changing a model (envkit/models/): every table and schema made from them

# The matrix's self-audit against the live index (docs/matrix.md): the diff of every derived fact, exit 1 when the
# matrix differs; REFRESH_ARGS="--write --record /tmp/snap" applies it and keeps what was read.
refresh: venv
	$(BIN)/envkit matrix refresh $(REFRESH_ARGS)

# Mutation testing of the core (mutmut, the `mutation` extra): a habit, not a gate, and not part of `make test`.
# MODULES=lockgate,verify (or all) picks module groups (tools/mutation.py --help lists them); all of them take hours on
# 2 cores, one group 1-20 minutes (README: Mutation testing). Prints the score per module and the surviving mutants.
# MUTATION_ARGS=--survivors reruns only the last run's survivors (after new tests), --diff prints each one's diff.
MODULES ?= versions,compare
MUTATION_ARGS ?=
mutation: venv $(VENV)/.mutation-installed
	$(BIN)/python tools/mutation.py --modules '$(MODULES)' --jobs 2 $(MUTATION_ARGS)

$(VENV)/.mutation-installed: pyproject.toml
	$(BIN)/python -m pip install -q -e '.[mutation]'
	touch $@

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis mutants .mutation .ruff_cache .mypy_cache
