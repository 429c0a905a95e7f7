/* worker/main.c - shardps-worker: flags in, train one job, exit status out. */
#include <stdio.h>

#include "common/config.h"
#include "common/log.h"
#include "proto/link.h"
#include "worker/data.h"
#include "worker/worker.h"

int main(int argc, char **argv)
{
    ps_worker_config_t cfg = {
        .scheduler = PS_LINK_DEFAULT_SCHEDULER,
        .rank = -1,
        .data_dir = PS_DATA_DEFAULT_DIR,
        .device = "auto",
        .threads = 1,
        .connect_timeout = PS_LINK_DEFAULT_CONNECT_TIMEOUT,
        .peer_timeout = PS_LINK_DEFAULT_PEER_TIMEOUT,
        .progress_seconds = 2.0,
        .bind = "tcp://0.0.0.0:*",
        .ring_kib = 128,
        .overlap = 1,
    };
    const char *log_level = "info";
    ps_flag_t flags[] = {
        ps_link_scheduler_flag(&cfg.scheduler),
        ps_link_rank_flag(&cfg.rank, PS_ROLE_WORKER),
        {"data", PS_FLAG_STR, &cfg.data_dir, "DIR", "directory of the Fashion-MNIST .gz files"},
        {"device", PS_FLAG_STR, &cfg.device, "DEV", "compute backend: auto, cpu or cuda"},
        {"threads", PS_FLAG_INT, &cfg.threads, "N", "compute threads on the CPU (0 = OpenBLAS default; 1 uses our AVX-512 kernels where the CPU has them)"},
        {"dump-params", PS_FLAG_STR, &cfg.dump_params, "FILE", "write the final parameters here (raw float32; %d = the worker's rank)"},
        {"bind", PS_FLAG_STR, &cfg.bind, "ENDPOINT", "allreduce: where the left neighbour connects (port * = any free port)"},
        {"advertise", PS_FLAG_STR, &cfg.advertise, "ENDPOINT", "allreduce: endpoint announced to the ring (default: the bound one; a 0.0.0.0 host becomes the address the scheduler sees)"},
        {"ring-kib", PS_FLAG_INT, &cfg.ring_kib, "KIB", "allreduce: KiB per ring message, the pipelining granularity"},
        {"overlap", PS_FLAG_INT, &cfg.overlap, "0|1", "sync, ssp: push each layer's gradients as backward finishes it; allreduce: sum the last layers' gradients while backward still runs"},
        {"progress", PS_FLAG_DOUBLE, &cfg.progress_seconds, "SECONDS", "worker 0 logs progress this often"},
        ps_link_connect_timeout_flag(&cfg.connect_timeout),
        ps_link_peer_timeout_flag(&cfg.peer_timeout),
        ps_log_level_flag(&log_level),
    };
    const char *prog = "shardps-worker";
    int rc = ps_config_parse(prog,
                             "A shardps worker: pulls weights, computes gradients on its data "
                             "shard, pushes them\n(or, in allreduce mode, sums them over a "
                             "ring of workers and updates locally).",
                             flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (ps_log_set_level_flag(prog, log_level) != 0) {
        return 2;
    }
    if (ps_link_check_timeouts(cfg.connect_timeout, cfg.peer_timeout) != 0 ||
        cfg.threads < 0 || !(cfg.progress_seconds > 0)) {
        fprintf(stderr, "%s: error: timeouts and --progress must be > 0, --threads >= 0\n",
                prog);
        return 2;
    }
    if (cfg.overlap != 0 && cfg.overlap != 1) {
        fprintf(stderr, "%s: error: --overlap %d: expected 0 or 1\n", prog, cfg.overlap);
        return 2;
    }
    if (cfg.ring_kib < 1 || cfg.ring_kib > 65536) {
        fprintf(stderr, "%s: error: --ring-kib %d: expected 1 to 65536\n", prog,
                cfg.ring_kib);
        return 2;
    }
    ps_log_set_role("W", cfg.rank);
    return ps_worker_run(&cfg);
}
