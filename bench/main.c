/*
 * bench/main.c - shardps-bench: measurements of shardps, as tables and plots.
 *
 *   shardps-bench comm  [--quick] [--out DIR] ...  push+pull goodput vs raw ZeroMQ
 *   shardps-bench train [--quick] [--out DIR] ...  modes x workers: speed, accuracy
 *   shardps-bench compute --model M [--torch] ...   one worker's arithmetic vs PyTorch
 *   shardps-bench observe [--rounds N] ...          the cost of metrics and traces
 *   shardps-bench checkpoint [--reps N] ...          training with vs without checkpoints
 *
 * "Performance is measured, not asserted": every figure comes with its
 * baseline measured in the same run (raw ZeroMQ, MPI, one worker), and
 * nothing here fails on a timing. This file only dispatches; comm.c (with
 * comm_run.c, allreduce.c and allreduce_mpi.c), train.c and compute.c
 * measure, plots.c writes.
 */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "common/alloc.h"

static void s_usage(FILE *f)
{
    fprintf(
        f,
        "usage: shardps-bench comm  [--quick] [--out DIR] [--servers LIST] [--inflight "
        "LIST] ...\n"
        "       shardps-bench train [--quick] [--out DIR] [--model mlp] [--straggler R:F] "
        "...\n"
        "       shardps-bench compute --model mlp|cnn [--device cpu|cuda] [--threads N] "
        "[--torch] --json FILE\n"
        "       shardps-bench observe [--rounds N] [--out DIR] ...\n"
        "       shardps-bench checkpoint [--out DIR] [--every N] [--reps N] ...\n"
        "\n"
        "comm   parameter-server push+pull goodput and rounds/s against payload size,\n"
        "       servers and rounds in flight, each beside raw ZeroMQ throughput of the\n"
        "       same bytes between the same endpoints; allreduce bus bandwidth beside\n"
        "       MPI_Allreduce where OpenMPI is installed.\n"
        "train  every consistency mode x worker count trains the same model with the\n"
        "       same seed through shardps-launch: samples/s, time to a target accuracy,\n"
        "       final accuracy, bytes per step, staleness.\n"
        "compute one worker trains alone (no servers, no network): samples/s, where a\n"
        "       step's time goes, and the PyTorch baseline's samples/s beside it.\n"
        "observe the cost of watching a job: one MLP job with metrics off, served and\n"
        "       scraped, and traced, alternated: samples/s and each one's cost.\n"
        "checkpoint the same sync job without and with --checkpoint-every N, alternated:\n"
        "       the samples/s ratio (what checkpointing costs).\n"
        "\n"
        "comm and train write CSV and markdown tables and gnuplot PNGs into --out\n"
        "(bench-out); compute writes one JSON object and prints a markdown row.\n"
        "`shardps-bench SUBCOMMAND --help` lists every flag.\n");
}

int main(int argc, char **argv)
{
    /* Large frames reuse freed memory instead of costing page faults per
     * message, whatever MALLOC_* says (common/alloc.h). */
    ps_alloc_keep_large_blocks();
    if (argc < 2) {
        s_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        s_usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "comm")) {
        return ps_bench_comm_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "train")) {
        return ps_bench_train_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "compute")) {
        return ps_bench_compute_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "observe")) {
        return ps_bench_observe_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "checkpoint")) {
        return ps_bench_checkpoint_main(argc - 1, argv + 1);
    }
    fprintf(
        stderr,
        "shardps-bench: error: unknown subcommand '%s' (expected comm, train, compute, observe or "
        "checkpoint)\n",
        argv[1]);
    return 2;
}
