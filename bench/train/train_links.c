/*
 * bench/train/train_links.c - `shardps-bench train --net`: the simulated
 * cluster made and removed around a sweep, each run's links measured on its
 * counters beside the theory, the link-bound step time for the bytes
 * measured, and whether the machine's cores or the simulator's delay line,
 * not the links, were the bound. Only with --net; the figures come from
 * bench/netsim/job.c (ps_netsim_result_t). crossover.c reads its runs the
 * same way.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/train/train.h"
#include "common/error.h"

int ps_bench_train_net_new(train_cfg_t *cfg, const char *prog, int servers, int workers)
{
    char log[PATH_MAX], err[256];
    snprintf(log, sizeof log, "%s/runs/net.log", cfg->out);
    remove(log);
    ps_netsim_catch_signals();
    int rc = ps_netsim_new(cfg->net_spec, cfg->dilate, servers, workers, log, &cfg->net,
                           err, sizeof err);
    if (rc == PS_ENOTSUP) {
        printf("%s --net %s: skipped: %s\n", prog, cfg->net_spec, err);
        fprintf(stderr, "%s: --net skipped: %s\n", prog, err);
        return rc;
    } else if (rc != 0) {
        fprintf(stderr, "%s: error: %s\n", prog, err);
        return PS_EIO;
    }
    fprintf(stderr, "%s: simulated network %s: %s\n", prog, ps_netsim_prefix(cfg->net),
            ps_netsim_note(cfg->net));
    return 0;
}

int ps_bench_train_net_destroy(train_cfg_t *cfg, const char *prog)
{
    if (!cfg->net) {
        return 0;
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s", ps_netsim_prefix(cfg->net));
    int left = ps_netsim_destroy(&cfg->net);
    if (left) {
        fprintf(stderr, "%s: %d network namespaces %s* could not be removed\n", prog, left,
                prefix);
        return 1;
    }
    fprintf(stderr, "%s: simulated network %s removed\n", prog, prefix);
    return 0;
}

double ps_bench_train_theory_mb(const train_run_t *r)
{
    const double M = r->workers, P = r->params * 4 / 1e6; /* MB of fp32 */
    /* dedicated: a worker sends and receives the model once; colocated its
     * link also carries its server's share, as much as the ring */
    return ps_bench_train_serverless(r->label) || ps_bench_train_colocated(r->label)
               ? 2 * (M - 1) / M * P
               : P;
}

void ps_bench_train_step_ms(const train_cfg_t *cfg, const train_run_t *r, double *bound,
                            double *step)
{
    const double rate = ps_netsim_rate(cfg->net);
    *bound = rate > 0 ? r->link_max * 8 / rate * 1e3 : NAN;
    *step = r->sps > 0 ? r->workers * ps_bench_train_batch(cfg) / r->sps * 1e3 : NAN;
}

const char *ps_bench_train_bound(const train_cfg_t *cfg, const train_run_t *r)
{
    if (isnan(r->cpu_busy)) {
        return "";
    }
    if (!cfg->net) {
        return r->cpu_busy >= TRAIN_CPU_BOUND ? "CPU" : "not CPU";
    }
    return r->cpu_busy >= TRAIN_CPU_BOUND     ? "CPU"
           : r->line_busy >= TRAIN_LINE_BOUND ? "delay line"
                                              : "link";
}

int ps_bench_train_links_new(const train_cfg_t *cfg, ps_bench_table_t **t)
{
    char title[256], headers[768];
    snprintf(title, sizeof title,
             "### Links: bytes per worker link per step, measured and in theory; "
             "link-bound against measured step time (%s)",
             ps_netsim_note(cfg->net));
    snprintf(headers, sizeof headers,
             "mode,workers,scenario,sent MB/step (measured),received MB/step (measured),"
             "PS MB/step each way (theory),ring MB/step each way (theory),"
             "busiest link MB/step,link-bound ms/step,measured ms/step,link efficiency,"
             "samples/s,s to %.2f,TCP retransmissions,TCP timeouts,CPU busy,"
             "delay line busy,bound",
             cfg->target);
    return ps_bench_table_new(cfg->page, "train_links", title,
                              "mode,workers,scenario,link_tx_mb,link_rx_mb,theory_ps_mb,"
                              "theory_ring_mb,link_max_mb,bound_ms,step_ms,efficiency,"
                              "samples_per_sec,time_to_target_s,tcp_retrans,tcp_timeouts,"
                              "cpu_busy,line_busy,bound",
                              headers, t);
}

void ps_bench_train_links_row(const train_cfg_t *cfg, ps_bench_table_t *t,
                              const train_run_t *r)
{
    const double M = r->workers, P = r->params * 4 / 1e6; /* MB of fp32 */
    const double ring = 2 * (M - 1) / M * P, ps = ps_bench_train_theory_mb(r);
    double bound, step;
    ps_bench_train_step_ms(cfg, r, &bound, &step);
    char tta[32] = "", psmb[32] = ""; /* empty: n/a */
    if (!isnan(r->tta)) {
        snprintf(tta, sizeof tta, "%.1f", r->tta);
    }
    if (strcmp(r->mode, "allreduce") != 0) {
        snprintf(psmb, sizeof psmb, "%.3f", ps);
    }
    ps_bench_table_rowf(t,
                        "%s,%d,%s,%.3f,%.3f,%s,%.3f,%.3f,%.1f,%.1f,%.2f,%.0f,%s,%.0f,%.0f,"
                        "%.2f,%.2f,%s",
                        r->name, r->workers, ps_bench_train_scenarios[r->scen],
                        r->link_tx / 1e6, r->link_rx / 1e6, psmb, ring, r->link_max / 1e6,
                        bound, step, bound / step, r->sps, tta, r->retrans, r->timeouts,
                        r->cpu_busy, r->line_busy, ps_bench_train_bound(cfg, r));
}

void ps_bench_train_links_notes(ps_bench_table_t *t)
{
    ps_bench_table_note(
        t,
        "Measured: each namespace's eth0 byte counters (/proc/net/dev inside it, headers "
        "included) and TCP counters (/proc/net/snmp RetransSegs, /proc/net/netstat "
        "TCPTimeouts) before and after the job, per worker step (worker 0's steps; the "
        "job's start-up, initial values and evaluations included; the jobs run without "
        "the preflight, whose probes would count too). Theory: fp32 payload "
        "of the model, P x 4 bytes; a parameter server with servers of their own sends "
        "and receives it once per worker step, a ring 2(M-1)/M times, a colocated "
        "parameter server as much as the ring. Link-bound ms/step: the busiest link's "
        "bytes one way at the link rate; link efficiency = link-bound / measured. CPU "
        "busy: the share of this machine's cores not idle over the job (/proc/stat); at "
        "%.0f %% or more the row is CPU-bound and says nothing about the network. Delay "
        "line busy: the busiest of the delay line's threads, its share of a core over the "
        "job (0 without a delay); at %.0f %% or more its packets wait for it, and the row "
        "is bound by the simulator, not the links.",
        TRAIN_CPU_BOUND * 100, TRAIN_LINE_BOUND * 100);
}
