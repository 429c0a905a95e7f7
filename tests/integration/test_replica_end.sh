#!/usr/bin/env bash
# tests/integration/test_replica_end.sh - a replica takes its rank over
# after the last step too (--replicas 1).
#
# A sync MLP job, 3 servers (each with a replica) x 2 workers, no
# checkpoints. Worker 0 writes its --dump-params into a named pipe, so it
# waits there after its last step and evaluation, before it says it is
# done. S1 is then stopped (SIGSTOP) and the pipe read: every worker is
# done, the scheduler asks for the servers' reports, S1 never answers and
# is declared lost once training is over. Its replica, which holds every
# update, takes the rank over and reports in its place: the job ends ok,
# exit 0, with a takeover and nothing rolled back in its summary, and both
# workers' parameters cmp-identical to an undisturbed run's. Then S1 is
# stopped the same way but the pipe read only after the takeover, which so
# comes while the job still runs: worker 1 sends its DONE again, and the
# job ends the same. The stopped server is killed once the summary is out;
# nothing is left running.
. "$(dirname "$0")/lib.sh"

fault_job full --servers 3 || fail "undisturbed run failed: $(tail -5 "$TMP/full.log")"

mkfifo "$TMP/end0.f32"
# 8 s for S1's loss: worker 0, released from the pipe, says it is done
# well before, however loaded the machine
fault_job end --servers 3 --replicas 1 --progress 0.1 --dump-params "$TMP/end%d.f32" \
    --peer-timeout 8 &
JOB_PID=$!
PIDS+=("$JOB_PID")
wait_line "$TMP/end.log" "S[0-9] is in step with S1" 60 || fail "S1 has no replica in step"
# worker 0 evaluated after its last step and waits at the pipe; worker 1 is done
wait_line "$TMP/end.log" "W0 I epoch=1 test_accuracy=" 60 || fail "no final evaluation"
wait_line "$TMP/end.log" "W1 done: 300 steps" 60 || fail "worker 1 did not finish"
S1=$(pid_of "$TMP/end.log" S1)
kill -STOP "$S1"
cat "$TMP/end0.f32" >"$TMP/w0.f32"
# the job is over once its summary is out: the stopped server goes then
wait_line "$TMP/end.log" "C I summary: " 60 || fail "no summary: $(tail -5 "$TMP/end.log")"
kill -9 "$S1"
wait_pid "$JOB_PID" 120 || fail "the job hangs: $(tail -5 "$TMP/end.log")"
[ "$WAIT_RC" = 0 ] || fail "exit $WAIT_RC: $(grep -E ' [EW] ' "$TMP/end.log" | tail -5)"
grep -Eq "lost S1 .* its replica S[0-9]+ \(pid [0-9]+\) takes the rank over" "$TMP/end.log" ||
    fail "no takeover: $(grep -E 'failover|S1' "$TMP/end.log" | tail -5)"
grep -q "every server knows S1's new primary; training is over" "$TMP/end.log" ||
    fail "the takeover was not after training: $(grep failover "$TMP/end.log")"
expect "$TMP/end.json" "d['status'] == 'ok' and d['replicas']['takeovers'] == 1 and \
    d['replicas']['steps_rolled_back'] == 0" "ok after a takeover once training was over"
expect "$TMP/end.json" "len(d['server_reports']) == 3" "a report from every rank"
cmp -s "$TMP/full.f32" "$TMP/w0.f32" || fail "worker 0's parameters differ"
cmp -s "$TMP/full.f32" "$TMP/end1.f32" || fail "worker 1's parameters differ"
no_leftovers "$TMP/end.log"

# The same, but the pipe is read only once the replica took over: S1 is
# lost while worker 0 still writes its outputs (the job still runs), so
# worker 1, done already, sends its DONE again, and worker 0 then its own.
rm -f "$TMP"/end*.f32
mkfifo "$TMP/end0.f32"
fault_job run --servers 3 --replicas 1 --progress 0.1 --dump-params "$TMP/end%d.f32" &
JOB_PID=$!
PIDS+=("$JOB_PID")
wait_line "$TMP/run.log" "S[0-9] is in step with S1" 60 || fail "S1 has no replica in step"
wait_line "$TMP/run.log" "W0 I epoch=1 test_accuracy=" 60 || fail "no final evaluation"
wait_line "$TMP/run.log" "W1 done: 300 steps" 60 || fail "worker 1 did not finish"
S1=$(pid_of "$TMP/run.log" S1)
kill -STOP "$S1"
wait_line "$TMP/run.log" "every server forgot the step under way" 60 ||
    fail "no takeover while the job runs: $(grep -E 'failover|S1' "$TMP/run.log" | tail -5)"
cat "$TMP/end0.f32" >"$TMP/w0.f32"
wait_line "$TMP/run.log" "C I summary: " 60 || fail "no summary: $(tail -5 "$TMP/run.log")"
kill -9 "$S1"
wait_pid "$JOB_PID" 120 || fail "the job hangs: $(tail -5 "$TMP/run.log")"
[ "$WAIT_RC" = 0 ] || fail "exit $WAIT_RC: $(grep -E ' [EW] ' "$TMP/run.log" | tail -5)"
expect "$TMP/run.json" "d['status'] == 'ok' and d['replicas']['takeovers'] == 1 and \
    d['replicas']['steps_rolled_back'] == 0" "ok after a takeover while outputs were written"
cmp -s "$TMP/full.f32" "$TMP/w0.f32" || fail "worker 0's parameters differ (run)"
cmp -s "$TMP/full.f32" "$TMP/end1.f32" || fail "worker 1's parameters differ (run)"
no_leftovers "$TMP/run.log"
check_logs
echo "ok"
