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

# tcp_iface: [config byte] then ops; op 0 = a frame of 2 * (next byte) bytes. Seeds: an ARP
# request for 10.0.0.1 (the target's address) and an ICMP echo request to it (checksums right).
mkdir -p corpus/tcp_iface
python3 - corpus/tcp_iface <<'PY'
import struct, sys
def csum(b):
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
us, peer = bytes([2, 0, 0, 0, 0, 1]), bytes([2, 0, 0, 0, 0, 2])
arp = b"\xff" * 6 + peer + b"\x08\x06" + bytes.fromhex("0001080006040001") + peer \
    + bytes([10, 0, 0, 2]) + bytes(6) + bytes([10, 0, 0, 1])
icmp = bytearray(b"\x08\x00\x00\x00\x00\x01\x00\x01" + b"ping")
icmp[2:4] = struct.pack("!H", csum(bytes(icmp)))
ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 1, 0, 64, 1, 0,
                           bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1])))
ip[10:12] = struct.pack("!H", csum(bytes(ip)))
echo = us + peer + b"\x08\x00" + bytes(ip) + bytes(icmp)
for name, frame in (("arp_request", arp), ("icmp_echo", echo)):
    frame += bytes(len(frame) % 2)
    open(f"{sys.argv[1]}/{name}", "wb").write(bytes([0, 0, len(frame) // 2]) + frame + b"\x05")
PY

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
