/*
 * bench/comm/allreduce.c - `shardps-bench comm`'s allreduce: shardps's ring
 * allreduce beside MPI_Allreduce, timed as shardps-bench-mpi times it.
 *
 * n ring members, each a process forked from this one (as MPI's ranks are
 * processes) with its own ZeroMQ context, worker/ring.h over TCP loopback on
 * 127.0.0.1 with the worker's defaults (--ring-kib). This process only drives
 * them, over two pipes per member: it hands out the endpoints, then sends
 * "allreduce F floats I times" commands; each member does a small allreduce
 * as a barrier, times I calls in place on a zeroed buffer (as the MPI helper's)
 * and writes back its seconds. A chunk's time is the slowest member's.
 * allreduce_mpi.c drives the MPI side the same way; this file alternates the
 * two and writes the table.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/comm/comm.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "deploy/proc.h"
#include "worker/ring.h"

/* A command to a ring member. */
typedef struct {
    int64_t floats; /* allreduce length; 0 = leave */
    int64_t iters;  /* calls to time */
} ar_cmd_t;

/* What a member tells the bench: its endpoint first, then one per command. */
typedef struct {
    int rc;         /* 0 or a negative PS_E* */
    double seconds; /* the timed calls together */
    char text[200]; /* the endpoint, or why it failed */
} ar_reply_t;

enum {
    AR_WARMUP_CALLS = 5,   /* first warm-up chunk */
    AR_MIN_CALLS = 3,      /* per timed chunk, however long calls take */
    AR_MAX_CALLS = 100000, /* per chunk, however short */
};
/* A member waiting this long for its neighbour fails. */
#define AR_RING_TIMEOUT_S 30.0
/* The design's target: shardps's busbw / MPI's at 16-64 MB, 2 and 4 workers. */
#define AR_TARGET_RATIO 1.2

/* What a member process is given (copied by fork). */
typedef struct {
    int rank, size;
    int cmd_fd;          /* read end: commands */
    int reply_fd;        /* write end: replies */
    uint64_t max_floats; /* the largest allreduce it will be asked for */
    size_t sub_floats;   /* ring pipelining granularity */
} ar_member_arg_t;

/* The bench's side of the n members. */
typedef struct {
    int n;
    pid_t pid[AR_MAX_MEMBERS];
    int cmd[AR_MAX_MEMBERS];   /* write ends */
    int reply[AR_MAX_MEMBERS]; /* read ends */
} ar_ring_t;

/* A ring member process: binds, reports its endpoint, joins the ring, then
 * runs the bench's commands until told to leave. */
static int s_ar_member_main(const void *arg)
{
    const ar_member_arg_t *a = arg;
    ps_log_set_role("W", a->rank);
    ar_reply_t rep = {0};
    ps_ring_t *ring = NULL;
    ps_ctx_t *ctx = NULL;
    ps_ctx_new(&ctx);
    /* Zeroed, as the MPI helper's: sums of zeros stay zeros (no overflow to
     * inf however many calls run in place). */
    float *buf = calloc(a->max_floats ? a->max_floats : 1, sizeof(float));
    float *bar = calloc((size_t)a->size, sizeof(float));
    int rc = ctx && buf && bar ? 0 : PS_ENOMEM;
    if (rc == 0) {
        rc = ps_ring_new(ctx, "tcp://127.0.0.1:*", a->max_floats, &ring, rep.text, sizeof rep.text,
                         rep.text, sizeof rep.text);
    } else {
        snprintf(rep.text, sizeof rep.text, "out of memory");
    }
    rep.rc = rc;
    char right[sizeof rep.text];
    if (ps_proc_write_all(a->reply_fd, &rep, sizeof rep) != 0 || rc != 0 ||
        ps_proc_read_all(a->cmd_fd, right, sizeof right, -1) != 0) {
        goto done;
    }
    right[sizeof right - 1] = '\0';
    ps_ring_config_t cfg = {.rank = a->rank,
                            .size = a->size,
                            .right = right,
                            .sub_floats = a->sub_floats,
                            .timeout = AR_RING_TIMEOUT_S};
    rc = ps_ring_connect(ring, &cfg, rep.text, sizeof rep.text);
    int64_t step = 0;
    for (;;) {
        ar_cmd_t cmd;
        if (ps_proc_read_all(a->cmd_fd, &cmd, sizeof cmd, -1) != 0 || cmd.floats <= 0) {
            break;
        }
        rep = (ar_reply_t){.rc = rc};
        if ((uint64_t)cmd.floats > a->max_floats) {
            rc = PS_EINVAL;
        }
        /* A barrier: every member's one float must go round the ring. */
        if (rc == 0) {
            rc = ps_ring_allreduce(ring, bar, (uint64_t)a->size, step++);
        }
        double t0 = ps_now();
        for (int64_t i = 0; i < cmd.iters && rc == 0; i++) {
            rc = ps_ring_allreduce(ring, buf, (uint64_t)cmd.floats, step++);
        }
        rep.seconds = ps_now() - t0;
        rep.rc = rc;
        if (rc != 0) {
            snprintf(rep.text, sizeof rep.text, "%s",
                     rc == PS_EINVAL ? "size out of range" : ps_ring_error(ring));
        }
        if (ps_proc_write_all(a->reply_fd, &rep, sizeof rep) != 0) {
            break;
        }
    }
done:
    ps_ring_destroy(&ring);
    ps_ctx_destroy(&ctx);
    free(buf);
    free(bar);
    return rc ? 1 : 0;
}

/* Stops the members - politely, or at once when the ring failed (the others
 * may be waiting for a dead neighbour) - and closes the pipes. */
static void s_ar_stop(ar_ring_t *g, int failed)
{
    ar_cmd_t stop = {0, 0};
    for (int i = 0; i < g->n; i++) {
        if (failed && g->pid[i] > 0) {
            kill(g->pid[i], SIGKILL);
        }
        if (g->cmd[i] >= 0) {
            if (!failed) {
                (void)ps_proc_write_all(g->cmd[i], &stop, sizeof stop);
            }
            close(g->cmd[i]);
            g->cmd[i] = -1;
        }
    }
    for (int i = 0; i < g->n; i++) {
        ps_proc_reap(g->pid[i], 10.0);
        g->pid[i] = 0;
        if (g->reply[i] >= 0) {
            close(g->reply[i]);
            g->reply[i] = -1;
        }
    }
}

/* Forks n members and wires them into a ring. */
static int s_ar_start(ar_ring_t *g, const ps_bench_comm_cfg_t *cfg, int n,
                      uint64_t max_floats, char *err, size_t errlen)
{
    g->n = n;
    for (int i = 0; i < n; i++) {
        g->pid[i] = 0;
        g->cmd[i] = g->reply[i] = -1;
    }
    for (int i = 0; i < n; i++) {
        int c[2], r[2];
        if (pipe(c) != 0) {
            snprintf(err, errlen, "pipe: %s", strerror(errno));
            return PS_EIO;
        }
        if (pipe(r) != 0) {
            snprintf(err, errlen, "pipe: %s", strerror(errno));
            close(c[0]);
            close(c[1]);
            return PS_EIO;
        }
        ar_member_arg_t a = {.rank = i,
                             .size = n,
                             .cmd_fd = c[0],
                             .reply_fd = r[1],
                             .max_floats = max_floats,
                             .sub_floats = (size_t)cfg->ring_kib * 1024 / sizeof(float)};
        g->pid[i] = ps_proc_fork(s_ar_member_main, &a);
        close(c[0]);
        close(r[1]);
        g->cmd[i] = c[1];
        g->reply[i] = r[0];
        if (g->pid[i] <= 0) {
            snprintf(err, errlen, "fork: %s", strerror(errno));
            return PS_EIO;
        }
    }
    char eps[AR_MAX_MEMBERS][sizeof((ar_reply_t *)0)->text];
    for (int i = 0; i < n; i++) {
        ar_reply_t rep = {0};
        int rc = ps_proc_read_all(g->reply[i], &rep, sizeof rep, COMM_POLL_LIMIT_S);
        if (rc != 0 || rep.rc != 0) {
            rep.text[sizeof rep.text - 1] = '\0';
            snprintf(err, errlen, "ring member %d did not start: %s", i,
                     rc ? ps_strerror(rc) : rep.text);
            return rc ? rc : rep.rc;
        }
        memcpy(eps[i], rep.text, sizeof eps[i]);
    }
    for (int i = 0; i < n; i++) {
        if (ps_proc_write_all(g->cmd[i], eps[(i + 1) % n], sizeof eps[i]) != 0) {
            snprintf(err, errlen, "ring member %d is gone", i);
            return PS_EIO;
        }
    }
    return 0;
}

/* One chunk: every member times `iters` allreduces of `floats`; *seconds is
 * the slowest member's time. The first member to fail (or die: its pipe
 * closes) ends the chunk at once. */
static int s_ar_chunk(void *side, uint64_t floats, long iters, char *err, size_t errlen,
                      double *seconds)
{
    ar_ring_t *g = side;
    ar_cmd_t cmd = {(int64_t)floats, iters};
    for (int i = 0; i < g->n; i++) {
        if (ps_proc_write_all(g->cmd[i], &cmd, sizeof cmd) != 0) {
            snprintf(err, errlen, "ring member %d is gone", i);
            return PS_EIO;
        }
    }
    *seconds = 0;
    int done[AR_MAX_MEMBERS] = {0}, left = g->n;
    /* Members give up on a silent neighbour after AR_RING_TIMEOUT_S. */
    double until = ps_now() + COMM_POLL_LIMIT_S * 5;
    while (left > 0) {
        struct pollfd pf[AR_MAX_MEMBERS];
        int who[AR_MAX_MEMBERS], np = 0;
        for (int i = 0; i < g->n; i++) {
            if (!done[i]) {
                pf[np] = (struct pollfd){g->reply[i], POLLIN, 0};
                who[np++] = i;
            }
        }
        double wait = until - ps_now();
        int n = wait > 0 ? poll(pf, (nfds_t)np, (int)(wait * 1000) + 1) : 0;
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            snprintf(err, errlen, "no ring member answered for %.0f s",
                     COMM_POLL_LIMIT_S * 5);
            return PS_ETIMEDOUT;
        }
        for (int k = 0; k < np; k++) {
            if (!pf[k].revents) {
                continue;
            }
            int i = who[k];
            ar_reply_t rep = {0};
            int rc = ps_proc_read_all(g->reply[i], &rep, sizeof rep, COMM_POLL_LIMIT_S);
            if (rc != 0 || rep.rc != 0) {
                rep.text[sizeof rep.text - 1] = '\0';
                snprintf(err, errlen, "ring member %d: %s", i,
                         rc == PS_ECLOSED ? "exited"
                         : rc             ? ps_strerror(rc)
                                          : rep.text);
                return rc ? rc : rep.rc;
            }
            *seconds = rep.seconds > *seconds ? rep.seconds : *seconds;
            done[i] = 1;
            left--;
        }
    }
    return 0;
}

/* Bus bandwidth in GB/s (nccl-tests): algorithm bandwidth x 2(n-1)/n. */
static double s_busbw(long bytes, double seconds, int n)
{
    return (double)bytes / seconds * 2.0 * (n - 1) / n / 1e9;
}

/* Either side's chunk: `iters` allreduces of `floats` between barriers; the
 * slowest rank's seconds. */
typedef int ar_chunk_fn(void *side, uint64_t floats, long iters, char *err, size_t errlen,
                        double *seconds);

/* Warm-up: >= AR_WARMUP_CALLS calls, doubled until a chunk lasts half of
 * `seconds`; then the calls per timed chunk (>= seconds, >= AR_MIN_CALLS). */
static int s_ar_calibrate(ar_chunk_fn *fn, void *side, double seconds, uint64_t floats,
                          char *err, size_t errlen, long *iters_out)
{
    long iters = AR_WARMUP_CALLS;
    double t;
    int rc = fn(side, floats, iters, err, errlen, &t);
    while (rc == 0 && t < seconds / 2 && iters < AR_MAX_CALLS) {
        iters *= 2;
        rc = fn(side, floats, iters, err, errlen, &t);
    }
    double once = t / (double)iters;
    iters = once > 0 ? (long)(seconds / once) + 1 : AR_MAX_CALLS;
    *iters_out = iters < AR_MIN_CALLS   ? AR_MIN_CALLS
                 : iters > AR_MAX_CALLS ? AR_MAX_CALLS
                                        : iters;
    return rc;
}

/* One allreduce figure: both sides' busbw (medians), and the median, lowest
 * and highest of the back-to-back pairs' ratios (NAN where not measured). */
typedef struct {
    double ours, mpi, ratio, lo, hi;
} ar_result_t;

/* Both sides of a pairing: our ring and the MPI reference, each with its
 * status (0 while it works) and reason. */
typedef struct {
    ar_ring_t g;
    ps_bench_mpi_t m;
    int rc, mrc;
    char err[256], merr[512];
} ar_pair_t;

/* One allreduce size of `bytes` over n members: each side still working
 * calibrated, then reps chunks of each, back to back, into *res. */
static void s_pair_size(const ps_bench_comm_cfg_t *cfg, ar_pair_t *p, int n, long bytes,
                        ar_result_t *res)
{
    char name[32];
    uint64_t floats = (uint64_t)bytes / sizeof(float);
    ps_bench_size_name(bytes, name, sizeof name);
    double t0 = ps_now(), ts[COMM_MAX_REPS], tm[COMM_MAX_REPS], ratio[COMM_MAX_REPS];
    long is = 0, im = 0;
    if (p->rc == 0) {
        p->rc = s_ar_calibrate(s_ar_chunk, &p->g, cfg->seconds, floats, p->err,
                               sizeof p->err, &is);
    }
    if (p->mrc == 0) {
        p->mrc = s_ar_calibrate(ps_bench_mpi_chunk, &p->m, cfg->seconds, floats, p->merr,
                                sizeof p->merr, &im);
    }
    int nr = 0;
    for (int k = 0; k < cfg->reps && (p->rc == 0 || p->mrc == 0); k++) {
        if (p->rc == 0) {
            p->rc = s_ar_chunk(&p->g, floats, is, p->err, sizeof p->err, &ts[k]);
            ts[k] /= (double)is;
        }
        if (p->mrc == 0) {
            p->mrc = ps_bench_mpi_chunk(&p->m, floats, im, p->merr, sizeof p->merr, &tm[k]);
            tm[k] /= (double)im;
        }
        if (p->rc == 0 && p->mrc == 0) {
            ratio[nr++] = tm[k] / ts[k]; /* busbw ratio ours/MPI */
        }
    }
    if (p->rc == 0) {
        res->ours = s_busbw(bytes, ps_bench_median(ts, cfg->reps), n);
    }
    if (p->mrc == 0) {
        res->mpi = s_busbw(bytes, ps_bench_median(tm, cfg->reps), n);
    }
    if (nr == cfg->reps) {
        res->ratio = ps_bench_median(ratio, nr); /* sorts ratio */
        res->lo = ratio[0];
        res->hi = ratio[nr - 1];
    }
    fprintf(stderr,
            COMM_PROG ": allreduce %s, %d workers: shardps %.3f GB/s, MPI %.3f GB/s busbw, "
                      "ratio %.2f [%.2f, %.2f] (%.1f s)\n",
            name, n, res->ours, res->mpi, res->ratio, res->lo, res->hi, ps_now() - t0);
}

/*
 * n members: for each allreduce size, our ring and MPI_Allreduce (when mpirun
 * is not NULL) each warmed up and calibrated, then reps pairs of chunks, ours
 * then MPI's, back to back; each side waits on its FIFOs or pipes, using no
 * CPU, while the other runs. Results into res[] (one per size). Returns 0 or 1
 * (our ring failed, said on stderr); *mpi_failed is set when the reference
 * failed (its log is kept).
 */
static int s_allreduce_pair(const ps_bench_comm_cfg_t *cfg, int n, const char *mpirun,
                            const char *helper, ar_result_t *res, int *mpi_failed)
{
    uint64_t max_floats = 0;
    for (int i = 0; i < cfg->nar_sizes; i++) {
        res[i] = (ar_result_t){NAN, NAN, NAN, NAN, NAN};
        uint64_t f = (uint64_t)cfg->ar_sizes[i] / sizeof(float);
        max_floats = f > max_floats ? f : max_floats;
    }
    /* A member that dies must fail a write, not kill the bench. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    ar_pair_t p = {.m = {.n = 0, .reply = -1}};
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/mpi-allreduce-n%d.log", cfg->out, n);
    p.rc = s_ar_start(&p.g, cfg, n, max_floats, p.err, sizeof p.err);
    p.mrc = mpirun ? ps_bench_mpi_start(&p.m, mpirun, helper, n, log, p.merr, sizeof p.merr)
                   : PS_ENOENT;
    *mpi_failed = mpirun && p.mrc != 0;
    for (int i = 0; i < cfg->nar_sizes && (p.rc == 0 || p.mrc == 0); i++) {
        s_pair_size(cfg, &p, n, cfg->ar_sizes[i], &res[i]);
    }
    s_ar_stop(&p.g, p.rc != 0);
    ps_bench_mpi_stop(&p.m);
    sigaction(SIGPIPE, &old, NULL);
    if (p.rc != 0) {
        fprintf(stderr, COMM_PROG ": ring allreduce with %d members failed: %s\n", n,
                p.err[0] ? p.err : ps_strerror(p.rc));
    }
    if (mpirun && p.mrc != 0) {
        *mpi_failed = 1;
        fprintf(stderr, COMM_PROG ": MPI_Allreduce with %d ranks failed: %s (log: %s)\n", n,
                p.merr[0] ? p.merr : ps_strerror(p.mrc), log);
    } else {
        unlink(log); /* kept only when it failed */
    }
    return p.rc != 0;
}

/* Every (workers, size) measured, and what failed. */
typedef struct {
    ar_result_t res[PS_BENCH_LIST_MAX][PS_BENCH_LIST_MAX];
    int ours_failed[PS_BENCH_LIST_MAX], nours_failed; /* ring sizes whose ring failed */
    int mpi_failed[PS_BENCH_LIST_MAX], nmpi_failed;   /* and whose MPI reference did */
    int rows, met;                                    /* the target's rows, and met */
    double worst;                                     /* its lowest ratio */
    char worst_at[64];
} ar_sweep_t;

/* What was compared, how, and what failed, under the table. */
static void s_notes(const ps_bench_comm_cfg_t *cfg, const ar_sweep_t *sw, int have_mpi,
                    const char *why, ps_bench_table_t *t)
{
    if (cfg->nar == 0) {
        ps_bench_table_note(t, "No allreduce measured: --allreduce-workers 0.");
    } else {
        ps_bench_table_note(
            t,
            "shardps: `worker/ring.h` (the `--mode allreduce` ring: reduce-scatter + "
            "all-gather, %d KiB messages, pipelined), n ring members, each a process "
            "forked from the bench with its own ZeroMQ context, over TCP on 127.0.0.1; "
            "a float32 sum in place on a zeroed buffer. Both sides (MPI's ranks stay up "
            "under one mpirun per n): for each size a warm-up of >= %d calls grown to "
            "half a chunk, then %d pairs of chunks of >= %.2f s, shardps's then MPI's "
            "back to back (each side waits on a pipe or FIFO, using no CPU, while the "
            "other runs), each chunk between barriers and timed by the slowest rank. "
            "busbw: the median chunk; the ratio: the median of the %d pairs' ratios (min "
            "and max beside it). bytes = the payload; GB = 1e9 B.",
            cfg->ring_kib, AR_WARMUP_CALLS, cfg->reps, cfg->seconds, cfg->reps);
    }
    if (cfg->nar && have_mpi) {
        ps_bench_table_note(t,
                            "MPI: OpenMPI `mpirun --mca btl self,tcp --mca "
                            "btl_tcp_if_include lo --mca pml ob1` (TCP loopback, no shared "
                            "memory), its default (tuned) allreduce algorithm choice.");
    } else if (cfg->nar) {
        ps_bench_table_note(t, "MPI_Allreduce comparison skipped: %s.", why);
    }
    if (sw->rows) {
        ps_bench_table_note(t,
                            "Target (16-64 MB, 2 and 4 workers: shardps busbw >= %.1fx "
                            "MPI_Allreduce's): met in %d of %d rows; lowest ratio %.2f (%s).",
                            AR_TARGET_RATIO, sw->met, sw->rows, sw->worst, sw->worst_at);
    }
    for (int i = 0; i < sw->nours_failed; i++) {
        ps_bench_table_note(t, "shardps's ring with %d members failed (n/a cells).",
                            sw->ours_failed[i]);
    }
    for (int i = 0; i < sw->nmpi_failed; i++) {
        ps_bench_table_note(t, "MPI_Allreduce with %d ranks failed: see mpi-allreduce-n%d.log.",
                            sw->mpi_failed[i], sw->mpi_failed[i]);
    }
}

/* Row (w, i) of the table and its point in the plot's data; counts it
 * towards the target. */
static void s_row(const ps_bench_comm_cfg_t *cfg, int w, int i, ar_sweep_t *sw,
                  ps_bench_table_t *t, ps_bench_str_t *gp)
{
    char name[32], o[32] = "", m[32] = "", ratio[32] = "";
    const ar_result_t *q = &sw->res[w][i];
    long bytes = cfg->ar_sizes[i];
    ps_bench_size_name(bytes, name, sizeof name);
    if (!isnan(q->ours)) {
        snprintf(o, sizeof o, "%.3f", q->ours);
    }
    if (!isnan(q->mpi)) {
        snprintf(m, sizeof m, "%.3f", q->mpi);
    }
    if (!isnan(q->ratio)) {
        double r = q->ratio;
        snprintf(ratio, sizeof ratio, "%.2f,%.2f,%.2f", r, q->lo, q->hi);
        if (bytes >= (16L << 20) && bytes <= (64L << 20) &&
            (cfg->ar_workers[w] == 2 || cfg->ar_workers[w] == 4)) {
            sw->rows++;
            sw->met += r >= AR_TARGET_RATIO;
            if (r < sw->worst) {
                sw->worst = r;
                snprintf(sw->worst_at, sizeof sw->worst_at, "%s, %ld workers", name,
                         cfg->ar_workers[w]);
            }
        }
    }
    ps_bench_table_rowf(t, "%ld,%s,%ld,%s,%s,%s", bytes, name, cfg->ar_workers[w], o, m,
                        ratio[0] ? ratio : ",,");
    ps_bench_str_addf(gp, "%ld %s %s\n", bytes, o[0] ? o : "NaN", m[0] ? m : "NaN");
}

/* The allreduce table (always written, with a note on what was skipped) and
 * its plot. Returns 0 or 1 (something failed). Under --secure they are files of
 * their own: a secure run into a plain run's --out keeps its allreduce.csv. */
int ps_bench_allreduce(const ps_bench_comm_cfg_t *cfg)
{
    const char *file = cfg->secure ? "comm_secure_allreduce" : "allreduce";
    const char *png = cfg->secure ? "comm_secure_allreduce_busbw" : "allreduce_busbw";
    char mpirun[PATH_MAX], helper[PATH_MAX], why[256] = "--mpi=0";
    int have_mpi =
        cfg->mpi && ps_bench_mpi_find(mpirun, helper, sizeof mpirun, why, sizeof why) == 0;
    const int nz = cfg->nar_sizes;
    ar_sweep_t *sw = calloc(1, sizeof *sw);
    if (!sw) {
        return 1;
    }
    sw->worst = INFINITY;
    int failed = 0;
    for (int w = 0; w < cfg->nar; w++) {
        int n = (int)cfg->ar_workers[w], mf = 0;
        /* The reference failing is worth a note, not a failed bench. */
        if (s_allreduce_pair(cfg, n, have_mpi ? mpirun : NULL, helper, sw->res[w], &mf) != 0) {
            sw->ours_failed[sw->nours_failed++] = n;
            failed = 1;
        }
        if (mf) {
            sw->mpi_failed[sw->nmpi_failed++] = n;
        }
    }
    ps_bench_table_t *t;
    if (ps_bench_table_new(
            cfg->page, file,
            "### Allreduce bus bandwidth (busbw = bytes/time x 2(n-1)/n, GB/s)",
            "payload_bytes,payload,workers,shardps_busbw_gbs,mpi_busbw_gbs,ratio,ratio_min,"
            "ratio_max",
            "bytes,payload,workers,shardps busbw,MPI_Allreduce busbw,"
            "shardps/MPI,ratio min,ratio max",
            &t) != 0) {
        free(sw);
        return 1;
    }
    ps_bench_str_t gp = {0}, plot = {0};
    ps_bench_plot_header(&gp, cfg->page, png, 640, 400);
    ps_bench_plot_sizes(&gp, cfg->ar_sizes, nz, "busbw (GB/s)");
    for (int w = 0; w < cfg->nar; w++) {
        int ours = 0, mpi = 0;
        ps_bench_str_addf(&gp, "$n%d << EOD\n", w);
        for (int i = 0; i < nz; i++) {
            s_row(cfg, w, i, sw, t, &gp);
            ours |= !isnan(sw->res[w][i].ours);
            mpi |= !isnan(sw->res[w][i].mpi);
        }
        ps_bench_str_addf(&gp, "EOD\n");
        if (ours) {
            ps_bench_str_addf(&plot, "%s$n%d u 1:2 w lp lc %d pt 7 t 'shardps n=%ld'",
                              plot.len ? ", " : "", w, w + 1, cfg->ar_workers[w]);
        }
        if (mpi) {
            ps_bench_str_addf(&plot, "%s$n%d u 1:3 w lp lc %d dt 2 pt 6 t 'MPI n=%ld'",
                              plot.len ? ", " : "", w, w + 1, cfg->ar_workers[w]);
        }
    }
    s_notes(cfg, sw, have_mpi, why, t);
    ps_bench_table_destroy(&t, 1);
    if (plot.len) {
        ps_bench_str_addf(&gp, "plot %s\n", ps_bench_str_get(&plot));
        failed |= ps_bench_plot(cfg->page, png, ps_bench_str_get(&gp)) == PS_EIO;
    }
    ps_bench_str_fini(&plot);
    ps_bench_str_fini(&gp);
    free(sw);
    return failed;
}
