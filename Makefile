# Two-command setup: `make test` and `make demo` create .venv and install into it
# on first use (requirements.txt pins + this package, editable), then run.
# The install is redone only when requirements.txt, pyproject.toml, setup.py, setup.cfg
# or package.xml change.

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
FLAKE8_PIN := flake8==7.5.0

.PHONY: test test-fast demo bench lint venv clean

# Everything, the node tests across processes included: the CI command (.ci/run).
# Two workers, one test file each at a time (module fixtures are built once), files in
# collection order (test/conftest.py puts the longest first; xdist would otherwise order
# them by their number of tests and start the one-test demo last); TEST_WORKERS=0 runs in
# one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	@$(VPY) -m compileall -q -j 0 arm_dyn_id >/dev/null    # see $(STAMP) below
	$(VPY) -m pytest -q -p no:cacheprovider --durations=40 \
	  $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) test

# The core tests: no ROS node, no DDS participant (-m "not ros"), nothing over ~5 s
# ("not slow"). About a minute on 2 cores; run it while you work, `make test` before a push.
test-fast: $(STAMP)
	$(VPY) -m pytest -q -p no:cacheprovider -m 'not ros and not slow' test

demo: $(STAMP)
	$(VENV)/bin/arm-dyn-id demo

# Benchmarks (full size, long: see bench/README.md) print JSON lines and write their
# tables to docs/results/ and plots to docs/; not part of CI (.ci/run is make test).
# bench/benchlib.py is their shared module, not a benchmark.
bench: $(STAMP)
	@set -e; found=0; for f in bench/*.py; do \
	  [ -f "$$f" ] || continue; [ "$$f" = bench/benchlib.py ] && continue; \
	  found=1; echo "== $$f"; $(VPY) "$$f"; done; \
	  [ $$found = 1 ] || echo "no benchmarks in bench/"

lint: $(STAMP)
	@$(VPY) -m flake8 --version >/dev/null 2>&1 || $(VPY) -m pip install -q $(FLAKE8_PIN)
	$(VPY) -m flake8 arm_dyn_id nodes launch test bench setup.py

venv: $(STAMP)

# The venv is made with the first python3 on PATH; it must be 3.10 or newer.
$(VPY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "error: '$(PYTHON)' not found on PATH; install Python >= 3.10" \
	       "(or run: make PYTHON=/path/to/python3.x ...)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { \
	  echo "error: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())')," \
	       "arm_dyn_id needs Python >= 3.10 (run: make PYTHON=/path/to/python3.x ...)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

# --use-pep517: build an editable wheel (PEP 660) so pip puts the commands in
# .venv/bin. Without it, an old pip with `wheel` installed falls back to
# `setup.py develop`, which obeys setup.cfg's script_dir (lib/arm_dyn_id, for
# ros2 run) and leaves arm-dyn-id off PATH.
# Byte-compiled once here, on every core: machines that set PYTHONDONTWRITEBYTECODE
# (this CI does) never keep what imports compile, and the suite starts hundreds of
# processes. pip would compile on one core (about 70 s of the install against 22 s).
$(STAMP): requirements.txt pyproject.toml setup.py setup.cfg package.xml | $(VPY)
	$(VPY) -m pip install -q --no-compile -r requirements.txt
	$(VPY) -m compileall -q -j 0 $(VENV)/lib >/dev/null || \
	  echo "note: some installed files did not byte-compile (pip ignores them too)"
	$(VPY) -m pip install -q --no-deps --use-pep517 -e .
	@touch $@

clean:
	rm -rf $(VENV) build install log demo_output *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
