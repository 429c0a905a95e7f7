#!/usr/bin/env bash
# A live server survives malformed messages (docs/design.md, "Wire"): a
# scheduler (1 server, 2 workers, sync), one real server, one real worker 0
# (initialises the parameters, then waits at the start barrier), and
# sps-malformed as worker 1. sps-malformed sends one bad message per case,
# checks each error reply and that the shard is bitwise unchanged; here we
# check the server is still running and logged one "rejected" line per case.
. "$(dirname "$0")/lib.sh"

MALFORMED=$SPS_BUILD/tests/integration/sps-malformed
P=235146 # the MLP 784-256-128-10

start_scheduler sched --servers 1 --workers 2 --model mlp --mode sync --max-steps 1 \
    --wait 120 --peer-timeout 30
start server "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' --peer-timeout 30
SERVER_PID=$LAST_PID
start worker0 "$WORKER" --scheduler "$SCHED_EP" --rank 0 --device cpu --threads 1 \
    --peer-timeout 30

"$MALFORMED" "$SCHED_EP" "$P" >"$TMP/malformed.log" 2>&1
rc=$?
cat "$TMP/malformed.log"
if [ $rc -ne 0 ]; then
    echo "--- server log"; cat "$TMP/server.log"
    echo "--- worker 0 log"; tail -5 "$TMP/worker0.log"
    echo "--- scheduler log"; tail -5 "$TMP/sched.log"
    fail "sps-malformed exited $rc"
fi
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server died: $(tail -5 "$TMP/server.log")"
cases=$(sed -n 's/^cases=//p' "$TMP/malformed.log")
rejected=$(grep -c 'rejected' "$TMP/server.log")
[ -n "$cases" ] && [ "$rejected" -eq "$cases" ] ||
    fail "the server logged $rejected 'rejected' lines for ${cases:-?} cases: $(cat "$TMP/server.log")"
echo "ok: $cases malformed messages rejected, server alive, parameters unchanged"
