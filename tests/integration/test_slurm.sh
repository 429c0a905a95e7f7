#!/usr/bin/env bash
# tests/integration/test_slurm.sh - deploy/slurm/shardps.sbatch on a real
# single-node Slurm trains the MLP as the launcher does.
#
# The test brings up its own Slurm as root, touching nothing of the system's:
# munged with a fresh key on a private socket, slurmctld and slurmd (Debian
# slurm-wlm 22.05) with a generated slurm.conf (free ports, this host as the
# one node with 8 CPUs, state and spool under $TMP). Then
# `sbatch --ntasks=5 shardps.sbatch --servers 2 --epochs 1 ...`: 1 scheduler,
# 2 servers, 2 workers as the tasks of one step. Asserts: the job completes
# with exit code 0; the summary's job id is slurm-<job id>.0 and its nodes
# S0 S1 W0 W1; the MLP reaches >= 0.82 after 1 epoch and exactly the test
# accuracy of the same job through shardps-launch. Skips (77) with the reason
# when Slurm is not installed (deploy/install-deps.sh installs it), not root,
# or the daemons do not come up here.
. "$(dirname "$0")/lib.sh"

SBATCH_SCRIPT=$(cd "$(dirname "$0")/../../deploy/slurm" && pwd)/shardps.sbatch
[ "$(id -u)" -eq 0 ] || skip "starting slurmctld, slurmd and munged needs root"
for p in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
    command -v "$p" >/dev/null || skip "no $p (Debian: slurmd slurmctld slurm-client munge)"
done

D=$TMP/slurm
mkdir -p "$D/state" "$D/spool"
chmod 700 "$TMP" "$D"
stop_daemons() {
    local f
    for f in "$D/slurmctld.pid" "$D/slurmd.pid" "$D/munged.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
}
trap 'stop_daemons; cleanup' EXIT

dd if=/dev/urandom of="$D/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$D/munge.key"
munged -f --socket="$D/munge.sock" --key-file="$D/munge.key" --log-file="$D/munged.log" \
    --pid-file="$D/munged.pid" --seed-file="$D/munged.seed" >"$TMP/munged.out" 2>&1 ||
    skip "munged does not start here: $(tail -1 "$TMP/munged.out")"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}
NODE=$(hostname -s)
cat >"$D/slurm.conf" <<CONF
ClusterName=shardpstest
SlurmctldHost=$NODE
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=$NODE CPUs=8 State=UNKNOWN
PartitionName=test Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$D/slurm.conf
start slurmctld slurmctld -D -i
start slurmd slurmd -D -N "$NODE"
i=0
until sinfo -h -o %t 2>/dev/null | grep -q idle; do
    i=$((i + 1))
    [ $i -le 100 ] || skip "Slurm did not come up here: $(tail -2 "$D/slurmctld.log" "$D/slurmd.log" "$TMP"/slurm*.log 2>/dev/null | tr '\n' ' ')"
    sleep 0.2
done

JOB=(--servers 2 --epochs 1 --seed 3)
ID=$(SHARDPS_LAUNCH=$LAUNCH sbatch --parsable --ntasks=5 --chdir="$TMP" --output="$TMP/job.out" \
    "$SBATCH_SCRIPT" "${JOB[@]}" --summary "$TMP/slurm.json") || fail "sbatch failed: $ID"
ID=${ID%%;*}
i=0
while squeue -h -j "$ID" 2>/dev/null | grep -q .; do
    i=$((i + 1))
    [ $i -le 600 ] || fail "Slurm job $ID still running after 300 s: $(tail -5 "$TMP/job.out")"
    sleep 0.5
done
state=$(scontrol -o show job "$ID" | grep -o 'JobState=[A-Z]* .*ExitCode=[0-9:]*')
case $state in
"JobState=COMPLETED "*"ExitCode=0:0") ;;
*) fail "Slurm job $ID: $state: $(tail -5 "$TMP/job.out")" ;;
esac
expect "$TMP/slurm.json" "d['status'] == 'ok' and d['job_id'] == 'slurm-$ID.0'" \
    "the Slurm job did not end ok as job slurm-$ID.0"
expect "$TMP/slurm.json" "[n['node'] for n in d['nodes']] == ['S0', 'S1', 'W0', 'W1']" \
    "the Slurm job's nodes are not S0 S1 W0 W1"
expect "$TMP/slurm.json" "d['test_accuracy'] >= 0.82" "the MLP is below 0.82 after 1 epoch"

"$LAUNCH" --workers 2 "${JOB[@]}" --summary "$TMP/launch.json" --log-level warn \
    >"$TMP/launch.log" 2>&1 || fail "the launcher run failed: $(tail -5 "$TMP/launch.log")"
a=$(field "$TMP/slurm.json" "d['test_accuracy']")
b=$(field "$TMP/launch.json" "d['test_accuracy']")
[ "$a" = "$b" ] || fail "the Slurm job's test accuracy $a is not the launcher's $b"
cp "$TMP/job.out" "$TMP/job.log" # for check_logs
check_logs
echo "ok: sbatch --ntasks=5 shardps.sbatch (job $ID): test_accuracy $a after 1 epoch (launcher: $b)"
