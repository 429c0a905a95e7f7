/*
 * bench/main.c - shardps-bench: measurements of shardps, as results pages.
 *
 *   shardps-bench comm  [--quick] [--out DIR] ...  push+pull goodput vs raw ZeroMQ
 *   shardps-bench train [--quick] [--out DIR] ...  modes x workers: speed, accuracy
 *   shardps-bench crossover [--links L] ...       the PS against the ring, per link setting
 *   shardps-bench compute --model M [--torch] ...   one worker's arithmetic vs PyTorch
 *   shardps-bench observe [--rounds N] ...          the cost of metrics and traces
 *   shardps-bench checkpoint [--reps N] ...          training with vs without checkpoints
 *   shardps-bench replicas [--reps N] ...            training with vs without hot replicas
 *   shardps-bench scale [--workers 8,16,32,64] ...   scheduler and server cost per step
 *   shardps-bench compress [--modes L] [--codecs L]  bytes saved vs accuracy (--wire, --compress)
 *   shardps-bench memory [--rows 1000000,4000000]    a server's memory per embedding row
 *   shardps-bench summary [--results DIR] [--out FILE] the results pages in one table
 *
 * "Performance is measured, not asserted": every figure comes with its
 * baseline measured in the same run (raw ZeroMQ, MPI, one worker), and
 * nothing here fails on a timing. This file only dispatches; comm/ (comm,
 * compress) and train/ (train, compute, observe, checkpoint, scale) measure,
 * netsim/ simulates a cluster for train --net and crossover, page.c and
 * plots.c write, summary.c gathers the pages into docs/results/README.md.
 */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "common/alloc.h"
#include "common/version.h"
#include "proto/codec.h"

static void s_usage(FILE *f)
{
    fprintf(
        f,
        "usage: shardps-bench comm  [--quick] [--out DIR] [--servers LIST] [--inflight "
        "LIST] ...\n"
        "       shardps-bench train [--quick] [--out DIR] [--model mlp] [--straggler R:F] "
        "...\n"
        "       shardps-bench crossover [--links LIST] [--workers LIST] [--max-steps N] "
        "[--out DIR] ...\n"
        "       shardps-bench compute --model mlp|cnn [--device cpu|cuda] [--threads N] "
        "[--torch] --json FILE\n"
        "       shardps-bench observe [--rounds N] [--out DIR] ...\n"
        "       shardps-bench checkpoint [--out DIR] [--every N] [--reps N] ...\n"
        "       shardps-bench replicas [--out DIR] [--servers N] [--reps N] ...\n"
        "       shardps-bench scale [--out DIR] [--workers LIST] [--servers N] [--steps A,B] "
        "...\n"
        "       shardps-bench compress [--out DIR] [--modes LIST] [--codecs LIST] ...\n"
        "       shardps-bench memory [--out DIR] [--rows LIST] [--optimizers LIST] ...\n"
        "       shardps-bench summary [--results DIR] [--out FILE]\n"
        "\n"
        "comm   parameter-server push+pull goodput and rounds/s against payload size,\n"
        "       servers and rounds in flight, each beside raw ZeroMQ throughput of the\n"
        "       same bytes between the same endpoints; allreduce bus bandwidth beside\n"
        "       MPI_Allreduce where OpenMPI is installed.\n"
        "train  every consistency mode x worker count trains the same model with the\n"
        "       same seed through shardps-launch: samples/s, time to a target accuracy,\n"
        "       final accuracy, bytes per step, staleness. --model ctr: the parameter\n"
        "       server against the ring's two ways of moving embedding rows, bytes per\n"
        "       worker link beside each one's theory (train_ctr.md).\n"
        "crossover for each link setting (--net and --dilate) and worker count N, the MLP\n"
        "       with N dedicated servers, N colocated servers and the ring: samples/s beside\n"
        "       the link-bound rate, PS/ring, and the loopback CPU cost of a round (root).\n"
        "compute one worker trains alone (no servers, no network): samples/s, where a\n"
        "       step's time goes, and the PyTorch baseline's samples/s beside it.\n"
        "observe the cost of watching a job: one MLP job with metrics off, scraped every\n"
        "       1 s, every 100 ms, and traced, in turn: samples/s and each one's cost.\n"
        "checkpoint the same sync job without and with --checkpoint-every N, alternated:\n"
        "       the samples/s ratio (what checkpointing costs).\n"
        "replicas the same sync job without and with --replicas 1, alternated: the\n"
        "       samples/s ratio (what hot replicas cost).\n"
        "scale  the same job with 8, 16, 32, 64 workers: the scheduler's and each\n"
        "       server's CPU time and messages per step.\n"
        "compress each mode x wire codec (fp32, fp16, bf16, top-k) trains the same model:\n"
        "       bytes on the wire by message type saved against fp32, and the accuracy.\n"
        "memory a server's table of embedding rows filled to 1M and 4M rows: its peak\n"
        "       resident memory per row against the rows' floats and optimizer state.\n"
        "summary reads the results pages in --results (docs/results) and writes one\n"
        "       table of them, a row per setting linked to its page (README.md).\n"
        "\n"
        "Each writes a results page, OUT/SUBCOMMAND.md (--out, default bench-out; comm\n"
        "--secure: comm_secure.md, train --join: train_join.md), beside its CSV files and\n"
        "gnuplot PNGs; its header gives the command that made it, the commit, the date,\n"
        "the machine and the load. compute writes one only with --out (and its figures\n"
        "as JSON with --json). The pages in docs/results/ are regenerated by the\n"
        "command in their header, e.g. shardps-bench comm --out docs/results/comm.\n"
        "`shardps-bench SUBCOMMAND --help` lists every flag; `shardps-bench --version`\n"
        "prints the build and protocol version.\n");
}

int main(int argc, char **argv)
{
    /* Large frames reuse freed memory instead of costing page faults per
     * message, whatever MALLOC_* says (common/alloc.h). */
    ps_alloc_keep_large_blocks();
    if (ps_version_flag("shardps-bench", ps_codec_build_id, argc, argv)) {
        return 0;
    }
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
    if (!strcmp(argv[1], "crossover")) {
        return ps_bench_crossover_main(argc - 1, argv + 1);
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
    if (!strcmp(argv[1], "replicas")) {
        return ps_bench_replicas_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "scale")) {
        return ps_bench_scale_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "compress")) {
        return ps_bench_compress_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "memory")) {
        return ps_bench_memory_main(argc - 1, argv + 1);
    }
    if (!strcmp(argv[1], "summary")) {
        return ps_bench_summary_main(argc - 1, argv + 1);
    }
    fprintf(
        stderr,
        "shardps-bench: error: unknown subcommand '%s' (expected comm, train, crossover, "
        "compute, observe, checkpoint, replicas, scale, compress, memory or summary)\n",
        argv[1]);
    return 2;
}
