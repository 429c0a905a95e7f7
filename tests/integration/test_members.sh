#!/usr/bin/env bash
# tests/integration/test_members.sh - a worker leaves and the job goes on.
#
# shardps-launch, 2 servers x 2 workers, sync MLP for 3 epochs, --min-workers 1:
# W1 is killed with SIGKILL mid-epoch. The scheduler leaves it out after
# --peer-timeout, the servers complete steps with W0 alone, and the job
# finishes every epoch: the launcher exits 0, the summary says ok, test
# accuracy >= 0.86, one membership change and some steps with fewer workers.
# Without --min-workers the same kill fails the job (test_peer_loss.sh).
. "$(dirname "$0")/lib.sh"

# K outside [0, workers], or below the workers of a ring, is bad usage.
"$SCHED" --workers 2 --min-workers 3 2>/dev/null
[ $? = 2 ] || fail "--min-workers 3 of 2 workers accepted"
"$SCHED" --servers 0 --mode allreduce --workers 2 --min-workers 1 2>/dev/null
[ $? = 2 ] || fail "--min-workers 1 accepted with allreduce"

export SHARDPS_PROGRESS=0.2 # worker 0 reports progress early (via the launcher)
start job "$LAUNCH" --servers 2 --workers 2 --min-workers 1 --peer-timeout 1.5 \
    --epochs 3 --seed 3 --summary "$TMP/m.json"
LPID=$LAST_PID

# W1: the launcher's child shardps-worker with --rank 1.
w1=""
for i in $(seq 1 600); do
    grep -Eq "step=[0-9]+/" "$TMP/job.log" && break
    sleep 0.1
done
for p in $(pgrep -P "$LPID"); do
    cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
    case "$cmd" in *shardps-worker*"--rank 1"*) w1=$p ;; esac
done
[ -n "$w1" ] || fail "no W1 under the launcher: $(tail -5 "$TMP/job.log")"
sleep 1
kill -9 "$w1"

wait_pid "$LPID" 280 || fail "the job did not end: $(tail -5 "$TMP/job.log")"
[ "$WAIT_RC" = 0 ] || fail "launcher exited $WAIT_RC: $(tail -8 "$TMP/job.log")"
grep -q "membership: lost W1" "$TMP/job.log" || fail "no membership line for W1"
expect "$TMP/m.json" "d['status'] == 'ok'" "job not finished"
expect "$TMP/m.json" "d['membership_changes'] == 1" "one membership change"
expect "$TMP/m.json" "0 < d['steps_with_fewer_workers'] < d['steps']" "steps with fewer workers"
expect "$TMP/m.json" "d['test_accuracy'] >= 0.86" "accuracy after 3 epochs"
echo "accuracy $(field "$TMP/m.json" "d['test_accuracy']"), steps $(field "$TMP/m.json" "d['steps']"), with 1 worker $(field "$TMP/m.json" "d['steps_with_fewer_workers']")"
check_logs
