# Entry point. The two commands a newcomer needs:
#   make demo   two iWARP stacks on a memif wire: iwarp-perf write_bw/write_lat tables beside kernel TCP
#   (make demo-net: ARP + ping, a TCP transfer, the poll-loop benchmark)
#   make test   every test (unit, simulator, and, as root, DPDK on virtual devices + netns)
# Both install what they need first (Debian packages, hugepages when possible).

SHELL := /bin/bash
CARGO ?= cargo

.PHONY: all deps build demo demo-net test bench fmt clippy clean docker-images docker-test interop

all: build

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --workspace

demo: build
	@flock /tmp/iwarp-e2e.lock scripts/demo.sh

demo-net: build
	@scripts/demo-net.sh

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

# Live interop with Linux soft-iWARP (siw) in a qemu guest: builds (cached) and boots the guest,
# runs the matrix (INTEROP_CELLS=name,... for a subset; scripts/interop.sh --list), tears it all
# down and writes the table into INTEROP.md. Root; takes /tmp/iwarp-e2e.lock for the DPDK part.
interop: deps
	@scripts/interop.sh

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
