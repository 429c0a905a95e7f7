#!/usr/bin/env bash
# tests/integration/test_mpirun.sh - `mpirun -np 5 shardps-mpi --servers 2 ...`
# starts a whole job, one role per rank, and trains the MLP exactly as the
# launcher does.
#
# Open MPI's mpirun (as root: --allow-run-as-root; --oversubscribe on a small
# machine) runs 5 ranks of shardps-mpi: rank 0 the scheduler, 1-2 the servers,
# 3-4 the workers. Asserts: mpirun exits 0; the summary's job id is the one
# rank 0 broadcast (SHARDPS_JOB_ID given here), the nodes are S0 S1 W0 W1 and
# each rank's role line names its task; the MLP reaches >= 0.82 after 1
# epoch, and exactly the test accuracy of the same job through
# shardps-launch (sync is bitwise reproducible). Skips (77) without mpirun or
# without shardps-mpi (no MPI found at build time).
. "$(dirname "$0")/lib.sh"

MPI_BIN=$SPS_BUILD/deploy/shardps-mpi
command -v mpirun >/dev/null || skip "no mpirun (Debian: openmpi-bin)"
[ -x "$MPI_BIN" ] || skip "no shardps-mpi: Meson found no MPI (Debian: libopenmpi-dev)"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
JOB=(--servers 2 --epochs 1 --seed 3)
SHARDPS_JOB_ID=mpi-test-$$ timeout 300 mpirun --allow-run-as-root --oversubscribe -np 5 \
    --mca btl self,tcp "$MPI_BIN" "${JOB[@]}" --port "$PORT" --summary "$TMP/mpi.json" \
    >"$TMP/mpi.log" 2>&1 || fail "mpirun failed ($?): $(tail -5 "$TMP/mpi.log")"
expect "$TMP/mpi.json" "d['status'] == 'ok' and d['job_id'] == 'mpi-test-$$'" \
    "the mpirun job did not end ok under the broadcast job id"
expect "$TMP/mpi.json" "[n['node'] for n in d['nodes']] == ['S0', 'S1', 'W0', 'W1']" \
    "the mpirun job's nodes are not S0 S1 W0 W1"
for t in C0 S0 S1 W0 W1; do
    grep -q "L I task is $t of job mpi-test-$$ (2 servers, 2 workers)" "$TMP/mpi.log" ||
        fail "no rank became $t: $(grep 'task is' "$TMP/mpi.log")"
done
expect "$TMP/mpi.json" "d['test_accuracy'] >= 0.82" "the MLP is below 0.82 after 1 epoch"

"$LAUNCH" --workers 2 "${JOB[@]}" --summary "$TMP/launch.json" --log-level warn \
    >"$TMP/launch.log" 2>&1 || fail "the launcher run failed: $(tail -5 "$TMP/launch.log")"
a=$(field "$TMP/mpi.json" "d['test_accuracy']")
b=$(field "$TMP/launch.json" "d['test_accuracy']")
[ "$a" = "$b" ] || fail "mpirun's test accuracy $a is not the launcher's $b"
check_logs
echo "ok: mpirun -np 5 shardps-mpi: test_accuracy $a after 1 epoch (launcher: $b)"
