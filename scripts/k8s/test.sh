#!/usr/bin/env bash
# The chart's test tiers, each with the tools (and images) it needs built first (cached by version):
#   scripts/k8s/test.sh [static] [rules] [apiserver] [pods] [keda] [hpa] [all]   (default: static rules apiserver)
#
#   static     helm lint, the values matrix under kubeconform, schema, check-values, features, skaffold
#   rules      promtool unit tests of every alert; dashboards against a Prometheus scraping the service
#   apiserver  install/upgrade/rollback/uninstall on a real API server with a kwok node
#   pods       real pods (kubelet, containerd, the images built here): helm test, queries, a killed worker
#   keda       KEDA scaling workers 0 -> 1 -> N -> 1 -> 0 on the stream's lag (operator, metrics adapter)
#   hpa        the chart's HPA without KEDA: gateway -> Prometheus -> prometheus-adapter, 1 -> N -> 1
# Missing tools fail the run here (QUANTA_K8S_REQUIRED=1), never skip.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
PYTHON=${PYTHON:-$root/.venv/bin/python}
export QUANTA_K8S_REQUIRED=1

# a Docker daemon this script starts (for the images) is stopped when it ends
eval "$("$here/docker.sh" env)"
docker version >/dev/null 2>&1 && docker_was_up=1 || docker_was_up=0
trap '[ "$docker_was_up" = 1 ] || "$here/docker.sh" stop' EXIT

tiers=("$@"); [ ${#tiers[@]} -gt 0 ] || tiers=(static rules apiserver)
[ "${tiers[*]}" = all ] && tiers=(static rules apiserver pods keda hpa)
files=()
for tier in "${tiers[@]}"; do
  case $tier in
    static) "$here/tools.sh" static
            files+=(tests/chart/test_chart_static.py tests/chart/test_chart_features.py tests/chart/test_skaffold.py) ;;
    rules) "$here/tools.sh" static
           files+=(tests/chart/test_rules_and_dashboards.py tests/chart/test_metrics_live.py) ;;
    apiserver) "$here/tools.sh" static apiserver; files+=(tests/cluster/test_apiserver.py) ;;
    pods) "$here/tools.sh" static apiserver pods; "$here/images.sh"; files+=(tests/cluster/test_pods.py) ;;
    keda) "$here/tools.sh" static apiserver keda; files+=(tests/cluster/test_keda.py) ;;
    hpa) "$here/tools.sh" static apiserver hpa; files+=(tests/cluster/test_hpa.py) ;;
    *) echo "unknown tier: $tier" >&2; exit 2 ;;
  esac
done
"$PYTHON" -m pytest -q -p no:cacheprovider "${files[@]}"
