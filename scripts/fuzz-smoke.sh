#!/usr/bin/env bash
# Run every cargo-fuzz target in fuzz/ for N seconds each (default 20); exit non-zero on a
# crash. Installs cargo-fuzz from crates.io if missing. Works on stable Rust through
# RUSTC_BOOTSTRAP=1 (cargo-fuzz needs -Z flags), or on a nightly toolchain if present.
#
# Usage: scripts/fuzz-smoke.sh [SECONDS] [TARGET...]
#        FUZZ_STABLE=1 forces the stable toolchain (with RUSTC_BOOTSTRAP=1).
set -euo pipefail

secs="${1:-20}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

toolchain=()
if [ "${FUZZ_STABLE:-0}" != 1 ] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=(+nightly)
else
    export RUSTC_BOOTSTRAP=1
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

# Seed corpora: a few real MPA frames and FPDUs so the fuzzers start deep.
mkdir -p corpus/mpa_reqrep corpus/mpa_deframer
printf 'MPA ID Req Frame\x10\x02\x00\x04\x00\x01\x00\x01' > corpus/mpa_reqrep/siw_rping_req
printf 'MPA ID Rep Frame\x30\x02\x00\x04\x00\x00\x00\x00' > corpus/mpa_reqrep/siw_reject
printf '\x01\x00\x00\x00\x00\x00\x00\x00\x00\x0e\xc1\x40\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' \
    > corpus/mpa_deframer/zero_len_write

fail=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    echo "fuzz-smoke: $t for ${secs}s" >&2
    if ! cargo "${toolchain[@]}" fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048; then
        echo "fuzz-smoke: $t FAILED (crash artifacts in fuzz/artifacts/$t)" >&2
        fail=1
    fi
done
exit "$fail"
