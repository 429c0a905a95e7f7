/*
 * bench/main.c - shardps-bench: measurements of shardps, as tables and plots.
 *
 *   shardps-bench comm  [--quick] [--out DIR] ...  push+pull goodput vs raw ZeroMQ
 *   shardps-bench train [--quick] [--out DIR] ...  modes x workers: speed, accuracy
 *   shardps-bench compute --model M [--torch] ...   one worker's arithmetic vs PyTorch
 *   shardps-bench observe [--rounds N] ...          the cost of metrics and traces
 *   shardps-bench checkpoint [--reps N] ...          training with vs without checkpoints
 *   shardps-bench scale [--workers 8,16,32,64] ...   scheduler and server cost per step
 *   shardps-bench compress [--modes L] [--codecs L]  bytes saved vs accuracy (--wire, --compress)
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
        "       shardps-bench scale [--out DIR] [--workers LIST] [--servers N] [--steps A,B] "
        "...\n"
        "       shardps-bench compress [--out DIR] [--modes LIST] [--codecs LIST] ...\n"
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
        "observe the cost of watching a job: one MLP job with metrics off, scraped every\n"
        "       1 s, every 100 ms, and traced, in turn: samples/s and each one's cost.\n"
        "checkpoint the same sync job without and with --checkpoint-every N, alternated:\n"
        "       the samples/s ratio (what checkpointing costs).\n"
        "scale  the same job with 8, 16, 32, 64 workers: the scheduler's and each\n"
        "       server's CPU time and messages per step.\n"
        "compress each mode x wire codec (fp32, fp16, bf16, top-k) trains the same model:\n"
        "       bytes on the wire by message type saved against fp32, and the accuracy.\n"
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
    if (!strcmp(argv[1], "scale")) {
        return ps_bench_scale_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "compress")) {
        return ps_bench_compress_main(argc - 1, argv + 1);
    }
    fprintf(
        stderr,
        "shardps-bench: error: unknown subcommand '%s' (expected comm, train, compute, observe, "
        "checkpoint, scale or compress)\n",
        argv[1]);
    return 2;
}
