#!/usr/bin/env bash
# The test command of the README (`make test` runs this after scripts/deps.sh):
# format, lints, dependency rules, every cargo test of the workspace (as root this includes the
# DPDK end-to-end tests on memif, af_packet and af_xdp inside network namespaces), and a short
# fuzz run of every parser.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "== dependency rules"
scripts/check-deps.sh

if [[ $(id -u) -ne 0 ]]; then
    echo "*** not root: the DPDK/netns end-to-end tests will print SKIPPED (CI runs as root) ***"
fi

echo "== cargo test --workspace"
cargo test --workspace --no-fail-fast 2>&1 | tee /tmp/iwarp-test.log
status=${PIPESTATUS[0]}

if [[ -x scripts/fuzz-smoke.sh && ${IWARP_SKIP_FUZZ:-0} != 1 ]]; then
    echo "== fuzz smoke (${FUZZ_SECONDS:-20} s per target)"
    scripts/fuzz-smoke.sh "${FUZZ_SECONDS:-20}" || status=1
fi

echo "== loom model check of the shared-memory rings (abi)"
cargo test -p abi --features loom --release --test loom 2>&1 | tee -a /tmp/iwarp-test.log
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1

if [[ ${IWARP_SKIP_DOCKER:-0} != 1 ]]; then
    echo "== docker-test (docker/test.sh: images, the two-host compose deployment)"
    make --no-print-directory docker-test 2>&1 | tee -a /tmp/iwarp-test.log || status=1
else
    echo "*** SKIPPED docker-test: IWARP_SKIP_DOCKER=1 ***"
fi

passed=$(grep -Eo '[0-9]+ passed' /tmp/iwarp-test.log | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed' /tmp/iwarp-test.log | awk '{s+=$1} END {print s+0}')
echo "tests: $passed passed, $failed failed"
exit "$status"
