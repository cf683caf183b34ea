#!/usr/bin/env bash
# Build the Kubernetes test tools, each cached by version under $QUANTA_CACHE/k8s
# (default ~/.cache/quanta/k8s): idempotent, and seconds when everything is cached.
#
#   scripts/k8s/tools.sh [static] [apiserver] [pods] [keda] [hpa] [all]   (default: static apiserver)
#
#   schemas    the JSON schemas alone (downloads, no compile: what .ci/run proves from a cold cache)
#   python     print the tools' Python (pip and PyYAML; images.sh downloads uv's wheel with it)
#   static     helm, kubeconform, Kubernetes + KEDA + prometheus-operator + skaffold JSON schemas, promtool
#   apiserver  etcd, kube-apiserver, controller-manager, scheduler, kubectl, kwok (tier 2)
#   pods       kubelet, Docker and containerd, CNI plugins, debootstrap (tier 3: real pods)
#   keda       the KEDA operator and its metrics adapter (tier 5)
#   hpa        prometheus-adapter (tier 5, the HPA without KEDA)
#
# Only the Go module proxy, PyPI and Debian's packages are used: no container registry.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"

export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOWORK=off
BIN=$K8S_TOOLS/bin          # symlinks to the current version of every tool
mkdir -p "$BIN" "$K8S_TOOLS/src"

log() { printf '\033[1mk8s-tools:\033[0m %s\n' "$*" >&2; }
# link NAME PATH: make $BIN/NAME point at PATH
link() { ln -sfn "$2" "$BIN/$1"; }
# module_dir MODULE@VERSION: download a module (its zip only) and print its folder
module_dir() { go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'; }
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
# The tools' own Python, with pip and PyYAML: the `python3` on make's PATH is the project's uv
# environment, which has no pip (any interpreter's stdlib venv brings one).
tools_python() {
  local venv=$K8S_TOOLS/venv-tools
  [ -x "$venv/bin/pip" ] || { rm -rf "$venv" && python3 -m venv "$venv" && "$venv/bin/pip" install -q pyyaml; } >&2
  echo "$venv/bin/python"
}
# go_install NAME PKG@VERSION [LDFLAGS]
go_install() {
  local name=$1 pkg=$2 ldflags=${3:-} dir=$K8S_TOOLS/$1-${2##*@}
  if [ ! -x "$dir/$name" ]; then
    log "building $name ${pkg##*@}"
    GOBIN=$dir go install -trimpath -ldflags="-s -w $ldflags" "$pkg"
  fi
  link "$name" "$dir/$name"
}

# Helm's Makefile stamps its version and the Kubernetes version of its client-go (else `helm
# template` assumes Kubernetes 1.20 and refuses charts that need more); so do we.
helm_() {
  local dir=$K8S_TOOLS/helm-$HELM_VERSION-stamped src kube major minor
  if [ ! -x "$dir/helm" ]; then
    src=$(module_dir "helm.sh/helm/v3@$HELM_VERSION")
    kube=$(awk '$1 == "k8s.io/client-go" {print $2}' "$src/go.mod")  # v0.MINOR.PATCH
    minor=$(echo "$kube" | cut -d. -f2); major=1
    local x="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    for pkg in pkg/lint/rules pkg/chartutil; do
      x="$x -X helm.sh/helm/v3/$pkg.k8sVersionMajor=$major -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$minor"
    done
    log "building helm $HELM_VERSION (Kubernetes 1.$minor)"
    GOBIN=$dir go install -trimpath -ldflags="-s -w $x" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  fi
  link helm "$dir/helm"
}

kubeconform_() {
  go_install kubeconform "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
}

# Kubernetes JSON schemas (strict), with $refs rewritten to local files so kubeconform works offline.
k8s_schemas() {
  local out=$K8S_TOOLS/schemas-k8s-$K8S_SCHEMAS_VERSION
  if [ ! -f "$out/_definitions.json" ]; then
    log "Kubernetes JSON schemas $K8S_SCHEMAS_VERSION (PyPI kubernetes-validate)"
    local tmp python; tmp=$(mktemp -d); python=$(tools_python)
    "$python" -m pip download -q --no-deps -d "$tmp" "kubernetes-validate==$K8S_SCHEMAS_VERSION"
    "$python" -m zipfile -e "$tmp"/kubernetes_validate-*.whl "$tmp/whl"
    rm -rf "$out.tmp" && cp -r "$tmp/whl/kubernetes_validate/kubernetes-json-schema/v$K8S_SCHEMAS_VERSION-local-strict" "$out.tmp"
    find "$out.tmp" -name '*.json' -print0 | xargs -0 sed -i "s#\"/api/_definitions.json#\"file://$out/_definitions.json#g"
    mv "$out.tmp" "$out" && rm -rf "$tmp"
  fi
  link schemas-k8s "$out"
}

# JSON schemas of the KEDA and prometheus-operator CRDs (the CRD files themselves are kept too:
# tier 2 installs them into the API server).
crd_schemas() {
  local out=$K8S_TOOLS/schemas-crds-keda-$KEDA_VERSION-promop-$PROMETHEUS_OPERATOR_VERSION
  if [ ! -f "$out/.done" ]; then
    log "CRD schemas: KEDA $KEDA_VERSION, prometheus-operator $PROMETHEUS_OPERATOR_VERSION"
    local keda promop kc python; python=$(tools_python)
    keda=$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")
    promop=$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")
    kc=$(module_dir "github.com/yannh/kubeconform@$KUBECONFORM_VERSION")
    rm -rf "$out" && mkdir -p "$out/crds"
    cp "$keda"/config/crd/bases/keda.sh_{scaledobjects,triggerauthentications}.yaml "$out/crds/"
    cp "$promop"/example/prometheus-operator-crd/monitoring.coreos.com_{servicemonitors,podmonitors,prometheusrules}.yaml \
      "$out/crds/"
    chmod u+w "$out"/crds/*
    (cd "$out" && FILENAME_FORMAT='{kind}-{group}-{version}' "$python" "$kc/scripts/openapi2jsonschema.py" crds/*.yaml \
      >/dev/null)
    touch "$out/.done"
  fi
  link schemas-crds "$out"
}

# skaffold's JSON schema of its config, as its module ships it (docs-v2/content/en/schemas): the static
# tier validates skaffold.yaml against it with kubeconform. No skaffold binary is built.
skaffold_schema() {
  local out=$K8S_TOOLS/skaffold-schema-$SKAFFOLD_VERSION
  if [ ! -f "$out/$SKAFFOLD_SCHEMA.json" ]; then
    log "skaffold $SKAFFOLD_VERSION config schema $SKAFFOLD_SCHEMA"
    local src; src=$(module_dir "github.com/GoogleContainerTools/skaffold/v2@$SKAFFOLD_VERSION")
    mkdir -p "$out" && cp "$src/docs-v2/content/en/schemas/$SKAFFOLD_SCHEMA.json" "$out/" && chmod u+w "$out"/*.json
  fi
  link skaffold-schema.json "$out/$SKAFFOLD_SCHEMA.json"
}

promtool_() {
  apt_install prometheus
  link promtool /usr/bin/promtool
  link prometheus /usr/bin/prometheus
}

etcd_() {
  local dir=$K8S_TOOLS/etcd-$ETCD_VERSION
  if [ ! -x "$dir/etcd" ]; then
    log "building etcd $ETCD_VERSION (about 1 minute)"
    # `go install` refuses etcd's replace directives: build a three-line wrapper module instead
    local w=$K8S_TOOLS/src/etcd-$ETCD_VERSION
    rm -rf "$w" && mkdir -p "$w"
    printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' \
      > "$w/main.go"
    (cd "$w" && go mod init quanta.local/etcd >/dev/null 2>&1 && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" \
      && go mod tidy >/dev/null 2>&1 && go build -trimpath -ldflags="-s -w" -o "$dir/etcd" .)
  fi
  link etcd "$dir/etcd"
}

# kube-apiserver & co from the k8s.io/kubernetes module: its staging modules are replaced by
# ./staging paths the module zip does not hold, so require their published versions instead.
kubernetes_() {
  local dir=$K8S_TOOLS/kubernetes-$KUBERNETES_VERSION cmds=("$@")
  local missing=()
  for c in "${cmds[@]}"; do [ -x "$dir/$c" ] || missing+=("$c"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "building ${missing[*]} $KUBERNETES_VERSION (kube-apiserver alone: about 10 minutes, 2.4 GB)"
    local w=$K8S_TOOLS/src/kubernetes-$KUBERNETES_VERSION
    if [ ! -f "$w/.prepared" ]; then
      local src; src=$(module_dir "k8s.io/kubernetes@$KUBERNETES_VERSION")
      rm -rf "$w" && cp -r "$src" "$w" && chmod -R u+w "$w"
      (cd "$w" && for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' go.mod); do
        go mod edit -dropreplace="$m" -require="$m@$KUBE_STAGING_VERSION"
      done)
      touch "$w/.prepared"
    fi
    local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
    local pkgs=(); for c in "${missing[@]}"; do pkgs+=("./cmd/$c"); done
    mkdir -p "$dir"
    (cd "$w" && go build -trimpath -o "$dir/" -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION \
      -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" "${pkgs[@]}")
  fi
  for c in "${cmds[@]}"; do link "$c" "$dir/$c"; done
}

kwok_() {
  go_install kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  local stages=$K8S_TOOLS/kwok-$KWOK_VERSION/stages src
  if [ ! -f "$stages/.done" ]; then
    src=$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")
    rm -rf "$stages" && mkdir -p "$stages"
    cp "$src"/kustomize/stage/node/fast/node-initialize.yaml "$src"/kustomize/stage/node/heartbeat/node-heartbeat.yaml \
      "$src"/kustomize/stage/pod/fast/pod-*.yaml "$stages/"
    chmod u+w "$stages"/* && touch "$stages/.done"
  fi
  link kwok-stages "$stages"
}

pods_() {
  apt_install docker.io containerd containernetworking-plugins debootstrap iptables util-linux
  kubernetes_ kubelet
}

keda_() {
  local dir=$K8S_TOOLS/keda-$KEDA_VERSION
  if [ ! -x "$dir/keda-operator" ]; then
    log "building the KEDA operator $KEDA_VERSION (about 10 minutes, 1.75 GB of modules)"
    local w=$K8S_TOOLS/src/keda-$KEDA_VERSION src
    if [ ! -d "$w" ]; then
      src=$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")
      cp -r "$src" "$w.tmp" && chmod -R u+w "$w.tmp" && mv "$w.tmp" "$w"
    fi
    (cd "$w" && go build -trimpath -ldflags="-s -w" -o "$dir/keda-operator" ./cmd/operator)
  fi
  link keda-operator "$dir/keda-operator"
  # KEDA's metrics adapter: the external metrics API the HPA reads to scale beyond one replica
  if [ ! -x "$dir/keda-adapter" ]; then
    log "building the KEDA metrics adapter $KEDA_VERSION (about 5 minutes with the operator's modules cached)"
    (cd "$K8S_TOOLS/src/keda-$KEDA_VERSION" && go build -trimpath -ldflags="-s -w" -o "$dir/keda-adapter" ./cmd/adapter)
  fi
  link keda-adapter "$dir/keda-adapter"
  # every KEDA CRD (the operator watches them all)
  if [ ! -f "$dir/crds/.done" ]; then
    local src; src=$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")
    rm -rf "$dir/crds" && mkdir -p "$dir/crds" && cp "$src"/config/crd/bases/*.yaml "$dir/crds/"
    chmod u+w "$dir"/crds/* && touch "$dir/crds/.done"
  fi
  link keda-crds "$dir/crds"
}

# prometheus-adapter serves Prometheus series as the external metrics API (the HPA path without KEDA)
prometheus_adapter_() {
  local dir=$K8S_TOOLS/prometheus-adapter-$PROMETHEUS_ADAPTER_VERSION
  if [ ! -x "$dir/prometheus-adapter" ]; then
    log "building prometheus-adapter $PROMETHEUS_ADAPTER_VERSION (about 5 minutes)"
    # `go install ...@version` fails here: the proxy refuses the module's version list (403), which
    # go install reads for deprecations; build in a copy of the module instead
    local w=$K8S_TOOLS/src/prometheus-adapter-$PROMETHEUS_ADAPTER_VERSION src
    if [ ! -d "$w" ]; then
      src=$(module_dir "sigs.k8s.io/prometheus-adapter@$PROMETHEUS_ADAPTER_VERSION")
      cp -r "$src" "$w.tmp" && chmod -R u+w "$w.tmp" && mv "$w.tmp" "$w"
    fi
    (cd "$w" && go build -trimpath -ldflags="-s -w" -o "$dir/prometheus-adapter" ./cmd/adapter)
  fi
  link prometheus-adapter "$dir/prometheus-adapter"
}

schemas() { k8s_schemas; crd_schemas; skaffold_schema; }
static() { helm_; kubeconform_; k8s_schemas; crd_schemas; skaffold_schema; promtool_; }
apiserver() { apt_install curl openssl; etcd_; kubernetes_ kube-apiserver kube-controller-manager kube-scheduler kubectl; kwok_; }
pods() { pods_; }
keda() { keda_; }
hpa() { prometheus_adapter_; }

start=$(date +%s)
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(static apiserver)
for t in "${targets[@]}"; do
  case $t in
    schemas|static|apiserver|pods|keda|hpa) "$t" ;;
    python) tools_python; exit ;;
    all) static; apiserver; pods; keda; hpa ;;
    *) echo "unknown target: $t" >&2; exit 2 ;;
  esac
done
log "ready in $(( $(date +%s) - start )) s: $BIN"
