#!/usr/bin/env bash
# Renders both kustomize overlays of deploy/ offline and checks them:
#   1. against the Kubernetes API schemas, unknown fields included (validate.mjs), and that
#      the same validator rejects every document of broken.yaml, so it cannot pass vacuously;
#   2. what kilnd needs from them (checks.py): the workload's shape, gRPC probes on 50051,
#      resources, the generated ConfigMap and Secret referenced, every path in kilnd.conf
#      mounted, the HPA, PDB, NetworkPolicy and Services selecting the kilnd pods.
# Exits 77 (ctest: skipped) when kubectl, PyYAML, node or the npm packages of
# tests/deploy (scripts/install-deps.sh) are missing; under CI=true a missing validator
# fails instead, since install-deps.sh installs it there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deploy="${1:-$here/../../deploy}"

skip() {
  echo "skipped: $1"
  exit 77
}
command -v kubectl >/dev/null || skip "kubectl not found"
/usr/bin/python3 -c 'import yaml' 2>/dev/null ||
  skip "/usr/bin/python3 has no yaml module (Debian: python3-yaml)"
if ! command -v node >/dev/null || [ ! -d "$here/node_modules/kubernetes-models" ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: the schema validator is missing (node, or tests/deploy/node_modules: scripts/install-deps.sh)"
    exit 1
  fi
  skip "node or tests/deploy/node_modules missing (scripts/install-deps.sh)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0

# The validator must reject each deliberately broken document.
broken_docs="$(grep -c '^kind:' "$here/broken.yaml")"
if node "$here/validate.mjs" "$here/broken.yaml" >"$work/broken.out"; then
  echo "FAIL: validate.mjs accepted broken.yaml"
  status=1
elif ! grep -qx "0 valid, $broken_docs invalid" "$work/broken.out"; then
  echo "FAIL: validate.mjs did not reject all $broken_docs documents of broken.yaml:"
  cat "$work/broken.out"
  status=1
else
  echo "ok:   validate.mjs rejects all $broken_docs documents of broken.yaml"
fi

for overlay in single-node fleet; do
  echo "== overlay $overlay"
  rendered="$work/$overlay.yaml"
  kubectl kustomize "$deploy/overlays/$overlay" >"$rendered"
  if node "$here/validate.mjs" "$rendered" >"$work/$overlay.out"; then
    echo "ok:   schemas: $(tail -n 1 "$work/$overlay.out")"
  else
    cat "$work/$overlay.out"
    echo "FAIL: schemas"
    status=1
  fi
  /usr/bin/python3 "$here/checks.py" "$overlay" "$rendered" || status=1
done

if [ "$status" -ne 0 ]; then
  echo "deploy: FAILED"
  exit 1
fi
echo "deploy: both overlays render, validate and pass all checks"
