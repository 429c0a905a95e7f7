#!/usr/bin/env bash
# tests/integration/test_bad_input.sh - bad flags, bad environment, missing
# data, an unreachable scheduler and bad endpoints each end a program at once
# with one line on stderr that names the problem.
#
# Every command runs under `timeout 30` (status 124 = it hung). A failing case
# must exit 1..127 (not a crash, not a sanitizer abort), print exactly one line
# on stderr matching the expected text, and nothing else. --help on every
# program exits 0 with usage on stdout and nothing on stderr.
. "$(dirname "$0")/lib.sh"

# Only what each case sets: no SHARDPS_* from the caller's environment.
for v in $(compgen -e | grep '^SHARDPS_'); do
    unset "$v"
done

N=0
# bad NAME REGEX CMD...: CMD must fail with one stderr line matching REGEX.
bad() {
    local name=$1 re=$2 rc
    shift 2
    N=$((N + 1))
    timeout 30 "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ $rc -ne 124 ] || fail "$name: still running after 30 s: $*"
    [ $rc -ge 1 ] && [ $rc -le 127 ] ||
        fail "$name: exit status $rc, expected a clean failure: $* : $(head -3 "$TMP/err")"
    local lines
    lines=$(wc -l <"$TMP/err")
    [ "$lines" -eq 1 ] ||
        fail "$name: $lines lines on stderr, expected 1: $*
$(head -5 "$TMP/err")"
    grep -Eq -- "$re" "$TMP/err" ||
        fail "$name: stderr does not match '$re': $(cat "$TMP/err")"
    [ ! -s "$TMP/out" ] || fail "$name: unexpected stdout: $(head -3 "$TMP/out")"
    echo "ok $N - $name (exit $rc): $(cat "$TMP/err")"
}

# --- --help and unknown flags on every program --------------------------------
for prog in "$SCHED" "$SERVER" "$WORKER" "$LAUNCH"; do
    p=$(basename "$prog")
    N=$((N + 1))
    timeout 30 "$prog" --help >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ $rc -eq 0 ] || fail "$p --help: exit status $rc"
    grep -q "^usage: $p " "$TMP/out" || fail "$p --help: no usage line: $(head -2 "$TMP/out")"
    grep -q -- "--help" "$TMP/out" || fail "$p --help: --help is not listed"
    [ ! -s "$TMP/err" ] || fail "$p --help: wrote to stderr: $(cat "$TMP/err")"
    echo "ok $N - $p --help"
    bad "$p unknown flag" "^$p: error: unknown flag --no-such-flag \\(see --help\\)$" \
        "$prog" --no-such-flag 1
    bad "$p flag typo" "^$p: error: unknown flag --log-levle; did you mean --log-level\\?" \
        "$prog" --log-levle info
done
bad "launch --lrr" "^shardps-launch: error: unknown flag --lrr; did you mean --lr\\?" "$LAUNCH" --lrr 0.1
# Arguments after "--" are the scheduler's alone to check: its usage error
# is the cause on the launcher's result line.
N=$((N + 1))
timeout 30 "$LAUNCH" -- --batch 0 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "launch -- --batch 0: exit status $rc, expected 2: $(cat "$TMP/err")"
grep -qx 'job failed: --batch 0: expected 1 to 65536' "$TMP/out" ||
    fail "launch -- --batch 0: the result line lacks the cause: $(cat "$TMP/out")"
echo "ok $N - launch -- --batch 0 (exit 2): $(cat "$TMP/out")"
bad "launch --port -1" "^shardps-launch: error: --port -1: expected 1 to 65535, or 0$" "$LAUNCH" --port -1
bad "launch --secure 2" "^shardps-launch: error: --secure 2: not 0 or 1$" "$LAUNCH" --secure 2

# --- values that do not parse or are out of range ------------------------------
bad "scheduler --servers abc" "--servers abc.*integer" "$SCHED" --servers abc
bad "launch --servers abc" "--servers abc.*integer" "$LAUNCH" --servers abc
bad "scheduler --lr x" "--lr x.*number" "$SCHED" --lr x
bad "server --connect-timeout soon" "--connect-timeout soon.*number" "$SERVER" --connect-timeout soon
bad "worker --rank one" "--rank one.*integer" "$WORKER" --rank one
bad "server --scheduler-grace -1" "--scheduler-grace -1: out of range" "$SERVER" --scheduler-grace -1
bad "scheduler --checkpoint-every 3x" "--checkpoint-every 3x: expected steps N" "$SCHED" \
    --checkpoint-every 3x --checkpoint-dir "$TMP"
bad "scheduler --checkpoint-every 0s" "--checkpoint-every 0s: expected" "$SCHED" \
    --checkpoint-every 0s --checkpoint-dir "$TMP"
bad "scheduler --checkpoint-every 30s in async" "timed checkpoints need --mode sync" "$SCHED" --mode async \
    --checkpoint-every 30s --checkpoint-dir "$TMP"
bad "scheduler --checkpoint-every 50 in allreduce" "allreduce has no shards" "$SCHED" \
    --mode allreduce --servers 0 --checkpoint-every 50 --checkpoint-dir "$TMP"
bad "scheduler --servers 0" "--servers 0" "$SCHED" --servers 0
bad "scheduler --wire fp8" "--wire fp8: expected fp32, fp16 or bf16" "$SCHED" --wire fp8
bad "scheduler --placement near" "--placement near: expected dedicated, or colocated" "$SCHED" \
    --placement near
bad "scheduler --placement colocated, more servers than workers" \
    "--placement colocated: expected dedicated, or colocated with --servers at most" "$SCHED" \
    --placement colocated --servers 3 --workers 2
bad "scheduler --chunk-kib 48" "--chunk-kib 48: expected 0 or a power of two in \[4, 1024\]" "$SCHED" \
    --chunk-kib 48
bad "scheduler --hidden 0" "--hidden 0: expected 1 to 8 comma-separated widths" "$SCHED" --hidden 0
bad "scheduler --compress topk:0" "--compress topk:0: expected none or topk:R" "$SCHED" \
    --compress topk:0
bad "launch --wire bf16 with allreduce" "--wire and --compress need servers" "$LAUNCH" \
    --mode allreduce --workers 2 --wire bf16
bad "scheduler --compress with allreduce" "--wire and --compress need servers" "$SCHED" \
    --mode allreduce --servers 0 --workers 2 --compress topk:0.01
bad "launch --servers 0" "--servers 0" "$LAUNCH" --servers 0
bad "launch --workers 0" "--workers 0" "$LAUNCH" --workers 0
bad "scheduler --workers 300" "--workers 300" "$SCHED" --workers 300
bad "scheduler --batch 0" "batch.*0" "$SCHED" --batch 0
bad "scheduler --lr -1" "--lr -1: out of range \\(0, 10\\]" "$SCHED" --lr -1
bad "scheduler --lr 1e308" "--lr 1e\\+308: out of range \\(0, 10\\]" "$SCHED" --lr 1e308
bad "scheduler --weight-decay 1e308" "--weight-decay 1e\\+308: out of range \\[0, 1\\)" "$SCHED" --weight-decay 1e308
bad "scheduler SHARDPS_LR=4.9e-324" "out of range \\(0, 10\\] \\(too small for a float32\\)" env SHARDPS_LR=4.9e-324 "$SCHED"
bad "worker --rank -2" "--rank -2: out of range \\[-1, 65535\\]" "$WORKER" --rank -2
bad "server --rank 70000" "--rank 70000: out of range \\[-1, 65535\\]" "$SERVER" --rank 70000
bad "scheduler --mode bogus" "--mode bogus" "$SCHED" --mode bogus
bad "scheduler --model bogus" "model 'bogus'" "$SCHED" --model bogus
bad "scheduler --epochs 0" "epochs.*0" "$SCHED" --epochs 0
bad "worker --device tpu" "device 'tpu'" "$WORKER" --device tpu
bad "worker --threads -1" "--threads" "$WORKER" --threads -1
bad "worker --tf32 1 on the CPU" "--tf32 1: the cpu backend has no TF32 mode" "$WORKER" --device cpu --tf32 1
bad "worker --cuda-graph 2" "--cuda-graph 2: expected 0 or 1" "$WORKER" --cuda-graph 2
bad "worker --conv fft" "--conv fft: expected cudnn or gemm" "$WORKER" --conv fft
bad "server --log-level loud" "--log-level loud" "$SERVER" --log-level loud
bad "flag without a value" "--servers needs a value" "$SCHED" --servers
bad "stray argument" "unexpected argument 'extra'" "$SERVER" extra

# The launcher checks the job flags it forwards with the scheduler's own
# checks, before anything starts: one line, exit 2, no node started.
bad "launch --batch 0" "^shardps-launch: error: --batch 0: expected 1 to 65536$" "$LAUNCH" --batch 0
bad "launch --mode snyc" "^shardps-launch: error: --mode snyc: expected sync" "$LAUNCH" --mode snyc
bad "launch --resume nosuchdir" "^shardps-launch: error: --resume $TMP/nosuchdir: cannot open" \
    "$LAUNCH" --resume "$TMP/nosuchdir"

# --- the environment -----------------------------------------------------------
bad "SHARDPS_SERVERS=abc scheduler" "SHARDPS_SERVERS=abc" env SHARDPS_SERVERS=abc "$SCHED"
bad "SHARDPS_SERVERS=abc launch" "SHARDPS_SERVERS=abc" env SHARDPS_SERVERS=abc "$LAUNCH"
bad "SHARDPS_CONNECT_TIMEOUT=x worker" "SHARDPS_CONNECT_TIMEOUT=x" \
    env SHARDPS_CONNECT_TIMEOUT=x "$WORKER"
bad "SHARDPS_MODE=bogus scheduler" "bogus" env SHARDPS_MODE=bogus "$SCHED"
bad "SHARDPS_DILATE=0 worker" "^shardps-worker: error: SHARDPS_DILATE=0: expected a factor" \
    env SHARDPS_DILATE=0 "$WORKER"
# A value from the environment is named by its variable, not as a flag.
bad "SHARDPS_MODE=bogus launch" ": SHARDPS_MODE=bogus: expected sync" env SHARDPS_MODE=bogus "$LAUNCH"
bad "SHARDPS_BATCH=0 scheduler" ": SHARDPS_BATCH=0: expected 1 to 65536$" env SHARDPS_BATCH=0 "$SCHED"
bad "SHARDPS_BATCH=0 launch" ": SHARDPS_BATCH=0: expected 1 to 65536$" env SHARDPS_BATCH=0 "$LAUNCH"
bad "SHARDPS_LOG_FORMAT=yaml worker" "^shardps-worker: error: SHARDPS_LOG_FORMAT=yaml: expected text or json$" \
    env SHARDPS_LOG_FORMAT=yaml "$WORKER"
bad "SHARDPS_LOG_FORMAT=yaml launch" "^shardps-launch: error: SHARDPS_LOG_FORMAT=yaml: expected text or json$" \
    env SHARDPS_LOG_FORMAT=yaml "$LAUNCH"
bad "server --log-format yaml" "^shardps-server: error: --log-format yaml: expected text or json$" \
    "$SERVER" --log-format yaml

# --- missing or broken data ----------------------------------------------------
# The worker reads its data before it contacts the scheduler (port 1: never asked).
bad "worker --data missing dir" "/nonexistent-$$/train-images-idx3-ubyte.gz" \
    "$WORKER" --data "/nonexistent-$$" --scheduler tcp://127.0.0.1:1
mkdir -p "$TMP/empty" "$TMP/junk"
bad "worker --data empty dir" "$TMP/empty/train-images-idx3-ubyte.gz" \
    "$WORKER" --data "$TMP/empty" --scheduler tcp://127.0.0.1:1
head -c 4096 /dev/urandom >"$TMP/junk/train-images-idx3-ubyte.gz"
bad "worker --data corrupt file" "$TMP/junk/train-images-idx3-ubyte.gz" \
    "$WORKER" --data "$TMP/junk" --scheduler tcp://127.0.0.1:1

# --- an unreachable scheduler ----------------------------------------------------
# A port that was just closed: a scheduler bound it and was killed.
start_scheduler gone --servers 1 --workers 1
kill -9 "$SCHED_PID"
wait "$SCHED_PID" 2>/dev/null
GONE=$SCHED_EP
NOTCP="no answer in 2 s \\(no TCP connection \\([0-9]+ attempts? failed\\)\\)"
bad "worker, unreachable scheduler" "cannot reach the scheduler at ${GONE//./\\.}: $NOTCP" \
    "$WORKER" --scheduler "$GONE" --connect-timeout 2
bad "server, unreachable scheduler" "cannot reach the scheduler at ${GONE//./\\.}: $NOTCP" \
    "$SERVER" --scheduler "$GONE" --connect-timeout 2 --bind 'tcp://127.0.0.1:*'

# listener NAME BACKLOG HELD: a TCP listener on a free loopback port that never
# accepts, with HELD connections of its own queued; sets PORT.
listener() {
    start "$1" python3 -c '
import os, socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(int(sys.argv[2]))
held = [socket.create_connection(s.getsockname()) for _ in range(int(sys.argv[3]))]
with open(sys.argv[1] + ".new", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".new", sys.argv[1])
time.sleep(600)' "$TMP/$1.port" "$2" "$3"
    wait_file "$TMP/$1.port" 15 || fail "listener $1 did not start: $(cat "$TMP/$1.log")"
    PORT=$(cat "$TMP/$1.port")
}

# A port that takes TCP connections and never speaks ZeroMQ: the error says the
# connection was made and the handshake was not, not that nothing answered.
listener mute 8 0
bad "worker, a port that is no scheduler" \
    "no answer in 2 s \\(connected over TCP, ZeroMQ handshake not done\\)" \
    "$WORKER" --scheduler "tcp://127.0.0.1:$PORT" --connect-timeout 2

# A listener whose queue is full (backlog 0, one connection never accepted):
# the kernel drops the worker's SYNs, and the error says its first attempt
# still waits, as behind a link that loses every packet.
listener full 0 1
bad "worker, a listener whose queue is full" \
    "no answer in 2 s \\(no TCP connection \\(the first attempt still waits\\)\\)" \
    "$WORKER" --scheduler "tcp://127.0.0.1:$PORT" --connect-timeout 2

# A secure scheduler and a worker without its keys: the handshakes fail,
# and the worker says so at once (long before its --connect-timeout).
"$SPS_BUILD/deploy/shardps-keygen" "$TMP/keys" >/dev/null || fail "shardps-keygen failed"
start_scheduler secure --secure --keys "$TMP/keys" --servers 1 --workers 1
bad "worker without the keys of a secure scheduler" \
    "the scheduler is --secure and this node is not: .* \\(connected, but [0-9]+ ZeroMQ handshakes? failed\\)" \
    "$WORKER" --scheduler "$SCHED_EP" --connect-timeout 20
kill -9 "$SCHED_PID"

# --- malformed endpoints -------------------------------------------------------
bad "scheduler --bind nonsense" "nonsense" "$SCHED" --bind nonsense
bad "server --bind nonsense" "nonsense" "$SERVER" --bind nonsense --connect-timeout 2
bad "server --scheduler nonsense" "nonsense" "$SERVER" --scheduler nonsense --bind 'tcp://127.0.0.1:*'
bad "worker --scheduler nonsense" "nonsense" "$WORKER" --scheduler nonsense
bad "scheduler --bind on a foreign address" "cannot bind tcp://192\.0\.2\.1:" \
    "$SCHED" --bind 'tcp://192.0.2.1:*'
# A malformed endpoint is bad usage: exit 2, the documented code, before anything
# connects or binds.
for args in "$WORKER --scheduler nonsense" "$SERVER --scheduler tcp://127.0.0.1:99999" \
    "$WORKER --scheduler tcp://127.0.0.1 --connect-timeout 1" "$SERVER --bind tcp://127.0.0.1"; do
    N=$((N + 1))
    # shellcheck disable=SC2086
    timeout 30 $args >/dev/null 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "$args: exit status $rc, expected 2"
    echo "ok $N - $args: exit 2"
done

# --- output paths: every one checked at start, before any training ----------------
touch "$TMP/a-file"
bad "scheduler --summary under a file" "--summary $TMP/a-file/s.json: cannot make its directory" \
    "$SCHED" --summary "$TMP/a-file/s.json"
bad "scheduler --summary is a directory" "--summary $TMP: not a file name" \
    "$SCHED" --summary "$TMP"
bad "scheduler --checkpoint-dir under a file" "--checkpoint-dir $TMP/a-file/ck" \
    "$SCHED" --checkpoint-dir "$TMP/a-file/ck" --checkpoint-every 5
bad "scheduler --endpoint-file in a missing directory" "--endpoint-file" \
    "$SCHED" --endpoint-file "$TMP/no-dir/ep"
bad "worker --dump-params in a missing directory" "--dump-params $TMP/no-dir/p%d.f32" \
    "$WORKER" --dump-params "$TMP/no-dir/p%d.f32"
bad "worker --save-model in a missing directory" "--save-model $TMP/no-dir/m.safetensors" \
    "$WORKER" --save-model "$TMP/no-dir/m.safetensors"
bad "bench train --dilate 0.5" "^shardps-bench train: error: --dilate 0.5: expected 1 to 1000, with --net$" \
    "$SPS_BUILD/bench/shardps-bench" train --net 1gbit --dilate 0.5
bad "bench train --dilate without --net" ": --dilate 10: expected 1 to 1000, with --net$" \
    "$SPS_BUILD/bench/shardps-bench" train --dilate 10
bad "bench compute --json in a missing directory" "--json $TMP/no-dir/c.json" \
    "$SPS_BUILD/bench/shardps-bench" compute --json "$TMP/no-dir/c.json"
bad "bench compute --conv fft" "^shardps-bench compute: error: --conv fft: expected cudnn or gemm$" \
    "$SPS_BUILD/bench/shardps-bench" compute --conv fft
# Through the launcher: bad usage (2), no node started, no step trained. The
# time is printed, not judged (timings are the bench's). --summary makes its
# missing directory: under a file it cannot.
for flag in --summary --dump-params --checkpoint-dir; do
    N=$((N + 1))
    extra=()
    out=$TMP/no-dir/out
    [ "$flag" = --checkpoint-dir ] && extra=(--checkpoint-every 5)
    [ "$flag" = --summary ] && out=$TMP/a-file/out
    t0=$(date +%s.%N)
    timeout 30 "$LAUNCH" --servers 2 --workers 2 "$flag" "$out" "${extra[@]}" \
        >"$TMP/out" 2>"$TMP/err"
    rc=$?
    t1=$(date +%s.%N)
    [ $rc -eq 2 ] || fail "launch $flag $out: exit $rc, expected 2: $(cat "$TMP/err")"
    grep -q -- "$flag $out" "$TMP/err" || fail "launch $flag: no line naming the path: $(cat "$TMP/err")"
    ! grep -Eq " (S[0-9]|W[0-9]) |job started" "$TMP/err" ||
        fail "launch $flag: a node or the job started: $(cat "$TMP/err")"
    echo "ok $N - launch $flag $out: exit 2 in $(echo "$t1 - $t0" | bc) s, before any node"
done
echo "ok: $N cases"
