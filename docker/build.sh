#!/usr/bin/env bash
# Build the iwarp image (docker/Dockerfile) from this checkout.
#
# No Rust toolchain can be downloaded inside a build here (no rustup server), so this stages a
# build context in target/docker-context/ with:
#   toolchain/  the host's toolchain (cargo, rustc, their libraries, the host target's std;
#               hard links into `rustc --print sysroot` where the file system allows, no docs)
#   vendor/     `cargo vendor` of Cargo.lock (re-made only when Cargo.lock changes)
#   src/        the sources git knows (tracked and untracked-not-ignored), without docker/, fuzz/
#   image/      docker/image/* (entry point, health check, container config)
# and runs BuildKit (Debian's /usr/bin/docker; /usr/local/bin/docker 28 would want buildx).
# The base image comes from docker/base.sh. Env: IWARP_IMAGE (tag, default iwarp:local),
# IWARP_BASE_IMAGE, IWARP_BINS (binaries to copy when built; default iwarpd iwarp-rping iwarp-perf).
set -euo pipefail
cd "$(dirname "$0")/.."

DOCKER=${DOCKER:-/usr/bin/docker}
IMAGE=${IWARP_IMAGE:-iwarp:local}
BASE=${IWARP_BASE_IMAGE:-iwarp-base:bookworm}
BINS=${IWARP_BINS:-iwarpd iwarp-rping iwarp-perf}
CTX=${IWARP_DOCKER_CTX:-target/docker-context}
LOG=${IWARP_DOCKER_LOG:-target/docker-build.log}

command -v rustc >/dev/null || { echo "build: rustc not found (the image is built with the host's toolchain)" >&2; exit 1; }
sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
mkdir -p "$CTX"
t0=$SECONDS

# toolchain/: hard links (cheap, same inodes and mtimes, so BuildKit resends nothing) or copies.
rm -rf "$CTX/toolchain"
mkdir -p "$CTX/toolchain/bin" "$CTX/toolchain/lib/rustlib"
link() { cp -al "$@" 2>/dev/null || cp -a "$@"; }
link "$sysroot/bin/cargo" "$sysroot/bin/rustc" "$CTX/toolchain/bin/"
link "$sysroot"/lib/*.so* "$CTX/toolchain/lib/"
link "$sysroot/lib/rustlib/$host" "$CTX/toolchain/lib/rustlib/"
echo "build: toolchain $(rustc --version) ($host) staged"

# vendor/: only when Cargo.lock changed since the last staging.
lock_sum=$(sha256sum Cargo.lock | cut -d' ' -f1)
if [[ ! -d $CTX/vendor || $(cat "$CTX/vendor.lock" 2>/dev/null) != "$lock_sum" ]]; then
    rm -rf "$CTX/vendor" "$CTX/vendor.lock"
    cargo vendor --locked --versioned-dirs "$CTX/vendor" >/dev/null 2>"$CTX/vendor.log" ||
        { cat "$CTX/vendor.log" >&2; echo "build: cargo vendor FAILED" >&2; exit 1; }
    echo "$lock_sum" >"$CTX/vendor.lock"
    echo "build: crates vendored ($(ls "$CTX/vendor" | wc -l) crates)"
fi
cat >"$CTX/cargo-config.toml" <<'EOF'
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "/opt/vendor"
EOF

# src/: what git knows, with modification times kept (cargo's fingerprints in the cached
# target directory stay valid, so an unchanged tree rebuilds nothing).
rm -rf "$CTX/src" "$CTX/image"
mkdir -p "$CTX/src"
if git rev-parse --show-toplevel >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do
            [[ -f $f && $f != docker/* && $f != fuzz/* ]] && printf '%s\0' "$f"
        done | tar --null -T - -cf - | tar -xf - -C "$CTX/src"
else
    tar --exclude=./target --exclude=./.git --exclude=./docker --exclude=./fuzz -cf - . | tar -xf - -C "$CTX/src"
fi
cp -a docker/image "$CTX/image"

echo "build: context staged in $((SECONDS - t0)) s; building $IMAGE (log: $LOG)"
t1=$SECONDS
if ! DOCKER_BUILDKIT=1 "$DOCKER" build --progress=plain -f docker/Dockerfile \
    --build-arg BASE="$BASE" --build-arg BINS="$BINS" -t "$IMAGE" "$CTX" >"$LOG" 2>&1; then
    tail -60 "$LOG" >&2
    echo "build: docker build FAILED (full log: $LOG)" >&2
    exit 1
fi
awk '/^#[0-9]+ \[/ { id = $1; sub(/^#[0-9]+ /, ""); name[id] = substr($0, 1, 90) }
     /^#[0-9]+ (DONE|CACHED)/ && ($1 in name) { print "build:   " name[$1] ": " $2 " " $3; delete name[$1] }
     /not built by this workspace/ { sub(/^#[0-9]+ [0-9.]+ /, ""); print "build:   " $0 }' "$LOG"
size=$("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE")
echo "build: $IMAGE built in $((SECONDS - t1)) s, $((size / 1048576)) MiB; binaries:" \
    "$("$DOCKER" run --rm --entrypoint ls "$IMAGE" /usr/local/bin | tr '\n' ' ')"
