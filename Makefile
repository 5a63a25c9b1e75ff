# podstate: `make demo` shows it on local sandbox pods, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PODS ?= 4
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test lint deps venv down clean bench bench-scale bench-venv bench-read bench-restart \
	pyinfra-compat

$(BIN)/podstate: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@# roles/ and schema/ install as podstate.roles and podstate.schema; setuptools warns
	@# about that mapping in editable installs, harmlessly.
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/podstate

# Debian packages the tests need (root): sshd and sshfs for sandbox pods, zsh and fish as
# login shells, shellcheck for podstate's shell scripts, strace to count the programs a
# command starts on a pod, tmux for Vast's login habit, dash to read the docs' sh blocks,
# debootstrap to build the Debian image of the old-image tests (.ci/run builds it first),
# chromium to render the check's HTML page, busybox to run each shell function under a
# third sh (tests/test_shell_*.py).
deps:
	@missing=""; \
	command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	command -v sshfs >/dev/null 2>&1 || missing="$$missing sshfs"; \
	command -v ssh-keygen >/dev/null 2>&1 || missing="$$missing openssh-client"; \
	command -v zsh >/dev/null 2>&1 || missing="$$missing zsh"; \
	command -v fish >/dev/null 2>&1 || missing="$$missing fish"; \
	command -v shellcheck >/dev/null 2>&1 || missing="$$missing shellcheck"; \
	command -v strace >/dev/null 2>&1 || missing="$$missing strace"; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	command -v dash >/dev/null 2>&1 || missing="$$missing dash"; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing="$$missing debootstrap"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v busybox >/dev/null 2>&1 || missing="$$missing busybox"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

demo: deps venv
	@sh scripts/demo.sh $(PODS)

test: deps venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	shellcheck podstate/scripts/*.sh
	@# mypy --strict runs as a test (tests/test_types.py: podstate as it installs, roles inside)
	@# test files in 4 processes, each file on sandbox pods of its own (a pid namespace each)
	$(BIN)/pytest -n 4 --dist loadfile

# Fleet speed at real latency against raw SSH, the same work with OpenSSH, plain pyinfra and
# Ansible, and the pods' own work (root, strace; about 25 minutes on 2 cores). Writes
# bench/results/fleet.md, fleet.png and fleet.json; BENCH_ARGS="--runs 1 --pods 8,24" and so on.
bench: deps venv
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

# The pyinfra API and boundary tests against each pyinfra minor podstate supports
# (PYINFRA_MINORS in podstate/pyinfra_api/verify.py), each in a venv of its own from PyPI:
# about a minute a minor the first time, seconds once the venvs are there.
pyinfra-compat:
	PYTHON=$(PYTHON) sh scripts/pyinfra-compat.sh

lint: venv
	$(BIN)/ruff check .
	$(BIN)/pytest -q -p no:cacheprovider tests/test_types.py tests/test_layers.py
	shellcheck podstate/scripts/*.sh
	$(BIN)/ruff format --check .

down: venv
	$(BIN)/podstate sandbox down

clean: down
	rm -rf $(VENV) .pytest_cache .ruff_cache

# Writes bench/results/scale.md and scale.json: apply and check of 50 to 500 pods from one
# process, then the 500 checked as 4 shards, each timed alone (root);
# SCALE_ARGS="--pods 50 200 --shards 2" and so on.
bench-scale: deps venv
	$(BIN)/python -m bench.scale $(SCALE_ARGS)

# Time to a ready numpy + pandas venv: naive pip on the network volume, the venv role on a
# fresh pod, a restore from its snapshot, and uv by hand (root; up to about 25 minutes).
# Writes bench/results/venv.md and venv.json; VENV_BENCH_ARGS="--rtt-ms 20" and so on.
bench-venv: deps venv
	$(BIN)/python -m bench.venv $(VENV_BENCH_ARGS)

# Large files (default 4 x 512M) read from the network volume (sshfs, 10 ms) and from local
# disk, page cache dropped before each pass (root). Writes bench/results/read.md and
# read.json; READ_BENCH_ARGS="--files 8 --size 1G" and so on.
bench-read: deps venv
	$(BIN)/python -m bench.read $(READ_BENCH_ARGS)

# Restarts: 24 sandbox pods at 150 ms, `podstate watch` at its default interval, a quarter
# of them restarted in each of 4 cycles; the time from each one's SSH being up again to its
# being ready, against interval + one apply (root; about 3 minutes). Writes
# bench/results/restart.md and restart.json; RESTART_ARGS="--cycles 8" and so on.
bench-restart: deps venv
	$(BIN)/python -m bench.restart $(RESTART_ARGS)
