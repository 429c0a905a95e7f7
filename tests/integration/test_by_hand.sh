#!/usr/bin/env bash
# tests/integration/test_by_hand.sh - the roles started one by one, as an
# operator (or Slurm, or a pod spec) would, train to exactly what the launcher
# trains to.
#
# A scheduler, 2 servers and 2 workers are started as separate processes on
# 127.0.0.1, the nodes first: they wait for the scheduler (past 10 s, with the
# default --connect-timeout) and join it when it comes (servers and workers
# without --rank: the scheduler assigns them),
# all given the job's secret through SHARDPS_SECRET_FILE (shardps-keygen
# --secret), then the same job runs through shardps-launch. Asserts: every hand-started
# process exits 0; both workers dump the same final parameters (sync mode);
# those are bitwise equal to the launcher's dump; the two summaries report the
# same step count, parameter count and test accuracy.
. "$(dirname "$0")/lib.sh"

JOB=(--max-steps 100 --epochs 1 --seed 7 --batch 32)

# The launcher run first: it is the reference.
"$LAUNCH" --servers 2 --workers 2 "${JOB[@]}" --summary "$TMP/launch.json" \
    --dump-params "$TMP/launch.f32" --log-level warn >"$TMP/launch.log" 2>&1 ||
    fail "launcher run failed: $(tail -5 "$TMP/launch.log")"

# By hand: servers and workers first, then the scheduler, each its own
# process, each reading the job's secret from the file SHARDPS_SECRET_FILE
# names. The nodes wait for the scheduler with the default --connect-timeout,
# past what once was its end (10 s), saying so.
"$SPS_BUILD/deploy/shardps-keygen" --secret "$TMP/job.secret" || fail "no secret"
export SHARDPS_SECRET_FILE=$TMP/job.secret
EP=tcp://127.0.0.1:$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
declare -A pid
for i in 0 1; do
    start "s$i" "$SERVER" --scheduler "$EP" --bind 'tcp://127.0.0.1:*'
    pid[s$i]=$LAST_PID
done
for i in 0 1; do
    start "w$i" "$WORKER" --scheduler "$EP" --dump-params "$TMP/hand_w$i.f32"
    pid[w$i]=$LAST_PID
done
wait_line "$TMP/w1.log" "I still waiting for the scheduler at $EP \(12 s of --connect-timeout 900;" 60 ||
    fail "W1 did not wait past 10 s for the scheduler: $(tail -2 "$TMP/w1.log")"
start_scheduler sched --bind "$EP" --servers 2 --workers 2 "${JOB[@]}" --summary "$TMP/hand.json"
pid[C]=$SCHED_PID

for name in w0 w1 s0 s1 C; do
    log=$TMP/$name.log
    [ "$name" = C ] && log=$TMP/sched.log
    wait_pid "${pid[$name]}" 120 || fail "$name still running after 120 s: $(tail -5 "$log")"
    [ "$WAIT_RC" -eq 0 ] || fail "$name exited with status $WAIT_RC: $(tail -5 "$log")"
done

# Both servers and both workers registered, with distinct ranks.
expect "$TMP/hand.json" "[n['node'] for n in d['nodes']] == ['S0', 'S1', 'W0', 'W1']" \
    "the scheduler did not register S0, S1, W0 and W1"

[ -s "$TMP/launch.f32" ] || fail "the launcher run dumped no parameters"
for i in 0 1; do
    [ -s "$TMP/hand_w$i.f32" ] || fail "worker $i dumped no parameters"
    params_close "$TMP/hand_w$i.f32" "$TMP/launch.f32" 0 ||
        fail "worker $i's parameters differ from the launcher run's"
done

for key in test_accuracy steps num_params; do
    a=$(field "$TMP/hand.json" "d['$key']")
    b=$(field "$TMP/launch.json" "d['$key']")
    [ -n "$a" ] || fail "no $key in the hand-run summary: $(cat "$TMP/hand.json")"
    [ "$a" = "$b" ] || fail "$key differs: by hand $a, launcher $b"
done
[ "$(field "$TMP/hand.json" "d['steps']")" = 100 ] || fail "expected 100 steps: $(cat "$TMP/hand.json")"
grep -q "no job secret" "$TMP/sched.log" && fail "the scheduler did not read SHARDPS_SECRET_FILE"
check_logs
echo "ok: test_accuracy $(field "$TMP/hand.json" "d['test_accuracy']"), parameters bitwise equal"
