#!/usr/bin/env bash
# Build the images with the local Docker daemon (scripts/k8s/docker.sh), no registry needed:
#   base     quanta-base:bookworm       debootstrap --variant=minbase --include=python3, docker import
#   helpers  quanta-rust:<rustc>, quanta-uv:<uv>, quanta-node:<node>, quanta-redis:bookworm, quanta-pause:bookworm
#   app      quanta-gateway, quanta-worker, quanta-loader (the Dockerfile's targets), tag $TAG (default dev)
#   scripts/k8s/images.sh [base] [helpers] [app]      (default: all three)
# Each image is built once and kept in the daemon's data root (under $QUANTA_CACHE).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${QUANTA_BUILD_CONTEXT:-$(cd "$here/../.." && pwd)}  # the repository, or a copy of it
. "$here/versions.sh"
"$here/docker.sh" start
eval "$("$here/docker.sh" env)"
TAG=${TAG:-dev}
BASE=quanta-base:$BASE_SUITE
RUSTC_VERSION=$(rustc --version | awk '{print $2}')
RUST_IMAGE=quanta-rust:$RUSTC_VERSION
UV_IMAGE=quanta-uv:$UV_VERSION
NODE_IMAGE=quanta-node:$(node --version)  # the gateway's web stage (npm ci of the query page's assets)

log() { printf '\033[1mk8s-images:\033[0m %s\n' "$*" >&2; }
have() { docker image inspect "$1" >/dev/null 2>&1; }
# classic builder (no buildx here); host network for apt, PyPI and crates.io; output kept for failures
build() {
  local out; out=$(mktemp)
  docker build --network host "$@" >"$out" 2>&1 || { tail -40 "$out" >&2; rm -f "$out"; return 1; }
  rm -f "$out"
}

base() {
  have "$BASE" && return
  log "debootstrap $BASE_SUITE (about 2 minutes)"
  local rootfs; rootfs=$(mktemp -d)
  local mirror; mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  debootstrap --variant=minbase --include=python3,ca-certificates "$BASE_SUITE" "$rootfs" \
    "${mirror:-http://deb.debian.org/debian}" >/dev/null
  # This machine reaches PyPI and crates.io through a proxy whose CA the host trusts
  # (/usr/local/share/ca-certificates): builds in the image must trust it too.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import - "$BASE" >/dev/null
  rm -rf "$rootfs"
}

helpers() {
  if ! have "$RUST_IMAGE"; then
    log "$RUST_IMAGE from the host's Rust toolchain"
    local ctx; ctx=$(mktemp -d)
    local tc; tc=$(rustc --print sysroot)
    mkdir -p "$ctx/rust" && cp -a "$tc/bin" "$tc/lib" "$ctx/rust/"
    build -t "$RUST_IMAGE" --build-arg BASE_IMAGE="$BASE" -f "$here/images/rust-builder.Dockerfile" "$ctx"
    rm -rf "$ctx"
  fi
  if ! have "$UV_IMAGE"; then
    log "$UV_IMAGE from PyPI's uv wheel"
    local ctx python; ctx=$(mktemp -d); python=$("$here/tools.sh" python)
    "$python" -m pip download -q --no-deps --only-binary :all: -d "$ctx" "uv==$UV_VERSION"
    "$python" -m zipfile -e "$ctx"/uv-*.whl "$ctx/whl"
    cp "$ctx"/whl/uv-*.data/scripts/uv "$ctx"/whl/uv-*.data/scripts/uvx "$ctx/" && chmod +x "$ctx/uv" "$ctx/uvx"
    build -t "$UV_IMAGE" -f "$here/images/uv.Dockerfile" "$ctx"
    rm -rf "$ctx"
  fi
  if ! have "$NODE_IMAGE"; then
    log "$NODE_IMAGE from the host's Node.js and npm"
    local ctx; ctx=$(mktemp -d)
    local npm; npm=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")  # .../node_modules/npm
    mkdir -p "$ctx/node/bin" "$ctx/node/lib/node_modules"
    cp "$(readlink -f "$(command -v node)")" "$ctx/node/bin/node"
    cp -a "$npm" "$ctx/node/lib/node_modules/npm"
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$ctx/node/bin/npm"
    build -t "$NODE_IMAGE" --build-arg BASE_IMAGE="$BASE" -f "$here/images/node.Dockerfile" "$ctx"
    rm -rf "$ctx"
  fi
  for name in redis pause; do
    have "quanta-$name:$BASE_SUITE" && continue
    log "quanta-$name:$BASE_SUITE"
    build -t "quanta-$name:$BASE_SUITE" --build-arg BASE_IMAGE="$BASE" -f "$here/images/$name.Dockerfile" "$here/images"
  done
}

app() {
  for role in worker loader gateway; do  # the Dockerfile's order: the classic builder builds the stages above a target
    log "quanta-$role:$TAG"
    local start=$SECONDS
    build -t "quanta-$role:$TAG" --build-arg BASE_IMAGE="$BASE" --build-arg RUST_IMAGE="$RUST_IMAGE" \
      --build-arg UV_IMAGE="$UV_IMAGE" --build-arg NODE_IMAGE="$NODE_IMAGE" --build-arg RUST_TOOLCHAIN_DIR=/usr/local/rust \
      --target "$role" -f "$root/Dockerfile" "$root"
    log "quanta-$role:$TAG built in $((SECONDS - start)) s"
  done
  # The previous builds' images, now untagged, once a day old. Not all of them: the classic builder
  # keeps the layers of the Dockerfile's earlier stages (the native wheel, the venvs) as untagged
  # images, and they are the next build's cache.
  docker image prune -f --filter until=24h >/dev/null
}

targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(base helpers app)
for t in "${targets[@]}"; do
  case $t in
    base|helpers|app) "$t" ;;
    *) echo "unknown target: $t" >&2; exit 2 ;;
  esac
done
