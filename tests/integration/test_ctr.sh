#!/usr/bin/env bash
# tests/integration/test_ctr.sh - the click-through model (--model ctr), its
# embedding rows held by the servers, through the launcher users run, on a
# click log shardps-datagen writes here (20,000 lines):
# - sync on 1 and on 2 servers (1 worker) gives the same dense parameters,
#   bitwise, with rows pushed to both servers; two identical 2x2 sync runs
#   are bitwise identical, and equal 1x1 with the same global batch (one
#   worker summing 2 micro-batches as a server sums 2 workers);
# - async, ssp:1 and sync:1/2 (2x2), ftrl and sgd, and rows messages much
#   longer than a push of the dense shard, end ok with a finite
#   test AUC in (0, 1] and a log loss in the summary, and "job ok ...
#   test_auc=" as the last line on stdout;
# - the ring's variants (--mode allreduce --ring-rows dense|allgather, the
#   rows in every worker's own table): 2 workers end ok with a finite AUC,
#   every worker holding the same bits; with 1 worker, and with 2 (every
#   sum of two terms is the same whatever its order, and adagrad leaves a
#   row without gradient as it was), both give the bits of sync on the
#   servers; dense sends 2(M-1)/M x (parameters + the table) per worker per
#   step, allgather the bytes a sync worker pushes; a worker building its
#   model for longer than --peer-timeout is not counted lost;
# - it learns: 2 epochs of sync adagrad on 1x1 reach a test AUC above 0.75
#   (the planted model's, which shardps-datagen prints, is about 0.84; an
#   untrained model's is about 0.5);
# - bad input fails the job (exit 1) with the reason on one line, and leaves
#   no process of the job: a ctr job without --ctr-data, --ctr-data on an
#   mlp job, a missing file, a file of 1001 malformed lines (1000 are
#   skipped: that job ends ok); --embed-dim 0, --min-count 0, --max-rows -1,
#   --optimizer adam, and with allreduce --min-count 2, --max-rows 100,
#   --micro-batch 32 or --ring-rows sparse, or --ring-rows allgather without
#   it, is refused with exit 2 and one error line, before anything starts.
. "$(dirname "$0")/lib.sh"
GEN=$SPS_BUILD/deploy/shardps-datagen
DATA=$TMP/clicks.txt
"$GEN" ctr --rows 20000 --seed 3 --out "$DATA" >"$TMP/gen.out" 2>&1 ||
    fail "shardps-datagen ctr: $(cat "$TMP/gen.out")"

# ctr NAME SERVERS WORKERS [flags...]: a ctr job of 60 steps of 64 samples
# (adagrad, lr 0.05 unless flags say otherwise) that must end ok with a
# finite AUC; parameters in $TMP/NAME.f32, summary $TMP/NAME.json.
ctr() {
    local name=$1 servers=$2 workers=$3
    shift 3
    "$LAUNCH" --servers "$servers" --workers "$workers" --model ctr --ctr-data "$DATA" \
        --batch 64 --max-steps 60 --optimizer adagrad --lr 0.05 --plot none \
        --dump-params "$TMP/$name.f32" --summary "$TMP/$name.json" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.log" ||
        fail "$name: the job failed: $(tail -5 "$TMP/$name.log")"
    tail -1 "$TMP/$name.out" | grep -Eq '^job ok .* test_auc=[0-9.]+ test_logloss=[0-9.]+' ||
        fail "$name: last line on stdout: $(tail -1 "$TMP/$name.out")"
    # one python a job: its start is slow on a loaded machine
    line=$(field "$TMP/$name.json" "'%s test_auc=%.4f test_logloss=%.4f' % (d['mode'], \
        d['test_auc'], d['test_logloss']) if d['status'] == 'ok' and 0 < d['test_auc'] <= 1 \
        and 0 < d['test_logloss'] < 100 and d['test_auc_per_epoch'][-1] == d['test_auc'] \
        else 'bad'")
    [ -n "$line" ] && [ "$line" != bad ] ||
        fail "$name: no finite test AUC: $(cat "$TMP/$name.json")"
    echo "ok - $name: $line"
}

# ---- 1. sharding the rows changes no bit; sync repeats itself ----------------
ctr one 1 1
ctr two 2 1
cmp -s "$TMP/one.f32" "$TMP/two.f32" || fail "sync 1x1 and 2x1 dense parameters differ"
expect "$TMP/two.json" "all(s['received'].get('rows_push', 0) > 0 and \
    s['received'].get('rows_pull', 0) > 0 for s in d['bytes_by_type']['servers'])" \
    "2 servers: not both got rows pushes and pulls"
ctr twice_a 2 2
ctr twice_b 2 2
cmp -s "$TMP/twice_a.f32" "$TMP/twice_b.f32" || fail "two identical 2x2 sync runs differ"
cmp -s "$TMP/one.f32" "$TMP/twice_a.f32" && fail "1 and 2 workers gave the same parameters"
ctr global 1 1 --batch 128 --micro-batch 64
cmp -s "$TMP/global.f32" "$TMP/twice_a.f32" ||
    fail "1x1 of batch 128 in micro-batches of 64 and 2x2 of batch 64 differ"
echo "ok - sync: 1x1 = 2x1, 2x2 = 2x2 again and = 1x1 of the same global batch, bitwise"

# ---- 2. every mode, every optimizer of rows ends ok ---------------------------
ctr async 2 2 --mode async
ctr ssp 2 2 --mode ssp:1
ctr backup 2 2 --mode sync:1/2
ctr ftrl 2 2 --optimizer ftrl --lr-schedule constant --l1 0.01 --l2 0.01
ctr sgd 2 2 --optimizer sgd
# a small dense shard and a big batch: a rows message is many times longer
# than a push of the shard, and the servers take it
ctr narrow 2 1 --hidden 8 --batch 1024 --max-steps 10 --timeout 120

# ---- 3. the ring's variants: the rows in every worker's own table ------------
ring() {
    local name=$1 workers=$2
    shift 2
    ctr "$name" 0 "$workers" --mode allreduce "$@"
}
ring ring_one 1 --ring-rows dense
ring ring_one_ag 1 --ring-rows allgather
cmp -s "$TMP/one.f32" "$TMP/ring_one.f32" || fail "ring dense 1 worker and sync 1x1 differ"
cmp -s "$TMP/one.f32" "$TMP/ring_one_ag.f32" || fail "ring allgather 1 worker and sync 1x1 differ"
ring ring_dense 2 --ring-rows dense --dump-params "$TMP/ring_dense.%d.f32"
ring ring_ag 2 --ring-rows allgather --dump-params "$TMP/ring_ag.%d.f32"
for v in ring_dense ring_ag; do
    cmp -s "$TMP/$v.0.f32" "$TMP/$v.1.f32" || fail "$v: W0 and W1 hold different rows"
    cmp -s "$TMP/$v.0.f32" "$TMP/twice_a.f32" || fail "$v: 2 workers differ from sync 2x2"
done
V=$(sed -n 's/.* W0 I rows: \([0-9]*\) in every worker.s table.*/\1/p' "$TMP/ring_dense.log")
[ -n "$V" ] || fail "ring_dense: no table size in its log"
# 2 workers: 2(M-1)/M = 1 vector of P + V x 16 floats a worker a step
expect "$TMP/ring_dense.json" "d['bytes_pushed'] == 2 * 60 * 4 * (d['num_params'] + $V * 16)" \
    "ring dense: not 2(M-1)/M x (parameters + $V rows) a worker a step"
pushed=$(field "$TMP/twice_a.json" "d['bytes_pushed']")
expect "$TMP/ring_ag.json" "d['bytes_pushed'] == $pushed" \
    "ring allgather: 2 workers do not send the $pushed bytes sync workers push"
echo "ok - ring: 1 worker = sync 1x1 and 2 workers = sync 2x2, bitwise; dense sends the table"

# Building a model may take longer than --peer-timeout (reading a big click
# log, a ring's table of every key in it): the worker's heartbeats go on
# meanwhile, so the scheduler does not count it lost. The build is made 4 s
# longer, twice the 2 s the scheduler waits.
"$LAUNCH" --workers 2 --mode allreduce --model ctr --ctr-data "$DATA" --batch 64 \
    --max-steps 5 --optimizer adagrad --lr 0.05 --peer-timeout 2 --fault-slow-build 4 \
    --plot none >"$TMP/slow.out" 2>"$TMP/slow.log" ||
    fail "a build 4 s longer than --peer-timeout 2: $(tail -3 "$TMP/slow.log")"
echo "ok - a worker building its model for longer than --peer-timeout keeps its heartbeats"

# ---- 4. it learns -----------------------------------------------------------
ctr learn 1 1 --max-steps 0 --epochs 2
learned=$line
expect "$TMP/learn.json" "len(d['test_auc_per_epoch']) == 2 and d['test_auc'] > 0.75" \
    "2 epochs of sync adagrad: test AUC not above 0.75"

# ---- 5. bad input -----------------------------------------------------------
# gone ID: no process of job ID (every role has --job-id ID on its command
# line) is left; waits up to 5 s for them to exit.
gone() {
    for _ in $(seq 50); do
        pgrep -f -- "--job-id $1( |\$)" >/dev/null || return 0
        sleep 0.1
    done
    return 1
}

N=0
# refused NAME STATUS REGEX COUNT [flags...]: a 2x2 job with flags ends with
# exit STATUS, "job failed" on stdout, the reason on COUNT lines of its
# stderr matching REGEX (1, or + for one or more), and no process left.
refused() {
    local name=$1 want=$2 re=$3 count=$4 rc n
    shift 4
    N=$((N + 1))
    local id="ctr-bad-$$-$N" out=$TMP/bad$N.out log=$TMP/bad$N.log
    timeout 60 "$LAUNCH" --servers 2 --workers 2 --batch 64 --max-steps 5 --plot none \
        --job-id "$id" "$@" >"$out" 2>"$log"
    rc=$?
    [ $rc -ne 124 ] || fail "$name: still running after 60 s: $(tail -3 "$log")"
    [ $rc -eq "$want" ] || fail "$name: exit status $rc, expected $want: $(tail -5 "$log")"
    # a job that starts ends with its result line; refused flags start nothing
    if [ "$want" = 2 ]; then
        [ ! -s "$out" ] || fail "$name: stdout: $(cat "$out")"
    else
        grep -q '^job failed: ' "$out" || fail "$name: stdout: $(cat "$out")"
    fi
    n=$(grep -Ec -- "$re" "$log")
    if [ "$count" = + ]; then
        [ "$n" -ge 1 ] || fail "$name: no line matches '$re': $(cat "$log")"
    else
        [ "$n" -eq "$count" ] || fail "$name: $n lines match '$re', expected $count: $(cat "$log")"
    fi
    gone "$id" || fail "$name: processes left: $(pgrep -af -- "--job-id $id( |\$)")"
    echo "ok $N - $name (exit $rc): $(grep -Em1 -- "$re" "$log" | cut -d' ' -f2-)"
}
W='^[^ ]+ W[01] E ' # a worker's error line
C='^shardps-launch: error: ' # the launcher checks the job's flags before it starts

refused "ctr job without --ctr-data" 1 "$W--model ctr needs the click log: --ctr-data FILE\$" + \
    --model ctr
refused "--ctr-data on an mlp job" 1 "$W--ctr-data is for --model ctr; this job trains mlp\$" + \
    --model mlp --ctr-data "$DATA"
refused "missing --ctr-data file" 1 "$W$TMP/no-such\\.txt: No such file or directory\$" + \
    --model ctr --ctr-data "$TMP/no-such.txt"
# 5 good lines, then 1001 bad ones: the 1001st (line 1006) is one too many
{
    head -5 "$DATA"
    for i in $(seq 1001); do
        printf '1\tnot a number %d\n' "$i"
    done
} >"$TMP/bad.txt"
refused "1001 malformed lines" 1 \
    "$W$TMP/bad\\.txt:1006: .*\\(malformed line 1001; at most 1000 are skipped\\)\$" + \
    --model ctr --ctr-data "$TMP/bad.txt"
# the control: 1000 malformed lines among good ones are skipped
{
    head -3000 "$DATA"
    for i in $(seq 1000); do
        printf '1\tnot a number %d\n' "$i"
    done
    sed -n 3001,4000p "$DATA"
} >"$TMP/skip.txt"
"$LAUNCH" --servers 1 --workers 2 --model ctr --ctr-data "$TMP/skip.txt" --max-steps 5 \
    --plot none --summary "$TMP/skip.json" >"$TMP/skip.out" 2>"$TMP/skip.log" ||
    fail "1000 malformed lines: the job failed: $(tail -3 "$TMP/skip.log")"
echo "ok - 1000 malformed lines are skipped: $(tail -1 "$TMP/skip.out" | cut -c1-60)"

A=(--model ctr --ctr-data "$DATA" --mode allreduce --servers 0)
refused "ctr allreduce --min-count 2" 2 \
    "${C}--min-count 2: the frequency filter is the servers': not with --mode allreduce\$" 1 \
    "${A[@]}" --min-count 2
refused "ctr allreduce --max-rows 100" 2 \
    "${C}--max-rows 100: the cap on rows is the servers': not with --mode allreduce\$" 1 \
    "${A[@]}" --max-rows 100
refused "ctr allreduce --micro-batch 32" 2 \
    "${C}--micro-batch sums on the servers: not with --mode allreduce\$" 1 \
    "${A[@]}" --micro-batch 32
refused "ctr --ring-rows sparse" 2 "${C}--ring-rows sparse: expected dense or allgather\$" 1 \
    "${A[@]}" --ring-rows sparse
refused "ctr sync --ring-rows allgather" 2 \
    "${C}--ring-rows allgather: for --model ctr with --mode allreduce\$" 1 \
    --model ctr --ctr-data "$DATA" --ring-rows allgather
refused "ctr --embed-dim 0" 2 "${C}--embed-dim 0: expected 1 to 1024\$" 1 \
    --model ctr --ctr-data "$DATA" --embed-dim 0
refused "ctr --min-count 0" 2 "${C}--min-count 0: expected 1 or more\$" 1 \
    --model ctr --ctr-data "$DATA" --min-count 0
refused "ctr --max-rows -1" 2 "${C}--max-rows -1: expected 0 \\(no cap\\) to [0-9]+\$" 1 \
    --model ctr --ctr-data "$DATA" --max-rows -1
refused "ctr --optimizer adam" 2 \
    "${C}--optimizer adam: a model with embedding rows takes sgd, adagrad or ftrl\$" 1 \
    --model ctr --ctr-data "$DATA" --optimizer adam
check_logs
echo "ok: learns ($learned in 2 epochs); $N bad inputs refused"
