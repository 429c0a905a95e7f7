#!/usr/bin/env bash
# tests/integration/test_ckpt_bound.sh - checkpoints bound to their job.
#
# Job A checkpoints every 20 steps up to step 60; its manifests record its
# id and configuration. A new job pointed at a copy of A's folder without
# --resume is refused with one line and leaves it as it was. A resume with
# --lr changed is refused naming lr and both values, before anything
# starts; with --resume-override lr it runs, and the summary, the log and
# the new manifests record the change and the lineage (A at step 60). A
# resume follows DIR/latest: pointed back at step-40, it starts there and
# skips the newer step-60. A manifest written before jobs were recorded is
# still resumed, with a warning; --resume-override with a name that is not
# a resume flag is bad usage.
. "$(dirname "$0")/lib.sh"

JOB=(--servers 1 --workers 1 --batch 32 --epochs 1 --seed 3 --optimizer sgd --momentum 0.9
     --lr 0.05 --checkpoint-every 20 --log-level info)

launch() { # name [flags...]: a launcher run; its status in RC
    local name=$1
    shift
    "$LAUNCH" "${JOB[@]}" --summary "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.log"
    RC=$?
}

# manifest DIR STEP EXPR: EXPR on step STEP's manifest in DIR as d.
manifest() {
    field "$1/step-$2/manifest.json" "$3"
}

launch a --max-steps 60 --checkpoint-dir "$TMP/ck"
[ "$RC" = 0 ] || fail "job A failed: $(tail -5 "$TMP/a.log")"
A=$(field "$TMP/a.json" "d['job_id']")
[ "$(manifest "$TMP/ck" 60 "d['job_id']")" = "$A" ] || fail "step-60's manifest names no job A"
[ "$(manifest "$TMP/ck" 60 "d['config']['lr']")" = 0.05 ] || fail "step-60 records no lr"
[ "$(manifest "$TMP/ck" 60 "len(d['config_hash'])")" = 16 ] || fail "step-60 records no hash"
[ "$(manifest "$TMP/ck" 60 "d['lineage']")" = "[]" ] || fail "a fresh job has a lineage"

# A new job on a copy of A's folder, without --resume: refused, one line.
cp -r "$TMP/ck" "$TMP/copy"
launch b --max-steps 60 --checkpoint-dir "$TMP/copy"
[ "$RC" = 2 ] || fail "a new job on another job's checkpoints: exit $RC, not 2"
grep -q "error: --checkpoint-dir $TMP/copy holds job $A's step-20 to step-60: --resume" \
    "$TMP/b.log" || fail "no refusal naming job A: $(grep -i error "$TMP/b.log")"
[ "$(grep -c 'error:' "$TMP/b.log")" = 1 ] || fail "not one error line: $(grep error "$TMP/b.log")"
[ "$(cat "$TMP/copy/latest")" = step-60 ] || fail "the refused job moved latest"
[ ! -e "$TMP/copy/step-80" ] && ! grep -q "registered" "$TMP/b.log" || fail "the refused job ran"

# --resume with another --lr: refused naming lr and both values.
launch lr --max-steps 80 --resume "$TMP/copy" --lr 0.5
[ "$RC" = 2 ] || fail "a resume with --lr changed: exit $RC, not 2"
grep -q "error: --resume $TMP/copy: step-60 of job $A ran with --lr '0.05', this job has --lr '0.5': .* --resume-override lr$" \
    "$TMP/lr.log" || fail "the refusal does not name lr: $(grep -i error "$TMP/lr.log")"
! grep -q "registered" "$TMP/lr.log" || fail "the refused resume started nodes"

# With --resume-override lr it runs, and says so.
launch lr_ok --max-steps 80 --resume "$TMP/copy" --lr 0.5 --resume-override lr
[ "$RC" = 0 ] || fail "the resume with --resume-override lr failed: $(grep ' E ' "$TMP/lr_ok.log")"
grep -q "resuming from $TMP/copy/step-60 at step 60" "$TMP/lr_ok.log" || fail "not resumed from step-60"
grep -q "resume: changed from $TMP/copy/step-60's (--resume-override): --lr '0.05' -> '0.5'" \
    "$TMP/lr_ok.log" || fail "the log does not record the change: $(grep resume "$TMP/lr_ok.log")"
expect "$TMP/lr_ok.json" "d['resume']['changed'] == \"--lr '0.05' -> '0.5'\"" "the summary's change"
expect "$TMP/lr_ok.json" "d['resume']['job_id'] == '$A' and d['resume']['step'] == 60" \
    "the summary's resume"
B=$(field "$TMP/lr_ok.json" "d['job_id']")
[ "$B" != "$A" ] || fail "the resumed job kept A's id"
[ "$(manifest "$TMP/copy" 80 "d['job_id']")" = "$B" ] || fail "step-80 is not the new job's"
[ "$(manifest "$TMP/copy" 80 "[(l['job_id'], l['step']) for l in d['lineage']]")" = "[('$A', 60)]" ] ||
    fail "step-80's lineage: $(manifest "$TMP/copy" 80 "d['lineage']")"
[ "$(manifest "$TMP/copy" 80 "d['config']['lr']")" = 0.5 ] || fail "step-80 records the old lr"

# --resume follows latest: back at step-40, step-60 is not used.
cp -r "$TMP/ck" "$TMP/back"
echo step-40 >"$TMP/back/latest"
launch back --max-steps 60 --resume "$TMP/back"
[ "$RC" = 0 ] || fail "the resume from latest failed: $(grep ' E ' "$TMP/back.log")"
grep -q "resuming from $TMP/back/step-40 at step 40" "$TMP/back.log" ||
    fail "did not follow latest: $(grep -i resum "$TMP/back.log")"
grep -q "skipping checkpoint step-60: newer than $TMP/back/latest (step-40)" "$TMP/back.log" ||
    fail "step-60 not skipped as newer than latest"

# A manifest from before jobs were recorded: resumed, with a warning.
cp -r "$TMP/ck" "$TMP/old"
for m in "$TMP"/old/step-*/manifest.json; do
    python3 -c "import json,sys; d=json.load(open(sys.argv[1]))
for k in ('job_id', 'lineage', 'config_hash', 'config'): del d[k]
json.dump(d, open(sys.argv[1], 'w'))" "$m"
done
launch old --max-steps 80 --resume "$TMP/old" --lr 0.5
[ "$RC" = 0 ] || fail "an old manifest's resume failed: $(grep ' E ' "$TMP/old.log")"
grep -q "records no job configuration (written by an earlier version)" "$TMP/old.log" ||
    fail "no warning about the old manifest"

launch bad --max-steps 80 --resume "$TMP/copy" --resume-override lr,epochs
[ "$RC" = 2 ] || fail "--resume-override epochs: exit $RC, not 2"
grep -q "error: --resume-override lr,epochs: 'epochs' is not a flag a resume keeps" "$TMP/bad.log" ||
    fail "--resume-override epochs: $(grep error "$TMP/bad.log")"
echo "ok: refused $A's folder for a new job, refused --lr then resumed with the override, followed latest, resumed an old manifest"
