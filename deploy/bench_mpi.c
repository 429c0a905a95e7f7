/*
 * deploy/bench_mpi.c - shardps-bench-mpi: MPI_Allreduce timings, the reference
 * that `shardps-bench comm` puts beside shardps's ring allreduce.
 *
 * Run under mpirun by shardps-bench: shardps-bench-mpi OUT SECONDS BYTES...
 * For each size: a float32 sum of BYTES/4 elements in place; a warm-up, then
 * three chunks of calls that together fill SECONDS (rank 0 decides the count,
 * everyone follows), each between barriers and timed by the slowest rank.
 * Rank 0 writes "BYTES SECONDS_PER_CALL" lines to OUT: the median chunk. Built only where
 * Meson finds MPI; it uses nothing of shardps.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls MPI_Allreduce iters times; returns the slowest rank's seconds per call. */
static double s_time(float *buf, int count, long iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double mine = (MPI_Wtime() - t0) / (double)iters, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

static void s_sort3(double *t)
{
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2 - i; j++) {
            if (t[j] > t[j + 1]) {
                double x = t[j];
                t[j] = t[j + 1];
                t[j + 1] = x;
            }
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 4) {
        if (rank == 0) {
            fprintf(stderr, "usage: shardps-bench-mpi OUT SECONDS BYTES...\n");
        }
        MPI_Finalize();
        return 2;
    }
    double seconds = atof(argv[2]);
    FILE *out = rank == 0 ? fopen(argv[1], "w") : NULL;
    int bad = rank == 0 && !out;
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad) {
        fprintf(stderr, "shardps-bench-mpi: cannot write %s\n", argv[1]);
        MPI_Finalize();
        return 1;
    }
    for (int a = 3; a < argc; a++) {
        long bytes = atol(argv[a]);
        int count = (int)(bytes / (long)sizeof(float));
        float *buf = calloc((size_t)(count > 0 ? count : 1), sizeof(float));
        if (!buf || count <= 0) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* Warm-up (connections, pages) of >= 5 calls and a tenth of the
         * time, which also sizes the timed chunks. */
        long iters = 5;
        double once = s_time(buf, count, iters);
        while (once * (double)iters < seconds / 10 && iters < 100000) {
            iters *= 2;
            once = s_time(buf, count, iters);
        }
        iters = once > 0 ? (long)(seconds / 3 / once) : 1000;
        iters = iters < 3 ? 3 : iters > 100000 ? 100000 : iters;
        MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        double t[3];
        for (int k = 0; k < 3; k++) {
            t[k] = s_time(buf, count, iters);
        }
        s_sort3(t); /* the median of three chunks, like the bench's medians */
        if (out) {
            fprintf(out, "%ld %.9f\n", bytes, t[1]);
        }
        free(buf);
    }
    if (out) {
        fclose(out);
    }
    MPI_Finalize();
    return 0;
}
