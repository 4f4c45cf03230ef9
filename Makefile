# The two commands of the README: `make demo` and `make test`. Everything else serves them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-peers lint unit integration system-deps lock clean

# Java and Maven start and fetch the embedded Kafka broker; PostgreSQL's server is what
# eventsourcing's DCB recorder runs on in the peer tests and bench. Installed when missing.
system-deps:
	@command -v java >/dev/null && command -v mvn >/dev/null || { \
	  echo "installing a JDK and Maven (Debian packages)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    openjdk-17-jdk-headless maven >/dev/null; }
	@{ command -v pg_config >/dev/null && test -x "$$(pg_config --bindir)/initdb"; } || { \
	  echo "installing PostgreSQL (Debian packages)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    postgresql libpq-dev >/dev/null; }

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c requirements.lock -e '.[dev,bench]'
	touch $(STAMP)

demo: system-deps $(STAMP)
	$(BIN)/dcb demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit

integration: system-deps $(STAMP)
	$(BIN)/pytest tests/integration

test: system-deps $(STAMP) lint
	$(BIN)/pytest

# Commit throughput, latency and cost beside raw transactional Kafka under each tag
# placement, then how cost grows with workers and partitions, on this machine:
# bench/results/commit.{json,png} and scale.{json,png} (about 13 minutes: some 8 for
# commit, 5 for scale; not part of `make test`).
bench: system-deps $(STAMP)
	$(BIN)/dcb bench commit
	$(BIN)/dcb bench scale
	$(BIN)/dcb bench projections
	$(BIN)/dcb bench archive

# The DCB course-subscription workload on dcb-streams, eventsourcing on PostgreSQL and
# UmaDB, one after another, at 1, 8, 64 and 256 writers: bench/results/peers.{json,png,md}
# (about 10 minutes).
bench-peers: system-deps $(STAMP)
	$(BIN)/dcb bench peers

# Re-resolve the pinned dependency set (commit the result).
lock:
	$(PYTHON) -m venv /tmp/dcb-lock-venv
	/tmp/dcb-lock-venv/bin/pip install -q --upgrade pip
	/tmp/dcb-lock-venv/bin/pip install -q -e '.[dev,bench]'
	/tmp/dcb-lock-venv/bin/pip freeze --exclude-editable | grep -v '^-e' > requirements.lock
	rm -rf /tmp/dcb-lock-venv

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
