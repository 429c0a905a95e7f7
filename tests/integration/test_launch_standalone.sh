#!/usr/bin/env bash
# tests/integration/test_launch_standalone.sh - shardps-launch against stand-in roles.
#
# Builds fake shardps-scheduler/-server/-worker shell scripts in a fresh temp
# dir and checks what the launcher does with them: exit statuses (0, 1, 2,
# 130, 143), stopping the job when one process fails, SIGKILL after 5 s, no
# processes left behind, flag forwarding, output relaying (prefixes, partial
# and long lines, no interleaving), and finding the role binaries in the
# Meson build-tree layout. Needs no real role, no network, no GPU.
#
# usage: test_launch_standalone.sh PATH/TO/shardps-launch
# Exits 0 when every check passes, 1 otherwise.
set -u

LAUNCH=${1:-}
if [ -z "$LAUNCH" ] || [ ! -x "$LAUNCH" ]; then
    echo "usage: $0 PATH/TO/shardps-launch" >&2
    exit 2
fi
LAUNCH=$(realpath "$LAUNCH")

T=$(mktemp -d "${TMPDIR:-/tmp}/test_launch.XXXXXX")
trap 'rm -rf "$T"' EXIT
BIN=$T/bin
mkdir -p "$BIN" "$T/tmp"
export TMPDIR=$T/tmp # where the launcher makes its endpoint directory

# One fake for all three roles; behaviour is chosen by FAKE_* variables,
# which the launcher passes on to its children with the rest of the environment.
cat > "$BIN/fake" <<'EOF'
#!/usr/bin/env bash
set -u
me=$(basename "$0")
role=${me#shardps-}
rank=0 epfile="" summary=""
args="$*"
while [ $# -gt 0 ]; do
    case "$1" in
    --rank) rank=$2; shift 2 ;;
    --endpoint-file) epfile=$2; shift 2 ;;
    --summary) summary=$2; shift 2 ;;
    *) shift ;;
    esac
done
case $role in
scheduler) tag=C ;;
server) tag=S$rank ;;
worker) tag=W$rank ;;
esac
echo "$args" > "$FAKE_DIR/args.$tag"
echo "dump=${SHARDPS_DUMP_PARAMS-unset} timeout=${SHARDPS_JOB_TIMEOUT-unset}" > "$FAKE_DIR/env.$tag"
echo $$ >> "$FAKE_DIR/pids"
log() { echo "$(date +%Y-%m-%dT%H:%M:%S.%3N%:z) $tag I $*" >&2; }
nap() { sleep "$1" & echo $! >> "$FAKE_DIR/pids"; wait $!; }
if [ -n "${FAKE_IGNORE_TERM:-}" ] && [ "$role" = server ]; then
    trap '' TERM
fi
case $role in
scheduler)
    if [ -n "${FAKE_SCHED_NO_EP:-}" ]; then
        echo "shardps-scheduler: error: cannot bind" >&2
        exit 3
    fi
    nap 0.2
    echo "tcp://127.0.0.1:5555" > "$epfile.tmp" && mv "$epfile.tmp" "$epfile"
    log "shard map: ok"
    echo "plain stdout line from the scheduler"
    nap "${FAKE_SLEEP:-1}"
    if [ -n "$summary" ] && [ -z "${FAKE_NO_SUMMARY:-}" ]; then
        echo ok > "$summary"
    fi
    if [ -n "${FAKE_JSON:-}" ]; then # a scheduler given --log-format json
        printf '{"time":"%s","node":"C","role":"scheduler","rank":null,"level":"info","message":"summary: job done"}\n' \
            "$(date +%Y-%m-%dT%H:%M:%S.%3N%:z)" >&2
    else
        log "summary: job done"
    fi
    ;;
server)
    log "serving"
    echo "plain stdout line from $tag"
    if [ -n "${FAKE_STOP_SERVER:-}" ]; then
        kill -STOP $$ # stopped until the launcher's SIGCONT; then its SIGTERM ends it
    fi
    nap "${FAKE_SLEEP:-0.5}"
    ;;
worker)
    log "epoch=1 step=1 loss=0.5"
    echo "shardps-worker: warning: not a logger line" >&2
    if [ "${FAKE_WORKER_FAIL:-x}" = "$rank" ]; then
        nap 0.3
        echo "shardps-worker: error: boom" >&2
        exit 1
    fi
    if [ -n "${FAKE_CHATTY:-}" ]; then
        ts=$(date +%Y-%m-%dT%H:%M:%S.%3N%:z)
        pad=$(printf 'y%.0s' $(seq 1 400))
        for i in $(seq 1 300); do
            echo "$ts $tag I chatty $i $pad end" >&2
        done
    fi
    printf 'part1-'
    nap 0.2
    printf 'part2\n'
    if [ -n "${FAKE_LONG:-}" ] && [ "$rank" = 0 ]; then
        head -c 100000 /dev/zero | tr '\0' x
        echo
    fi
    nap "${FAKE_SLEEP:-0.5}"
    ;;
esac
exit 0
EOF
chmod +x "$BIN/fake"
for r in scheduler server worker; do
    cp "$BIN/fake" "$BIN/shardps-$r"
done

export FAKE_DIR
FAILS=0
pass() { echo "ok   - $*"; }
fail() {
    echo "FAIL - $*"
    FAILS=$((FAILS + 1))
}

# Starts a fresh case: empty record dir. Sets FAKE_DIR.
fresh() {
    FAKE_DIR=$(mktemp -d "$T/case.XXXXXX")
    : > "$FAKE_DIR/pids"
}

# Runs the launcher in the foreground; sets RC, OUT (its stderr) and SECS.
run() {
    local t0 t1
    t0=$(date +%s.%N)
    timeout 40 "$LAUNCH" --bin-dir "$BIN" "$@" > "$FAKE_DIR/stdout" 2> "$FAKE_DIR/stderr"
    RC=$?
    t1=$(date +%s.%N)
    SECS=$(echo "$t1 - $t0" | bc)
    OUT=$FAKE_DIR/stderr
}

# True when no process recorded in the case's pids file is still alive.
none_left() {
    local i p st alive
    for i in $(seq 1 20); do
        alive=""
        while read -r p; do
            st=$(ps -o stat= -p "$p" 2> /dev/null | tr -d ' ')
            if [ -n "$st" ] && [ "${st#Z}" = "$st" ]; then
                alive="$alive $p"
            fi
        done < "$FAKE_DIR/pids"
        if [ -z "$alive" ]; then
            return 0
        fi
        sleep 0.1
    done
    echo "     left behind:$alive" >&2
    return 1
}

# Waits until every role has started (each fake writes args.<tag> first).
wait_started() {
    local n=$1 i
    for i in $(seq 1 100); do
        if [ "$(ls "$FAKE_DIR"/args.* 2> /dev/null | wc -l)" -ge "$n" ]; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

lt() { [ "$(echo "$1 < $2" | bc)" = 1 ]; }
# A logger line's stamp: ISO 8601 with milliseconds and the UTC offset.
STAMP='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[+-][0-9]{2}:[0-9]{2}'
has() { grep -qE -- "$1" "$OUT"; }
show() {
    sed 's/^/     | /' "$OUT" | cut -c1-200 | tail -25
}

# 1. Everything exits 0: exit 0, lines relayed, flags forwarded.
fresh
run --servers 2 --workers 3 --model mlp --lr 0.1 --data /d --dump-params "$FAKE_DIR/p.bin" \
    --summary "$FAKE_DIR/summary.txt" --log-level info -- --extra-flag 7
if [ "$RC" = 0 ] && grep -qE '^job ok in [0-9.]+ s: job done$' "$FAKE_DIR/stdout" &&
    ! has 'job ok'; then
    pass "all ok: exit 0 and the 'job ok' line, with the scheduler's summary, on stdout"
else
    fail "all ok: rc=$RC"
    show
fi
if has "^$STAMP C I shard map: ok$" && has "^$STAMP W2 I epoch=1 step=1 loss=0.5$"; then
    pass "logger lines are relayed verbatim"
else
    fail "logger lines are relayed verbatim"
fi
if has "^$STAMP W1 ! shardps-worker: warning: not a logger line$" &&
    has "^$STAMP S1 > plain stdout line from S1$" &&
    has "^$STAMP C > plain stdout line from the scheduler$"; then
    pass "other lines get the logger prefix with the child's tag"
else
    fail "other lines get the logger prefix"
fi
if [ "$(grep -c ' > part1-part2$' "$OUT")" = 3 ]; then
    pass "partial lines are joined"
else
    fail "partial lines are joined"
fi
if [ "$(grep -c '' "$FAKE_DIR/stdout")" = 1 ]; then
    pass "launcher writes one line on stdout, its last"
else
    fail "launcher writes one line on stdout, its last"
fi
a=$(cat "$FAKE_DIR/args.C")
if [[ "$a" == "--bind tcp://127.0.0.1:* --endpoint-file "*"/scheduler.endpoint --servers 2 --workers 3 --model mlp --lr 0.1 --summary $FAKE_DIR/summary.txt --job-id job-"*" --log-level info --extra-flag 7" ]]; then
    pass "scheduler command line"
else
    fail "scheduler command line: $a"
fi
a=$(cat "$FAKE_DIR/args.S1")
# Every role gets the job's fresh id (no --job-hash: "--extra-flag 7" does not parse as
# a scheduler flag, so the launcher has no configuration to hash).
if [[ "$a" == "--scheduler tcp://127.0.0.1:5555 --bind tcp://127.0.0.1:* --rank 1 --job-id job-"*" --log-level info" ]]; then
    pass "server command line"
else
    fail "server command line: $a"
fi
a0=$(cat "$FAKE_DIR/args.W0")
a2=$(cat "$FAKE_DIR/args.W2")
if [[ "$a0" == "--scheduler tcp://127.0.0.1:5555 --rank 0 --data /d --dump-params $FAKE_DIR/p.bin --save-model $FAKE_DIR/model.safetensors --job-id job-"*" --log-level info" ]] &&
    [[ "$a2" == "--scheduler tcp://127.0.0.1:5555 --rank 2 --data /d --job-id job-"*" --log-level info" ]]; then
    pass "worker command lines (--dump-params, --save-model beside --summary to worker 0 only)"
else
    fail "worker command lines: '$a0' / '$a2'"
fi
# --port without --node: the port the scheduler binds, not a free one
fresh
run --servers 1 --workers 1 --port 9123
a=$(cat "$FAKE_DIR/args.C")
if [ "$RC" = 0 ] && [[ "$a" == "--bind tcp://127.0.0.1:9123 "* ]]; then
    pass "--port: the scheduler binds it"
else
    fail "--port: rc=$RC, scheduler command line: $a"
fi

# 2. SHARDPS_* variables: read by the launcher; launcher-only ones not passed on.
fresh
SHARDPS_WORKERS=2 SHARDPS_DUMP_PARAMS=/x SHARDPS_JOB_TIMEOUT=30 run
if [ "$RC" = 0 ] && [ -f "$FAKE_DIR/args.W1" ] && grep -q -- '--dump-params /x' "$FAKE_DIR/args.W0" &&
    [ "$(cat "$FAKE_DIR/env.W1")" = "dump=unset timeout=unset" ]; then
    pass "SHARDPS_* flags from the environment; launcher-only ones not inherited"
else
    fail "environment: rc=$RC env.W1=$(cat "$FAKE_DIR/env.W1" 2> /dev/null)"
fi

# 3. A failing worker stops the rest quickly; exit 1.
fresh
FAKE_SLEEP=30 FAKE_WORKER_FAIL=1 run --servers 2 --workers 3
if [ "$RC" = 1 ] && lt "$SECS" 6 &&
    has ' L E W1 \(pid [0-9]+\) exited with status 1$' &&
    has ' W1 ! shardps-worker: error: boom$' &&
    has ' L E job failed: W1 \(pid [0-9]+\) exited with status 1$'; then
    pass "failing worker: exit 1 in ${SECS}s, named, its error relayed"
else
    fail "failing worker: rc=$RC secs=$SECS"
    show
fi
if [ "$(grep -n 'W1 ! shardps-worker: error: boom' "$OUT" | cut -d: -f1)" -lt \
    "$(grep -n 'L E W1 (pid' "$OUT" | cut -d: -f1)" ]; then
    pass "a child's last words come before the line about its exit"
else
    fail "ordering of a child's last words"
fi
if none_left; then
    pass "failing worker: no process left"
else
    fail "failing worker: processes left"
fi

# 4. A server that ignores SIGTERM gets SIGKILL after 5 s.
fresh
FAKE_SLEEP=30 FAKE_WORKER_FAIL=0 FAKE_IGNORE_TERM=1 run --servers 1 --workers 1
if [ "$RC" = 1 ] && lt 4.9 "$SECS" && lt "$SECS" 8 && has 'S0 \(pid [0-9]+\) still running; sending SIGKILL'; then
    pass "SIGKILL after 5 s (${SECS}s)"
else
    fail "SIGKILL escalation: rc=$RC secs=$SECS"
    show
fi
if none_left; then
    pass "after SIGKILL: no process left"
else
    fail "after SIGKILL: processes left"
fi

# 4b. A node stopped (SIGSTOP) when the job finishes: the launcher stops it
#     15 s after the scheduler exited, says so, and the job is ok.
fresh
FAKE_SLEEP=0.3 FAKE_STOP_SERVER=1 run --servers 1 --workers 1
if [ "$RC" = 0 ] && has ' L W S0 \(pid [0-9]+\) still running 15 s after the job finished; stopping it$' &&
    grep -q '^job ok in' "$FAKE_DIR/stdout"; then
    pass "a stopped node after the job finished: stopped, exit 0 (${SECS}s)"
else
    fail "a stopped node after the job finished: rc=$RC"
    show
fi
if none_left; then
    pass "after stopping the stopped node: no process left"
else
    fail "after stopping the stopped node: processes left"
fi

# 5. SIGINT and SIGTERM to the launcher: 130 / 143, nothing left behind.
for sig in INT TERM; do
    fresh
    FAKE_SLEEP=30 timeout 40 "$LAUNCH" --bin-dir "$BIN" --servers 2 --workers 2 \
        2> "$FAKE_DIR/stderr" &
    pid=$!
    OUT=$FAKE_DIR/stderr
    wait_started 5
    sleep 0.3
    kill -"$sig" "$pid"
    wait "$pid"
    RC=$?
    want=$([ "$sig" = INT ] && echo 130 || echo 143)
    if [ "$RC" = "$want" ] && has "job failed: interrupted by SIG$sig$"; then
        pass "SIG$sig: exit $want"
    else
        fail "SIG$sig: rc=$RC"
        show
    fi
    if none_left; then
        pass "SIG$sig: no process left"
    else
        fail "SIG$sig: processes left"
    fi
done

# 6. Bad flags: one line, exit 2, nothing started.
fresh
for bad in "--foo" "--workers 0" "--servers x" "--timeout -1" "--log-level loud" "stray"; do
    # shellcheck disable=SC2086
    run $bad
    if [ "$RC" = 2 ] && [ "$(grep -c '' "$OUT")" = 1 ] && has '^shardps-launch: error: '; then
        pass "bad usage '$bad': one line, exit 2"
    else
        fail "bad usage '$bad': rc=$RC"
        show
    fi
done
if [ ! -s "$FAKE_DIR/pids" ]; then
    pass "bad usage starts nothing"
else
    fail "bad usage started something"
fi
"$LAUNCH" --bin-dir "$T/nowhere" > /dev/null 2> "$FAKE_DIR/stderr"
RC=$?
OUT=$FAKE_DIR/stderr
if [ "$RC" = 2 ] && has 'no executable shardps-scheduler in --bin-dir'; then
    pass "missing role binary: exit 2"
else
    fail "missing role binary: rc=$RC"
fi

# 7. The scheduler dies before writing its endpoint: fail fast.
fresh
FAKE_SCHED_NO_EP=1 run
if [ "$RC" = 1 ] && lt "$SECS" 3 && has 'C ! shardps-scheduler: error: cannot bind' &&
    has 'job failed: scheduler \(pid [0-9]+\) exited with status 3 before writing its endpoint$'; then
    pass "scheduler exits before its endpoint: exit 1 in ${SECS}s"
else
    fail "scheduler exits before its endpoint: rc=$RC"
    show
fi

# 8. --timeout.
fresh
FAKE_SLEEP=30 run --timeout 1
if [ "$RC" = 1 ] && lt "$SECS" 4 && has 'job failed: timed out after 1 s'; then
    pass "--timeout: exit 1 in ${SECS}s"
else
    fail "--timeout: rc=$RC secs=$SECS"
    show
fi
# SHARDPS_JOB_TIMEOUT is the same limit; SHARDPS_STATUS_TIMEOUT, shardps-status's, is not an error.
fresh
FAKE_SLEEP=30 SHARDPS_JOB_TIMEOUT=1 SHARDPS_STATUS_TIMEOUT=0 run
if [ "$RC" = 1 ] && lt "$SECS" 4 && has 'job failed: timed out after 1 s'; then
    pass "SHARDPS_JOB_TIMEOUT=1: timed out; SHARDPS_STATUS_TIMEOUT=0 beside it ignored"
else
    fail "SHARDPS_JOB_TIMEOUT=1: rc=$RC in $SECS s"
    show
fi
if none_left; then
    pass "--timeout: no process left"
else
    fail "--timeout: processes left"
fi

# 9. --summary FILE that the scheduler did not write.
fresh
FAKE_NO_SUMMARY=1 run --summary "$FAKE_DIR/none.txt"
if [ "$RC" = 1 ] && has "job failed: summary file $FAKE_DIR/none.txt was not written$"; then
    pass "missing summary file: exit 1"
else
    fail "missing summary file: rc=$RC"
    show
fi

# 10. Long and many lines: split at 64 KiB, nothing lost, no line mixed up.
fresh
FAKE_LONG=1 FAKE_CHATTY=1 run --workers 3
xs=$(grep ' W0 > x' "$OUT" | tr -cd x | wc -c)
nlong=$(grep -c ' W0 > xxx' "$OUT")
nchat=$(grep -cE "^$STAMP W[0-2] I chatty [0-9]+ y{400} end\$" "$OUT")
nbad=$(grep -cvE "^$STAMP [A-Z][0-9]* [EWID!>] " "$OUT")
if [ "$RC" = 0 ] && [ "$xs" = 100000 ] && [ "$nlong" = 2 ] && [ "$nchat" = 900 ] && [ "$nbad" = 0 ]; then
    pass "long line split in 2, 900 chatty lines intact, every line well-formed"
else
    fail "long/chatty lines: rc=$RC xs=$xs nlong=$nlong nchat=$nchat nbad=$nbad"
fi

# 10b. --log-format json: every line on stderr one JSON object with the
# time, node, role, rank, level and message, the children's text lines made
# so; the summary read from the scheduler's line, a JSON one too.
fresh
FAKE_JSON=1 run --servers 1 --workers 2 --log-format json
if [ "$RC" = 0 ] && grep -qE '^job ok in [0-9.]+ s: job done$' "$FAKE_DIR/stdout" &&
    python3 - "$OUT" <<'PY'; then
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$")
assert all(stamp.match(l["time"]) and set(l) == {"time", "node", "role", "rank", "level",
           "message"} for l in lines), lines
def has(**kw):
    return any(all(l[k] == v for k, v in kw.items()) for l in lines)
assert has(node="C", role="scheduler", rank=None, level="info", message="shard map: ok")
assert has(node="W1", role="worker", rank=1, level="stderr",
           message="shardps-worker: warning: not a logger line")
assert has(node="S0", role="server", rank=0, level="stdout", message="plain stdout line from S0")
assert has(role="launcher", rank=None, level="info")
assert has(node="C", level="info", message="summary: job done")
PY
    pass "--log-format json: one object per line, children's lines too"
else
    fail "--log-format json: rc=$RC: $(cat "$FAKE_DIR/stdout")"
    show
fi

# 11. Without --bin-dir: finds the roles in the Meson build-tree layout.
fresh
B=$T/build
mkdir -p "$B/deploy" "$B/scheduler" "$B/server" "$B/worker"
cp "$LAUNCH" "$B/deploy/shardps-launch"
for r in scheduler server worker; do
    cp "$BIN/fake" "$B/$r/shardps-$r"
done
timeout 20 "$B/deploy/shardps-launch" --log-level debug 2> "$FAKE_DIR/stderr"
RC=$?
OUT=$FAKE_DIR/stderr
if [ "$RC" = 0 ] && has "starting W0: $B/worker/shardps-worker --scheduler"; then
    pass "finds ../<role>/shardps-<role> next to the launcher"
else
    fail "build-tree layout: rc=$RC"
    show
fi

# 12. Every run removed its temporary endpoint directory.
if [ -z "$(ls -A "$T/tmp")" ]; then
    pass "temporary directories removed"
else
    fail "temporary directories left: $(ls "$T/tmp")"
fi

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all checks passed"
exit 0
