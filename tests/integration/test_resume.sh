#!/usr/bin/env bash
# tests/integration/test_resume.sh - checkpoints on any storage, and a resume
# that loads what it checked or refuses.
#
# A sync 2x2 job checkpointing every 40 steps is the reference. The same job
# by hand, each server with its own --checkpoint-dir (node-local storage):
# the scheduler's directory holds manifests only, each server's its own
# part; resumed from step 80 with the same directories it ends bitwise equal
# to the reference. A part set to NaN behind a manifest that names an intact
# copy of it: the server loads the copy the manifest names (bitwise equal,
# not diverged). --resume with a mistyped directory, an empty one, or one
# whose every checkpoint the servers refuse exits 2 with one error line and
# creates nothing; --resume-or-start on a directory not there yet trains
# from scratch (bitwise the reference) and exits 0.
. "$(dirname "$0")/lib.sh"

JOB=(--servers 2 --workers 2 --batch 32 --max-steps 160 --epochs 1 --seed 3 --optimizer sgd
     --momentum 0.9 --checkpoint-every 40 --log-level info)
SJOB=("${JOB[@]:4}") # the job flags without the node counts, for by-hand runs

launch() { # name [flags...]: a launcher run; its status in RC
    local name=$1
    shift
    "$LAUNCH" "${JOB[@]}" --dump-params "$TMP/$name.f32" --summary "$TMP/$name.json" "$@" \
        >"$TMP/$name.log" 2>&1
    RC=$?
}

# by_hand name sched_dir s0_dir s1_dir [scheduler flags...]: the scheduler,
# each server with its own --checkpoint-dir, and the workers, by hand.
by_hand() {
    local name=$1 sdir=$2 d0=$3 d1=$4
    shift 4
    start_scheduler "$name.C" --servers 2 --workers 2 "${SJOB[@]}" --summary "$TMP/$name.json" "$@"
    local pids=("$SCHED_PID")
    start "$name.S0" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' --rank 0 \
        --checkpoint-dir "$d0"
    pids+=("$LAST_PID")
    start "$name.S1" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' --rank 1 \
        --checkpoint-dir "$d1"
    pids+=("$LAST_PID")
    for w in 0 1; do
        start "$name.W$w" "$WORKER" --scheduler "$SCHED_EP" --rank $w --dump-params "$TMP/$name.f32"
        pids+=("$LAST_PID")
    done
    for p in "${pids[@]}"; do
        wait_pid "$p" 120 || fail "$name: a process hangs: $(tail -3 "$TMP/$name.C.log")"
        [ "$WAIT_RC" = 0 ] || fail "$name: a process exited $WAIT_RC: $(grep -h ' E ' "$TMP/$name".*.log | head -3)"
    done
}

# Keeps only the checkpoints up to step 80 in each directory given.
upto_80() {
    for d in "$@"; do
        rm -rf "$d/step-120" "$d/step-160"
    done
}

launch ref --checkpoint-dir "$TMP/ref_ck"
[ "$RC" = 0 ] || fail "reference run failed: $(tail -5 "$TMP/ref.log")"

# Node-local: the scheduler keeps manifests, each server its own part.
by_hand local "$TMP/c" "$TMP/s0" "$TMP/s1" --checkpoint-dir "$TMP/c"
params_close "$TMP/ref.f32" "$TMP/local.f32" 0 || fail "node-local run differs from the reference"
[ -s "$TMP/c/step-80/manifest.json" ] || fail "no manifest in the scheduler's directory: $(ls -R "$TMP/c")"
[ -z "$(find "$TMP/c" -name '*.safetensors')" ] || fail "parts in the scheduler's directory"
[ "$(cd "$TMP/s0/step-80" && ls)" = server-0.safetensors ] || fail "S0's directory: $(ls -R "$TMP/s0")"
[ "$(cd "$TMP/s1/step-80" && ls)" = server-1.safetensors ] || fail "S1's directory: $(ls -R "$TMP/s1")"
upto_80 "$TMP/c" "$TMP/s0" "$TMP/s1"
by_hand local_resumed "$TMP/c" "$TMP/s0" "$TMP/s1" --resume "$TMP/c"
grep -q "resuming from $TMP/c/step-80 " "$TMP/local_resumed.C.log" ||
    fail "did not resume from step-80: $(grep -i resum "$TMP/local_resumed.C.log")"
grep -q "resumed at step 80 from 2 parts in $TMP/s1/step-80" "$TMP/local_resumed.S1.log" ||
    fail "S1 did not load from its own directory: $(grep -i resum "$TMP/local_resumed.S1.log")"
params_close "$TMP/ref.f32" "$TMP/local_resumed.f32" 0 ||
    fail "resumed from node-local directories: differs from the reference"

# One file both checked and loaded: S1's part set to NaN, the manifest
# naming an intact copy of it.
cp -r "$TMP/ref_ck" "$TMP/nan_ck"
upto_80 "$TMP/nan_ck"
PART=$TMP/nan_ck/step-80/server-1.safetensors
cp "$PART" "$TMP/nan_ck/step-80/server-1.copy.safetensors"
python3 - "$PART" "$TMP/nan_ck/step-80/manifest.json" <<'EOF'
import json, struct, sys
part, manifest = sys.argv[1], sys.argv[2]
with open(part, 'r+b') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    begin, end = json.loads(f.read(n))['params']['data_offsets']
    f.seek(8 + n + begin)
    f.write(struct.pack('<f', float('nan')) * ((end - begin) // 4))
m = json.load(open(manifest))
m['parts'][1]['file'] = 'server-1.copy.safetensors'
open(manifest, 'w').write(json.dumps(m))
EOF
launch nan --resume "$TMP/nan_ck"
[ "$RC" = 0 ] || fail "resume behind the NaN part failed: $(tail -5 "$TMP/nan.log")"
expect "$TMP/nan.json" "d['status'] == 'ok'" "resume behind the NaN part"
params_close "$TMP/ref.f32" "$TMP/nan.f32" 0 ||
    fail "resumed the NaN part instead of the file the manifest names"

# Nothing to resume: exit 2, one error line, no directory made.
launch typo --resume "$TMP/no_such_dir"
[ "$RC" = 2 ] || fail "mistyped --resume: exit $RC, not 2: $(tail -3 "$TMP/typo.log")"
[ ! -e "$TMP/no_such_dir" ] || fail "mistyped --resume created the directory"
[ "$(grep -c "error: --resume $TMP/no_such_dir: cannot open" "$TMP/typo.log")" = 1 ] ||
    fail "no one-line reason: $(cat "$TMP/typo.log")"
mkdir "$TMP/empty"
launch empty --resume "$TMP/empty"
[ "$RC" = 2 ] || fail "empty --resume: exit $RC, not 2: $(tail -3 "$TMP/empty.log")"
grep -q "error: --resume $TMP/empty: $TMP/empty holds no checkpoint" "$TMP/empty.log" ||
    fail "empty --resume: no reason: $(cat "$TMP/empty.log")"
[ -z "$(ls "$TMP/empty")" ] || fail "empty --resume wrote into the directory: $(ls "$TMP/empty")"
cp -r "$TMP/ref_ck" "$TMP/bad_ck"
for part in "$TMP"/bad_ck/step-*/server-0.safetensors; do
    truncate -s -100 "$part"
done
launch bad --resume "$TMP/bad_ck"
[ "$RC" = 2 ] || fail "every checkpoint refused: exit $RC, not 2: $(tail -3 "$TMP/bad.log")"
[ "$(grep -c "C E job aborted: resume: no checkpoint of $TMP/bad_ck is whole" "$TMP/bad.log")" = 1 ] ||
    fail "every checkpoint refused: no reason: $(grep -E ' [EW] ' "$TMP/bad.log")"
[ ! -e "$TMP/bad.f32" ] || fail "every checkpoint refused, yet the job trained"

# --resume-or-start: a directory not there yet is a fresh start.
launch fresh --resume-or-start "$TMP/fresh_ck"
[ "$RC" = 0 ] || fail "--resume-or-start failed: $(tail -5 "$TMP/fresh.log")"
params_close "$TMP/ref.f32" "$TMP/fresh.f32" 0 || fail "--resume-or-start did not train from scratch"
[ -s "$TMP/fresh_ck/step-160/manifest.json" ] || fail "--resume-or-start wrote no checkpoints"
check_logs
echo "ok: node-local checkpoints resumed bitwise; the manifest's file loaded; nothing to resume exits 2"
