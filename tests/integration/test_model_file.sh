#!/usr/bin/env bash
# tests/integration/test_model_file.sh - the trained model as a file: a sync
# MLP job (2 servers x 2 workers) saves model.safetensors beside its summary;
# shardps-worker --evaluate on it gives the accuracy the job reported;
# --init-from it starts a job from those values (an lr too small to move a
# weight keeps the accuracy exactly); a mismatched, corrupt or truncated file
# and an unwritable --save-model path fail fast with one line; PyTorch loads
# the file into the reference MLP and CNN with the same accuracy (skipped
# with the reason when torch is absent); the CNN through --evaluate; an MLP
# of --hidden widths trains, saves fc1..fcN and loads the same ways.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${SHARDPS_DATA:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/t10k-images-idx3-ubyte.gz" ] || skip "no Fashion-MNIST in $DATA"

# close A B: |A - B| <= 0.001
close() {
    python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 0.001)" "$1" "$2"
}
# one_line FILE: FILE holds exactly one line
one_line() {
    [ "$(wc -l <"$1")" -eq 1 ] || fail "expected one error line, got: $(cat "$1")"
}
# fast CMD...: runs CMD, which must fail (exit != 0) with one line on stderr,
# before it would train or wait for anything (a hang is caught by a bound far
# above any load's); the output goes to $TMP/fast.log
fast() {
    local rc=0
    timeout 120 "$@" >"$TMP/fast.out" 2>"$TMP/fast.log" || rc=$?
    [ "$rc" -ne 0 ] || fail "$* succeeded"
    [ "$rc" -ne 124 ] || fail "$* hung"
    one_line "$TMP/fast.log"
}

# 1. train, save beside the summary
"$LAUNCH" --servers 2 --workers 2 --model mlp --max-steps 80 --summary "$TMP/mlp.json" \
    >"$TMP/train.log" 2>&1 || fail "MLP job failed: $(tail -5 "$TMP/train.log")"
[ -s "$TMP/model.safetensors" ] || fail "no model.safetensors beside the summary"
ls "$TMP" | grep -q '\.tmp\.' && fail "a temp file was left: $(ls "$TMP")"
acc=$(field "$TMP/mlp.json" "d['test_accuracy']")

# 2. --evaluate gives the job's accuracy
"$WORKER" --evaluate "$TMP/model.safetensors" --data "$DATA" --summary "$TMP/eval.json" \
    >"$TMP/eval.out" 2>"$TMP/eval.log" || fail "--evaluate failed: $(cat "$TMP/eval.log")"
one_line "$TMP/eval.out"
grep -q "^model=mlp test_accuracy=" "$TMP/eval.out" || fail "eval line: $(cat "$TMP/eval.out")"
eacc=$(field "$TMP/eval.json" "d['test_accuracy']")
close "$eacc" "$acc" || fail "--evaluate says $eacc, the job said $acc"
echo "mlp: job test_accuracy=$acc, --evaluate $eacc"

# 3. --init-from: one step with lr 1e-30 moves no weight, so the accuracy stays
"$LAUNCH" --servers 2 --workers 2 --model mlp --max-steps 1 --lr 1e-30 \
    --init-from "$TMP/model.safetensors" --save-model "$TMP/again.safetensors" \
    --summary "$TMP/again.json" >"$TMP/again.log" 2>&1 ||
    fail "--init-from job failed: $(tail -5 "$TMP/again.log")"
iacc=$(field "$TMP/again.json" "d['test_accuracy']")
close "$iacc" "$acc" || fail "started from the model, the job says $iacc, not $acc"
"$WORKER" --evaluate "$TMP/again.safetensors" --data "$DATA" --summary "$TMP/again_eval.json" \
    >/dev/null 2>&1 || fail "--evaluate of the resumed model failed"
close "$(field "$TMP/again_eval.json" "d['test_accuracy']")" "$acc" || fail "resumed model evaluates differently"
mkdir "$TMP/fresh" # its model.safetensors goes there, beside its summary
"$LAUNCH" --servers 1 --workers 1 --model mlp --max-steps 1 --lr 1e-30 \
    --summary "$TMP/fresh/s.json" >"$TMP/fresh.log" 2>&1 || fail "fresh job failed"
[ -s "$TMP/fresh/model.safetensors" ] || fail "no model beside the fresh job's summary"
facc=$(field "$TMP/fresh/s.json" "d['test_accuracy']")
close "$facc" "$acc" && fail "a fresh start gets $facc too: --init-from had no effect?"
echo "init-from: $iacc (fresh start: $facc)"

# 4. failures: one line, non-zero exit, fast
fast "$LAUNCH" --workers 1 --max-steps 1 --save-model "$TMP/no/such/dir/m.safetensors"
grep -q "no/such/dir" "$TMP/fast.log" || fail "the error does not name the path: $(cat "$TMP/fast.log")"
fast "$WORKER" --save-model "$TMP/no/such/dir/m.safetensors" --data "$DATA"
fast "$WORKER" --evaluate "$TMP/missing.safetensors" --data "$DATA"
cp "$TMP/model.safetensors" "$TMP/flip.safetensors"
printf '\x00' | dd of="$TMP/flip.safetensors" bs=1 seek=20 conv=notrunc status=none
fast "$WORKER" --evaluate "$TMP/flip.safetensors" --data "$DATA"
grep -q "flip.safetensors" "$TMP/fast.log" || fail "no file named: $(cat "$TMP/fast.log")"
head -c 500000 "$TMP/model.safetensors" >"$TMP/cut.safetensors"
fast "$WORKER" --evaluate "$TMP/cut.safetensors" --data "$DATA"
grep -q "cut.safetensors" "$TMP/fast.log" || fail "no file named: $(cat "$TMP/fast.log")"
fast "$LAUNCH" --workers 1 --max-steps 1 --init-from "$TMP/cut.safetensors"
# an MLP file for a CNN job: the worker's one line names the missing tensor
"$LAUNCH" --workers 1 --model cnn --max-steps 1 --init-from "$TMP/model.safetensors" \
    >"$TMP/mismatch.log" 2>&1 && fail "a CNN job started from an MLP file"
grep -q "W0 E --init-from .*conv1.weight" "$TMP/mismatch.log" ||
    fail "no mismatch line: $(cat "$TMP/mismatch.log")"
echo "failures: one line each, as expected"

# 5. the CNN: a few steps, saved, evaluated
mkdir "$TMP/cnn"
"$LAUNCH" --workers 2 --model cnn --max-steps 4 --batch 32 --summary "$TMP/cnn/s.json" \
    >"$TMP/cnn.log" 2>&1 || fail "CNN job failed: $(tail -5 "$TMP/cnn.log")"
cacc=$(field "$TMP/cnn/s.json" "d['test_accuracy']")
"$WORKER" --evaluate "$TMP/cnn/model.safetensors" --data "$DATA" --summary "$TMP/cnn/e.json" \
    >/dev/null 2>"$TMP/cnn_eval.log" || fail "CNN --evaluate failed: $(cat "$TMP/cnn_eval.log")"
ceacc=$(field "$TMP/cnn/e.json" "d['test_accuracy']")
close "$ceacc" "$cacc" || fail "CNN: --evaluate says $ceacc, the job said $cacc"
echo "cnn: job test_accuracy=$cacc, --evaluate $ceacc"

# 6. --hidden 64,32: a 2x2 job trains the MLP 784-64-32-10; its file holds
# fc1..fc3 of those shapes, --evaluate finds the widths in the file; bad
# widths fail, saying why
mkdir "$TMP/hid"
"$LAUNCH" --servers 2 --workers 2 --hidden 64,32 --max-steps 60 --summary "$TMP/hid/s.json" \
    >"$TMP/hid.log" 2>&1 || fail "--hidden 64,32 job failed: $(tail -5 "$TMP/hid.log")"
hacc=$(field "$TMP/hid/s.json" "d['test_accuracy']")
python3 -c "import sys; sys.exit(not float(sys.argv[1]) > 0.5)" "$hacc" ||
    fail "--hidden 64,32: test accuracy $hacc after 60 steps"
"$WORKER" --evaluate "$TMP/hid/model.safetensors" --data "$DATA" --summary "$TMP/hid/e.json" \
    >/dev/null 2>"$TMP/hid_eval.log" || fail "--hidden --evaluate failed: $(cat "$TMP/hid_eval.log")"
close "$(field "$TMP/hid/e.json" "d['test_accuracy']")" "$hacc" || fail "--hidden: --evaluate differs"
"$LAUNCH" --workers 1 --max-steps 1 --hidden 64,,32 >"$TMP/hid_bad.log" 2>&1 &&
    fail "a job with --hidden 64,,32 started"
grep -q -- "error: --hidden 64,,32: expected" "$TMP/hid_bad.log" || fail "bad --hidden: $(cat "$TMP/hid_bad.log")"
"$LAUNCH" --workers 1 --max-steps 1 --model cnn --hidden 64 >"$TMP/hid_bad.log" 2>&1 &&
    fail "a CNN job with --hidden started"
grep -q -- "error: --hidden is for the mlp" "$TMP/hid_bad.log" || fail "cnn --hidden: $(cat "$TMP/hid_bad.log")"
echo "hidden 64,32: job test_accuracy=$hacc"

# 7. read without shardps: the format by hand, then PyTorch when present
# (Debian's python3-torch lives in /usr/bin/python3, whatever python3 is first
# on PATH; the bench's --torch uses the same interpreter)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" "$HERE/torch_load.py" "$TMP/model.safetensors" mlp "$DATA" "$acc" ||
    fail "the MLP file does not load outside shardps"
"$PY" "$HERE/torch_load.py" "$TMP/cnn/model.safetensors" cnn "$DATA" "$cacc" ||
    fail "the CNN file does not load outside shardps"
"$PY" "$HERE/torch_load.py" "$TMP/hid/model.safetensors" mlp:64,32 "$DATA" "$hacc" ||
    fail "the --hidden 64,32 file does not load outside shardps"
check_logs
echo "ok"
