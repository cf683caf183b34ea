#!/usr/bin/env bash
# A Docker daemon of our own (Debian docker.io, no bridge, no iptables), with its data under
# $QUANTA_CACHE/docker so built images survive between runs.
#   scripts/k8s/docker.sh start|stop|env
# `eval "$(scripts/k8s/docker.sh env)"` points the docker CLI at it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"
D=$QUANTA_CACHE/docker
SOCK=$D/run/docker.sock
export DOCKER_HOST=unix://$SOCK

case ${1:-start} in
  start)
    if docker version >/dev/null 2>&1; then exit 0; fi
    mkdir -p "$D/data" "$D/exec" "$D/run"
    # containerd comes with docker.io; dockerd starts its own when none is given
    nohup dockerd --bridge=none --iptables=false --ip6tables=false --data-root "$D/data" --exec-root "$D/exec" \
      --pidfile "$D/run/dockerd.pid" -H "$DOCKER_HOST" > "$D/dockerd.log" 2>&1 &
    for _ in $(seq 100); do docker version >/dev/null 2>&1 && exit 0; sleep 0.2; done
    echo "dockerd did not start: see $D/dockerd.log" >&2; exit 1 ;;
  stop)
    [ -f "$D/run/dockerd.pid" ] && kill "$(cat "$D/run/dockerd.pid")" 2>/dev/null || true ;;
  env)
    echo "export DOCKER_HOST=$DOCKER_HOST DOCKER_BUILDKIT=0" ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
