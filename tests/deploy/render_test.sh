#!/usr/bin/env bash
# Renders the kustomize base offline and checks what kilnd needs from it: a StatefulSet
# with a volume for /var/lib/kiln, a ClusterIP and a headless Service on 50051, gRPC
# probes on 50051, non-root. Exits 77 (ctest: skipped) when kubectl or PyYAML is missing.
set -euo pipefail
base="${1:-$(dirname "${BASH_SOURCE[0]}")/../../deploy/base}"

if ! command -v kubectl >/dev/null; then
  echo "skipped: kubectl not found"
  exit 77
fi
if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
  echo "skipped: /usr/bin/python3 has no yaml module (Debian: python3-yaml)"
  exit 77
fi

rendered="$(mktemp)"
trap 'rm -f "$rendered"' EXIT
kubectl kustomize "$base" >"$rendered"
/usr/bin/python3 - "$rendered" <<'PY'
import sys, yaml

with open(sys.argv[1]) as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
failures = []

def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)

sets = by_kind.get("StatefulSet", [])
services = {s["metadata"]["name"]: s for s in by_kind.get("Service", [])}
check(len(sets) == 1, "exactly one StatefulSet")
check(len(services) == 2, "two Services (ClusterIP and headless)")
if failures:
    sys.exit(1)

sts = sets[0]
spec = sts["spec"]
pod = spec["template"]["spec"]
labels = spec["template"]["metadata"].get("labels", {})
check(spec.get("replicas") == 1, "StatefulSet has 1 replica")
check(spec["selector"]["matchLabels"].items() <= labels.items(), "selector matches pod labels")

containers = pod["containers"]
check(len(containers) == 1, "one container")
c = containers[0]
check(any(p.get("name") == "grpc" and p.get("containerPort") == 50051 for p in c.get("ports", [])),
      "container port 50051 named grpc")
for probe in ("readinessProbe", "livenessProbe"):
    check(c.get(probe, {}).get("grpc", {}).get("port") == 50051, probe + " is grpc on port 50051")
res = c.get("resources", {})
check(bool(res.get("requests")) and bool(res.get("limits")), "resource requests and limits set")
check(pod.get("securityContext", {}).get("runAsNonRoot") is True, "pod runs as non-root")

claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
check(mounts.get("/var/lib/kiln") in claims, "/var/lib/kiln is on a volumeClaimTemplate")

headless = services.get(spec.get("serviceName"))
check(headless is not None and headless["spec"].get("clusterIP") == "None",
      "serviceName names a headless Service")
for name, svc in services.items():
    s = svc["spec"]
    check(s["selector"].items() <= labels.items(), f"Service {name} selects the kilnd pods")
    check(any(p.get("port") == 50051 for p in s.get("ports", [])), f"Service {name} serves 50051")
check(any(s["spec"].get("type", "ClusterIP") == "ClusterIP" and s["spec"].get("clusterIP") != "None"
          for s in services.values()), "a ClusterIP Service")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("deploy/base renders and passes all checks")
PY
