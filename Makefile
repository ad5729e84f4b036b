# Two commands do everything on a fresh machine:
#   make test   - create .venv, install pytimely with its dev tools, run the suite
#   make demo   - create .venv, install pytimely, run the main job
VENV   := .venv
PY     := $(VENV)/bin/python
DEV    := $(VENV)/.installed-dev
BASE   := $(VENV)/.installed-base
SPARK  := $(VENV)/.installed-spark
BENCH  := $(VENV)/.installed-bench
WORKERS ?= 2
# pytest-xdist processes for `make test`: 4 on this 2-core machine, because much of the suite waits
# (on child processes, JVMs and fault timeouts) rather than computes. Spark's tests run in two groups,
# each on one worker with one session (tests/conftest.py).
TEST_JOBS ?= 4
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) --dist loadgroup

.PHONY: test test-audit audit-pass demo bench lint graphviz debian clean test-cluster spark-cluster spark-cluster-stop compiled pure

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(BASE): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(DEV): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(BASE)

# Spark (PySpark, pandas, pyarrow) runs the flagship pipeline and its tests.
$(SPARK): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev,spark]'
	touch $@ $(DEV) $(BASE)

# Debian packages: graphviz provides the `dot` binary used by the renderer, prometheus the
# server (and promtool) that the metrics tests scrape with. Installed with apt-get when missing and root.
debian:
	@missing=""; \
	command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    echo "installing Debian's$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "warning: missing Debian package(s):$$missing; install them (we are not root)"; \
	  fi; \
	fi

graphviz: debian

# Every test, the benchmarks' own included (`-m ""` overrides the `-m 'not bench'` of a plain `pytest`);
# they need the bench extra's baselines. PYTIMELY_NO_SKIPS=1 fails any test that would be skipped:
# everything a test needs is installed here.
# Bytecode of the project's modules comes first, as pip writes it for an installed package, and pytest may write
# its rewritten test modules (PYTHONDONTWRITEBYTECODE, set on CI machines, forbade both): every process a test
# starts (a cluster's children, example programs: hundreds) imports runtime with 0.11 s of CPU instead of 0.32 s
# compiling it from source, and the audit pass reuses the test modules that the first pass rewrote (9 s a worker).
# The mypyc build before the audit pass keeps one core busy for about 35 s: lint (ruff, mypy) runs beside it on
# the other. If either fails, the build is removed and the checkout is pure Python again.
test: $(BENCH) debian
	$(PY) -m compileall -q scopes runtime viz benchmarks examples tests
	PYTHONDONTWRITEBYTECODE= PYTIMELY_NO_SKIPS=1 $(PYTEST) -m ""
	$(MAKE) -j2 --output-sync=target lint compiled || { $(PY) -m runtime.compiled remove; exit 1; }
	$(MAKE) audit-pass

# The tests that exercise the progress path (marked `progress` in tests/conftest.py) again with the
# progress audit on (runtime/audit.py), which checks the progress ledger as every computation runs.
# The list is PROGRESS_FILES in tests/conftest.py: the files whose subject is progress (frontiers,
# capabilities, notifications, scopes, loops, stalls); the other files' subjects are elsewhere. This pass runs the compiled build of the
# progress, operator and channel path (`make compiled`), so that both builds are tested, with the files of the
# operator and channel path (marked `compiled`: COMPILED_FILES in tests/conftest.py) as well; the build is removed
# afterwards, pass or fail, and the checkout is pure Python again.
test-audit: $(SPARK) debian
	$(PY) -m runtime.compiled build
	$(MAKE) audit-pass

# The audit pass itself, on the compiled build already made (`make test` and `make test-audit` make it first).
audit-pass: $(SPARK) debian
	PYTHONDONTWRITEBYTECODE= PYTIMELY_AUDIT=1 PYTIMELY_EXPECT_COMPILED=1 PYTIMELY_NO_SKIPS=1 \
	  $(PYTEST) -m "progress or compiled"; \
	  status=$$?; $(PY) -m runtime.compiled remove; exit $$status

# The optional compiled build: mypyc compiles the progress, operator and channel path into build/mypyc (outside the
# packages). It is used only while its sources are unchanged (scopes/native.py checks their hashes);
# `python -m runtime.compiled status` says which build runs. `make pure` removes it.
compiled: $(DEV)
	$(PY) -m runtime.compiled build

pure: $(PY)
	$(PY) -m runtime.compiled remove

# A user's program on a real standalone cluster (a master and two workers on loopback, about a minute):
# not part of `make test`.  spark-cluster / spark-cluster-stop start and stop one by hand.
test-cluster: $(SPARK)
	PYTIMELY_CLUSTER_TESTS=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_spark_standalone.py

spark-cluster: $(SPARK)
	$(PY) -m runtime.spark.standalone start --workers 2 --cores 1

spark-cluster-stop: $(SPARK)
	$(PY) -m runtime.spark.standalone stop

lint: $(SPARK)
	$(VENV)/bin/ruff check scopes runtime viz tests examples benchmarks
	$(VENV)/bin/ruff format --check scopes runtime viz tests examples benchmarks
	$(VENV)/bin/mypy

demo: $(SPARK) debian
	$(PY) examples/pipeline.py --check --log pipeline.msgpack --svg dataflow.svg

# The baselines of `make bench` (bytewax 0.21.1, networkx, scipy, igraph, PySpark) come from the `bench` extra,
# not from the product's dependencies. About 13 minutes on a quiet 2-core machine; the goals are in
# benchmarks/goals.toml. The compiled build is made for the 1-worker latency goal against bytewax (measured in a fresh
# interpreter) and removed afterwards; every other workload runs pure Python (PYTIMELY_PURE=1).
# `benchmarks/run.py --quick --repeat 1` is the smoke test (tests/test_bench.py runs it).
$(BENCH): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev,spark,bench]'
	touch $@ $(SPARK) $(DEV) $(BASE)

bench: $(BENCH)
	# bytecode first, as pip writes it for an installed package: start-up is measured importing it,
	# not compiling every module (which PYTHONDONTWRITEBYTECODE=1 would otherwise repeat in every child)
	$(PY) -m compileall -q scopes runtime viz benchmarks examples
	$(PY) -m runtime.compiled build
	PYTIMELY_PURE=1 $(PY) benchmarks/run.py --output BENCHMARKS.md; \
	  status=$$?; $(PY) -m runtime.compiled remove; exit $$status

clean:
	rm -rf $(VENV) output .pytest_cache .mypy_cache .ruff_cache .hypothesis
