#!/usr/bin/env bash
# tests/integration/test_checkpoint.sh - checkpoints and exact resume.
#
# A sync MLP job, 2 servers x 2 workers, checkpointing every 50 steps, is
# killed with SIGKILL (the launcher and, through their parent-death signal,
# every role) once checkpoint step-100 is complete, then resumed with
# --resume: its final parameters are bitwise those of an uninterrupted run,
# resumed on 2 servers and on 3 (the flat vector re-cut). A byte flipped in a
# part of the newest checkpoint, or a part cut short, makes the resume fall
# back to the previous checkpoint with a log line naming the file, and the
# result is still exact.
. "$(dirname "$0")/lib.sh"

STEPS=240
job() { # name servers [flags...]
    local name=$1 servers=$2
    shift 2
    "$LAUNCH" --servers "$servers" --workers 2 --batch 32 --max-steps $STEPS --epochs 1 \
        --lr-schedule cosine --optimizer sgd --momentum 0.9 --checkpoint-every 50 \
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
sleep 0.1
kill -9 -- -"$KPID"
wait "$KPID" 2>/dev/null
for i in $(seq 50); do
    pgrep -f -- "$TMP/ck" >/dev/null || break
    sleep 0.1
done
! pgrep -f -- "$TMP/ck" >/dev/null || fail "processes left after kill -9: $(pgrep -af -- "$TMP/ck")"
[ ! -e "$TMP/ck/step-$STEPS" ] || fail "the job ended before the kill"
for d in flip trunc three; do
    cp -r "$TMP/ck" "$TMP/ck_$d"
done
# The newest checkpoint with a manifest (DIR/latest may lag it: the kill can
# fall between the two).
NEWEST=$(cd "$TMP/ck" && ls -d step-*/manifest.json | sort -t- -k2 -n | tail -1)
NEWEST=${NEWEST%/manifest.json}

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
grep -q "skipping checkpoint $NEWEST: $PART has CRC-32" "$TMP/flip.log" ||
    fail "no log line naming $PART: $(grep -i resum "$TMP/flip.log")"
grep -q "resuming from $TMP/ck_flip/step-" "$TMP/flip.log" || fail "flip: did not resume"

# A part cut short: likewise.
PART=$TMP/ck_trunc/$NEWEST/server-0.safetensors
truncate -s -4096 "$PART"
resume trunc 2 "$TMP/ck_trunc"
grep -q "skipping checkpoint $NEWEST: $PART is .* bytes" "$TMP/trunc.log" ||
    fail "no log line naming $PART: $(grep -i resum "$TMP/trunc.log")"
check_logs
echo "ok"
