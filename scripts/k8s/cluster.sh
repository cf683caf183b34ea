#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, for the chart's tests:
#   scripts/k8s/cluster.sh start [--kwok] [--kubelet]   etcd, kube-apiserver, controller-manager, scheduler,
#                                                       plus kwok (simulated node) and/or kubelet + containerd
#                                                       (a real node running real containers)
#   scripts/k8s/cluster.sh stop
#   scripts/k8s/cluster.sh env                          prints KUBECONFIG=...
# State lives in $QUANTA_CLUSTER_DIR (default /tmp/quanta-cluster); each process's pid and log are there.
# The API server takes aggregated APIs (front-proxy certificates: metrics adapters); the HPA
# controller syncs every $QUANTA_HPA_SYNC_PERIOD (default 2s, Kubernetes' own default is 15s).
# The tools come from scripts/k8s/tools.sh (apiserver; pods for --kubelet).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"
BIN=$K8S_TOOLS/bin
DIR=${QUANTA_CLUSTER_DIR:-/tmp/quanta-cluster}
API_PORT=${QUANTA_API_PORT:-16443}
ETCD_PORT=${QUANTA_ETCD_PORT:-23790}
TOKEN=quanta-test-token
export KUBECONFIG=$DIR/kubeconfig

log() { printf '\033[1mk8s-cluster:\033[0m %s\n' "$*" >&2; }
kubectl() { "$BIN/kubectl" "$@"; }
# bg NAME CMD...: start a process in the background, remembering its pid
bg() { local name=$1; shift; nohup "$@" > "$DIR/$name.log" 2>&1 & echo $! > "$DIR/$name.pid"; }
wait_for() {  # wait_for WHAT SECONDS CMD...
  local what=$1 seconds=$2; shift 2
  for _ in $(seq $((seconds * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  log "$what not ready after ${seconds}s"; return 1
}

# The front proxy: the client certificate the API server shows aggregated APIs (a metrics adapter)
# when it forwards a request, and the CA they check it with (published in kube-system's
# extension-apiserver-authentication ConfigMap).
front_proxy_certs() {
  [ -f "$DIR/front-proxy-client.crt" ] && return
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=front-proxy-ca \
    -keyout "$DIR/front-proxy-ca.key" -out "$DIR/front-proxy-ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=front-proxy-client \
    -keyout "$DIR/front-proxy-client.key" -out "$DIR/front-proxy-client.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' > "$DIR/front-proxy-client.ext"
  openssl x509 -req -in "$DIR/front-proxy-client.csr" -CA "$DIR/front-proxy-ca.crt" -CAkey "$DIR/front-proxy-ca.key" \
    -CAcreateserial -days 3650 -extfile "$DIR/front-proxy-client.ext" -out "$DIR/front-proxy-client.crt" 2>/dev/null
}

certs() {
  front_proxy_certs
  [ -f "$DIR/sa.key" ] && return
  openssl genrsa -out "$DIR/sa.key" 2048 2>/dev/null
  openssl rsa -in "$DIR/sa.key" -pubout -out "$DIR/sa.pub" 2>/dev/null
  echo "$TOKEN,admin,admin,\"system:masters\"" > "$DIR/tokens.csv"
  cat > "$KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters: [{name: quanta, cluster: {server: "https://127.0.0.1:$API_PORT", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: $TOKEN}}]
contexts: [{name: quanta, context: {cluster: quanta, user: admin}}]
current-context: quanta
KC
}

control_plane() {
  bg etcd "$BIN/etcd" --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls http://127.0.0.1:0 \
    --log-level warn
  wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
  bg kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --endpoint-reconciler-type none --cert-dir "$DIR/pki" --token-auth-file "$DIR/tokens.csv" \
    --service-account-key-file "$DIR/sa.pub" --service-account-signing-key-file "$DIR/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.96.0.0/24 \
    --authorization-mode RBAC --allow-privileged=false \
    --requestheader-client-ca-file "$DIR/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$DIR/front-proxy-client.crt" --proxy-client-key-file "$DIR/front-proxy-client.key"
  wait_for kube-apiserver 60 kubectl get --raw /readyz
  bg kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --service-account-private-key-file "$DIR/sa.key" --secure-port 0 --use-service-account-credentials=false \
    --horizontal-pod-autoscaler-sync-period "${QUANTA_HPA_SYNC_PERIOD:-2s}"
  bg kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$KUBECONFIG" --leader-elect=false --secure-port 0
  wait_for "serviceaccount default" 60 kubectl get serviceaccount default
}

kwok_node() {
  local configs=()
  for f in "$BIN"/kwok-stages/*.yaml; do configs+=(--config "$f"); done
  bg kwok "$BIN/kwok" --kubeconfig "$KUBECONFIG" "${configs[@]}" \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake --server-address 127.0.0.1:0
  kubectl apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: kwok-node-0, type: kwok}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
NODE
  wait_for "kwok node" 60 kubectl wait --for=condition=Ready node/kwok-node-0 --timeout=1s
}

# A real node: containerd (from docker.io) with its own CRI config, and the kubelet.
kubelet_node() {
  local c=$DIR/containerd
  mkdir -p "$c/root" "$c/state" "$c/cni/conf" "$DIR/kubelet"
  cat > "$c/cni/conf/10-loopback.conflist" <<CNI
{"cniVersion": "1.0.0", "name": "loopback-only", "plugins": [{"type": "loopback"}]}
CNI
  cat > "$c/config.toml" <<TOML
version = 2
root = "$c/root"
state = "$c/state"
[grpc]
  address = "$c/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/quanta-pause:$BASE_SUITE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$c/cni/conf"
TOML
  bg containerd containerd --config "$c/config.toml"
  wait_for containerd 30 test -S "$c/containerd.sock"
  cat > "$DIR/kubelet/config.yaml" <<KCFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$c/containerd.sock
staticPodPath: ""
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
KCFG
  local ip; ip=$(hostname -I | awk '{print $1}')
  bg kubelet "$BIN/kubelet" --config "$DIR/kubelet/config.yaml" --kubeconfig "$KUBECONFIG" \
    --root-dir "$DIR/kubelet/root" --hostname-override quanta-node-0 --node-ip "$ip"
  wait_for "kubelet node" 90 kubectl wait --for=condition=Ready node/quanta-node-0 --timeout=1s
}

# Import local images into the node's containerd (k8s.io namespace), as a registry pull would.
import_images() {
  eval "$("$here/docker.sh" env)"
  for image in "$@"; do
    docker save "$image" | ctr -a "$DIR/containerd/containerd.sock" -n k8s.io images import - >/dev/null
  done
}

# Volumes for PVCs (no provisioner here): hostPath PVs the claims bind to.
volumes() {
  for i in $(seq 0 9); do
    mkdir -p "$DIR/pv-$i" && chmod 777 "$DIR/pv-$i"
    kubectl apply -f - >/dev/null <<PV
apiVersion: v1
kind: PersistentVolume
metadata: {name: quanta-pv-$i}
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteOnce, ReadOnlyMany, ReadWriteMany]
  persistentVolumeReclaimPolicy: Delete
  hostPath: {path: "$DIR/pv-$i"}
PV
  done
}

stop_process() {
  [ -f "$DIR/$1.pid" ] || return 0
  local pid
  pid=$(cat "$DIR/$1.pid")
  kill "$pid" 2>/dev/null || true
  # then SIGKILL after 10 s: an API server stopping gracefully can wait for its etcd, stopped next, forever
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$DIR/$1.pid"
}

stop() {
  for name in kubelet kwok kube-scheduler kube-controller-manager kube-apiserver; do stop_process "$name"; done
  # the kubelet's containers outlive it: kill them through containerd before stopping it
  local sock=$DIR/containerd/containerd.sock
  if [ -S "$sock" ]; then
    for id in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$sock" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
    done
  fi
  stop_process containerd
  stop_process etcd
  # what the kubelet and containerd mounted (volumes, sandboxes' /dev/shm) outlives them
  sleep 1
  { findmnt -rn -o TARGET | grep "^$DIR/" || true; } | sort -r | while read -r target; do umount -l "$target" || true; done
}

case ${1:-} in
  start)
    shift
    mkdir -p "$DIR"
    started=$(date +%s%N)
    certs
    control_plane
    for opt in "$@"; do
      case $opt in
        --kwok) kwok_node ;;
        --kubelet) kubelet_node ;;
        *) log "unknown option $opt"; exit 2 ;;
      esac
    done
    volumes
    elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
    log "ready in $((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100)) s; export KUBECONFIG=$KUBECONFIG"
    ;;
  import) shift; import_images "$@" ;;
  stop) stop ;;
  clean) stop; rm -rf "$DIR" ;;
  env) echo "export KUBECONFIG=$KUBECONFIG" ;;
  *) echo "usage: $0 start [--kwok] [--kubelet] | import IMAGE... | stop | clean | env" >&2; exit 2 ;;
esac
