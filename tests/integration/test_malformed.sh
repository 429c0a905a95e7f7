#!/usr/bin/env bash
# A live server survives malformed messages (docs/design/wire.md): a
# scheduler (1 server, 2 workers, sync), one real server, one real worker 0
# (initialises the parameters, then waits at the start barrier), and
# sps-malformed as worker 1. sps-malformed sends one bad message per case,
# checks each error reply and that the shard is bitwise unchanged; here we
# check the server is still running and logged one "rejected" line per
# distinct reason (a repeated reason is counted, not logged again), and that
# the 100,000 messages sps-malformed then sends each of the scheduler and the
# server from a stranger leave both logs under 100 lines. Run under the
# UBSan build, no log may hold a runtime error (INT64_MIN/MAX steps and
# versions are among the cases). Last, the rows messages of a job with
# embedding rows (--model ctr) against its server 0, and the job still ends
# bitwise as without them (below).
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

# A job with embedding rows (--model ctr; 2 servers, so server 0 holds half
# the hashed keys; 2 workers, sync, 3 steps): sps-malformed --rows, as
# worker 1, sends server 0 the malformed rows messages, each refused with
# its reason and its shard and rows bitwise unchanged, then plays worker 1
# (zero gradients) to the end. The job ends ok, worker 0's parameters
# bitwise those of the same job without the malformed messages, with one
# "rejected" line per case in server 0's log and each case counted (and the
# tokens that were not ours as forged).
PC=143105 # the ctr model: 26 x 16 embeddings + 13 -> 256 -> 128 -> 1
"$SPS_BUILD/deploy/shardps-datagen" ctr --rows 4000 --seed 5 --out "$TMP/clicks.txt" \
    >"$TMP/datagen.log" 2>&1 || fail "shardps-datagen: $(cat "$TMP/datagen.log")"
rows_job() { # NAME CASES
    local name=$1 sched rc
    start_scheduler "sched_$name" --servers 2 --workers 2 --model ctr --mode sync \
        --max-steps 3 --batch 64 --optimizer adagrad --summary "$TMP/$name.json" --wait 120 \
        --peer-timeout 30
    sched=$SCHED_PID
    for r in 0 1; do
        start "s${r}_$name" "$SERVER" --scheduler "$SCHED_EP" --rank $r \
            --bind 'tcp://127.0.0.1:*' --peer-timeout 30
    done
    start "w0_$name" "$WORKER" --scheduler "$SCHED_EP" --rank 0 --device cpu --threads 1 \
        --ctr-data "$TMP/clicks.txt" --dump-params "$TMP/$name.f32" --peer-timeout 30
    "$MALFORMED" --rows "$SCHED_EP" "$PC" "$2" >"$TMP/$name.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "--- server 0 log"; cat "$TMP/s0_$name.log"
        echo "--- worker 0 log"; tail -5 "$TMP/w0_$name.log"
        fail "$name: sps-malformed --rows exited $rc: $(cat "$TMP/$name.log")"
    fi
    wait_pid "$sched" 60 || fail "$name: the job did not end: $(tail -5 "$TMP/sched_$name.log")"
    [ "$WAIT_RC" = 0 ] || fail "$name: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_$name.log")"
    expect "$TMP/$name.json" "d['status'] == 'ok' and d['steps'] == 3" "$name: the job"
}
rows_job rows_quiet 0
rows_job rows 1
cat "$TMP/rows.log"
cmp -s "$TMP/rows_quiet.f32" "$TMP/rows.f32" ||
    fail "the ctr job under malformed rows messages differs from the undisturbed one"
rcases=$(sed -n 's/^cases=//p' "$TMP/rows.log")
rrepeats=$(sed -n 's/^repeats=//p' "$TMP/rows.log")
rejected=$(grep -c ' S0 W rejected ' "$TMP/s0_rows.log") # not its closing summary
[ "${rcases:-0}" -ge 20 ] && [ "$rejected" -eq $((rcases - rrepeats)) ] ||
    fail "server 0 logged $rejected 'rejected' lines for ${rcases:-?} rows cases, ${rrepeats:-?} of them repeats: $(cat "$TMP/s0_rows.log")"
expect "$TMP/rows.json" "d['server_reports'][0]['rejected'] == $rcases and \
    d['server_reports'][1]['rejected'] == 0 and d['servers_refused_forged'] == 2" \
    "rows cases: not each counted once by server 0 (2 of them forged)"
expect "$TMP/rows_quiet.json" "d['messages_rejected'] == 0" "the undisturbed ctr job"
check_logs
echo "ok: $cases malformed messages rejected, server alive, parameters unchanged;" \
    "logs after a 100,000-message flood: $(wc -l <"$TMP/server.log") server lines," \
    "$(wc -l <"$TMP/sched.log") scheduler lines; rows: $rcases" \
    "cases refused, the ctr job bitwise as undisturbed"
