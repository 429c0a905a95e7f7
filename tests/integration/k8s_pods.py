"""tests/integration/k8s_pods.py - every pod of deploy/kubernetes/, as a command line.

usage: k8s_pods.py RENDERED.yaml OUTDIR

Reads the rendered manifests (`kubectl kustomize`, or the files one after the
other) and checks what Kubernetes would rely on: the headless Service is the
one the ConfigMap names (SHARDPS_SERVICE) on its port (SHARDPS_PORT), and the
servers' and workers' indexed Jobs have SHARDPS_SERVERS and SHARDPS_WORKERS
completions. Then writes OUTDIR/<job>-<index>.env (NUL-separated NAME=VALUE:
the ConfigMap's data, the container's env, JOB_COMPLETION_INDEX for an indexed
Job, as the kubelet sets them) and OUTDIR/<job>-<index>.cmd (the container's
command and args, NUL-separated), one pair per pod, and prints the pod names.
Exits 1 with one line on the first mismatch.
"""
import os
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

for job in jobs:
    name = job["metadata"]["name"]
    spec = job["spec"]
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    env = {}
    for src in c.get("envFrom", []):
        ref = src["configMapRef"]["name"]
        if ref not in maps:
            fail("%s: no ConfigMap %s" % (name, ref))
        env.update({k: str(v) for k, v in maps[ref].items()})
    env.update({e["name"]: str(e["value"]) for e in c.get("env", [])})
    role = env.get("SHARDPS_ROLE")
    want = {"scheduler": "1", "server": env.get("SHARDPS_SERVERS"),
            "worker": env.get("SHARDPS_WORKERS")}.get(role)
    if want is None:
        fail("%s: SHARDPS_ROLE=%s" % (name, role))
    n = spec.get("completions", 1)
    if str(n) != want:
        fail("%s: %s completions, the ConfigMap says %s" % (name, n, want))
    svc = services.get(env.get("SHARDPS_SERVICE", ""))
    if not svc or svc["spec"].get("clusterIP") != "None":
        fail("%s: SHARDPS_SERVICE=%s is not a headless Service" % (name, env.get("SHARDPS_SERVICE")))
    ports = [str(p["port"]) for p in svc["spec"]["ports"]]
    if env.get("SHARDPS_PORT") not in ports:
        fail("%s: SHARDPS_PORT=%s, the Service has %s" % (name, env.get("SHARDPS_PORT"), ports))
    if role == "scheduler":
        labels = spec["template"]["metadata"]["labels"]
        if any(labels.get(k) != v for k, v in svc["spec"]["selector"].items()):
            fail("the Service %s does not select the scheduler's pod" % svc["metadata"]["name"])
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
