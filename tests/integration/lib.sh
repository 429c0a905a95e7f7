# tests/integration/lib.sh - shared helpers for the integration scripts.
# Sourced, not run. Expects SPS_BUILD (the Meson build root) in the environment;
# every process a test starts is killed when the test exits, pass or fail.
# Its directory of logs goes when it passes, and stays when it fails (or
# with SPS_KEEP=1): the path is printed.
set -u

SPS_BUILD=${SPS_BUILD:?SPS_BUILD must point at the build directory}
SCHED=$SPS_BUILD/scheduler/shardps-scheduler
SERVER=$SPS_BUILD/server/shardps-server
WORKER=$SPS_BUILD/worker/shardps-worker
LAUNCH=$SPS_BUILD/deploy/shardps-launch
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sps-test.XXXXXX")
PIDS=()

cleanup() {
    local rc=$?
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null
    done
    netsim_down
    wait 2>/dev/null
    if [ -n "${SPS_KEEP:-}" ] || { [ "$rc" != 0 ] && [ "$rc" != 77 ]; }; then
        echo "kept $TMP" >&2
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

# wait_line FILE REGEX SECONDS: waits until a line of FILE matches (grep -E);
# returns 1 when none did in time.
wait_line() {
    local i=0
    until grep -Eq "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt $(($3 * 10)) ] && return 1
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

# fault_job NAME [flags...]: the failure tests' job, a sync MLP of 300
# steps, 2 workers, SGD momentum 0.9, a 2 s peer timeout; its parameters in
# $TMP/NAME.f32, summary $TMP/NAME.json, output $TMP/NAME.log.
fault_job() {
    local name=$1
    shift
    "$LAUNCH" --workers 2 --batch 32 --max-steps 300 --epochs 1 --optimizer sgd \
        --momentum 0.9 --peer-timeout 2 --dump-params "$TMP/$name.f32" \
        --summary "$TMP/$name.json" --log-level info "$@" >"$TMP/$name.log" 2>&1
}

# fault_job_bg NAME [flags...]: fault_job in the background, slowed (a
# straggler only sleeps: the parameters are the same) so kills land
# mid-run; sets JOB_PID.
fault_job_bg() {
    fault_job "$@" --straggler 1:10 &
    JOB_PID=$!
    PIDS+=("$JOB_PID")
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

# results_page FILE BENCH: FILE is a finished results page of `shardps-bench
# BENCH`: its header names the command that made it, the build's commit, the
# date (UTC), the machine and the load at the start and at the end.
results_page() {
    local f=$1 b=$2
    [ -s "$f" ] || fail "no results page $f"
    [ "$(head -1 "$f")" = "# shardps-bench $b" ] || fail "$f: title '$(head -1 "$f")'"
    grep -q "^- Command: \`shardps-bench $b .*\`\$" "$f" &&
        grep -Eq '^- Commit: [^ ]+ protocol [0-9]+$' "$f" &&
        grep -Eq '^- Date: [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC$' "$f" &&
        grep -Eq '^- Machine: [0-9]+ cores, .+' "$f" &&
        grep -Eq '^- Load \(1, 5, 15-minute averages\): ([0-9.]+ ){3}at the start, ([0-9.]+ ){3}at the end$' \
            "$f" ||
        fail "$f: the header lacks a field: $(head -8 "$f")"
}

# ---- the simulated cluster: roles as hosts ------------------------------------
# netsim_up SERVERS WORKERS [--net SPEC] holds a shardps-netsim
# (bench/netsim/main.c) for the test: one network namespace per role (c,
# s0.., w0..) on a link to a routing hub; NS[role] and ADDR[role] hold each
# namespace and address, PFX their common prefix. Skips (77) with the reason
# where namespaces cannot be made (not root, no kernel support). in_ns ROLE
# CMD... starts CMD in ROLE's namespace (output in $TMP/ROLE.log, pid in
# PID[ROLE]). netsim_down removes the network (also on exit) and returns 1,
# saying why, when a namespace was left behind.
declare -A NS ADDR PID
NETSIM_PID=

netsim_up() {
    "$SPS_BUILD/bench/netsim/shardps-netsim" --servers "$1" --workers "$2" "${@:3}" \
        --log "$TMP/netsim-commands.log" >"$TMP/netsim.out" 2>"$TMP/netsim.err" &
    NETSIM_PID=$!
    until grep -qx ready "$TMP/netsim.out"; do
        if ! kill -0 "$NETSIM_PID" 2>/dev/null; then
            wait "$NETSIM_PID"
            local rc=$?
            NETSIM_PID=
            [ $rc = 3 ] && skip "$(tail -1 "$TMP/netsim.err")"
            fail "shardps-netsim exited $rc: $(cat "$TMP/netsim.err")"
        fi
        sleep 0.1
    done
    local role ns addr
    while read -r role ns addr; do
        [ "$role" = ready ] && break
        NS[$role]=$ns
        ADDR[$role]=$addr
    done <"$TMP/netsim.out"
    PFX=${NS[c]%c}
}

in_ns() {
    local role=$1
    shift
    start "$role" ip netns exec "${NS[$role]}" "$@"
    PID[$role]=$LAST_PID
}

netsim_down() {
    [ -n "$NETSIM_PID" ] || return 0
    local pid=$NETSIM_PID left
    NETSIM_PID=
    kill -TERM "$pid" 2>/dev/null
    if ! wait "$pid"; then
        echo "shardps-netsim: $(tail -1 "$TMP/netsim.err")" >&2
        return 1
    fi
    left=$(ip netns list 2>/dev/null | awk '{print $1}' |
        grep -E "^${PFX}(hub|c|s[0-9]+|w[0-9]+)$" || true)
    [ -z "$left" ] || { echo "namespaces left behind: $left" >&2; return 1; }
}
