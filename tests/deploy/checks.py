"""Checks what kilnd needs from a rendered overlay of deploy/ (kubectl kustomize output).

usage: checks.py single-node|fleet RENDERED.yaml   (exit 1 when a check fails)
"""
import base64
import re
import sys

import yaml

# kilnd's flags (and kilnd.conf names): the contract in server/kilnd_flags.cc.
KILND_FLAGS = {
    "config", "listen", "data-dir", "log-level", "log-format", "metrics-listen",
    "tls-cert", "tls-key", "tls-client-ca", "token-file", "postgres",
    "max-cache-bytes", "max-model-bytes", "max-jobs", "max-queued-jobs", "drain-seconds",
    "max-job-seconds", "job-memory-bytes", "max-upload-bytes-per-second", "max-streams",
    "max-rpcs", "fleet-lease-seconds",
}
PATH_FLAGS = {"data-dir", "tls-cert", "tls-key", "tls-client-ca", "token-file"}
BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}

shape, path = sys.argv[1], sys.argv[2]
with open(path) as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)
    return ok


def finish():
    if failures:
        print(f"{shape}: {len(failures)} check(s) failed")
        sys.exit(1)
    print(f"{shape}: all checks passed")
    sys.exit(0)


def of_kind(kind):
    return [d for d in docs if d["kind"] == kind]


def selects(selector, labels):
    """A LabelSelector (matchLabels only, as used here) against pod labels."""
    if not selector or set(selector) - {"matchLabels"}:
        return False
    return bool(selector["matchLabels"]) and selector["matchLabels"].items() <= labels.items()


def quantity(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", str(q))
    return int(m.group(1)) * BINARY_SUFFIXES.get(m.group(2), 1) if m else None


def mount_for(file_path, mounts):
    """The volumeMount whose directory holds file_path, and the path inside it."""
    for m in mounts:
        prefix = m["mountPath"].rstrip("/") + "/"
        if file_path.startswith(prefix):
            return m, file_path[len(prefix):]
    return None, None


# --- The workload -----------------------------------------------------------------------
sets, deployments = of_kind("StatefulSet"), of_kind("Deployment")
if shape == "single-node":
    check(len(sets) == 1 and not deployments, "one StatefulSet, no Deployment")
    workloads = sets
elif shape == "fleet":
    check(len(deployments) == 1 and not sets, "one Deployment, no StatefulSet")
    workloads = deployments
else:
    sys.exit(f"unknown shape {shape}")
if failures:
    finish()
wl = workloads[0]
spec = wl["spec"]
pod = spec["template"]["spec"]
labels = spec["template"]["metadata"].get("labels", {})
check(selects(spec["selector"], labels), f"{wl['kind']} selector matches its pod labels")
volumes = {v["name"]: v for v in pod.get("volumes", [])}
configmaps = {c["metadata"]["name"]: c for c in of_kind("ConfigMap")}
secrets = {s["metadata"]["name"]: s for s in of_kind("Secret")}

check(pod.get("securityContext", {}).get("runAsNonRoot") is True, "pod runs as non-root")
containers = pod.get("containers", []) + pod.get("initContainers", [])
check(len(pod.get("containers", [])) == 1, "one container")
for c in containers:
    res = c.get("resources", {})
    check(all(k in res.get("requests", {}) for k in ("cpu", "memory"))
          and all(k in res.get("limits", {}) for k in ("cpu", "memory")),
          f"container {c['name']}: cpu and memory requests and limits")
    check(c.get("securityContext", {}).get("readOnlyRootFilesystem") is True,
          f"container {c['name']}: read-only root filesystem")
c = pod["containers"][0]
ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
check(ports.get("grpc") == 50051 and ports.get("metrics") == 9090,
      "container ports grpc 50051 and metrics 9090")
for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
    check(c.get(probe, {}).get("grpc", {}).get("port") == 50051, f"{probe} is grpc on port 50051")

# --- Generated ConfigMap and Secret, and what refers to them ----------------------------
check(len(configmaps) == 1 and next(iter(configmaps)).startswith("kilnd-config-"),
      "one generated ConfigMap kilnd-config-<hash>")
check(len(secrets) == 1 and next(iter(secrets)).startswith("kilnd-secrets-"),
      "one generated Secret kilnd-secrets-<hash>")
for name, v in volumes.items():
    if "configMap" in v:
        check(v["configMap"]["name"] in configmaps, f"volume {name} names the generated ConfigMap")
    if "secret" in v:
        check(v["secret"]["secretName"] in secrets, f"volume {name} names the generated Secret")
for e in c.get("env", []):
    ref = e.get("valueFrom", {}).get("secretKeyRef")
    if ref:
        check(ref["name"] in secrets and ref["key"] in secrets[ref["name"]].get("data", {}),
              f"env {e['name']} comes from a key of the generated Secret")
for sname, s in secrets.items():
    for key, value in s.get("data", {}).items():
        text = base64.b64decode(value).decode()
        check(all(line.startswith("#") for line in text.splitlines() if line.strip()),
              f"Secret key {key} in the repository is a placeholder (comments only)")

# --- kilnd's command line and kilnd.conf ------------------------------------------------
mounts = c.get("volumeMounts", [])
check(c.get("command") == ["/usr/local/bin/kilnd"], "command is /usr/local/bin/kilnd")
flags = {}
for arg in c.get("args", []):
    m = re.fullmatch(r"--([a-z-]+)=(.*)", arg)
    check(bool(m) and m.group(1) in KILND_FLAGS, f"argument {arg.split('=')[0]} is a kilnd flag")
    if m:
        flags[m.group(1)] = m.group(2)

conf_path = flags.get("config", "")
conf_mount, conf_key = mount_for(conf_path, mounts)
conf_volume = volumes.get(conf_mount["name"], {}) if conf_mount else {}
conf_map = configmaps.get(conf_volume.get("configMap", {}).get("name"))
check(conf_map is not None and conf_key in conf_map.get("data", {}),
      f"--config={conf_path} is a key of the mounted ConfigMap")
if failures:
    finish()

conf, commented = {}, {}
for n, line in enumerate(conf_map["data"][conf_key].splitlines(), 1):
    m = re.fullmatch(r"\s*(#\s*)?([a-z-]+)\s*=\s*(.*?)\s*", line)
    if m and (not m.group(1) or m.group(2) in KILND_FLAGS):
        (commented if m.group(1) else conf)[m.group(2)] = m.group(3)
    elif line.strip() and not line.lstrip().startswith("#"):
        check(False, f"kilnd.conf line {n} is `name = value`: {line!r}")
for name in conf:
    check(name in KILND_FLAGS and name != "config", f"kilnd.conf: {name} is a kilnd flag")
settings = {**conf, **flags}  # flags override the file

# Every path kilnd.conf names, set or commented out (TLS), lies on a mounted volume, and
# a file on a ConfigMap or Secret volume is one of its keys.
for source, entries in (("set", conf), ("commented", commented)):
    for name, value in entries.items():
        if name not in PATH_FLAGS:
            continue
        if name == "data-dir":
            check(any(m["mountPath"].rstrip("/") == value.rstrip("/") for m in mounts),
                  f"data-dir {value} is a mounted volume")
            continue
        m, key = mount_for(value, mounts)
        v = volumes.get(m["name"], {}) if m else {}
        if "secret" in v:
            ok = key in secrets.get(v["secret"]["secretName"], {}).get("data", {})
        elif "configMap" in v:
            ok = key in configmaps.get(v["configMap"]["name"], {}).get("data", {})
        else:
            ok = m is not None
        check(ok, f"{name} ({source}) {value} is a file of a mounted volume")
check(settings.get("listen", "").endswith(":50051"), "kilnd listens on 50051")
check(settings.get("metrics-listen", "").endswith(":9090"), "kilnd serves metrics on 9090")
drain = int(settings.get("drain-seconds", "30"))
check(drain < pod.get("terminationGracePeriodSeconds", 30),
      f"drain-seconds {drain} < terminationGracePeriodSeconds")

data_dir = settings.get("data-dir", "")
data_mount = next((m for m in mounts if m["mountPath"].rstrip("/") == data_dir.rstrip("/")), None)
data_volume = data_mount["name"] if data_mount else None

# --- Shape-specific ---------------------------------------------------------------------
services = {s["metadata"]["name"]: s for s in of_kind("Service")}
if shape == "single-node":
    check(spec.get("replicas") == 1, "StatefulSet has 1 replica")
    claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    check(data_volume in claims, f"data-dir {data_dir} is on a volumeClaimTemplate")
    headless = services.get(spec.get("serviceName"))
    check(headless is not None and headless["spec"].get("clusterIP") == "None",
          "serviceName names a headless Service")
    check("postgres" not in settings, "no PostgreSQL")
else:
    check(spec.get("replicas") is None, "Deployment leaves replicas to the HPA")
    dv = volumes.get(data_volume, {})
    check("emptyDir" in dv, f"data-dir {data_dir} is an emptyDir")
    size, cache = quantity(dv.get("emptyDir", {}).get("sizeLimit")), settings.get("max-cache-bytes")
    check(size is not None and cache is not None and int(cache) < size,
          "max-cache-bytes fits in the emptyDir's sizeLimit")
    check(settings.get("postgres", "").startswith("host="), "--postgres conninfo set")
    check("password" not in settings.get("postgres", ""), "no password in the conninfo")
    check(any(e["name"] == "PGPASSWORD" and "secretKeyRef" in e.get("valueFrom", {})
              for e in c.get("env", [])), "PGPASSWORD from a secretKeyRef")
    hpas = of_kind("HorizontalPodAutoscaler")
    check(len(hpas) == 1 and hpas[0]["apiVersion"] == "autoscaling/v2", "one autoscaling/v2 HPA")
    if hpas:
        h = hpas[0]["spec"]
        ref = h["scaleTargetRef"]
        check((ref.get("apiVersion"), ref["kind"], ref["name"]) ==
              ("apps/v1", "Deployment", wl["metadata"]["name"]), "HPA targets the Deployment")
        check(h.get("minReplicas", 1) >= 2 and h["maxReplicas"] > h["minReplicas"],
              "HPA scales from at least 2 replicas")
        check(any(m["type"] == "Resource" and m["resource"]["name"] == "cpu"
                  and m["resource"]["target"]["type"] == "Utilization" for m in h.get("metrics", [])),
              "HPA scales on CPU utilization")

# --- Services, PDB, NetworkPolicy --------------------------------------------------------
for name, svc in services.items():
    s = svc["spec"]
    check(s["selector"].items() <= labels.items() and s["selector"],
          f"Service {name} selects the kilnd pods")
    check(any(p.get("port") == 50051 and p.get("targetPort") in ("grpc", 50051)
              for p in s.get("ports", [])), f"Service {name} serves grpc on 50051")
cluster = services.get("kilnd", {}).get("spec", {})
check(cluster.get("type", "ClusterIP") == "ClusterIP" and cluster.get("clusterIP") != "None"
      and any(p.get("port") == 9090 for p in cluster.get("ports", [])),
      "ClusterIP Service kilnd also serves metrics on 9090")

pdbs = of_kind("PodDisruptionBudget")
check(len(pdbs) == 1, "one PodDisruptionBudget")
for p in pdbs:
    ps = p["spec"]
    check(selects(ps["selector"], labels), "PDB selects the kilnd pods")
    replicas = spec.get("replicas") if shape == "single-node" else None
    if replicas == 1:
        check(ps.get("maxUnavailable") in (1, "100%") or ps.get("minAvailable") in (0, "0%"),
              "PDB lets a drain evict the single replica")
    check("maxUnavailable" in ps or "minAvailable" in ps, "PDB sets a budget")

policies = of_kind("NetworkPolicy")
check(len(policies) == 1, "one NetworkPolicy")
for np in policies:
    ns = np["spec"]
    check(selects(ns["podSelector"], labels), "NetworkPolicy selects the kilnd pods")
    check(set(ns.get("policyTypes", [])) == {"Ingress", "Egress"}, "NetworkPolicy: Ingress and Egress")
    ingress_ports = {p["port"] for r in ns.get("ingress", []) for p in r.get("ports", [])}
    check({50051, 9090} <= ingress_ports, "NetworkPolicy admits 50051 and 9090")
    check(all(r.get("from") and r.get("ports") for r in ns.get("ingress", [])),
          "every ingress rule names its sources and ports")
    egress_ports = {p["port"] for r in ns.get("egress", []) for p in r.get("ports", [])}
    want = {53, 5432} if shape == "fleet" else {53}
    check(egress_ports == want, f"NetworkPolicy egress to ports {sorted(want)} only")

finish()
