#!/usr/bin/env bash
# tests/integration/test_conventions.sh - what every program does alike, and
# the small things a first run shows.
#
# 1. Every program of the build, and every one `meson install` puts on the
#    PATH, answers --version (exit 0, "NAME BUILD protocol N", one build for
#    all) and --help (exit 0, its usage names itself, not another program).
#    Helpers that are not commands (shardps-bench-mpi) are installed under
#    libexec/shardps, not bin.
# 2. A short job through the launcher (worker 0 logs every step:
#    --progress 1e-6): its one line on stdout is the last,
#    "job ok in T s: <summary>"; the logs are on stderr; --plot and --log-dir
#    are made (mkdir -p); worker 0's progress counts toward --max-steps
#    ("step=N/40", never the epoch's 468) with the time left; a plot is drawn
#    only from two points or more, and no gnuplot script or log is left
#    beside it. Variables meant for other programs (shardps-status's
#    SHARDPS_STATUS_TIMEOUT=0, a worker's SHARDPS_EVALUATE_SUMMARY, the
#    retired SHARDPS_TIMEOUT=0) are no error to any role.
# 3. A job of one step reports once: no plot and nothing in --plot's directory.
# 4. deploy/install-deps.sh --run (the quickstart's) holds none of the tests'
#    packages; the default holds them all.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

for v in $(compgen -e | grep '^SHARDPS_'); do
    unset "$v"
done

# check_program PATH: --version and --help of one program.
check_program() {
    local p=$1 name rc
    name=$(basename "$p")
    "$p" --version >"$TMP/v.out" 2>"$TMP/v.err"
    rc=$?
    [ "$rc" = 0 ] || fail "$name --version: exit $rc: $(cat "$TMP/v.err")"
    grep -Eqx "$name [^ ]+ protocol [0-9]+" "$TMP/v.out" ||
        fail "$name --version printed '$(cat "$TMP/v.out")'"
    cut -d' ' -f2- "$TMP/v.out" >>"$TMP/builds"
    "$p" --help >"$TMP/h.out" 2>"$TMP/h.err"
    rc=$?
    [ "$rc" = 0 ] || fail "$name --help: exit $rc: $(head -3 "$TMP/h.err")"
    head -1 "$TMP/h.out" | grep -Eq "^usage: (.* )?$name( |$)" ||
        fail "$name --help does not name itself: $(head -1 "$TMP/h.out")"
    grep -q -- "--version" "$TMP/h.out" || fail "$name --help does not list --version"
}

# 1. The build tree: every executable named shardps-*.
: >"$TMP/builds"
n=0
while read -r p; do
    check_program "$p"
    n=$((n + 1))
done < <(find "$SPS_BUILD" -type f -name 'shardps-*' -perm -u+x ! -name '*.p' | sort)
[ "$n" -ge 10 ] || fail "found only $n programs in $SPS_BUILD"
[ "$(sort -u "$TMP/builds" | wc -l)" = 1 ] || fail "programs of one build disagree: $(sort -u "$TMP/builds")"
echo "ok - $n programs of the build: --version ($(head -1 "$TMP/builds")) and --help"

# ... and installed.
meson install -C "$SPS_BUILD" --no-rebuild --destdir "$TMP/inst" >"$TMP/install.log" 2>&1 ||
    fail "meson install: $(tail -5 "$TMP/install.log")"
bin=$(find "$TMP/inst" -type d -path '*/bin' | head -1)
[ -n "$bin" ] && [ -x "$bin/shardps-launch" ] || fail "no bin/shardps-launch under $TMP/inst"
n=0
for p in "$bin"/*; do
    check_program "$p"
    n=$((n + 1))
done
[ ! -e "$bin/shardps-bench-mpi" ] || fail "shardps-bench-mpi, not a command, is installed in bin/"
if [ -x "$SPS_BUILD/bench/shardps-bench-mpi" ]; then
    helper=$(find "$TMP/inst" -path '*/libexec/shardps/shardps-bench-mpi')
    [ -n "$helper" ] || fail "shardps-bench-mpi is not under libexec/shardps: $(find "$TMP/inst" -name 'shardps-bench-mpi')"
    check_program "$helper"
fi
echo "ok - $n installed commands in bin/, the helpers in libexec/shardps/"

# 2. A short job.
mkdir -p "$TMP/run"
SHARDPS_PROGRESS=1e-6 SHARDPS_STATUS_TIMEOUT=0 SHARDPS_TIMEOUT=0 \
    SHARDPS_EVALUATE_SUMMARY=/nonexistent/e.json \
    "$LAUNCH" --servers 1 --workers 1 --max-steps 40 --batch 32 --summary "$TMP/run/s.json" \
    --plot "$TMP/new/plots" --log-dir "$TMP/new/logs/x" >"$TMP/job.out" 2>"$TMP/job.log"
rc=$?
[ "$rc" = 0 ] || fail "short job: exit $rc: $(tail -5 "$TMP/job.log")"
[ "$(wc -l <"$TMP/job.out")" = 1 ] && grep -Eq '^job ok in [0-9.]+ s: model=mlp mode=sync .*test_accuracy=' "$TMP/job.out" ||
    fail "stdout is not the one 'job ok' line: $(cat "$TMP/job.out")"
grep -q 'job ok' "$TMP/job.log" && fail "the 'job ok' line is on stderr too"
grep -q ' C I summary: ' "$TMP/job.log" || fail "no scheduler summary among the logs on stderr"
echo "ok - the launcher's last line on stdout: $(cut -c1-60 "$TMP/job.out")..."

[ -d "$TMP/new/plots" ] && [ -s "$TMP/new/logs/x/W0.log" ] ||
    fail "--plot or --log-dir not made: $(ls -R "$TMP/new" 2>&1 | head)"
grep -E ' W0 I epoch=' "$TMP/job.log" >"$TMP/progress" || fail "no progress line of W0"
grep -q 'step=[0-9]*/468' "$TMP/progress" && fail "progress counted to the epoch's 468: $(head -2 "$TMP/progress")"
grep -Eq 'epoch=1/1 step=[0-9]+/40 .* eta=[0-9]+s$' "$TMP/progress" ||
    fail "no 'epoch=1/1 step=N/40 ... eta=Ns' line: $(cat "$TMP/progress")"
grep -Eq 'step=40/40 ' "$TMP/progress" || fail "no progress line at the last step: $(cat "$TMP/progress")"
echo "ok - progress toward --max-steps: $(grep -m1 -o 'step=.*' "$TMP/progress")"

if [ -f "$TMP/new/plots/progress.png" ]; then
    [ "$(wc -l <"$TMP/new/plots/progress.csv")" -ge 3 ] || fail "a plot of fewer than two points"
else
    grep -q 'no plots of the run' "$TMP/job.log" || fail "no plot and no word why"
fi
left=$(ls "$TMP/new/plots" | grep -v -e '^progress.png$' -e '^progress.csv$' -e '^accuracy.csv$')
[ -z "$left" ] || fail "stray files beside the plots: $left"
echo "ok - --plot: $(ls "$TMP/new/plots" | tr '\n' ' ')"

# 3. One step: one report, no plot.
"$LAUNCH" --servers 1 --workers 1 --max-steps 1 --plot "$TMP/one" >/dev/null 2>"$TMP/one.log" ||
    fail "one-step job: $(tail -5 "$TMP/one.log")"
grep -q 'no plots of the run' "$TMP/one.log" || fail "one step: no 'no plots' line"
[ -d "$TMP/one" ] && [ -z "$(ls "$TMP/one")" ] || fail "one step left: $(ls "$TMP/one")"
echo "ok - a one-step job draws no plot and leaves nothing"

# 4. The two sets of packages.
run=" $("$ROOT/deploy/install-deps.sh" --run --print) "
all=" $("$ROOT/deploy/install-deps.sh" --print) "
for p in check slurmd munge prometheus openmpi-bin python3-yaml; do
    case $run in *" $p "*) fail "install-deps.sh --run installs $p, a test's" ;; esac
    case $all in *" $p "*) ;; *) fail "install-deps.sh does not install $p" ;; esac
done
for p in libzmq3-dev libprotobuf-c-dev libopenblas-dev libjansson-dev libmicrohttpd-dev dataset-fashion-mnist; do
    case $run in *" $p "*) ;; *) fail "install-deps.sh --run misses $p" ;; esac
done
grep -q 'install-deps.sh --run' "$ROOT/deploy/quickstart.sh" || fail "the quickstart installs more than --run"
echo "ok - install-deps.sh --run:$run"
check_logs
