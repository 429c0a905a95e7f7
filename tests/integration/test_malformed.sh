#!/usr/bin/env bash
# A live server survives malformed messages (docs/design.md, "Wire"): a
# scheduler (1 server, 2 workers, sync), one real server, one real worker 0
# (initialises the parameters, then waits at the start barrier), and
# sps-malformed as worker 1. sps-malformed sends one bad message per case,
# checks each error reply and that the shard is bitwise unchanged; here we
# check the server is still running and logged one "rejected" line per
# distinct reason (a repeated reason is counted, not logged again), and that
# the 100,000 messages sps-malformed then sends each of the scheduler and the
# server from a stranger leave both logs under 100 lines. Run under the
# UBSan build, no log may hold a runtime error (INT64_MIN/MAX steps and
# versions are among the cases).
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
repeats=$(sed -n 's/^repeats=//p' "$TMP/malformed.log")
# the flood's two strangers add one line each: their first rejection
rejected=$(grep -c 'rejected' "$TMP/server.log")
[ -n "$cases" ] && [ "$rejected" -eq $((cases - repeats + 1)) ] ||
    fail "the server logged $rejected 'rejected' lines for ${cases:-?} cases, ${repeats:-?} of them repeats, and a flood: $(cat "$TMP/server.log")"
for log in server sched; do
    lines=$(wc -l <"$TMP/$log.log")
    [ "$lines" -lt 100 ] || fail "100,000 stranger messages wrote $lines lines to the $log log"
done

# A --compress topk job: sps-malformed sends the malformed sparse pushes
# (offsets out of range, unsorted, repeated; counts that do not match), each
# refused with its reason and the shard bitwise unchanged.
start_scheduler sched2 --servers 1 --workers 2 --model mlp --mode sync --max-steps 1 \
    --compress topk:0.01 --wait 120 --peer-timeout 30
start server2 "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' --peer-timeout 30
SERVER_PID=$LAST_PID
start worker0b "$WORKER" --scheduler "$SCHED_EP" --rank 0 --device cpu --threads 1 \
    --peer-timeout 30
"$MALFORMED" "$SCHED_EP" "$P" >"$TMP/malformed2.log" 2>&1 ||
    fail "sparse cases: sps-malformed exited $?: $(cat "$TMP/malformed2.log")"
cat "$TMP/malformed2.log"
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server died: $(tail -5 "$TMP/server2.log")"
sparse=$(sed -n 's/^cases=//p' "$TMP/malformed2.log")
[ "${sparse:-0}" -ge 8 ] || fail "only ${sparse:-0} sparse cases ran"
check_logs
echo "ok: $cases malformed messages rejected, server alive, parameters unchanged;" \
    "logs after a 100,000-message flood: $(wc -l <"$TMP/server.log") server lines," \
    "$(wc -l <"$TMP/sched.log") scheduler lines"
