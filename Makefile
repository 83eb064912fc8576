# Two commands on a fresh machine: `make demo` and `make test`. Both run `make setup` first, which is idempotent.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
APT_PKGS := gfmd gfsd gfarm-client libgfarm-dev gfarm2fs montage ruby rake sqlite3 iproute2 attr fuse3 \
            build-essential pkg-config python3-venv python3-dev openssh-server openssh-client postgresql util-linux procps fio stress-ng \
            chromium
# C parts: each folder with a Makefile builds into its own build/.
C_DIRS := $(wildcard preload envelope/engine db)

.PHONY: setup packages venv cbuild test demo bench bench-wfbench clean
setup: packages venv cbuild

packages:
	@missing=$$(for p in $(APT_PKGS); do dpkg-query -W -f='$${db:Status-Abbrev}' $$p 2>/dev/null | grep -q '^ii' || echo -n "$$p "; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make setup: missing Debian packages (run as root to install): $$missing" >&2; exit 1; fi; \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	fi

# The venv uses Debian's python3 so it does not depend on whichever interpreter is first on PATH.
$(VENV)/.stamp: pyproject.toml
	@test -x $(PY) || /usr/bin/python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# -qq: not setuptools' notice that every editable install prints; a failed build is still shown in full
	$(PY) -m pip install -qq -e '.[test,wfcommons]'
	@touch $@
venv: $(VENV)/.stamp

cbuild:
	@for d in $(C_DIRS); do if [ -f $$d/Makefile ]; then $(MAKE) -s -C $$d PYTHON=$(CURDIR)/$(PY) || exit 1; fi; done

# pytest exits 5 when it collected nothing: an empty suite must not pass.
test: setup
	@$(PY) -m pytest -ra --durations=12 $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc = 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

# DEMO_ARGS: demo.py's options, e.g. DEMO_ARGS="--results montage_example/results.json" to record the figures
demo: setup
	flock /run/mtcbed.lock $(PY) montage_example/demo.py $(DEMO_ARGS)

bench: setup
	@for b in tests/bench/*_bench.py tests/bench/montage_overhead.py tests/bench/montage_predict.py; do \
	  echo "== $$b"; $(PY) $$b || exit 1; done

# WfBench workflows predicted from a traced run of another size (takes the testbed lock itself), e.g.
# make bench-wfbench WFBENCH_ARGS="--recipes blast --sizes 50,200 --hosts 2 --keep out"
bench-wfbench: setup
	$(PY) tests/bench/wfbench_predict.py $(WFBENCH_ARGS)

clean:
	@for d in $(C_DIRS); do [ -f $$d/Makefile ] && $(MAKE) -s -C $$d clean; done; rm -rf $(VENV) *.egg-info
