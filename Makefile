# Two entry points for a fresh machine: `make demo` and `make test`. Both create .venv once;
# later runs reuse it (the stamp is refreshed only when pyproject.toml changes).
# A system interpreter first (3.11 or newer, with venv): sandboxed kernels run as users of their
# own (README "Security"), who must be able to read the interpreter and its standard library;
# one in a private home folder (a pyenv under /root, say) would leave kernels running as you.
PYTHON ?= $(shell for p in /usr/local/bin/python3 /usr/bin/python3 python3; do \
	$$p -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { echo $$p; exit 0; }; done; echo python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Without an NVIDIA GPU, install torch's CPU build first (a plain `torch` requirement would pull
# the multi-GB CUDA build): from a wheel pip finds on local disk (its find-links, as on this
# project's machines), else from PyTorch's CPU index (TORCH_CPU_INDEX).
TORCH_CPU ?= torch==2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

DEMO_SHAPE ?= M=256,N=256,K=256

.PHONY: install demo test test-fast test-process test-fleet lint unit clean compose-check

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@if nvidia-smi -L >/dev/null 2>&1; then \
		echo "GPU found: torch comes from the project requirements"; \
	else \
		echo "no GPU: installing $(TORCH_CPU) (CPU build)"; \
		$(BIN)/python -m pip install -q --no-index --no-deps "$(TORCH_CPU)" 2>/dev/null \
		|| $(BIN)/python -m pip install -q --index-url "$(TORCH_CPU_INDEX)" "$(TORCH_CPU)"; \
	fi
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,benchmarks]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tuner tune matmul --shape $(DEMO_SHAPE) --dtype fp16 --trials 20 --parallel 2 --seed 0
	$(BIN)/tuner best matmul --shape $(DEMO_SHAPE) --dtype fp16
	@echo "Browse every trial: $(BIN)/tuner dashboard   (http://127.0.0.1:8080)"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

# Every tier on every core: the fleet (PostgreSQL, Redis, Celery), real processes, the GPU
# (skipped without one), then the fast tier, whose short tests an idle core steals at the end
# (tests/conftest.py, TIER_ORDER).
test: lint
	$(BIN)/pytest -q -n auto --dist worksteal --durations=40

# The pre-commit check: unit tests and the control plane in-process (under 2 minutes on 2 cores).
test-fast: $(STAMP)
	$(BIN)/pytest -q -n auto tests/fast

test-process: $(STAMP)
	$(BIN)/pytest -q -n auto tests/process

test-fleet: $(STAMP)
	$(BIN)/pytest -q -n auto tests/fleet

unit: test-fast

# The image built and docker-compose.yml started end to end on this machine, on loopback only
# (README "From one machine to a GPU fleet"): as root; about 5 minutes from nothing, 3 warm.
compose-check: $(STAMP)
	bash scripts/compose_check.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
