# Two entry points for a fresh machine: `make run` (the pipeline) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export MLFLOW_DISABLE_TELEMETRY := true
export DVC_NO_ANALYTICS := 1
export DO_NOT_TRACK := 1

.PHONY: setup run test collect push

setup: $(VENV)/.installed

# torch first and pinned (an unpinned torch pulls GBs of CUDA packages); mamba-ssm last, built
# against that torch without CUDA kernels (its own build isolation would fetch a CUDA torch).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE \
		$(BIN)/pip install -q --no-build-isolation mamba-ssm==2.3.1
	$(BIN)/pip check
	touch $@

# The dataset comes from the DVC remote (dvc-store/ in this repository unless you moved it): pull,
# then repro measures only what the store lacks.
run: setup
	source $(BIN)/activate && dvc pull --allow-missing && dvc repro

# Measure where you are (README "Growing the knowledge base"): this CPU's platforms, what the store lacks,
# in the background (timings on collect.runner.cpus), committed and pushed every COLLECT_EVERY minutes.
# A CPU without platforms stops at once with the params.yaml entries to add. COLLECT_ARGS=--no-git: no git commits.
COLLECT_EVERY ?= 20
collect: setup
	@mkdir -p logs; log=logs/collect-$$(date -u +%Y%m%d-%H%M%S).log; \
	source $(BIN)/activate && python -m tcl.collect.host \
	&& { nohup setsid python -m flows.grow --every-min $(COLLECT_EVERY) $(COLLECT_ARGS) > $$log 2>&1 & \
	     echo "make collect: started (pid $$!), log $$log; stop it with: kill -- -$$!"; }

# dvc push, then earlier versions out of the in-repository remote (git history keeps them): README "Where the data lives".
push: setup
	source $(BIN)/activate && dvc push && python -m tcl.data.footprint

# TEST_WORKERS=2: two pytest-xdist workers (tests/conftest.py), the whole-pipeline test in one, the rest in
# the other, a core each. Not the default: timed on a clean clone (2 vCPUs) it took 37.8 min against one
# process's 32.9 min, when tests still tuned with MetaSchedule's full search; one process took 56 min on a
# 2-vCPU Zen 1 in stop 73 (3,384 s), two lanes were not timed again.
TEST_WORKERS ?= 0
# tests/test_servers.py opens MLflow's UI in headless Chromium (Debian's package; CI runs this as root).
test: setup
	command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)
	source $(BIN)/activate && pytest -q -ra --durations=25 -n $(TEST_WORKERS) --dist loadgroup
