/*
 * bench/comm/comm_run.c - one configuration of `shardps-bench comm`: what the
 * parameter server moves, next to what ZeroMQ alone moves between the same
 * endpoints.
 *
 * Parameter server: for each (servers S, payload, in flight W) a fresh job: a
 * real scheduler and S real servers, each a process forked from this one
 * running ps_scheduler_run() / ps_server_run() with its own ZeroMQ context,
 * and this process as the job's only worker through worker/kv.h, with the
 * payload as its model (P = payload / 4 floats, cut by the scheduler's shard
 * map). One round = push the whole payload + pull it back. W = 1 runs in sync
 * mode: push(step t), pull(version >= t+1), the servers applying one SGD step
 * in between. W > 1 runs async with W rounds outstanding.
 *
 * ZeroMQ baseline: S echo processes (a ROUTER sending every message back), one
 * DEALER each in this process, the same payload cut by the same shard map and
 * sent zero-copy with a small first frame, W rounds in flight; same loopback
 * TCP, same socket options (ps_sock_new). Received frames are read in
 * place, as the servers do; the worker's client also copies pulled values
 * into the caller's buffer, which is part of what is measured.
 *
 * With --secure the baseline is a second, plain parameter-server job beside
 * a --secure one (CurveZMQ, keys made in the job's temporary directory): the
 * ratio is then what encryption costs. The echo processes are not started.
 *
 * Both are timed alternately, reps times each, after a warm-up: rates are
 * medians, the ratio is the median of the back-to-back pairs' ratios, so a
 * change in the machine's load hits both sides of each ratio.
 *
 * Processes are forked only while this one holds no ZeroMQ context and no
 * thread of ours (everything is torn down between configurations).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h> /* the raw-ZeroMQ baseline */

#include "bench/comm/comm.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/job.h"
#include "common/log.h"
#include "common/secret.h"
#include "kernels/optim.h"
#include "deploy/proc.h"
#include "proto/curve.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "scheduler/scheduler.h"
#include "server/server.h"
#include "worker/kv.h"

/* One parameter-server job: its processes and this process's client of it. */
typedef struct {
    int secure;                      /* --secure, keys in tmpdir */
    char tmpdir[PATH_MAX];           /* holds the scheduler's endpoint file (and keys) */
    pid_t sched;                     /* scheduler process; 0 = none */
    pid_t servers[COMM_MAX_SERVERS]; /* server processes */
    ps_scheduler_config_t sc;        /* their configurations, copied into the children */
    ps_server_config_t vc;
    char epfile[PATH_MAX + 32];
    char secret_file[PATH_MAX + 32]; /* the job's secret, as the launcher makes one */
    ps_secret_t secret;
    char sched_ep[256];
    ps_ctx_t *ctx; /* this process's ZeroMQ context for the job */
    ps_link_t *link;
    ps_view_t *view;
    ps_kv_t *kv;
    int64_t step; /* next push's step */
} comm_job_t;

/* One configuration: its processes and this process's client side. */
typedef struct {
    const ps_bench_comm_cfg_t *cfg;
    int S;                               /* servers */
    int W;                               /* rounds in flight */
    long bytes;                          /* payload */
    uint64_t P;                          /* payload floats */
    ps_range_t ranges[COMM_MAX_SERVERS]; /* the shard map, for the echo side */
    comm_job_t job[2];                   /* the measured job; with --secure [0] is plain */
    int njobs;                           /* 1, or 2 with --secure */
    pid_t echo[COMM_MAX_SERVERS];        /* echo processes (not with --secure) */
    char echo_ep[COMM_MAX_SERVERS][128];
    ps_ctx_t *ctx; /* this process's ZeroMQ context for the echo side */
    ps_sock_t *dealers[COMM_MAX_SERVERS]; /* to the echo processes */
    float *grad;                     /* P: what is pushed (and echoed) */
    float *dst[COMM_MAX_INFLIGHT];   /* P each: where round k's pull lands */
    float *w;                        /* P: the floor's parameters (s_floor_cpu) */
    char err[256];
} comm_run_t;

/* ---- the processes of one configuration ------------------------------------ */

static int s_sched_main(const void *arg)
{
    ps_log_set_role("C", -1);
    return ps_scheduler_run(arg);
}

static int s_server_main(const void *arg)
{
    ps_log_set_role("S", -1);
    return ps_server_run(arg);
}

/* What an echo process is told: where to report its endpoint. */
typedef struct {
    int fd; /* write end of a pipe */
} comm_echo_arg_t;

/* An echo process: sends every multipart message back as it came, zero-copy
 * (the received frames are handed back to ZeroMQ). Runs until killed. */
static int s_echo_main(const void *arg)
{
    const comm_echo_arg_t *a = arg;
    ps_log_set_role("E", -1);
    ps_ctx_t *ctx = NULL;
    ps_sock_t *router = NULL;
    char ep[128] = "", why[128] = "out of memory";
    if (ps_ctx_new(&ctx) != 0 || ps_sock_new(ctx, PS_SOCK_ROUTER, &router, why, sizeof why) ||
        ps_sock_bind(router, "tcp://127.0.0.1:*", ep, sizeof ep, why, sizeof why) != 0) {
        ps_log_err("echo: cannot bind: %s", why);
        return 1;
    }
    void *sock = ps_sock_handle(router); /* raw ZeroMQ, the project's options */
    ssize_t w = write(a->fd, ep, strlen(ep) + 1);
    close(a->fd);
    if (w <= 0) {
        return 1;
    }
    for (;;) {
        zmq_msg_t parts[PS_MSG_MAX_FRAMES], extra;
        int n = 0, more = 1;
        while (more) { /* [route][id][payload]; anything longer loses its tail */
            zmq_msg_t *m = n < PS_MSG_MAX_FRAMES ? &parts[n] : &extra;
            zmq_msg_init(m);
            if (zmq_msg_recv(m, sock, 0) < 0) {
                return 1;
            }
            more = zmq_msg_more(m);
            if (m == &extra) {
                zmq_msg_close(m);
            } else {
                n++;
            }
        }
        for (int i = 0; i < n; i++) {
            if (zmq_msg_send(&parts[i], sock, i + 1 < n ? ZMQ_SNDMORE : 0) < 0) {
                zmq_msg_close(&parts[i]);
            }
        }
    }
}

/* ---- one configuration: set up and tear down -------------------------------- */

/* Starts S echo processes and reads their endpoints. */
static int s_start_echo(comm_run_t *r)
{
    for (int i = 0; i < r->S; i++) {
        int fds[2];
        if (pipe(fds) != 0) {
            snprintf(r->err, sizeof r->err, "pipe: %s", strerror(errno));
            return PS_EIO;
        }
        comm_echo_arg_t a = {fds[1]};
        r->echo[i] = ps_proc_fork(s_echo_main, &a);
        close(fds[1]);
        ssize_t n =
            r->echo[i] > 0 ? read(fds[0], r->echo_ep[i], sizeof r->echo_ep[i] - 1) : -1;
        close(fds[0]);
        if (n <= 0) {
            snprintf(r->err, sizeof r->err, "echo process %d did not start", i);
            return PS_EIO;
        }
        r->echo_ep[i][n] = '\0';
    }
    return 0;
}

/* Starts the scheduler and S servers of job j with P parameters (with its
 * keys when secure). */
static int s_start_job(comm_run_t *r, comm_job_t *j)
{
    ps_scheduler_config_t *sc = &j->sc;
    ps_server_config_t *vc = &j->vc;
    snprintf(j->tmpdir, sizeof j->tmpdir, "%s/sps-bench.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(j->tmpdir)) {
        snprintf(r->err, sizeof r->err, "mkdtemp: %s", strerror(errno));
        j->tmpdir[0] = '\0';
        return PS_EIO;
    }
    if (j->secure && ps_curve_keygen(j->tmpdir, r->err, sizeof r->err) != 0) {
        return PS_EIO;
    }
    /* every node proves it holds the job's secret, as under the launcher */
    snprintf(j->secret_file, sizeof j->secret_file, "%s/job.secret", j->tmpdir);
    if (ps_secret_write(j->secret_file, r->err, sizeof r->err) != 0 ||
        ps_secret_read(j->secret_file, &j->secret, r->err, sizeof r->err) != 0) {
        return PS_EIO;
    }
    snprintf(j->epfile, sizeof j->epfile, "%s/scheduler.ep", j->tmpdir);
    memset(sc, 0, sizeof *sc);
    sc->secure = j->secure;
    sc->keys = j->secure ? j->tmpdir : NULL;
    sc->secret = j->secret;
    sc->bind = "tcp://127.0.0.1:*";
    sc->endpoint_file = j->epfile;
    sc->servers = r->S;
    sc->workers = 1;
    sc->peer_timeout = 10.0;
    sc->wait = 30.0;
    ps_job_defaults(&sc->job);
    /* Plain SGD: the servers' share of a round is one pass over the shard. */
    snprintf(sc->job.optimizer, sizeof sc->job.optimizer, "sgd");
    sc->job.momentum = 0;
    sc->job.lr = 1e-3;
    sc->job.batch = 1;
    sc->job.epochs = 1;
    ps_job_parse_mode(r->W == 1 ? "sync" : "async", &sc->job);
    j->sched = ps_proc_fork(s_sched_main, sc);
    if (j->sched <= 0) {
        snprintf(r->err, sizeof r->err, "fork: %s", strerror(errno));
        return PS_EIO;
    }
    char *text = NULL;
    for (double until = ps_now() + 15.0; ps_now() < until; usleep(5000)) {
        if (ps_bench_read_file(j->epfile, &text) == 0) {
            break;
        }
    }
    if (!text) {
        snprintf(r->err, sizeof r->err, "the scheduler did not write its endpoint");
        return PS_ETIMEDOUT;
    }
    text[strcspn(text, "\n")] = '\0';
    snprintf(j->sched_ep, sizeof j->sched_ep, "%s", text);
    free(text);
    memset(vc, 0, sizeof *vc);
    vc->secure = j->secure;
    vc->keys = sc->keys;
    vc->secret_file = j->secret_file;
    vc->scheduler = j->sched_ep;
    vc->bind = "tcp://127.0.0.1:*";
    vc->rank = -1;
    vc->connect_timeout = 10.0;
    vc->peer_timeout = 10.0;
    vc->report_missing = 30.0;
    for (int i = 0; i < r->S; i++) {
        j->servers[i] = ps_proc_fork(s_server_main, vc);
        if (j->servers[i] <= 0) {
            snprintf(r->err, sizeof r->err, "fork: %s", strerror(errno));
            return PS_EIO;
        }
    }
    return 0;
}

/* This process joins job j as its only worker and initialises the
 * parameters (r->grad: zeros). */
static int s_join(comm_run_t *r, comm_job_t *j)
{
    ps_job_t job;
    j->view = calloc(1, sizeof *j->view);
    if (ps_ctx_new(&j->ctx) != 0 || !j->view) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return PS_ENOMEM;
    }
    int rc = ps_curve_secure_ctx(j->ctx, j->secure, j->tmpdir, PS_ROLE_WORKER, r->err,
                                 sizeof r->err);
    rc = rc ? rc
            : ps_link_join(&j->link, j->ctx, j->sched_ep, PS_ROLE_WORKER, -1, NULL,
                           &(ps_link_ident_t){NULL, NULL, &j->secret}, 10.0, 10.0, &job,
                           r->err, sizeof r->err);
    /* One sample per step and (practically) no end: the job lasts until we finish. */
    if (rc == 0) {
        Shardps__ModelInfo info = SHARDPS__MODEL_INFO__INIT;
        info.num_params = r->P;
        info.train_samples = UINT64_C(1) << 40;
        rc = ps_link_wait_view(j->link, &info, j->view, r->err, sizeof r->err);
    }
    if (rc == 0) {
        rc = ps_kv_new(j->ctx, &j->link, j->view, &j->kv, r->err, sizeof r->err);
    }
    if (rc == 0 && (rc = ps_kv_wait(j->kv, ps_kv_init(j->kv, 0, r->P, r->grad))) != 0) {
        snprintf(r->err, sizeof r->err, "init: %s", ps_kv_error(j->kv));
    }
    return rc;
}

/* This process's side: allocates the buffers, joins the jobs, connects to
 * the echo processes. */
static int s_start_client(comm_run_t *r)
{
    size_t n = (size_t)r->P * sizeof(float);
    r->grad = malloc(n);
    r->w = calloc(1, n);
    for (int k = 0; k < r->W; k++) {
        r->dst[k] = malloc(n);
        if (r->dst[k]) {
            memset(r->dst[k], 0, n); /* fault the pages in before timing */
        }
    }
    for (int k = 0; k < r->W; k++) {
        if (!r->dst[k]) {
            r->grad = (free(r->grad), NULL);
        }
    }
    if (!r->w) {
        r->grad = (free(r->grad), NULL);
    }
    if (!r->grad) {
        snprintf(r->err, sizeof r->err, "out of memory for %d x %ld bytes", r->W + 2,
                 r->bytes);
        return PS_ENOMEM;
    }
    memset(r->grad, 0, n);
    int rc = 0;
    for (int k = 0; k < r->njobs && rc == 0; k++) {
        rc = s_join(r, &r->job[k]);
    }
    if (rc != 0 || r->njobs == 2) {
        return rc;
    }
    if (ps_ctx_new(&r->ctx) != 0) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return PS_ENOMEM;
    }
    for (int i = 0; i < r->S; i++) {
        if (ps_sock_new(r->ctx, PS_SOCK_DEALER, &r->dealers[i], r->err, sizeof r->err) != 0 ||
            ps_sock_connect(r->dealers[i], r->echo_ep[i]) != 0) {
            snprintf(r->err, sizeof r->err, "cannot connect to echo %d at %s", i,
                     r->echo_ep[i]);
            return PS_EIO;
        }
    }
    return 0;
}

/* Ends job j (cleanly when ok), stops its processes, removes its files.
 * Returns 0 when every role exited 0 after a clean end. */
static int s_end_job(comm_run_t *r, comm_job_t *j, int ok)
{
    int rc = 0;
    if (j->kv) {
        if (ok) {
            Shardps__Done done = SHARDPS__DONE__INIT;
            done.steps = j->step;
            rc = ps_kv_finish(j->kv, &done);
            if (rc != 0) {
                snprintf(r->err, sizeof r->err, "finishing the job: %s",
                         ps_kv_error(j->kv));
            }
        } else {
            ps_kv_abort(j->kv, r->err[0] ? r->err : "shardps-bench failed");
        }
        ps_kv_destroy(&j->kv);
    } else if (j->link) {
        ps_link_abort(j->link, r->err[0] ? r->err : "shardps-bench failed");
    }
    ps_link_destroy(&j->link);
    ps_ctx_destroy(&j->ctx);
    /* The job's roles end by themselves (the scheduler saw us finish or
     * abort); anything left after a while is killed. */
    double grace = ok ? 15.0 : 12.0;
    for (int i = 0; i < r->S; i++) {
        int st = ps_proc_reap(j->servers[i], grace);
        rc = rc ? rc : (ok && st ? PS_EIO : 0);
        j->servers[i] = 0;
    }
    int st = ps_proc_reap(j->sched, grace);
    rc = rc ? rc : (ok && st ? PS_EIO : 0);
    j->sched = 0;
    if (j->tmpdir[0]) {
        static const char *const files[] = {"scheduler.ep", "job.secret", "job.key", "job.pub",
                                            "server.key", "server.pub", "worker.key",
                                            "worker.pub"};
        for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/%s", j->tmpdir, files[f]);
            unlink(path);
        }
        rmdir(j->tmpdir);
        j->tmpdir[0] = '\0';
    }
    free(j->view);
    j->view = NULL;
    return rc;
}

/* Ends the jobs, stops every process, frees everything. Returns 0 when every
 * role exited 0 after a clean end. */
static int s_teardown(comm_run_t *r, int ok)
{
    int rc = 0;
    for (int k = 0; k < r->njobs; k++) {
        int jrc = s_end_job(r, &r->job[k], ok);
        rc = rc ? rc : jrc;
    }
    for (int i = 0; i < r->S; i++) {
        ps_sock_destroy(&r->dealers[i]);
    }
    ps_ctx_destroy(&r->ctx);
    for (int i = 0; i < r->S; i++) {
        if (r->echo[i] > 0) {
            kill(r->echo[i], SIGKILL);
            ps_proc_reap(r->echo[i], 5.0);
            r->echo[i] = 0;
        }
    }
    if (rc != 0 && !r->err[0]) {
        snprintf(r->err, sizeof r->err, "a scheduler or server process failed");
    }
    free(r->grad);
    r->grad = NULL;
    free(r->w);
    r->w = NULL;
    for (int k = 0; k < COMM_MAX_INFLIGHT; k++) {
        free(r->dst[k]);
        r->dst[k] = NULL;
    }
    return rc;
}

/* ---- the two measurements ---------------------------------------------------- */

/* Queues round k on job j: push the payload and pull it back into dst[k], in
 * one request per server (ps_kv_push_pull), as the worker's training loop. */
static int s_ps_submit(comm_run_t *r, comm_job_t *j, int k, int *h)
{
    int64_t t = j->step++;
    *h = ps_kv_push_pull(j->kv, 0, r->P, r->grad, t, r->dst[k], r->W == 1 ? t + 1 : 0);
    if (*h < 0) {
        snprintf(r->err, sizeof r->err, "push/pull refused: %s", ps_kv_error(j->kv));
        return *h;
    }
    return 0;
}

/*
 * Parameter server: keeps W rounds outstanding for at least `seconds` and
 * min_rounds rounds, then drains. *rounds completed in *elapsed seconds.
 */
static int s_ps_measure(comm_run_t *r, comm_job_t *j, double seconds, int min_rounds,
                        long *rounds, double *elapsed)
{
    int h[COMM_MAX_INFLIGHT], active[COMM_MAX_INFLIGHT] = {0};
    long started = 0, done = 0;
    double t0 = ps_now(), stop_at = t0 + seconds;
    int rc = 0;
    for (int k = 0; k < r->W && rc == 0; k++) {
        rc = s_ps_submit(r, j, k, &h[k]);
        active[k] = rc == 0;
        started += rc == 0;
    }
    for (int k = 0; done < started; k = (k + 1) % r->W) {
        if (!active[k]) {
            continue;
        }
        int a = ps_kv_wait(j->kv, h[k]);
        active[k] = 0;
        done++;
        if (a && rc == 0) {
            snprintf(r->err, sizeof r->err, "push/pull failed: %s", ps_kv_error(j->kv));
            rc = a;
        }
        if (rc == 0 && (ps_now() < stop_at || started < min_rounds)) {
            rc = s_ps_submit(r, j, k, &h[k]);
            active[k] = rc == 0;
            started += rc == 0;
        }
    }
    *elapsed = ps_now() - t0;
    *rounds = done;
    return rc;
}

/* ZeroMQ: sends one round, the payload's shard i to echo process i. */
static int s_zmq_submit(comm_run_t *r, long round)
{
    for (int i = 0; i < r->S; i++) {
        uint64_t id = (uint64_t)round;
        zmq_msg_t m;
        uint64_t n = ps_range_len(r->ranges[i]);
        void *d = ps_sock_handle(r->dealers[i]);
        if (zmq_send(d, &id, sizeof id, ZMQ_SNDMORE) < 0) {
            goto fail;
        }
        /* Zero-copy, no free function: grad outlives every send. */
        zmq_msg_init_data(&m, r->grad + r->ranges[i].begin, n * sizeof(float), NULL, NULL);
        if (zmq_msg_send(&m, d, 0) < 0) {
            zmq_msg_close(&m);
            goto fail;
        }
    }
    return 0;
fail:
    snprintf(r->err, sizeof r->err, "send to an echo process: %s",
             zmq_strerror(zmq_errno()));
    return PS_EIO;
}

/* ZeroMQ: reads every whole reply waiting on dealer i; counts them. */
static int s_zmq_drain(comm_run_t *r, int i, long *replies)
{
    void *d = ps_sock_handle(r->dealers[i]);
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, d, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return zmq_errno() == EAGAIN ? 0 : PS_EIO;
        }
        int more = zmq_msg_more(&m);
        zmq_msg_close(&m);
        while (more) { /* a multipart message arrives whole */
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, d, 0) < 0) {
                zmq_msg_close(&m);
                return PS_EIO;
            }
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
        replies[i]++;
    }
}

/* ZeroMQ: as s_ps_measure, with echo rounds. */
static int s_zmq_measure(comm_run_t *r, double seconds, int min_rounds, long *rounds,
                         double *elapsed)
{
    long replies[COMM_MAX_SERVERS] = {0}, started = 0, done = 0;
    zmq_pollitem_t items[COMM_MAX_SERVERS];
    for (int i = 0; i < r->S; i++) {
        items[i] = (zmq_pollitem_t){ps_sock_handle(r->dealers[i]), 0, ZMQ_POLLIN, 0};
    }
    double t0 = ps_now(), stop_at = t0 + seconds;
    int rc = 0;
    for (int k = 0; k < r->W && rc == 0; k++) {
        rc = s_zmq_submit(r, started);
        started += rc == 0;
    }
    while (done < started) {
        int n = zmq_poll(items, r->S, (long)(COMM_POLL_LIMIT_S * 1000));
        if (n <= 0) {
            snprintf(r->err, sizeof r->err, "no echo for %.0f s", COMM_POLL_LIMIT_S);
            return PS_ETIMEDOUT;
        }
        long least = LONG_MAX;
        for (int i = 0; i < r->S; i++) {
            if ((items[i].revents & ZMQ_POLLIN) && s_zmq_drain(r, i, replies) != 0) {
                snprintf(r->err, sizeof r->err, "receive: %s", zmq_strerror(zmq_errno()));
                return PS_EIO;
            }
            least = replies[i] < least ? replies[i] : least;
        }
        /* Replies come back in order on each socket: a round is complete when
         * every echo process has answered it. */
        while (done < least) {
            done++;
            if (rc == 0 && (ps_now() < stop_at || started < min_rounds)) {
                rc = s_zmq_submit(r, started);
                started += rc == 0;
            }
        }
    }
    *elapsed = ps_now() - t0;
    *rounds = done;
    return rc;
}

/* The measured job: the only one, or the secure one beside the plain. */
static comm_job_t *s_measured(comm_run_t *r)
{
    return &r->job[r->njobs - 1];
}

/* CPU seconds and minor page faults so far of this process and one side's
 * processes: side 1 the measured job's scheduler and servers, side 0 the
 * baseline's (the echo processes, or with --secure the plain job's). Only
 * one side works at a time, so this process's share belongs to the side
 * being measured. */
static void s_side_usage(comm_run_t *r, int side, double *cpu, double *faults)
{
    const comm_job_t *j = side ? s_measured(r) : r->njobs == 2 ? &r->job[0] : NULL;
    pid_t pids[COMM_MAX_SERVERS + 2];
    int n = 0;
    pids[n++] = 0;
    if (j) {
        pids[n++] = j->sched;
    }
    for (int i = 0; i < r->S; i++) {
        pids[n++] = j ? j->servers[i] : r->echo[i];
    }
    *cpu = *faults = 0;
    for (int i = 0; i < n; i++) {
        *cpu += ps_bench_cpu_seconds(pids[i]);
        *faults += ps_bench_minor_faults(pids[i]);
    }
}

/* One side's rounds (side as s_side_cpu's). */
static int s_side_measure(comm_run_t *r, int side, double seconds, int min_rounds,
                          long *rounds, double *elapsed)
{
    if (side == 0 && r->njobs == 1) {
        return s_zmq_measure(r, seconds, min_rounds, rounds, elapsed);
    }
    return s_ps_measure(r, side ? s_measured(r) : &r->job[0], seconds, min_rounds, rounds,
                        elapsed);
}

/* The floor of a round's CPU beyond an echo's: the work no parameter server
 * can skip, done here on the payload: one copy of it into the caller's
 * buffer (ZeroMQ 4.3 cannot receive into caller memory) and one pass of the
 * servers' optimizer (plain SGD) over it. CPU seconds of this process (its
 * ZeroMQ threads idle meanwhile). */
static double s_floor_cpu(comm_run_t *r)
{
    ps_optim_t opt;
    ps_optim_from_job(&r->job[0].sc.job, &opt);
    const double t0 = ps_cpu_seconds();
    memcpy(r->dst[0], r->grad, (size_t)r->P * sizeof(float));
    ps_optim_step(&opt, (float)r->job[0].sc.job.lr, 1, r->w, NULL, 0, r->grad, 1.0f, r->P);
    return ps_cpu_seconds() - t0;
}

/* Measures one configuration: rounds per second, CPU and minor page faults
 * per round of both sides, medians. */
static int s_measure_config(comm_run_t *r, ps_bench_comm_result_t *res)
{
    const ps_bench_comm_cfg_t *cfg = r->cfg;
    double rate[2][COMM_MAX_REPS], cpu[2][COMM_MAX_REPS], flt[2][COMM_MAX_REPS];
    double ratio[COMM_MAX_REPS], cpu_ratio[COMM_MAX_REPS], floor[COMM_MAX_REPS];
    double el, c0, f0, c1, f1;
    long rounds;
    /* Warm-up: connections, page faults, the servers' first touch. */
    int rc = s_side_measure(r, 0, 0, r->W + 1, &rounds, &el);
    if (rc == 0) {
        rc = s_side_measure(r, 1, 0, r->W + 1, &rounds, &el);
        s_floor_cpu(r); /* its buffers' first touch */
    }
    for (int i = 0; i < cfg->reps && rc == 0; i++) {
        for (int side = 0; side < 2 && rc == 0; side++) { /* baseline, then shardps */
            s_side_usage(r, side, &c0, &f0);
            rc = s_side_measure(r, side, cfg->seconds, COMM_MIN_ROUNDS, &rounds, &el);
            s_side_usage(r, side, &c1, &f1);
            rate[side][i] = rounds / el;
            cpu[side][i] = (c1 - c0) / (double)rounds;
            flt[side][i] = (f1 - f0) / (double)rounds;
        }
        ratio[i] = rc == 0 ? rate[1][i] / rate[0][i] : 0;
        /* CPU is counted in clock ticks: a short repetition may show none */
        cpu_ratio[i] = rc == 0 && cpu[0][i] > 0 ? cpu[1][i] / cpu[0][i] : NAN;
        floor[i] = rc == 0 && cpu[0][i] > 0 ? 1.0 + s_floor_cpu(r) / cpu[0][i] : NAN;
    }
    if (rc == 0) {
        res->ps = ps_bench_median(rate[1], cfg->reps);
        res->base = ps_bench_median(rate[0], cfg->reps);
        res->ps_cpu = ps_bench_median(cpu[1], cfg->reps);
        res->base_cpu = ps_bench_median(cpu[0], cfg->reps);
        res->ps_faults = ps_bench_median(flt[1], cfg->reps);
        res->base_faults = ps_bench_median(flt[0], cfg->reps);
        res->cpu_ratio = ps_bench_median(cpu_ratio, cfg->reps);
        res->floor_ratio = ps_bench_median(floor, cfg->reps);
        res->ratio = ps_bench_median(ratio, cfg->reps); /* sorts ratio */
        res->ratio_lo = ratio[0];
        res->ratio_hi = ratio[cfg->reps - 1];
    }
    return rc;
}

int ps_bench_comm_run(const ps_bench_comm_cfg_t *cfg, int S, long bytes, int W,
                      ps_bench_comm_result_t *res, char *err, size_t errlen)
{
    comm_run_t r = {.cfg = cfg, .S = S, .W = W, .bytes = bytes};
    r.P = (uint64_t)bytes / sizeof(float);
    ps_range_split(r.P, S, r.ranges);
    r.njobs = cfg->secure ? 2 : 1;
    r.job[1].secure = 1; /* the measured one when there are two */
    int rc = cfg->secure ? 0 : s_start_echo(&r);
    for (int k = 0; k < r.njobs && rc == 0; k++) {
        rc = s_start_job(&r, &r.job[k]);
    }
    if (rc == 0) {
        rc = s_start_client(&r);
    }
    if (rc == 0) {
        rc = s_measure_config(&r, res);
    }
    int trc = s_teardown(&r, rc == 0);
    rc = rc ? rc : trc;
    snprintf(err, errlen, "%s", r.err);
    return rc;
}
