"""tests/integration/k8s_pods.py - every pod of deploy/kubernetes/, as a command line.

usage: k8s_pods.py RENDERED.yaml OUTDIR

Reads the rendered manifests (`kubectl kustomize`, or the files one after the
other) and checks what Kubernetes would rely on: the Jobs are named
NAME-scheduler, NAME-servers and NAME-workers and each pod reads its Job's
name (K8S_JOB_NAME from the job-name label); the headless Service is
NAME-scheduler, on SHARDPS_PORT, and selects the scheduler's pod; the
servers' and workers' indexed Jobs have SHARDPS_SERVERS and SHARDPS_WORKERS
completions; every container asks for CPU and memory; the scheduler's pod is
annotated for a Prometheus scrape of SHARDPS_METRICS_BIND's port, which its
container and the Service expose; each pod mounts SHARDPS_KEYS from a Secret
volume (defaultMode 0400); the scheduler and the servers mount a
PersistentVolumeClaim of the manifests at /checkpoints, where the
scheduler's SHARDPS_CHECKPOINT_DIR is ($(VAR) references expanded). Then writes
OUTDIR/<job>-<index>.env (NUL-separated NAME=VALUE: the ConfigMap's data, the
container's env, JOB_COMPLETION_INDEX for an indexed Job, as the kubelet sets
them) and OUTDIR/<job>-<index>.cmd (the container's command and args,
NUL-separated), one pair per pod, and prints the pod names and, on the last
line, "secret NAME" (the Secret every pod mounts). Exits 1 with one line on
the first mismatch.
"""
import os
import re
import sys

import yaml


def fail(msg):
    print("k8s_pods: " + msg, file=sys.stderr)
    sys.exit(1)


docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
out = sys.argv[2]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
maps = {m["metadata"]["name"]: m["data"] for m in by_kind.get("ConfigMap", [])}
services = {s["metadata"]["name"]: s for s in by_kind.get("Service", [])}
jobs = by_kind.get("Job", [])
if len(jobs) != 3:
    fail("expected 3 Jobs (scheduler, servers, workers), found %d" % len(jobs))

def env_of(c, maps, job_name):
    env = {}
    for src in c.get("envFrom", []):
        ref = src["configMapRef"]["name"]
        if ref not in maps:
            fail("%s: no ConfigMap %s" % (job_name, ref))
        env.update({k: str(v) for k, v in maps[ref].items()})
    for e in c.get("env", []):
        if "value" in e:  # $(VAR) names a variable defined before, as the kubelet expands it
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)),
                                    str(e["value"]))
        elif e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['job-name']":
            env[e["name"]] = job_name  # the Job controller's label on its pods
        else:
            fail("%s: env %s from %s" % (job_name, e["name"], e["valueFrom"]))
    return env


def check_volumes(name, pod, c, env):
    """SHARDPS_KEYS is a Secret volume's mount, the checkpoints a claim's."""
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: vols.get(m["name"]) for m in c.get("volumeMounts", [])}
    keys = mounts.get(env.get("SHARDPS_KEYS"))
    if env.get("SHARDPS_SECURE") == "1":
        if not keys or "secret" not in keys or keys["secret"].get("defaultMode") != 0o400:
            fail("%s: SHARDPS_KEYS=%s is not a Secret volume of mode 0400" % (name, env.get("SHARDPS_KEYS")))
        secrets.add(keys["secret"]["secretName"])
    ckpt = [v for p, v in mounts.items() if p == "/checkpoints"]
    if ckpt and ckpt[0].get("persistentVolumeClaim", {}).get("claimName") not in claims:
        fail("%s: /checkpoints is no PersistentVolumeClaim of the manifests" % name)
    return bool(ckpt)


claims = {c["metadata"]["name"] for c in by_kind.get("PersistentVolumeClaim", [])}
secrets = set()
for job in jobs:
    name = job["metadata"]["name"]
    spec = job["spec"]
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    env = env_of(c, maps, name)
    role = env.get("SHARDPS_ROLE")
    want = {"scheduler": "1", "server": env.get("SHARDPS_SERVERS"),
            "worker": env.get("SHARDPS_WORKERS")}.get(role)
    if want is None:
        fail("%s: SHARDPS_ROLE=%s" % (name, role))
    n = spec.get("completions", 1)
    if str(n) != want:
        fail("%s: %s completions, the ConfigMap says %s" % (name, n, want))
    suffix = {"scheduler": "-scheduler", "server": "-servers", "worker": "-workers"}[role]
    if not name.endswith(suffix) or env.get("K8S_JOB_NAME") != name:
        fail("%s: a %s Job must be NAME%s with K8S_JOB_NAME from its job-name label" % (name, role, suffix))
    service = name[: -len(suffix)] + "-scheduler"
    svc = services.get(env.get("SHARDPS_SERVICE", service))
    if not svc or svc["spec"].get("clusterIP") != "None":
        fail("%s: no headless Service %s" % (name, service))
    ports = [str(p["port"]) for p in svc["spec"]["ports"]]
    if env.get("SHARDPS_PORT") not in ports:
        fail("%s: SHARDPS_PORT=%s, the Service has %s" % (name, env.get("SHARDPS_PORT"), ports))
    req = c.get("resources", {}).get("requests", {})
    if "cpu" not in req or "memory" not in req:
        fail("%s: no CPU and memory requests" % name)
    mounts_ckpt = check_volumes(name, pod, c, env)
    if role == "scheduler":
        labels = spec["template"]["metadata"]["labels"]
        if any(labels.get(k) != v for k, v in svc["spec"]["selector"].items()):
            fail("the Service %s does not select the scheduler's pod" % svc["metadata"]["name"])
        metrics = env.get("SHARDPS_METRICS_BIND", "").rpartition(":")[2]
        notes = spec["template"]["metadata"].get("annotations", {})
        exposed = [str(p["containerPort"]) for p in c.get("ports", [])]
        if (notes.get("prometheus.io/scrape") != "true" or notes.get("prometheus.io/port") != metrics
                or metrics not in exposed or metrics not in ports):
            fail("the scheduler's metrics port %r is not exposed and annotated for a scrape" % metrics)
    ckpt_dir = env.get("SHARDPS_CHECKPOINT_DIR", "")
    if role == "scheduler" and ckpt_dir and not ckpt_dir.startswith("/checkpoints/"):
        fail("the scheduler's SHARDPS_CHECKPOINT_DIR %s is not on the claim" % ckpt_dir)
    if role != "worker" and not mounts_ckpt:
        fail("%s: no claim at /checkpoints, where the checkpoints go" % name)
    indexed = spec.get("completionMode") == "Indexed"
    if role != "scheduler" and not indexed:
        fail("%s: not an indexed Job (no JOB_COMPLETION_INDEX)" % name)
    for i in range(n):
        pod_env = dict(env)
        if indexed:
            pod_env["JOB_COMPLETION_INDEX"] = str(i)
        base = os.path.join(out, "%s-%d" % (name, i))
        with open(base + ".env", "w") as f:
            f.write("".join("%s=%s\0" % kv for kv in sorted(pod_env.items())))
        with open(base + ".cmd", "w") as f:
            f.write("".join(a + "\0" for a in c["command"] + c.get("args", [])))
        print("%s-%d" % (name, i))
if len(secrets) > 1:
    fail("the pods mount different Secrets: %s" % sorted(secrets))
print("secret %s" % (secrets.pop() if secrets else "-"))
