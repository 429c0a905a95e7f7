/*
 * bench/comm/mpi_helper.c - shardps-bench-mpi: MPI_Allreduce timings, the reference
 * that `shardps-bench comm` puts beside shardps's ring allreduce.
 *
 * Run under mpirun by shardps-bench: shardps-bench-mpi DIR. The bench drives
 * it through FIFOs it made in DIR, so that it can alternate chunks of MPI
 * calls with chunks of its own ring's calls while the other side waits
 * without using a CPU (OpenMPI's blocking calls spin; a read() on a FIFO does
 * not): every rank R reads commands from DIR/cmd-R, rank 0 writes replies to
 * DIR/reply. A command is {bytes, iters} (two int64; bytes <= 0 or end of
 * file: leave); for it every rank runs, between barriers, `iters` in-place
 * float32 MPI_Allreduce sums of bytes/4 elements of a zeroed buffer, and rank 0
 * replies with the slowest rank's seconds (a double). The first reply (0.0)
 * says MPI is up. Built only where Meson finds MPI, and installed under
 * libexec (not a command); of shardps it uses only the pipe helpers of
 * deploy/proc.h and --version.
 */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/version.h"
#include "deploy/proc.h"
#include "proto/codec.h"

/* Calls MPI_Allreduce iters times; returns the slowest rank's seconds in all. */
static double s_time(float *buf, int count, long iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double mine = MPI_Wtime() - t0, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

#define S_PROG "shardps-bench-mpi"

int main(int argc, char **argv)
{
    /* Before MPI_Init: a person asking needs no MPI job. */
    if (ps_version_flag(S_PROG, ps_codec_build_id, argc, argv)) {
        return 0;
    }
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: mpirun -np N " S_PROG " DIR\n"
               "The MPI_Allreduce reference of `shardps-bench comm`, which starts it under\n"
               "mpirun and drives it through FIFOs in DIR; not a command of its own.\n"
               "Installed in shardps's libexec directory, where shardps-bench finds it.\n"
               "  --version  " PS_VERSION_HELP "\n");
        return 0;
    }
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 2) {
        if (rank == 0) {
            fprintf(stderr, "usage: " S_PROG " DIR (run by shardps-bench comm; see --help)\n");
        }
        MPI_Finalize();
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/cmd-%d", argv[1], rank);
    int cmd = open(path, O_RDONLY | O_CLOEXEC);
    int reply = -1;
    if (rank == 0) {
        snprintf(path, sizeof path, "%s/reply", argv[1]);
        reply = open(path, O_WRONLY | O_CLOEXEC);
    }
    if (cmd < 0 || (rank == 0 && reply < 0)) {
        fprintf(stderr, "shardps-bench-mpi: rank %d: cannot open %s: %s\n", rank, path,
                strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double up = 0;
    if (rank == 0 && ps_proc_write_all(reply, &up, sizeof up) != 0) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    float *buf = NULL;
    int64_t have = 0;
    for (;;) {
        int64_t c[2];
        if (ps_proc_read_all(cmd, c, sizeof c, -1) != 0 || c[0] <= 0) {
            break;
        }
        int64_t count = c[0] / (int64_t)sizeof(float);
        if (count > have) {
            free(buf);
            buf = calloc((size_t)count, sizeof(float));
            have = buf ? count : 0;
        }
        if (!buf || count <= 0 || count > INT32_MAX || c[1] < 1) {
            fprintf(stderr, "shardps-bench-mpi: rank %d: bad command %lld x %lld\n", rank,
                    (long long)c[0], (long long)c[1]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double t = s_time(buf, (int)count, (long)c[1]);
        if (rank == 0 && ps_proc_write_all(reply, &t, sizeof t) != 0) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    free(buf);
    close(cmd);
    if (reply >= 0) {
        close(reply);
    }
    MPI_Finalize();
    return 0;
}
