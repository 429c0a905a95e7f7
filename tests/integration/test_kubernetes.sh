#!/usr/bin/env bash
# tests/integration/test_kubernetes.sh - deploy/kubernetes/: the manifests
# render, agree with each other, and every pod's container command, run here
# with that pod's environment, makes one job that trains.
#
# There is no cluster here: the manifests are rendered (`kubectl kustomize`
# where kubectl is installed, else the files in kustomization.yaml's order),
# k8s_pods.py checks them (Jobs NAME-scheduler/-servers/-workers whose pods
# read their Job's name, the headless Service NAME-scheduler on SHARDPS_PORT,
# indexed Jobs with SHARDPS_SERVERS / SHARDPS_WORKERS completions, resource
# requests, the metrics port exposed and annotated, the keys from a Secret
# volume, the checkpoints on a claim) and writes each pod's environment
# (ConfigMap + container env + JOB_COMPLETION_INDEX) and command. The Secret
# is `shardps-keygen --k8s NAME`'s output (parsed as YAML), laid out on disk
# exactly as the kubelet mounts a Secret volume: DIR/..2026_.../FILE, the
# link DIR/..data to it and DIR/FILE -> ..data/FILE. Each pod then runs as a
# local process with exactly that environment (env -i), plus overrides that
# stand in for the cluster: SHARDPS_SCHEDULER_HOST=127.0.0.1 (the Service's
# DNS name), SHARDPS_PORT and SHARDPS_METRICS_BIND (free ports here),
# SHARDPS_KEYS (the Secret's directory), SHARDPS_CHECKPOINT_DIR (the claim)
# and, for the scheduler, SHARDPS_SUMMARY; PATH points at the build.
# Asserts: every pod exits 0; each pod became the role and rank its Job and
# index say, in the job named by the Jobs ("shardps"); the secure job's
# summary is ok under that id with nodes S0 S1 W0 W1. Skips (77) without
# Python's yaml module (Debian python3-yaml).
. "$(dirname "$0")/lib.sh"

K8S=$(cd "$(dirname "$0")/../../deploy/kubernetes" && pwd)
python3 -c 'import yaml' 2>/dev/null || skip "no Python yaml module (Debian: python3-yaml)"
if command -v kubectl >/dev/null && kubectl kustomize "$K8S" >"$TMP/rendered.yaml" 2>"$TMP/kustomize.err"; then
    how="kubectl kustomize"
else
    how="the files of kustomization.yaml"
    for f in $(python3 -c 'import sys, yaml; print(" ".join(yaml.safe_load(open(sys.argv[1]))["resources"]))' \
        "$K8S/kustomization.yaml"); do
        cat "$K8S/$f"
        echo "---"
    done >"$TMP/rendered.yaml"
fi
mkdir -p "$TMP/pods"
python3 "$(dirname "$0")/k8s_pods.py" "$TMP/rendered.yaml" "$TMP/pods" >"$TMP/pods.txt" ||
    fail "the manifests do not agree"
SECRET=$(sed -n 's/^secret //p' "$TMP/pods.txt")
sed -i '/^secret /d' "$TMP/pods.txt"
[ "$(wc -l <"$TMP/pods.txt")" -eq 5 ] || fail "expected 5 pods: $(cat "$TMP/pods.txt")"
echo "ok - rendered with $how: $(tr '\n' ' ' <"$TMP/pods.txt")"

# The Secret volume, from shardps-keygen --k8s, as the kubelet lays it out.
[ "$SECRET" != - ] || fail "the pods mount no Secret for SHARDPS_KEYS"
"$SPS_BUILD/deploy/shardps-keygen" --k8s "$SECRET" "$TMP/secret.yaml" || fail "keygen --k8s failed"
[ "$(stat -c %a "$TMP/secret.yaml")" = 600 ] || fail "keygen --k8s FILE is not 0600"
python3 - "$TMP/secret.yaml" "$TMP/keys" "$SECRET" <<'PY' || fail "keygen --k8s wrote no Secret of the six key files and the secret"
import os, sys, yaml
(d,) = [x for x in yaml.safe_load_all(open(sys.argv[1])) if x]
assert d["kind"] == "Secret" and d["metadata"]["name"] == sys.argv[3], d["metadata"]
files = d["stringData"]
assert sorted(files) == sorted(["job.secret"] + [f + e for f in ("job", "server", "worker")
                                                  for e in (".key", ".pub")])
assert len(files["job.secret"].strip()) == 64, "job.secret is not 64 hex digits"
vol, stamp = sys.argv[2], "..2026_11_26_18_00_00.123456789"
os.makedirs(os.path.join(vol, stamp), mode=0o755)
for name, text in files.items():
    assert name == "job.secret" or text.startswith("# shardps ") and "public " in text, name
    path = os.path.join(vol, stamp, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o400), "w") as f:
        f.write(text)
    os.symlink(os.path.join("..data", name), os.path.join(vol, name))
os.symlink(stamp, os.path.join(vol, "..data"))
PY
mkdir -p "$TMP/ckpt"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
METRICS=$(free_port)
declare -A POD
while read -r pod; do
    mapfile -d '' envs <"$TMP/pods/$pod.env"
    mapfile -d '' cmd <"$TMP/pods/$pod.cmd"
    extra=(SHARDPS_SCHEDULER_HOST=127.0.0.1 SHARDPS_PORT="$PORT" SHARDPS_KEYS="$TMP/keys"
        SHARDPS_SECRET_FILE="$TMP/keys/job.secret"
        SHARDPS_CHECKPOINT_DIR="$TMP/ckpt" SHARDPS_METRICS_BIND="127.0.0.1:$METRICS")
    case $pod in shardps-scheduler-*) extra+=(SHARDPS_SUMMARY="$TMP/k8s.json") ;; esac
    start "$pod" env -i PATH="$SPS_BUILD/deploy:/usr/bin:/bin" HOME="$TMP" "${envs[@]}" \
        "${extra[@]}" "${cmd[@]}"
    POD[$pod]=$LAST_PID
done <"$TMP/pods.txt"
for pod in "${!POD[@]}"; do
    wait_pid "${POD[$pod]}" 180 || fail "$pod still running: $(tail -3 "$TMP/$pod.log")"
    [ "$WAIT_RC" -eq 0 ] || fail "$pod exited $WAIT_RC: $(tail -3 "$TMP/$pod.log")"
done
JOB_ID=shardps # the Jobs shardps-scheduler, shardps-servers and shardps-workers
for want in scheduler-0:C0 servers-0:S0 servers-1:S1 workers-0:W0 workers-1:W1; do
    grep -q "task is ${want#*:} of job $JOB_ID " "$TMP/shardps-${want%:*}.log" ||
        fail "pod shardps-${want%:*} did not become ${want#*:}: $(head -2 "$TMP/shardps-${want%:*}.log")"
done
expect "$TMP/k8s.json" "d['status'] == 'ok' and d['job_id'] == '$JOB_ID'" \
    "the job did not end ok as $JOB_ID"
expect "$TMP/k8s.json" "[n['node'] for n in d['nodes']] == ['S0', 'S1', 'W0', 'W1'] and \
    len(d['preflight']) == 4" "the job's nodes are not S0 S1 W0 W1 with a preflight"
check_logs
echo "ok: 5 pods of deploy/kubernetes/ as local processes: test_accuracy $(field "$TMP/k8s.json" "d['test_accuracy']")"
