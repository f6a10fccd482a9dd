#!/usr/bin/env bash
# The dependency rules of DESIGN.md §3, checked on every test run:
# - protocol crates (netcore, tcp, iwarp, abi) pull in no DPDK, no async runtime, no socket or
#   OS-binding crate;
# - tcp and iwarp do not depend on each other;
# - netcore, tcp, iwarp and control forbid unsafe code, and no `unsafe` appears in them;
# - protocol crates never read the clock, sleep or spawn threads (also enforced by clippy.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
bad='^(dpdk-sys|dataplane|control|verbs|tokio|mio|socket2|libc|nix|async-std|smol)$'
for p in netcore tcp iwarp abi; do
    deps=$(cargo tree -e normal -p "$p" --prefix none 2>/dev/null | awk '{print $1}' | sort -u)
    if hits=$(grep -E "$bad" <<<"$deps"); then
        echo "check-deps: $p depends on forbidden crates: $(echo $hits)"; fail=1
    fi
done
if cargo tree -e normal -p iwarp --prefix none | awk '{print $1}' | grep -qx tcp; then
    echo "check-deps: iwarp must not depend on tcp"; fail=1
fi
if cargo tree -e normal -p tcp --prefix none | awk '{print $1}' | grep -qx iwarp; then
    echo "check-deps: tcp must not depend on iwarp"; fail=1
fi
# shm (memfd segments, SCM_RIGHTS, eventfd) is an OS edge for the control path: libc and abi
# only, never the dataplane, DPDK or the daemon.
shm_deps=$(cargo tree -e normal -p shm --prefix none 2>/dev/null | awk '{print $1}' | sort -u)
if hits=$(grep -E '^(dpdk-sys|dataplane|control|verbs|tcp|iwarp|tokio|mio)$' <<<"$shm_deps"); then
    echo "check-deps: shm depends on forbidden crates: $(echo $hits)"; fail=1
fi
# abi: unsafe code only in the ring module (shared-memory rings).
if grep -rlE '\bunsafe\b' abi/src | grep -vE '^abi/src/ring(\.rs|/)' | xargs -r grep -nE '^\s*[^/]*\bunsafe\b' | grep -v 'deny(unsafe_code)'; then
    echo "check-deps: unsafe code in abi outside abi::ring"; fail=1
fi
for c in netcore tcp iwarp control; do
    grep -q '^#!\[forbid(unsafe_code' "$c/src/lib.rs" || { echo "check-deps: $c/src/lib.rs lacks #![forbid(unsafe_code)]"; fail=1; }
    if grep -rnE '\bunsafe\b' "$c/src" | grep -vE '^\S+:\s*//|forbid\(unsafe_code|//.*unsafe'; then
        echo "check-deps: unsafe code in $c"; fail=1
    fi
done
# copycrc (CPU kernels, the one exception to "no unsafe outside the OS/DPDK edges"): no
# dependency but the crc32c fallback, and unsafe only in its kernels (src/fold.rs, src/sse42.rs, src/sum.rs), the
# raw-pointer entry points of src/lib.rs and the tests calling them (src/tests.rs).
cc_deps=$(cargo tree -e normal -p copycrc --prefix none 2>/dev/null | awk '{print $1}' | sort -u | grep -vxE 'copycrc|crc32c' || true)
if [[ -n "$cc_deps" ]]; then
    echo "check-deps: copycrc depends on more than crc32c: $(echo $cc_deps)"; fail=1
fi
if grep -rlE '\bunsafe\b' copycrc/src | grep -vxE 'copycrc/src/(fold|sse42|sum|lib|tests)\.rs'; then
    echo "check-deps: unsafe code in copycrc outside src/fold.rs, src/sse42.rs, src/sum.rs, src/lib.rs and src/tests.rs"; fail=1
fi
for c in netcore tcp iwarp copycrc; do
    if grep -rnE 'std::time::(Instant|SystemTime)|Instant::now\(|SystemTime::now\(|thread::spawn|thread::sleep|std::net::|std::fs::' "$c/src"; then
        echo "check-deps: $c reads a clock, sleeps, spawns or does I/O (sans-IO crate)"; fail=1
    fi
done
if ((fail)); then exit 1; fi
echo "check-deps: dependency rules hold (netcore, tcp, iwarp, abi are sans-IO; tcp and iwarp independent; shm is an OS edge; abi unsafe only in abi::ring; copycrc unsafe only in its kernels)"
