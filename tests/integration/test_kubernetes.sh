#!/usr/bin/env bash
# tests/integration/test_kubernetes.sh - deploy/kubernetes/: the manifests
# render, agree with each other, and every pod's container command, run here
# with that pod's environment, makes one job that trains.
#
# There is no cluster here: the manifests are rendered (`kubectl kustomize`
# where kubectl is installed, else the files in kustomization.yaml's order),
# k8s_pods.py checks them (Service = SHARDPS_SERVICE on SHARDPS_PORT, indexed
# Jobs with SHARDPS_SERVERS / SHARDPS_WORKERS completions) and writes each
# pod's environment (ConfigMap + container env + JOB_COMPLETION_INDEX) and
# command. Each pod then runs as a local process with exactly that
# environment (env -i), plus three overrides that stand in for the cluster:
# SHARDPS_SCHEDULER_HOST=127.0.0.1 (the Service's DNS name), SHARDPS_PORT (a
# free port here) and, for the scheduler, SHARDPS_SUMMARY; PATH points at the
# build. Asserts: every pod exits 0; each pod became the role and rank its Job
# and index say; the summary is ok under the ConfigMap's job id with nodes
# S0 S1 W0 W1. Skips (77) without Python's yaml module (Debian python3-yaml).
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
[ "$(wc -l <"$TMP/pods.txt")" -eq 5 ] || fail "expected 5 pods: $(cat "$TMP/pods.txt")"
echo "ok - rendered with $how: $(tr '\n' ' ' <"$TMP/pods.txt")"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
declare -A POD
while read -r pod; do
    mapfile -d '' envs <"$TMP/pods/$pod.env"
    mapfile -d '' cmd <"$TMP/pods/$pod.cmd"
    extra=(SHARDPS_SCHEDULER_HOST=127.0.0.1 SHARDPS_PORT="$PORT")
    case $pod in shardps-scheduler-*) extra+=(SHARDPS_SUMMARY="$TMP/k8s.json") ;; esac
    start "$pod" env -i PATH="$SPS_BUILD/deploy:/usr/bin:/bin" HOME="$TMP" "${envs[@]}" \
        "${extra[@]}" "${cmd[@]}"
    POD[$pod]=$LAST_PID
done <"$TMP/pods.txt"
for pod in "${!POD[@]}"; do
    wait_pid "${POD[$pod]}" 180 || fail "$pod still running: $(tail -3 "$TMP/$pod.log")"
    [ "$WAIT_RC" -eq 0 ] || fail "$pod exited $WAIT_RC: $(tail -3 "$TMP/$pod.log")"
done
JOB_ID=$(grep -o 'SHARDPS_JOB_ID: [^ ]*' "$K8S/job-config.yaml" | cut -d' ' -f2)
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
