# podstate: `make demo` shows it on local sandbox pods, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PODS ?= 4
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test lint deps venv down clean

$(BIN)/podstate: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/podstate

# Debian packages the sandbox pods need (root).
deps:
	@missing=""; \
	command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	command -v sshfs >/dev/null 2>&1 || missing="$$missing sshfs"; \
	command -v ssh-keygen >/dev/null 2>&1 || missing="$$missing openssh-client"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

demo: deps venv
	@sh scripts/demo.sh $(PODS)

test: deps venv
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

down: venv
	$(BIN)/podstate sandbox down

clean: down
	rm -rf $(VENV) .pytest_cache .ruff_cache
