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
check_logs
