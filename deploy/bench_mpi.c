/*
 * deploy/bench_mpi.c - shardps-bench-mpi: MPI_Allreduce timings, the reference
 * that `shardps-bench comm` puts beside shardps's ring allreduce.
 *
 * Run under mpirun by shardps-bench: shardps-bench-mpi OUT SECONDS CHUNKS BYTES...
 * For each size: a float32 sum of BYTES/4 elements in place on a zeroed
 * buffer; a warm-up of >= 5 calls grown to half a chunk (it also sizes the
 * chunks; rank 0 decides the count, everyone follows), then CHUNKS chunks of
 * calls of >= SECONDS each, each between barriers and timed by the slowest
 * rank. Rank 0 writes "BYTES SECONDS_PER_CALL" lines to OUT: the median chunk.
 * The bench times its own ring on the same schedule (bench_comm.c). Built only
 * where Meson finds MPI; it uses nothing of shardps.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { S_MAX_CHUNKS = 64, S_WARMUP_CALLS = 5, S_MIN_CALLS = 3, S_MAX_CALLS = 100000 };

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

/* The median of t[0..n) (sorts t). */
static double s_median(double *t, int n)
{
    for (int i = 1; i < n; i++) {
        double x = t[i];
        int j = i;
        for (; j > 0 && t[j - 1] > x; j--) {
            t[j] = t[j - 1];
        }
        t[j] = x;
    }
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int chunks = argc >= 5 ? atoi(argv[3]) : 0;
    if (argc < 5 || chunks < 1 || chunks > S_MAX_CHUNKS) {
        if (rank == 0) {
            fprintf(stderr, "usage: shardps-bench-mpi OUT SECONDS CHUNKS(1..%d) BYTES...\n",
                    S_MAX_CHUNKS);
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
    for (int a = 4; a < argc; a++) {
        long bytes = atol(argv[a]);
        int count = (int)(bytes / (long)sizeof(float));
        float *buf = calloc((size_t)(count > 0 ? count : 1), sizeof(float));
        if (!buf || count <= 0) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* Warm-up (connections, pages): >= 5 calls, doubled up to half a chunk. */
        long iters = S_WARMUP_CALLS;
        double t = s_time(buf, count, iters);
        int more = t < seconds / 2 && iters < S_MAX_CALLS;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        while (more) {
            iters *= 2;
            t = s_time(buf, count, iters);
            more = t < seconds / 2 && iters < S_MAX_CALLS;
            MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
        double once = t / (double)iters;
        iters = once > 0 ? (long)(seconds / once) + 1 : S_MAX_CALLS;
        iters = iters < S_MIN_CALLS   ? S_MIN_CALLS
                : iters > S_MAX_CALLS ? S_MAX_CALLS
                                      : iters;
        MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        double per[S_MAX_CHUNKS];
        for (int k = 0; k < chunks; k++) {
            per[k] = s_time(buf, count, iters) / (double)iters;
        }
        if (out) {
            fprintf(out, "%ld %.9f\n", bytes, s_median(per, chunks));
        }
        free(buf);
    }
    if (out) {
        fclose(out);
    }
    MPI_Finalize();
    return 0;
}
