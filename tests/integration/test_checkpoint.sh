#!/usr/bin/env bash
# tests/integration/test_checkpoint.sh - checkpoints and exact resume.
#
# A sync MLP job, 2 servers x 2 workers, checkpointing every 50 steps, is
# killed with SIGKILL (the launcher and, through their parent-death signal,
# every role) once checkpoint step-100 is complete, then resumed with
# --resume: its final parameters are bitwise those of an uninterrupted run,
# resumed on 2 servers and on 3 (the flat vector re-cut). A byte flipped in a
# part of the newest checkpoint, or a part cut short, makes the resume fall
# back to the previous checkpoint with a log line naming the server and the
# file it checked, and the result is still exact. Checkpoints every second (--checkpoint-every 1s, at
# steps agreed with the servers) are cuts as good: resuming the first one is
# exact too. Resumed with 3 workers instead of 2, the job starts at the step
# of the same data position (ceil(N*2/3) within the epoch) and ends normally.
# Under ssp:2 every multiple of 50 is checkpointed (a push may complete
# several steps; each one's cut is written), and a resume goes on from one.
. "$(dirname "$0")/lib.sh"

STEPS=240
job() { # name servers [flags...]
    local name=$1 servers=$2
    shift 2
    "$LAUNCH" --servers "$servers" --workers "${WORKERS:-2}" --batch 32 --max-steps $STEPS \
        --epochs 1 --lr-schedule cosine --optimizer sgd --momentum 0.9 \
        --checkpoint-every "${EVERY:-50}" \
        --dump-params "$TMP/$name.f32" --summary "$TMP/$name.json" --log-level info "$@" \
        >"$TMP/$name.log" 2>&1
}
resume() { # name servers dir
    job "$1" "$2" --resume "$3" || fail "$1: resumed run failed: $(tail -5 "$TMP/$1.log")"
    params_close "$TMP/full.f32" "$TMP/$1.f32" "${4:-0}" || fail "$1: differs from the uninterrupted run"
}

job full 2 --checkpoint-dir "$TMP/ck_full" || fail "uninterrupted run failed: $(tail -5 "$TMP/full.log")"
[ -s "$TMP/ck_full/step-200/manifest.json" ] || fail "no manifest for step 200: $(ls -R "$TMP/ck_full")"
[ "$(cat "$TMP/ck_full/latest")" = step-200 ] || fail "latest is not step-200"

# The killed run: slowed down (a straggler only sleeps; the parameters are
# the same) so the kill lands between checkpoints 100 and 150.
setsid "$LAUNCH" --servers 2 --workers 2 --batch 32 --max-steps $STEPS --epochs 1 \
    --lr-schedule cosine --optimizer sgd --momentum 0.9 --checkpoint-every 50 \
    --checkpoint-dir "$TMP/ck" --straggler 1:20 --log-level info >"$TMP/killed.log" 2>&1 &
KPID=$!
PIDS+=("$KPID")
wait_file "$TMP/ck/step-100/manifest.json" 60 || fail "no checkpoint step-100: $(tail -5 "$TMP/killed.log")"
kill -9 -- -"$KPID"
wait "$KPID" 2>/dev/null
for i in $(seq 50); do
    pgrep -f -- "$TMP/ck" >/dev/null || break
    sleep 0.1
done
! pgrep -f -- "$TMP/ck" >/dev/null || fail "processes left after kill -9: $(pgrep -af -- "$TMP/ck")"
[ ! -e "$TMP/ck/step-$STEPS" ] || fail "the job ended before the kill"
for d in flip trunc three workers; do
    cp -r "$TMP/ck" "$TMP/ck_$d"
done
# The checkpoint --resume follows: DIR/latest's (a newer step-N may be
# there: the kill can fall between writing it and moving latest).
NEWEST=$(head -1 "$TMP/ck/latest")

resume resumed 2 "$TMP/ck"
grep -q "resuming from $TMP/ck/$NEWEST" "$TMP/resumed.log" || fail "did not resume from $NEWEST"
resume three 3 "$TMP/ck_three" 1e-6

# A flipped byte in the newest checkpoint's second part: the previous one is used.
PART=$TMP/ck_flip/$NEWEST/server-1.safetensors
python3 - "$PART" <<'EOF'
import sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(-1000, 2)
    b = f.read(1)
    f.seek(-1000, 2)
    f.write(bytes([b[0] ^ 0x40]))
EOF
resume flip 2 "$TMP/ck_flip"
grep -q "skipping checkpoint $NEWEST: S1's $PART is .* bytes with CRC-32" "$TMP/flip.log" ||
    fail "no log line naming $PART: $(grep -i resum "$TMP/flip.log")"
grep -q "resuming from $TMP/ck_flip/step-" "$TMP/flip.log" || fail "flip: did not resume"

# A part cut short: likewise.
PART=$TMP/ck_trunc/$NEWEST/server-0.safetensors
truncate -s -4096 "$PART"
resume trunc 2 "$TMP/ck_trunc"
grep -q "skipping checkpoint $NEWEST: S0's $PART is .* bytes" "$TMP/trunc.log" ||
    fail "no log line naming $PART: $(grep -i resum "$TMP/trunc.log")"
# Every second: checkpoints at agreed steps, each a cut to resume exactly from.
EVERY=0.4s job timed 2 --checkpoint-dir "$TMP/ck_timed" --straggler 1:5 ||
    fail "timed run failed: $(tail -5 "$TMP/timed.log")"
params_close "$TMP/full.f32" "$TMP/timed.f32" 0 || fail "timed checkpoints changed the training"
TIMED=$(cd "$TMP/ck_timed" && ls -d step-*/manifest.json | sort -t- -k2 -n)
[ "$(echo "$TIMED" | wc -l)" -ge 2 ] || fail "fewer than 2 timed checkpoints: $TIMED"
FIRST=$(echo "$TIMED" | head -1)
FIRST=${FIRST%/manifest.json}
for d in "$TMP"/ck_timed/step-*; do
    [ "$(basename "$d")" = "$FIRST" ] || rm -rf "$d"
done
resume timed_resumed 2 "$TMP/ck_timed"
grep -q "resuming from $TMP/ck_timed/$FIRST" "$TMP/timed_resumed.log" ||
    fail "did not resume from the timed $FIRST"

# 3 workers resume the 2 workers' checkpoint at the same data position.
N=${NEWEST#step-}
WANT=$(( (N * 2 + 2) / 3 )) # ceil(N*2/3); 60000 samples: the epoch is not over
WORKERS=3 job three_workers 2 --resume "$TMP/ck_workers" ||
    fail "resume with 3 workers failed: $(tail -5 "$TMP/three_workers.log")"
grep -q "its step $N maps to step $WANT at the same data position" "$TMP/three_workers.log" ||
    fail "no mapping of step $N to $WANT: $(grep -i resum "$TMP/three_workers.log")"
expect "$TMP/three_workers.json" "d['status'] == 'ok' and d['workers'] == 3" "3-worker resume"
expect "$TMP/three_workers.json" "d['worker_steps'] == [$STEPS - $WANT] * 3" "steps from $WANT on"
expect "$TMP/three_workers.json" \
    "d['test_accuracy'] >= $(field "$TMP/full.json" "d['test_accuracy']") - 0.03" \
    "accuracy of the 3-worker resume"
# ssp: each step's cut, whatever the pushes that completed it.
job ssp 2 --mode ssp:2 --checkpoint-dir "$TMP/ck_ssp" || fail "ssp run failed: $(tail -5 "$TMP/ssp.log")"
for n in 50 100 150 200; do
    [ -s "$TMP/ck_ssp/step-$n/manifest.json" ] || fail "ssp: no checkpoint step-$n: $(ls "$TMP/ck_ssp")"
done
rm -rf "$TMP/ck_ssp/step-150" "$TMP/ck_ssp/step-200"
job ssp_resumed 2 --mode ssp:2 --resume "$TMP/ck_ssp" ||
    fail "ssp resume failed: $(tail -5 "$TMP/ssp_resumed.log")"
expect "$TMP/ssp_resumed.json" "d['status'] == 'ok' and d['worker_steps'] == [$STEPS - 100] * 2" \
    "ssp resumed from step 100"
expect "$TMP/ssp_resumed.json" "d['test_accuracy'] >= $(field "$TMP/ssp.json" "d['test_accuracy']") - 0.03" \
    "accuracy of the ssp resume"
check_logs
echo "ok: timed checkpoints $(echo "$TIMED" | sed 's|/manifest.json||' | tr '\n' ' '); 3 workers resumed $NEWEST at step $WANT, accuracy $(field "$TMP/three_workers.json" "d['test_accuracy']") (uninterrupted $(field "$TMP/full.json" "d['test_accuracy']"))"
