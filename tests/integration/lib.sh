# tests/integration/lib.sh - shared helpers for the integration scripts.
# Sourced, not run. Expects SPS_BUILD (the Meson build root) in the environment;
# every process a test starts is killed when the test exits, pass or fail.
set -u

SPS_BUILD=${SPS_BUILD:?SPS_BUILD must point at the build directory}
SCHED=$SPS_BUILD/scheduler/shardps-scheduler
SERVER=$SPS_BUILD/server/shardps-server
WORKER=$SPS_BUILD/worker/shardps-worker
LAUNCH=$SPS_BUILD/deploy/shardps-launch
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sps-test.XXXXXX")
PIDS=()

cleanup() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null
    done
    wait 2>/dev/null
    if [ -n "${SPS_KEEP:-}" ]; then
        echo "kept $TMP"
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

skip() {
    echo "skipped: $*"
    exit 77
}

# Starts a command in the background, its output in $TMP/NAME.log; the pid
# goes into PIDS and into the variable named by NAME_pid... kept simple:
# prints nothing, sets LAST_PID.
start() {
    local name=$1
    shift
    "$@" >"$TMP/$name.log" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

# Waits up to $2 seconds for file $1 to exist.
wait_file() {
    local f=$1 t=${2:-15} i=0
    while [ ! -s "$f" ]; do
        i=$((i + 1))
        [ $i -gt $((t * 10)) ] && return 1
        sleep 0.1
    done
}

# Waits for pid $1 up to $2 seconds; sets WAIT_RC to its exit status or 124.
wait_pid() {
    local pid=$1 t=${2:-60} i=0
    while kill -0 "$pid" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt $((t * 10)) ]; then
            WAIT_RC=124
            return 1
        fi
        sleep 0.1
    done
    wait "$pid"
    WAIT_RC=$?
}

# pid_of LOG NODE: the pid the scheduler registered NODE (S1, spare S2) with.
pid_of() {
    sed -n "s/.*registered $2 (pid \([0-9]*\).*/\1/p" "$1" | head -1
}

# kill_s1_after MANIFEST LOG: once MANIFEST (a checkpoint) is written, kills
# -9 the S1 that LOG's scheduler registered (sets S1) and waits for the job
# ($JOB_PID) to end ok.
kill_s1_after() {
    wait_file "$1" 60 || fail "no checkpoint $(basename "$(dirname "$1")"): $(tail -5 "$2")"
    S1=$(pid_of "$2" S1)
    [ -n "$S1" ] || fail "no pid for S1 in the log"
    kill -9 "$S1"
    wait_pid "$JOB_PID" 120 || fail "the job hangs after S1 was killed: $(tail -5 "$2")"
    [ "$WAIT_RC" = 0 ] || fail "the job failed after S1 was killed: $(grep -E ' [EW] ' "$2" | tail -5)"
}

# Starts a scheduler on a free loopback port; sets SCHED_EP and SCHED_PID.
start_scheduler() {
    local name=$1
    shift
    rm -f "$TMP/$name.ep"
    start "$name" "$SCHED" --bind 'tcp://127.0.0.1:*' --endpoint-file "$TMP/$name.ep" "$@"
    SCHED_PID=$LAST_PID
    wait_file "$TMP/$name.ep" 15 || fail "scheduler did not write its endpoint: $(cat "$TMP/$name.log")"
    SCHED_EP=$(cat "$TMP/$name.ep")
}

# The job's results come from the scheduler's summary JSON (--summary FILE;
# fields in docs/observe.md), never from log prose, which is for people.
# field FILE EXPR: prints the Python expression EXPR on the JSON in FILE as d,
# e.g. field "$TMP/x.json" "d['server_reports'][1]['pushes']".
field() {
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

# expect FILE EXPR WHAT: fails with WHAT and the summary unless EXPR holds on d.
expect() {
    [ "$(field "$1" "bool($2)")" = True ] || fail "$3: $(cat "$1" 2>/dev/null || echo "no $1")"
}

# Compares two raw float32 files: largest relative difference <= $3.
params_close() {
    "$SPS_BUILD/tests/integration/sps-params-diff" "$1" "$2" "$3"
}

# Fails when a log under $TMP holds a sanitizer report (UBSan, for one, reports
# and carries on, so the exit status alone does not show it).
check_logs() {
    local hits
    hits=$(grep -El "AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:" \
        "$TMP"/*.log 2>/dev/null)
    [ -z "$hits" ] ||
        fail "sanitizer report in $hits: $(grep -Eh -m3 "Sanitizer|runtime error:" $hits)"
}

# no_leftovers LOG...: every process the logs name by pid has exited.
no_leftovers() {
    local pids p left
    pids=$(grep -ho '(pid [0-9]*' "$@" | tr -dc '0-9\n' | sort -u)
    for i in $(seq 50); do
        left=
        for p in $pids; do
            kill -0 "$p" 2>/dev/null && left="$left $p"
        done
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    fail "processes left:$left: $(ps -o pid,args -p "${left// /,}")"
}
