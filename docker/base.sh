#!/usr/bin/env bash
# The local Debian 12 base image (no image registry here): `debootstrap --variant=minbase
# bookworm` into a folder, then `docker import`. Cached: does nothing when the image exists
# (IWARP_BASE_REBUILD=1 makes it again). The image's apt sources are the host's, so the build
# stages install packages from the same Debian mirror the host uses.
set -euo pipefail

DOCKER=${DOCKER:-/usr/bin/docker}
IMAGE=${IWARP_BASE_IMAGE:-iwarp-base:bookworm}

if [[ ${IWARP_BASE_REBUILD:-0} != 1 ]] && "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "base: $IMAGE is cached"
    exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "base: debootstrap needs root" >&2; exit 1; }

# The host's Debian mirror for bookworm (deb822 or one-line sources); debootstrap's default else.
mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v security | head -1 || true)
if [[ -z $mirror ]]; then
    mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
fi

root=$(mktemp -d /tmp/iwarp-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "base: debootstrap --variant=minbase bookworm ${mirror:-(default mirror)}"
t0=$SECONDS
debootstrap --variant=minbase bookworm "$root" ${mirror:+"$mirror"} >"$root.log" 2>&1 || {
    tail -20 "$root.log" >&2
    rm -f "$root.log"
    exit 1
}
rm -f "$root.log"

# apt as the host has it (sources, keyrings referenced by them), no recommends, no docs.
rm -f "$root/etc/apt/sources.list"
[[ -f /etc/apt/sources.list ]] && cp /etc/apt/sources.list "$root/etc/apt/"
mkdir -p "$root/etc/apt/sources.list.d"
cp /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list "$root/etc/apt/sources.list.d/" 2>/dev/null || true
cat >"$root/etc/apt/apt.conf.d/90iwarp" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
cat >"$root/etc/dpkg/dpkg.cfg.d/90iwarp-nodoc" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/*/changelog*

tar --numeric-owner -C "$root" -c . |
    "$DOCKER" import -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
echo "base: $IMAGE made in $((SECONDS - t0)) s"
