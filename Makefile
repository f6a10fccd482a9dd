# Entry point. The two commands a newcomer needs:
#   make demo   two iwarpd instances on a memif wire: ARP + ping, then the poll-loop benchmark
#   make test   every test (unit, simulator, and, as root, DPDK on virtual devices + netns)
# Both install what they need first (Debian packages, hugepages when possible).

SHELL := /bin/bash
CARGO ?= cargo

.PHONY: all deps build demo test bench fmt clippy clean docker-images docker-test

all: build

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --workspace

demo: build
	@scripts/demo.sh

test: deps
	@scripts/test.sh

bench: build
	@scripts/bench-l2.sh

# Container images and the two-host compose deployment (docker/README.md). docker-test is also
# run by `make test`; it skips loudly when no Docker engine can be started.
docker-images: deps
	@docker/engine.sh up && docker/base.sh && docker/build.sh

docker-test: deps
	@flock /tmp/iwarp-e2e.lock docker/test.sh

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
