#!/usr/bin/env bash
# tests/integration/test_job_identity.sh - two jobs side by side on one
# machine never mix: a node of another job, or started for another job
# configuration, is refused at registration with one line naming both, and
# each job trains with its own nodes only.
#
# Jobs A (--job-id job-a) and B (--job-id job-b, another seed) wait for 1
# server and 1 worker each on 127.0.0.1. A worker of job B pointed at A's
# scheduler, and a server of job A with another configuration hash, are
# refused (exit 1, one line naming job-a and job-b, or both hashes); then each
# job's own nodes join and both jobs end ok. Asserts from the summaries: each
# job's nodes are exactly its own processes (by pid), A counts 2 refused
# registrations and B none, and the ids and hashes are the jobs'.
. "$(dirname "$0")/lib.sh"

JOB=(--servers 1 --workers 1 --max-steps 40 --batch 32)
start_scheduler a "${JOB[@]}" --job-id job-a --seed 1 --summary "$TMP/a.json"
EP_A=$SCHED_EP
PID_A=$SCHED_PID
start_scheduler b "${JOB[@]}" --job-id job-b --seed 2 --summary "$TMP/b.json"
EP_B=$SCHED_EP
PID_B=$SCHED_PID

# refused NAME REGEX CMD...: exits 1 within 30 s with one error line matching REGEX.
refused() {
    local name=$1 re=$2
    shift 2
    timeout 30 "$@" >"$TMP/$name.out" 2>&1
    local rc=$?
    [ $rc -eq 1 ] || fail "$name: exit status $rc, expected 1: $(tail -3 "$TMP/$name.out")"
    local errs
    errs=$(grep -c ' E ' "$TMP/$name.out")
    [ "$errs" -eq 1 ] || fail "$name: $errs error lines, expected 1: $(cat "$TMP/$name.out")"
    grep -Eq -- "$re" "$TMP/$name.out" || fail "$name: no line matching '$re': $(cat "$TMP/$name.out")"
    echo "ok - $name: $(grep ' E ' "$TMP/$name.out")"
}

refused "worker of job B at job A's scheduler" "job 'job-b'.*job 'job-a'" \
    "$WORKER" --scheduler "$EP_A" --job-id job-b
refused "server of job A with another configuration" "0000000000000000.*job-a.*[0-9a-f]{16}" \
    "$SERVER" --scheduler "$EP_A" --job-id job-a --job-hash 0000000000000000 \
    --bind 'tcp://127.0.0.1:*'

# Waiting is not silent: the scheduler names the missing nodes every 3 s, and a
# node waiting for an absent scheduler says so as often.
for i in $(seq 1 300); do # the first comes after 3 s
    grep -q "still waiting for S0 W0 (0/2 registered" "$TMP/a.log" && break
    sleep 0.1
done
grep -q "still waiting for S0 W0 (0/2 registered" "$TMP/a.log" ||
    fail "no 'still waiting' line from scheduler A: $(cat "$TMP/a.log")"
timeout 30 "$WORKER" --scheduler tcp://127.0.0.1:1 --connect-timeout 3.5 >"$TMP/absent.out" 2>&1
grep -q "still waiting for the scheduler at tcp://127.0.0.1:1 (3 s" "$TMP/absent.out" ||
    fail "a worker waiting for an absent scheduler is silent: $(cat "$TMP/absent.out")"
echo "ok - waiting is logged: $(grep -m1 'still waiting' "$TMP/a.log")"

start sa "$SERVER" --scheduler "$EP_A" --job-id job-a --bind 'tcp://127.0.0.1:*'
SA=$LAST_PID
start wa "$WORKER" --scheduler "$EP_A" --job-id job-a
WA=$LAST_PID
start sb "$SERVER" --scheduler "$EP_B" --job-id job-b --bind 'tcp://127.0.0.1:*'
SB=$LAST_PID
start wb "$WORKER" --scheduler "$EP_B" --job-id job-b
WB=$LAST_PID
for p in "$WA" "$WB" "$SA" "$SB" "$PID_A" "$PID_B"; do
    wait_pid "$p" 120 || fail "pid $p still running: $(tail -3 "$TMP"/*.log)"
    [ "$WAIT_RC" -eq 0 ] || fail "pid $p exited $WAIT_RC: $(tail -3 "$TMP"/*.log)"
done

expect "$TMP/a.json" "d['status'] == 'ok' and d['job_id'] == 'job-a'" "job A did not end ok"
expect "$TMP/b.json" "d['status'] == 'ok' and d['job_id'] == 'job-b'" "job B did not end ok"
expect "$TMP/a.json" "[n['pid'] for n in d['nodes']] == [$SA, $WA]" "job A's nodes are not its own"
expect "$TMP/b.json" "[n['pid'] for n in d['nodes']] == [$SB, $WB]" "job B's nodes are not its own"
expect "$TMP/a.json" "d['registrations_refused'] == 2" "job A did not count 2 refused nodes"
expect "$TMP/b.json" "d['registrations_refused'] == 0" "job B refused a node"
expect "$TMP/a.json" "len(d['job_hash']) == 16 and d['build'].endswith(' protocol 9')" \
    "no configuration hash or build in the summary"
# Same flags but the seed: the configuration hashes differ.
[ "$(field "$TMP/a.json" "d['job_hash']")" != "$(field "$TMP/b.json" "d['job_hash']")" ] ||
    fail "jobs with different seeds have the same configuration hash"
check_logs
echo "ok: two jobs side by side, each with its own nodes; 2 foreign nodes refused"
