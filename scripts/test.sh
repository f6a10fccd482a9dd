#!/usr/bin/env bash
# The test command of the README (`make test` runs this after scripts/deps.sh):
# format, lints, dependency rules, every cargo test of the workspace (as root this includes the
# DPDK end-to-end tests on memif, af_packet and af_xdp inside network namespaces), and a short
# fuzz run of every parser.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage names itself with the minutes elapsed so far (CI has 90 minutes in all).
stage() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

# Every stage's output, for the summary at the end: one file per run (two worktrees may run
# this at once).
LOG=${IWARP_TEST_LOG:-/tmp/iwarp-test.$$.log}

stage "cargo fmt --check"
cargo fmt --all -- --check

stage "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

stage "dependency rules"
scripts/check-deps.sh

if [[ $(id -u) -ne 0 ]]; then
    echo "*** not root: the DPDK/netns end-to-end tests will print SKIPPED (CI runs as root) ***"
fi

stage "cargo test --workspace"
# A failing stage must not end the script (set -e + pipefail): `|| status=1` keeps going, so the
# later stages still run and the summary counts everything that failed.
status=0
cargo test --workspace --no-fail-fast 2>&1 | tee "$LOG" || status=1

# copycrc's paths for x86-64 CPUs without AVX-512 (its `crc32` streams behind the public
# functions and its AVX2 ones-complement sum; netcore's CRC choice and calibration, and its
# checksum choice (`csum`), with them): valgrind's CPU has SSE4.2, PCLMULQDQ and AVX2 but no
# AVX-512, so its tests run there as on such a CPU (and memcheck watches the
# kernels' raw loads and stores). On an AVX-512 machine nothing else runs these paths.
if [[ $(uname -m) == x86_64 ]] && command -v valgrind > /dev/null; then
    stage "copycrc without AVX-512 (copycrc, netcore::crc and netcore::csum tests under valgrind)"
    runner="valgrind -q --error-exitcode=9"
    { CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=$runner cargo test -p copycrc --lib &&
        CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=$runner cargo test -p netcore --lib -- crc:: csum::; } \
        2>&1 | tee -a "$LOG" || status=1
else
    echo "*** SKIPPED copycrc without AVX-512: needs valgrind on x86-64 ***"
fi

if [[ -x scripts/fuzz-smoke.sh && ${IWARP_SKIP_FUZZ:-0} != 1 ]]; then
    stage "fuzz smoke (${FUZZ_SECONDS:-20} s per target)"
    scripts/fuzz-smoke.sh "${FUZZ_SECONDS:-20}" || status=1
fi

stage "loom model check of the shared-memory rings (abi)"
cargo test -p abi --features loom --release --test loom 2>&1 | tee -a "$LOG" || status=1

if [[ ${IWARP_SKIP_DOCKER:-0} != 1 ]]; then
    stage "docker-test (docker/test.sh: images, the two-host compose deployment)"
    make --no-print-directory docker-test 2>&1 | tee -a "$LOG" || status=1
else
    echo "*** SKIPPED docker-test: IWARP_SKIP_DOCKER=1 ***"
fi

if [[ ${IWARP_SKIP_INTEROP:-0} != 1 ]]; then
    # INTEROP.md: the CI subset of `make interop` (rping and ib_write_bw -R, both roles,
    # against Linux siw in a qemu guest; the image build is cached in /var/tmp/siw-peer).
    stage "interop with Linux siw (CI subset of make interop)"
    INTEROP_PROFILE=debug INTEROP_CELLS=rping-siw-c,rping-we-c,rping-siw-c-crc,rping-we-c-crc,write_bw-siw-c,write_bw-we-c \
        scripts/interop.sh 2>&1 | tee -a "$LOG" || status=1
else
    echo "*** SKIPPED interop with siw: IWARP_SKIP_INTEROP=1 ***"
fi

# Summary lines only (cargo's "N passed; M failed;", docker-test's "N passed, M failed,"), not
# a tool's own "ok=4 failed=0".
passed=$(grep -Eo '\b[0-9]+ passed[;,]' "$LOG" | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '\b[0-9]+ failed[;,]' "$LOG" | awk '{s+=$1} END {print s+0}')
echo "tests: $passed passed, $failed failed"
# CI shows only the tail of this output: name what failed here, last.
if [[ $status -ne 0 ]]; then
    echo "failed (from $LOG):"
    grep -E '^test .+ \.\.\. FAILED$|^error: test failed|^error: [0-9]+ targets? failed|docker-test.*FAIL|FAILED:|^\[interop.*FAIL' \
        "$LOG" | sed 's/^/  /' | head -40 || true
fi
stage "done"
exit "$status"
