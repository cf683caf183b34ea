# Versions of the Kubernetes test tools (sourced by tools.sh and env.sh). Bump one and
# tools.sh rebuilds only that tool; builds are cached by version under $QUANTA_CACHE.
HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0
KUBERNETES_VERSION=v1.37.2      # kube-apiserver, controller-manager, scheduler, kubelet, kubectl
KUBE_STAGING_VERSION=v0.37.2    # the k8s.io/* staging modules of that release
K8S_SCHEMAS_VERSION=1.37.0      # PyPI kubernetes-validate: Kubernetes JSON schemas (strict)
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
KEDA_VERSION=v2.21.0               # the operator and its metrics adapter (cmd/adapter, same module)
PROMETHEUS_ADAPTER_VERSION=v0.12.0 # sigs.k8s.io/prometheus-adapter: the external metrics API without KEDA
PROMETHEUS_OPERATOR_VERSION=v0.85.0
SKAFFOLD_VERSION=v2.16.1          # the newest skaffold module the Go proxy serves here (by exact version)
SKAFFOLD_SCHEMA=v4beta13          # its newest config schema: skaffold.yaml's apiVersion
UV_VERSION=0.13.9               # copied into a FROM-scratch image the Dockerfiles take uv from
BASE_SUITE=bookworm

QUANTA_CACHE=${QUANTA_CACHE:-$HOME/.cache/quanta}
K8S_TOOLS=$QUANTA_CACHE/k8s
