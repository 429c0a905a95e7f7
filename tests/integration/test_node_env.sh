#!/usr/bin/env bash
# tests/integration/test_node_env.sh - the cluster-manager contract of
# `shardps-launch --node`: which role, rank, scheduler address and job id each
# task gets from Slurm's, Open MPI's, PMI's and Kubernetes' environment.
#
# The role programs are stand-ins that print their command line (--bin-dir),
# so each case shows exactly what a task would exec. Every case runs with an
# empty environment plus the manager's variables. Asserts per manager: task 0
# is the scheduler bound on --port, tasks 1..S servers 0..S-1 and the rest
# workers in task order, all pointed at the manager's scheduler host, with the
# manager's job id and one configuration hash; and that a missing or
# inconsistent environment is bad usage (exit 2, one line naming it). Last,
# the local launcher (no manager) gives each worker its rank as LOCAL_RANK,
# the local rank a worker picks its GPU by: a short job whose worker program
# is a wrapper that prints it, then execs the real worker.
. "$(dirname "$0")/lib.sh"

BIN=$TMP/bin
mkdir -p "$BIN"
for r in scheduler server worker; do
    printf '#!/bin/sh\necho "$(basename "$0") $*"\n' >"$BIN/shardps-$r"
    chmod +x "$BIN/shardps-$r"
done
N=0
# task VAR=VALUE... -- FLAGS...: prints the exec'd command line (stdout only).
task() {
    local envs=()
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    env -i PATH=/usr/bin:/bin "${envs[@]}" "$LAUNCH" --node --bin-dir "$BIN" "$@" 2>"$TMP/err"
}
# is WHAT GOT WANT-GLOB
is() {
    N=$((N + 1))
    # shellcheck disable=SC2053
    [[ $2 == $3 ]] || fail "$1: got '$2', expected '$3'"
    echo "ok $N - $1"
}
bad() {
    local what=$1 re=$2 rc
    shift 2
    N=$((N + 1))
    task "$@" >"$TMP/out"
    rc=$?
    [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$what: expected one line: $(cat "$TMP/err")"
    grep -Eq -- "$re" "$TMP/err" || fail "$what: '$re' not in: $(cat "$TMP/err")"
    echo "ok $N - $what: $(cat "$TMP/err")"
}

SL=(SLURM_NTASKS=6 SLURM_STEP_NODELIST='node[07-09,12],gpu1' SLURM_JOB_ID=42 SLURM_STEP_ID=3)
FL=(--servers 2 --port 9100 --epochs 2)
is "Slurm task 0: the scheduler on --port, 3 workers" "$(task SLURM_PROCID=0 "${SL[@]}" -- "${FL[@]}")" \
    "shardps-scheduler --bind tcp://0.0.0.0:9100 --servers 2 --workers 3 --epochs 2 --preflight 1 --job-id slurm-42.3"
s1=$(task SLURM_PROCID=2 "${SL[@]}" -- "${FL[@]}")
is "Slurm task 2: server 1 at the step's first node" "$s1" \
    "shardps-server --scheduler tcp://node07:9100 --bind tcp://0.0.0.0:\* --rank 1 --job-hash ???????????????? --job-id slurm-42.3"
w2=$(task SLURM_PROCID=5 "${SL[@]}" -- "${FL[@]}")
is "Slurm task 5: worker 2" "$w2" \
    "shardps-worker --scheduler tcp://node07:9100 --rank 2 --job-hash ???????????????? --job-id slurm-42.3"
is "one configuration hash on every task" "${s1#*--job-hash }" "${w2#*--job-hash }"

OM=(OMPI_COMM_WORLD_SIZE=4 SHARDPS_SCHEDULER_HOST=h1 SHARDPS_JOB_ID=mpi-j)
is "Open MPI rank 1: server 0" "$(task OMPI_COMM_WORLD_RANK=1 "${OM[@]}" --)" \
    "shardps-server --scheduler tcp://h1:9000 --bind tcp://0.0.0.0:\* --rank 0 --job-hash * --job-id mpi-j"
is "Open MPI rank 3: worker 1" "$(task OMPI_COMM_WORLD_RANK=3 "${OM[@]}" --)" \
    "shardps-worker --scheduler tcp://h1:9000 --rank 1 *"
is "PMI rank 2 of 3: worker 0" "$(task PMI_RANK=2 PMI_SIZE=3 SHARDPS_SCHEDULER_HOST=h2 --)" \
    "shardps-worker --scheduler tcp://h2:9000 --rank 0 --job-hash *"
is "SHARDPS_SCHEDULER overrides the host and the port" \
    "$(task PMI_RANK=0 PMI_SIZE=3 SHARDPS_SCHEDULER=tcp://x:1234 --)" \
    "shardps-scheduler --bind tcp://0.0.0.0:1234 *"

K8=(SHARDPS_SERVICE=shardps-scheduler SHARDPS_WORKERS=2 SHARDPS_SERVERS=2 SHARDPS_JOB_ID=k)
is "Kubernetes scheduler pod" "$(task SHARDPS_ROLE=scheduler "${K8[@]}" --)" \
    "shardps-scheduler --bind tcp://0.0.0.0:9000 --servers 2 --workers 2 --preflight 1 --job-id k"
is "Kubernetes server pod, index 1" "$(task SHARDPS_ROLE=server JOB_COMPLETION_INDEX=1 "${K8[@]}" --)" \
    "shardps-server --scheduler tcp://shardps-scheduler:9000 --bind tcp://0.0.0.0:\* --rank 1 *--job-id k"
is "Kubernetes worker pod, index 0" "$(task SHARDPS_ROLE=worker JOB_COMPLETION_INDEX=0 "${K8[@]}" --)" \
    "shardps-worker --scheduler tcp://shardps-scheduler:9000 --rank 0 *--job-id k"

is "--preflight 0 keeps the preflight off under --node" \
    "$(task SHARDPS_ROLE=scheduler "${K8[@]}" -- --preflight 0)" \
    "shardps-scheduler --bind tcp://0.0.0.0:9000 --servers 2 --workers 2 --preflight 0 --job-id k"
is "--advertise reaches the scheduler" \
    "$(task SHARDPS_ROLE=scheduler SHARDPS_ADVERTISE=10.1.2.3 "${K8[@]}" --)" \
    "shardps-scheduler * --advertise 10.1.2.3 *"
is "--advertise reaches a server" \
    "$(task SHARDPS_ROLE=server JOB_COMPLETION_INDEX=0 "${K8[@]}" -- --advertise node3)" \
    "shardps-server * --advertise node3 *"
KJ=(SHARDPS_WORKERS=2 SHARDPS_SERVERS=2)
is "Kubernetes: job id and Service from the scheduler Job's name" \
    "$(task SHARDPS_ROLE=scheduler K8S_JOB_NAME=run7-shardps-scheduler "${KJ[@]}" --)" \
    "shardps-scheduler * --job-id run7-shardps"
is "Kubernetes: job id and Service from a worker Job's name" \
    "$(task SHARDPS_ROLE=worker JOB_COMPLETION_INDEX=1 K8S_JOB_NAME=run7-shardps-workers "${KJ[@]}" --)" \
    "shardps-worker --scheduler tcp://run7-shardps-scheduler:9000 --rank 1 *--job-id run7-shardps"

bad "no manager in the environment" "no task in the environment" --
bad "a server pod without its index" "SHARDPS_ROLE=server needs its rank" \
    SHARDPS_ROLE=server "${K8[@]}" --
bad "an unknown role" "SHARDPS_ROLE=boss" SHARDPS_ROLE=boss --
bad "too few tasks" "started 3 tasks; the job needs 1 scheduler \+ 2 servers" \
    SLURM_PROCID=0 SLURM_NTASKS=3 SLURM_STEP_NODELIST=n1 -- --servers 2
bad "--workers against the task count" "--workers 5, but Slurm started 6 tasks" \
    SLURM_PROCID=1 "${SL[@]}" -- --servers 2 --workers 5
bad "no scheduler address" "no scheduler address" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=3 --
bad "a malformed SHARDPS_SCHEDULER" "SHARDPS_SCHEDULER=h:1" PMI_RANK=1 PMI_SIZE=3 SHARDPS_SCHEDULER=h:1 --
REAL=$TMP/real
mkdir -p "$REAL"
ln -s "$SCHED" "$REAL/shardps-scheduler"
ln -s "$SERVER" "$REAL/shardps-server"
printf '#!/bin/sh\necho "LOCAL_RANK=$LOCAL_RANK" >&2\nexec %s "$@"\n' "$WORKER" >"$REAL/shardps-worker"
chmod +x "$REAL/shardps-worker"
"$LAUNCH" --bin-dir "$REAL" --workers 2 --max-steps 2 --epochs 1 >"$TMP/local.log" 2>&1 ||
    fail "the local job failed: $(tail -3 "$TMP/local.log")"
for w in 0 1; do
    grep -q "W$w.*LOCAL_RANK=$w\$" "$TMP/local.log" ||
        fail "worker $w did not get LOCAL_RANK=$w: $(grep LOCAL_RANK "$TMP/local.log")"
done
N=$((N + 1))
echo "ok $N - the local launcher: worker i has LOCAL_RANK=i"
echo "ok: $N cases"
