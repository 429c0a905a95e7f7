#!/usr/bin/env bash
# tests/integration/test_status.sh - shardps-status names the worker a
# stalled step waits for.
#
# A sync job of 1 server and 2 workers where W1 is a straggler (--straggler
# 1:40: its compute takes 40 times as long): W0 pushes each step at once and
# waits, so the server's step waits for W1. shardps-status, asked while the
# job runs, shows every node (S0's keys, the workers' steps) and the line
# "step N waits for: W1 (on S0)". --watch prints view after view; a scheduler
# that does not answer is one error line and exit 1.
#
# --watch --json, started before a short job's nodes: one JSON object per
# line, the last the job's final view ("finished"), exit 0; for a job that
# diverges and fails, the final view "failed" and exit 3. A value from
# SHARDPS_STATUS_TIMEOUT that is out of range is named by that variable;
# SHARDPS_TIMEOUT (nobody's) changes nothing.
#
# Under shardps-launch: --watch on a job whose worker is killed -9 ends with
# the failed view, exit 3. A --secure job with the launcher's own keys: the
# launcher logs the shardps-status command with them; asked without them,
# shardps-status says at once that the job is --secure and names --keys.
. "$(dirname "$0")/lib.sh"
STATUS=$SPS_BUILD/deploy/shardps-status

"$STATUS" --scheduler tcp://127.0.0.1:1 --timeout 0.5 >"$TMP/none.out" 2>"$TMP/none.err"
rc=$?
[ "$rc" = 1 ] || fail "no scheduler: exit $rc, not 1"
[ "$(wc -l <"$TMP/none.err")" = 1 ] && grep -q "no answer from the scheduler" "$TMP/none.err" ||
    fail "no scheduler: $(cat "$TMP/none.err")"
"$STATUS" 2>/dev/null
[ $? = 2 ] || fail "no --scheduler is not bad usage"

start_scheduler sched --servers 1 --workers 2 --straggler 1:40 --max-steps 400 \
    --summary "$TMP/s.json"
start s0 "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*'
start w0 "$WORKER" --scheduler "$SCHED_EP" --rank 0
start w1 "$WORKER" --scheduler "$SCHED_EP" --rank 1
found=""
for i in $(seq 1 100); do
    "$STATUS" --scheduler "$SCHED_EP" >"$TMP/status.out" 2>&1 ||
        fail "shardps-status failed: $(cat "$TMP/status.out")"
    if grep -q "waits for: W1 (on S0)" "$TMP/status.out"; then
        found=1
        break
    fi
    sleep 0.2
done
[ -n "$found" ] || fail "status never named W1: $(cat "$TMP/status.out")"
grep -Eq "^S0 +running .*\[0, 235146\)" "$TMP/status.out" || fail "no S0 line with its keys"
grep -Eq "^W0 +running .*step [0-9]+" "$TMP/status.out" || fail "no W0 line with its step"
grep -Eq "^W1 +running .*step [0-9]+" "$TMP/status.out" || fail "no W1 line with its step"
grep -q "waits for: W0" "$TMP/status.out" && fail "W0 named as the straggler"
cat "$TMP/status.out"
timeout 3 "$STATUS" --scheduler "$SCHED_EP" --watch --interval 0.5 >"$TMP/watch.out" 2>&1
[ "$(grep -c '^job: ' "$TMP/watch.out")" -ge 2 ] || fail "--watch printed one view: $(cat "$TMP/watch.out")"
kill "$SCHED_PID" 2>/dev/null

SHARDPS_STATUS_TIMEOUT=0 "$STATUS" --scheduler tcp://127.0.0.1:1 >/dev/null 2>"$TMP/env.err"
rc=$?
[ "$rc" = 2 ] && grep -q "^shardps-status: error: SHARDPS_STATUS_TIMEOUT=0: out of range" "$TMP/env.err" ||
    fail "SHARDPS_STATUS_TIMEOUT=0: exit $rc: $(cat "$TMP/env.err")"
SHARDPS_TIMEOUT=0 "$STATUS" --scheduler tcp://127.0.0.1:1 --timeout 0.3 >/dev/null 2>"$TMP/env.err"
rc=$?
[ "$rc" = 1 ] && grep -q "no answer" "$TMP/env.err" ||
    fail "SHARDPS_TIMEOUT=0 is not shardps-status's: exit $rc: $(cat "$TMP/env.err")"

# watch_job NAME WANT_RC WANT_PHASE SCHEDULER_FLAGS...: a 1x1 job watched from
# before its nodes register until it ends.
watch_job() {
    local name=$1 want_rc=$2 want_phase=$3 rc
    shift 3
    start_scheduler "$name" --servers 1 --workers 1 --summary "$TMP/$name.json" "$@"
    start "$name.watch" "$STATUS" --scheduler "$SCHED_EP" --watch --json --interval 0.3
    local watch_pid=$LAST_PID
    # the watcher has asked once (its first line) before the job can end
    for i in $(seq 1 100); do
        [ -s "$TMP/$name.watch.log" ] && break
        sleep 0.1
    done
    start "$name.s0" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*'
    start "$name.w0" "$WORKER" --scheduler "$SCHED_EP" --rank 0
    wait_pid "$watch_pid" 120 || fail "$name: --watch still running after the job"
    rc=$WAIT_RC
    [ "$rc" = "$want_rc" ] || fail "$name: --watch exit $rc, not $want_rc: $(tail -3 "$TMP/$name.watch.log")"
    python3 - "$TMP/$name.watch.log" "$want_phase" <<'PY' || fail "$name: --watch --json output"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
views = [json.loads(l) for l in lines]  # every line one JSON object
assert len(views) >= 2, lines
last = views[-1]
assert last["phase"] == sys.argv[2], last["phase"]
assert [n["node"] for n in last["nodes"]] == ["S0", "W0"], last["nodes"]
assert last["nodes"][0]["key_end"] == 235146 and last["total_steps"] > 0
print("%d views, the last %s at step %d of %d" % (len(views), last["phase"], last["step"], last["total_steps"]))
PY
}
watch_job ok 0 finished --max-steps 30
# the worker's setting in the environment that every role gets: not an error to the others
export SHARDPS_ON_NONFINITE=fail
watch_job bad 3 failed --optimizer sgd --lr 5 --max-steps 200
unset SHARDPS_ON_NONFINITE

# launch NAME FLAGS...: a shardps-launch job in the background; sets
# LAUNCH_PID and SCHED_EP (from the launcher's "scheduler at" line).
launch() {
    local name=$1
    shift
    start "$name" "$LAUNCH" --servers 1 --epochs 50 "$@"
    LAUNCH_PID=$LAST_PID
    wait_line "$TMP/$name.log" " L I scheduler at tcp://" 30 ||
        fail "$name: no scheduler: $(tail -3 "$TMP/$name.log")"
    SCHED_EP=$(grep -om1 'scheduler at tcp://[0-9.:]*' "$TMP/$name.log" | cut -d' ' -f3)
}

# Under the launcher a worker killed -9 fails the job: --watch ends with the
# failed view, exit 3 (the scheduler, stopped by the launcher, sends it).
launch died --workers 2
start died.watch "$STATUS" --scheduler "$SCHED_EP" --watch --json --interval 0.3
watch_pid=$LAST_PID
wait_line "$TMP/died.watch.log" '"node":"W1","role":"worker","rank":1,"state":"running"' 60 ||
    fail "--watch never saw W1 running: $(tail -c 300 "$TMP/died.watch.log")"
w1=$(tail -1 "$TMP/died.watch.log" | python3 -c '
import json, sys
print([n["pid"] for n in json.loads(sys.stdin.read())["nodes"] if n["node"] == "W1"][0])')
kill -9 "$w1"
wait_pid "$watch_pid" 60 || fail "--watch still running after the job failed"
[ "$WAIT_RC" = 3 ] && tail -1 "$TMP/died.watch.log" | grep -q '^{"phase":"failed"' ||
    fail "a worker killed under the launcher: --watch exit $WAIT_RC: $(tail -c 200 "$TMP/died.watch.log")"
wait_pid "$LAUNCH_PID" 60 || fail "the launcher still runs after W1 died"

# A --secure job with the launcher's own keys: asked without them, one line
# at once (not after --timeout) naming --keys; with the keys the launcher
# logs, the view.
launch secure --workers 1 --secure
wait_line "$TMP/secure.log" " L I shardps-status --scheduler $SCHED_EP --keys [^ ]+ asks this --secure job" 10 ||
    fail "the launcher did not say where the job's keys are: $(grep ' L ' "$TMP/secure.log")"
keys=$(grep -om1 -- "--keys [^ ]*" "$TMP/secure.log" | cut -d' ' -f2)
"$STATUS" --scheduler "$SCHED_EP" --timeout 60 >/dev/null 2>"$TMP/nokeys.err"
rc=$?
[ "$rc" = 1 ] && [ "$(wc -l <"$TMP/nokeys.err")" = 1 ] &&
    grep -q "it is --secure: give the job's --keys DIR" "$TMP/nokeys.err" ||
    fail "asked without the keys: exit $rc: $(cat "$TMP/nokeys.err")"
"$STATUS" --scheduler "$SCHED_EP" --keys "$keys" >"$TMP/keys.out" 2>&1 ||
    fail "asked with the launcher's keys: $(cat "$TMP/keys.out")"
grep -q '^job: mlp sync' "$TMP/keys.out" || fail "no view with the keys: $(cat "$TMP/keys.out")"
kill "$LAUNCH_PID"
wait_pid "$LAUNCH_PID" 60 || fail "the launcher did not stop"
check_logs
