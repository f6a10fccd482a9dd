#!/usr/bin/env bash
# Install the system packages the stack needs (Debian 12) and reserve hugepages if possible.
# Idempotent: does nothing when everything is there.
set -euo pipefail

PKGS=(dpdk dpdk-dev libdpdk-dev pkg-config libclang-dev clang iproute2 tshark tcpdump nftables ethtool
      iperf3 iputils-ping fonts-dejavu-core valgrind)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "deps: missing packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
        exit 1
    fi
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer no without a prompt.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -q
    apt-get -o DPkg::Lock::Timeout=600 install -y -q "${missing[@]}"
fi

if ! command -v cargo >/dev/null; then
    echo "deps: cargo not found: install a Rust toolchain (rustup, 1.95 or newer)" >&2
    exit 1
fi

# Hugepages: 2 MiB pages let EAL run --in-memory; without them iwarpd falls back to --no-huge.
hp=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
want=${IWARP_HUGEPAGES:-512}
if [[ $(id -u) -eq 0 && -w $hp ]]; then
    cur=$(cat "$hp")
    if (( cur < want )); then
        echo "$want" > "$hp" 2>/dev/null || true
        echo "deps: hugepages (2 MiB) reserved: $(cat "$hp") (wanted $want; iwarpd falls back to --no-huge if short)"
    fi
else
    echo "deps: cannot reserve hugepages (not root); iwarpd will use --no-huge"
fi
