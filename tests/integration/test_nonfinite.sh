#!/usr/bin/env bash
# A job never reports success with a broken model:
# 1. --lr 1e39 (would overflow a float32) is refused at start, naming the range;
# 2. a job made to diverge (SGD at lr 5, valid but far too large) exits
#    non-zero with "status": "diverged" in its summary, under --on-nonfinite
#    fail (the default) and skip alike;
# 3. a NaN push by worker 1 (its own token) for step 0 of a live sync job,
#    sent before its real push (--fault-nan-push 0), is refused and the job
#    ends bitwise equal to an undisturbed run: a refused push never counts
#    toward its step.
# 4. five finite pushes of 3e38 by the worker (its own token) at the last step
#    of an async job (--fault-huge-push 9 of 10): the first applies, the
#    updates of the others would overflow the parameters, are left undone and
#    counted; every parameter stays finite and the job ends ok. One worker:
#    a second one could still be computing on the huge parameters the first
#    push left, whatever the order the two run in.
. "$(dirname "$0")/lib.sh"

MALFORMED=$SPS_BUILD/tests/integration/sps-malformed

# 1
"$SCHED" --lr 1e39 >"$TMP/lr.log" 2>&1 && fail "--lr 1e39 was accepted"
grep -q -- '--lr 1e+39: out of range (0, 10]' "$TMP/lr.log" ||
    fail "--lr 1e39: expected the range in the message: $(cat "$TMP/lr.log")"
SHARDPS_LR=1e-300 "$SCHED" >"$TMP/lr.log" 2>&1 && fail "SHARDPS_LR=1e-300 was accepted"
grep -q 'out of range (0, 10\] (too small for a float32)' "$TMP/lr.log" ||
    fail "SHARDPS_LR=1e-300: $(cat "$TMP/lr.log")"

# 2
for how in fail skip; do
    "$LAUNCH" --servers 1 --workers 2 --optimizer sgd --lr 5 --max-steps 100 \
        --on-nonfinite "$how" --summary "$TMP/div_$how.json" >"$TMP/div_$how.log" 2>&1 &&
        fail "a job at lr 5 (--on-nonfinite $how) exited 0: $(tail -5 "$TMP/div_$how.log")"
    expect "$TMP/div_$how.json" "d['status'] == 'diverged'" "lr 5, --on-nonfinite $how"
    grep -q 'training diverged' "$TMP/div_$how.log" ||
        fail "no 'training diverged' line: $(tail -5 "$TMP/div_$how.log")"
done

# 3
run() {
    local name=$1 fault=()
    start_scheduler "sched_$name" --servers 1 --workers 2 --mode sync --max-steps 5 \
        --summary "$TMP/$name.json"
    local sched=$SCHED_PID
    start "server_$name" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*'
    for r in 0 1; do
        [ "$name" = attacked ] && [ $r = 1 ] && fault=(--fault-nan-push 0)
        start "w${r}_$name" "$WORKER" --scheduler "$SCHED_EP" --rank $r --device cpu \
            --threads 1 --dump-params "$TMP/$name.f32" "${fault[@]}"
    done
    wait_pid "$sched" 120 || fail "$name: the job did not end"
    [ "$WAIT_RC" -eq 0 ] || fail "$name: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_$name.log")"
    expect "$TMP/$name.json" "d['status'] == 'ok'" "$name"
}
run quiet
run attacked
expect "$TMP/attacked.json" "d['pushes_nonfinite'] == 1 and d['messages_rejected'] >= 1" \
    "the NaN push counted once"
grep -q 'the NaN push for step 0 was refused' "$TMP/w1_attacked.log" ||
    fail "worker 1 did not log its NaN push refused: $(tail -3 "$TMP/w1_attacked.log")"
params_close "$TMP/quiet.f32" "$TMP/attacked.f32" 0 ||
    fail "the job with a refused NaN push differs from the undisturbed one"

# 4
start_scheduler sched_huge --servers 1 --workers 1 --mode async --max-steps 10 \
    --summary "$TMP/huge.json"
sched=$SCHED_PID
start server_huge "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*'
start w0_huge "$WORKER" --scheduler "$SCHED_EP" --rank 0 --device cpu --threads 1 \
    --dump-params "$TMP/huge.f32" --fault-huge-push 9
wait_pid "$sched" 120 || fail "huge: the job did not end"
[ "$WAIT_RC" -eq 0 ] || fail "huge: the scheduler exited $WAIT_RC: $(grep -E ' [EW] ' "$TMP/sched_huge.log" | tail -5)"
expect "$TMP/huge.json" "d['status'] == 'ok' and d['pushes_nonfinite'] >= 1" "the overflowing updates undone"
grep -q "would make parameters NaN or infinite" "$TMP/server_huge.log" ||
    fail "the server did not log an undone update: $(tail -3 "$TMP/server_huge.log")"
python3 -c "import array,math,sys; a=array.array('f'); a.frombytes(open(sys.argv[1],'rb').read()); sys.exit(not all(math.isfinite(x) for x in a))" "$TMP/huge.f32" ||
    fail "a parameter is not finite after the huge pushes"
check_logs
echo "ok: --lr 1e39 refused; lr 5 diverged (fail, skip); a NaN push refused, job bitwise unchanged; overflowing updates undone ($(field "$TMP/huge.json" "d['pushes_nonfinite']")), job ok"
