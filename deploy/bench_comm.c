/*
 * deploy/bench_comm.c - shardps-bench comm: what the parameter server moves,
 * next to what ZeroMQ alone moves between the same endpoints.
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
 * Both are timed alternately, reps times each, after a warm-up: rates are
 * medians, the ratio is the median of the back-to-back pairs' ratios, so a
 * change in the machine's load hits both sides of each ratio. Goodput is
 * payload bytes moved (2 x payload per round) per second; GB = 1e9 bytes.
 *
 * Allreduce: bus bandwidth (nccl-tests: busbw = bytes / time x 2(n-1)/n) of
 * shardps's ring (worker/ring.h; n member processes forked from this one, as
 * MPI's ranks are processes) beside MPI_Allreduce over TCP loopback
 * (shardps-bench-mpi under one mpirun, driven through FIFOs), both on the same
 * schedule and alternated chunk by chunk: warm-up, reps pairs of chunks between
 * barriers timed by the slowest rank; medians, and the median pair ratio.
 *
 * Processes are forked only while this one holds no ZeroMQ context and no
 * thread of ours (everything is torn down between configurations).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h> /* the raw-ZeroMQ baseline */

#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/job.h"
#include "common/log.h"
#include "deploy/bench.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "scheduler/scheduler.h"
#include "server/server.h"
#include "worker/kv.h"
#include "worker/ring.h"

#define S_PROG "shardps-bench comm"

enum {
    COMM_MAX_SERVERS = 16, /* processes on one machine */
    COMM_MAX_INFLIGHT =
        16,              /* the client has 64 request slots: 2 per round, room to spare */
    COMM_MIN_ROUNDS = 3, /* per repetition, however long rounds take */
    COMM_MAX_REPS = 15,
};

#define COMM_POLL_LIMIT_S 60.0 /* no reply for this long: the run failed */
#define COMM_TARGET_RATIO 0.8  /* the design note's target for 1-16 MB */

typedef struct {
    const char *out;               /* output directory */
    long sizes[PS_BENCH_LIST_MAX]; /* payload bytes */
    int nsizes;
    long servers[PS_BENCH_LIST_MAX]; /* server counts */
    int nservers;
    long inflight[PS_BENCH_LIST_MAX]; /* rounds in flight */
    int ninflight;
    long ar_workers[PS_BENCH_LIST_MAX]; /* allreduce ranks; none = skip allreduce */
    int nar;
    long ar_sizes[PS_BENCH_LIST_MAX]; /* allreduce payload bytes */
    int nar_sizes;
    int ring_kib;       /* shardps ring: KiB per message (the worker's --ring-kib) */
    double seconds;     /* least timed seconds per repetition */
    int reps;           /* repetitions of each measurement */
    int mpi;            /* compare allreduce with MPI where installed */
    double load_before; /* 1-minute load average at the start */
} comm_cfg_t;

/* One configuration: its processes and this process's client side. */
typedef struct {
    const comm_cfg_t *cfg;
    int S;                               /* servers */
    int W;                               /* rounds in flight */
    long bytes;                          /* payload */
    uint64_t P;                          /* payload floats */
    ps_range_t ranges[COMM_MAX_SERVERS]; /* the shard map, for the echo side */
    char tmpdir[PATH_MAX];               /* holds the scheduler's endpoint file */
    pid_t sched;                         /* scheduler process; 0 = none */
    pid_t servers[COMM_MAX_SERVERS];     /* server processes */
    pid_t echo[COMM_MAX_SERVERS];        /* echo processes */
    char echo_ep[COMM_MAX_SERVERS][128];
    ps_ctx_t *ctx; /* this process's ZeroMQ context */
    ps_link_t *link;
    ps_view_t *view;
    ps_kv_t *kv;
    ps_sock_t *dealers[COMM_MAX_SERVERS]; /* to the echo processes */
    float *grad;                     /* P: what is pushed (and echoed) */
    float *dst[COMM_MAX_INFLIGHT];   /* P each: where round k's pull lands */
    int64_t step;                    /* next push's step */
    char err[256];
} comm_run_t;

/* What one configuration measured. */
typedef struct {
    double ps;       /* shardps rounds/s: median over the repetitions */
    double zmq;      /* ZeroMQ rounds/s: median over the repetitions */
    double ratio;    /* median of the per-repetition ratios shardps/ZeroMQ (each pair
                        measured back to back, so it shares the machine's mood) */
    double ratio_lo; /* lowest per-repetition ratio */
    double ratio_hi; /* highest per-repetition ratio */
    double ps_cpu;   /* shardps CPU seconds per round (all its processes): median */
    double zmq_cpu;  /* ZeroMQ CPU seconds per round (this process + echoes): median */
} comm_result_t;

/* ---- child processes ------------------------------------------------------- */

typedef int (*comm_role_fn)(const void *arg);

/* Forks a child that runs fn(arg) and exits with its status. */
static pid_t s_fork_role(comm_role_fn fn, const void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(1);
        }
        exit(fn(arg));
    }
    return pid;
}

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

/* Waits up to `seconds` for pid; then SIGKILLs it. Returns its exit status,
 * or 128 + signal. */
static int s_reap(pid_t pid, double seconds)
{
    if (pid <= 0) {
        return 0;
    }
    double until = ps_now() + seconds;
    int status = 0;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid) {
            break;
        }
        if (got < 0 && errno != EINTR) {
            return 1;
        }
        if (ps_now() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(5000);
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
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
        r->echo[i] = s_fork_role(s_echo_main, &a);
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

/* Starts the scheduler and S servers of a job with P parameters; fills the
 * configs, which must outlive the fork (they are copied into the children). */
static int s_start_job(comm_run_t *r, ps_scheduler_config_t *sc, ps_server_config_t *vc,
                       char *epfile, size_t epcap, char *sched_ep, size_t sched_cap)
{
    snprintf(r->tmpdir, sizeof r->tmpdir, "%s/sps-bench.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(r->tmpdir)) {
        snprintf(r->err, sizeof r->err, "mkdtemp: %s", strerror(errno));
        r->tmpdir[0] = '\0';
        return PS_EIO;
    }
    snprintf(epfile, epcap, "%s/scheduler.ep", r->tmpdir);
    memset(sc, 0, sizeof *sc);
    sc->bind = "tcp://127.0.0.1:*";
    sc->endpoint_file = epfile;
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
    r->sched = s_fork_role(s_sched_main, sc);
    if (r->sched <= 0) {
        snprintf(r->err, sizeof r->err, "fork: %s", strerror(errno));
        return PS_EIO;
    }
    char *text = NULL;
    for (double until = ps_now() + 15.0; ps_now() < until; usleep(5000)) {
        if (ps_bench_read_file(epfile, &text) == 0) {
            break;
        }
    }
    if (!text) {
        snprintf(r->err, sizeof r->err, "the scheduler did not write its endpoint");
        return PS_ETIMEDOUT;
    }
    text[strcspn(text, "\n")] = '\0';
    snprintf(sched_ep, sched_cap, "%s", text);
    free(text);
    memset(vc, 0, sizeof *vc);
    vc->scheduler = sched_ep;
    vc->bind = "tcp://127.0.0.1:*";
    vc->rank = -1;
    vc->connect_timeout = 10.0;
    vc->peer_timeout = 10.0;
    vc->report_missing = 30.0;
    for (int i = 0; i < r->S; i++) {
        r->servers[i] = s_fork_role(s_server_main, vc);
        if (r->servers[i] <= 0) {
            snprintf(r->err, sizeof r->err, "fork: %s", strerror(errno));
            return PS_EIO;
        }
    }
    return 0;
}

/* This process's side: joins the job as its only worker, initialises the
 * parameters, connects to the echo processes, allocates the buffers. */
static int s_start_client(comm_run_t *r, const char *sched_ep)
{
    ps_job_t job;
    r->view = calloc(1, sizeof *r->view);
    if (ps_ctx_new(&r->ctx) != 0 || !r->view) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return PS_ENOMEM;
    }
    int rc = ps_link_join(&r->link, r->ctx, sched_ep, PS_ROLE_WORKER, -1, NULL, 10.0, 10.0,
                          &job, r->err, sizeof r->err);
    /* One sample per step and (practically) no end: the job lasts until we finish. */
    if (rc == 0) {
        ps_model_info_t info = {.num_params = r->P, .train_samples = UINT64_C(1) << 40};
        rc = ps_link_wait_view(r->link, &info, r->view, r->err, sizeof r->err);
    }
    if (rc == 0) {
        rc = ps_kv_new(r->ctx, &r->link, r->view, &r->kv, r->err, sizeof r->err);
    }
    if (rc != 0) {
        return rc;
    }
    size_t n = (size_t)r->P * sizeof(float);
    r->grad = malloc(n);
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
    if (!r->grad) {
        snprintf(r->err, sizeof r->err, "out of memory for %d x %ld bytes", r->W + 1,
                 r->bytes);
        return PS_ENOMEM;
    }
    memset(r->grad, 0, n);
    rc = ps_kv_wait(r->kv, ps_kv_init(r->kv, 0, r->P, r->grad));
    if (rc != 0) {
        snprintf(r->err, sizeof r->err, "init: %s", ps_kv_error(r->kv));
        return rc;
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

/* Ends the job (cleanly when ok), stops every process, frees everything.
 * Returns 0 when every role exited 0 after a clean end. */
static int s_teardown(comm_run_t *r, int ok)
{
    int rc = 0;
    if (r->kv) {
        if (ok) {
            ps_done_t done = {0};
            done.steps = r->step;
            rc = ps_kv_finish(r->kv, &done);
            if (rc != 0) {
                snprintf(r->err, sizeof r->err, "finishing the job: %s",
                         ps_kv_error(r->kv));
            }
        } else {
            ps_kv_abort(r->kv, r->err[0] ? r->err : "shardps-bench failed");
        }
        ps_kv_destroy(&r->kv);
    } else if (r->link) {
        ps_link_abort(r->link, r->err[0] ? r->err : "shardps-bench failed");
    }
    ps_link_destroy(&r->link);
    for (int i = 0; i < r->S; i++) {
        ps_sock_destroy(&r->dealers[i]);
    }
    ps_ctx_destroy(&r->ctx);
    /* The job's roles end by themselves (the scheduler saw us finish or
     * abort); anything left after a while is killed. */
    double grace = ok ? 15.0 : 12.0;
    for (int i = 0; i < r->S; i++) {
        int st = s_reap(r->servers[i], grace);
        rc = rc ? rc : (ok && st ? PS_EIO : 0);
        r->servers[i] = 0;
    }
    int st = s_reap(r->sched, grace);
    rc = rc ? rc : (ok && st ? PS_EIO : 0);
    r->sched = 0;
    for (int i = 0; i < r->S; i++) {
        if (r->echo[i] > 0) {
            kill(r->echo[i], SIGKILL);
            s_reap(r->echo[i], 5.0);
            r->echo[i] = 0;
        }
    }
    if (rc != 0 && !r->err[0]) {
        snprintf(r->err, sizeof r->err, "a scheduler or server process failed");
    }
    if (r->tmpdir[0]) {
        char ep[PATH_MAX + 32];
        snprintf(ep, sizeof ep, "%s/scheduler.ep", r->tmpdir);
        unlink(ep);
        rmdir(r->tmpdir);
        r->tmpdir[0] = '\0';
    }
    free(r->grad);
    r->grad = NULL;
    for (int k = 0; k < COMM_MAX_INFLIGHT; k++) {
        free(r->dst[k]);
        r->dst[k] = NULL;
    }
    free(r->view);
    r->view = NULL;
    return rc;
}

/* ---- the two measurements ---------------------------------------------------- */

/* Queues round k: push the payload, pull it back into dst[k]. */
static int s_ps_submit(comm_run_t *r, int k, int *hp, int *hl)
{
    int64_t t = r->step++;
    *hp = ps_kv_push(r->kv, 0, r->P, r->grad, t);
    *hl = ps_kv_pull(r->kv, 0, r->P, r->dst[k], r->W == 1 ? t + 1 : 0);
    if (*hp < 0 || *hl < 0) {
        snprintf(r->err, sizeof r->err, "push/pull refused: %s", ps_kv_error(r->kv));
        return *hp < 0 ? *hp : *hl;
    }
    return 0;
}

/*
 * Parameter server: keeps W rounds outstanding for at least `seconds` and
 * min_rounds rounds, then drains. *rounds completed in *elapsed seconds.
 */
static int s_ps_measure(comm_run_t *r, double seconds, int min_rounds, long *rounds,
                        double *elapsed)
{
    int hp[COMM_MAX_INFLIGHT], hl[COMM_MAX_INFLIGHT], active[COMM_MAX_INFLIGHT] = {0};
    long started = 0, done = 0;
    double t0 = ps_now(), stop_at = t0 + seconds;
    int rc = 0;
    for (int k = 0; k < r->W && rc == 0; k++) {
        rc = s_ps_submit(r, k, &hp[k], &hl[k]);
        active[k] = rc == 0;
        started += rc == 0;
    }
    for (int k = 0; done < started; k = (k + 1) % r->W) {
        if (!active[k]) {
            continue;
        }
        int a = ps_kv_wait(r->kv, hp[k]), b = ps_kv_wait(r->kv, hl[k]);
        active[k] = 0;
        done++;
        if ((a || b) && rc == 0) {
            snprintf(r->err, sizeof r->err, "push/pull failed: %s", ps_kv_error(r->kv));
            rc = a ? a : b;
        }
        if (rc == 0 && (ps_now() < stop_at || started < min_rounds)) {
            rc = s_ps_submit(r, k, &hp[k], &hl[k]);
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

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* CPU seconds used so far by this process and one side's processes: the
 * scheduler and servers (ps) or the echo processes. Only one side works at a
 * time, so this process's share belongs to the side being measured. */
static double s_side_cpu(const comm_run_t *r, int ps)
{
    double sum = ps_bench_cpu_seconds(0);
    if (ps) {
        sum += ps_bench_cpu_seconds(r->sched);
    }
    for (int i = 0; i < r->S; i++) {
        sum += ps_bench_cpu_seconds(ps ? r->servers[i] : r->echo[i]);
    }
    return sum;
}

/* Measures one configuration: rounds per second and CPU per round of both,
 * medians. */
static int s_measure_config(comm_run_t *r, comm_result_t *res)
{
    const comm_cfg_t *cfg = r->cfg;
    double ps[COMM_MAX_REPS], zq[COMM_MAX_REPS], ratio[COMM_MAX_REPS], el;
    double ps_cpu[COMM_MAX_REPS], zq_cpu[COMM_MAX_REPS], c0;
    long rounds;
    /* Warm-up: connections, page faults, the servers' first touch. */
    int rc = s_zmq_measure(r, 0, r->W + 1, &rounds, &el);
    if (rc == 0) {
        rc = s_ps_measure(r, 0, r->W + 1, &rounds, &el);
    }
    for (int i = 0; i < cfg->reps && rc == 0; i++) {
        c0 = s_side_cpu(r, 0);
        rc = s_zmq_measure(r, cfg->seconds, COMM_MIN_ROUNDS, &rounds, &el);
        zq[i] = rounds / el;
        zq_cpu[i] = (s_side_cpu(r, 0) - c0) / (double)rounds;
        if (rc == 0) {
            c0 = s_side_cpu(r, 1);
            rc = s_ps_measure(r, cfg->seconds, COMM_MIN_ROUNDS, &rounds, &el);
            ps[i] = rounds / el;
            ps_cpu[i] = (s_side_cpu(r, 1) - c0) / (double)rounds;
            ratio[i] = ps[i] / zq[i];
        }
    }
    if (rc == 0) {
        res->ps = s_median(ps, cfg->reps);
        res->zmq = s_median(zq, cfg->reps);
        res->ps_cpu = s_median(ps_cpu, cfg->reps);
        res->zmq_cpu = s_median(zq_cpu, cfg->reps);
        res->ratio = s_median(ratio, cfg->reps); /* sorts ratio */
        res->ratio_lo = ratio[0];
        res->ratio_hi = ratio[cfg->reps - 1];
    }
    return rc;
}

/* Runs one (servers, payload, in flight) configuration from scratch. */
static int s_run_config(const comm_cfg_t *cfg, int S, long bytes, int W, comm_result_t *res,
                        char *err, size_t errlen)
{
    comm_run_t r = {.cfg = cfg, .S = S, .W = W, .bytes = bytes};
    r.P = (uint64_t)bytes / sizeof(float);
    ps_range_split(r.P, S, r.ranges);
    ps_scheduler_config_t sc;
    ps_server_config_t vc;
    char epfile[PATH_MAX + 32], sched_ep[256];
    int rc = s_start_echo(&r);
    if (rc == 0) {
        rc = s_start_job(&r, &sc, &vc, epfile, sizeof epfile, sched_ep, sizeof sched_ep);
    }
    if (rc == 0) {
        rc = s_start_client(&r, sched_ep);
    }
    if (rc == 0) {
        rc = s_measure_config(&r, res);
    }
    int trc = s_teardown(&r, rc == 0);
    rc = rc ? rc : trc;
    snprintf(err, errlen, "%s", r.err);
    return rc;
}

/* The x axis of a plot against payload size: log2, tics named 4K, 1M, ... */
static void s_plot_sizes(ps_bench_str_t *gp, const long *sizes, int nsizes,
                         const char *ylabel)
{
    ps_bench_str_addf(gp,
                      "set logscale x 2\nset xlabel 'payload'\nset ylabel '%s'\n"
                      "set yrange [0:*]\nset xtics (",
                      ylabel);
    for (int i = 0; i < nsizes; i++) {
        char name[32];
        ps_bench_size_name(sizes[i], name, sizeof name);
        ps_bench_str_addf(gp, "%s'%s' %ld", i ? ", " : "", name, sizes[i]);
    }
    long lo = sizes[0], hi = sizes[0];
    for (int i = 1; i < nsizes; i++) {
        lo = sizes[i] < lo ? sizes[i] : lo;
        hi = sizes[i] > hi ? sizes[i] : hi;
    }
    /* A margin, so the end points and their tic labels stay inside. */
    ps_bench_str_addf(gp, ")\nset xrange [%g:%g]\n", lo / 1.5, hi * 1.5);
}

/* ---- allreduce ------------------------------------------------------------------- */

/*
 * shardps's ring allreduce, timed as shardps-bench-mpi times MPI_Allreduce.
 *
 * n ring members, each a process forked from this one (as MPI's ranks are
 * processes) with its own ZeroMQ context, worker/ring.h over TCP loopback on
 * 127.0.0.1 with the worker's defaults (--ring-kib). This process only drives
 * them, over two pipes per member: it hands out the endpoints, then sends
 * "allreduce F floats I times" commands; each member does a small allreduce
 * as a barrier, times I calls in place on a zeroed buffer (as the MPI helper's)
 * and writes back its seconds. A chunk's time is the slowest member's.
 */

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
    AR_MAX_MEMBERS = 64,   /* --allreduce-workers bound */
    AR_WARMUP_CALLS = 5,   /* first warm-up chunk */
    AR_MIN_CALLS = 3,      /* per timed chunk, however long calls take */
    AR_MAX_CALLS = 100000, /* per chunk, however short */
};
/* A member waiting this long for its neighbour fails. */
#define AR_RING_TIMEOUT_S 30.0
/* The target: shardps's busbw / MPI's at 16-64 MB, 2 and 4 workers. */
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

/* Writes all of buf, or fails. */
static int s_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return PS_EIO;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Reads all of buf within `seconds` (< 0: no limit). PS_ETIMEDOUT, PS_ECLOSED
 * (the writer is gone) or PS_EIO on failure. */
static int s_read_all(int fd, void *buf, size_t len, double seconds)
{
    char *p = buf;
    double until = ps_now() + seconds;
    while (len > 0) {
        if (seconds >= 0) {
            double left = until - ps_now();
            struct pollfd pf = {fd, POLLIN, 0};
            int n = left > 0 ? poll(&pf, 1, (int)(left * 1000) + 1) : 0;
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n == 0) {
                return PS_ETIMEDOUT;
            }
        }
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return r == 0 ? PS_ECLOSED : PS_EIO;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

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
        rc = ps_ring_new(ctx, "tcp://127.0.0.1:*", &ring, rep.text, sizeof rep.text,
                         rep.text, sizeof rep.text);
    } else {
        snprintf(rep.text, sizeof rep.text, "out of memory");
    }
    rep.rc = rc;
    char right[sizeof rep.text];
    if (s_write_all(a->reply_fd, &rep, sizeof rep) != 0 || rc != 0 ||
        s_read_all(a->cmd_fd, right, sizeof right, -1) != 0) {
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
        if (s_read_all(a->cmd_fd, &cmd, sizeof cmd, -1) != 0 || cmd.floats <= 0) {
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
        if (s_write_all(a->reply_fd, &rep, sizeof rep) != 0) {
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
                (void)s_write_all(g->cmd[i], &stop, sizeof stop);
            }
            close(g->cmd[i]);
            g->cmd[i] = -1;
        }
    }
    for (int i = 0; i < g->n; i++) {
        s_reap(g->pid[i], 10.0);
        g->pid[i] = 0;
        if (g->reply[i] >= 0) {
            close(g->reply[i]);
            g->reply[i] = -1;
        }
    }
}

/* Forks n members and wires them into a ring. */
static int s_ar_start(ar_ring_t *g, const comm_cfg_t *cfg, int n, uint64_t max_floats,
                      char *err, size_t errlen)
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
        g->pid[i] = s_fork_role(s_ar_member_main, &a);
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
        int rc = s_read_all(g->reply[i], &rep, sizeof rep, COMM_POLL_LIMIT_S);
        if (rc != 0 || rep.rc != 0) {
            rep.text[sizeof rep.text - 1] = '\0';
            snprintf(err, errlen, "ring member %d did not start: %s", i,
                     rc ? ps_strerror(rc) : rep.text);
            return rc ? rc : rep.rc;
        }
        memcpy(eps[i], rep.text, sizeof eps[i]);
    }
    for (int i = 0; i < n; i++) {
        if (s_write_all(g->cmd[i], eps[(i + 1) % n], sizeof eps[i]) != 0) {
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
        if (s_write_all(g->cmd[i], &cmd, sizeof cmd) != 0) {
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
            int rc = s_read_all(g->reply[i], &rep, sizeof rep, COMM_POLL_LIMIT_S);
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

/* Are MPI and our helper here? Fills the paths, or says why not in why. */
static int s_mpi_find(char *mpirun, char *helper, size_t cap, char *why, size_t whylen)
{
    if (ps_bench_find_exe("mpirun", NULL, mpirun, cap) != 0) {
        snprintf(why, whylen, "mpirun not found (Debian: openmpi-bin libopenmpi-dev)");
        return PS_ENOENT;
    }
    if (ps_bench_find_exe("shardps-bench-mpi", "deploy", helper, cap) != 0) {
        snprintf(why, whylen,
                 "shardps-bench-mpi was not built (install libopenmpi-dev, then "
                 "meson setup --reconfigure)");
        return PS_ENOENT;
    }
    return 0;
}

/* The MPI reference: n ranks of shardps-bench-mpi under one mpirun, driven
 * through FIFOs (see bench_mpi.c). */
typedef struct {
    int n;
    pid_t pid;               /* mpirun; 0 = none */
    char dir[PATH_MAX];      /* holds the FIFOs; "" = none */
    int cmd[AR_MAX_MEMBERS]; /* cmd-R, opened read-write (never blocks) */
    int reply;               /* reply, opened read-write */
} ar_mpi_t;

/* Is mpirun still there? Says why not in err. */
static int s_mpi_alive(ar_mpi_t *m, char *err, size_t errlen)
{
    int status;
    if (m->pid > 0 && waitpid(m->pid, &status, WNOHANG) == m->pid) {
        m->pid = 0;
        snprintf(err, errlen, "mpirun exited (%s %d)",
                 WIFSIGNALED(status) ? "signal" : "status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return PS_ECLOSED;
    }
    return m->pid > 0 ? 0 : PS_ECLOSED;
}

/* Waits for rank 0's next reply (a double) within `seconds`, watching mpirun. */
static int s_mpi_reply(ar_mpi_t *m, double seconds, char *err, size_t errlen, double *v)
{
    double until = ps_now() + seconds;
    for (;;) {
        struct pollfd pf = {m->reply, POLLIN, 0};
        int n = poll(&pf, 1, 100);
        if (n > 0) {
            return s_read_all(m->reply, v, sizeof *v, COMM_POLL_LIMIT_S);
        }
        if (n < 0 && errno != EINTR) {
            snprintf(err, errlen, "poll: %s", strerror(errno));
            return PS_EIO;
        }
        int rc = s_mpi_alive(m, err, errlen);
        if (rc != 0) {
            return rc;
        }
        if (ps_now() > until) {
            snprintf(err, errlen, "no answer from the MPI ranks for %.0f s", seconds);
            return PS_ETIMEDOUT;
        }
    }
}

/* Ends the reference: end of file on every command FIFO, then mpirun is given
 * a while to finish before it is killed. */
static void s_mpi_stop(ar_mpi_t *m)
{
    for (int i = 0; i < m->n; i++) {
        if (m->cmd[i] >= 0) {
            close(m->cmd[i]);
            m->cmd[i] = -1;
        }
    }
    if (m->pid > 0) {
        double until = ps_now() + 10.0;
        int status;
        while (waitpid(m->pid, &status, WNOHANG) == 0 && ps_now() < until) {
            usleep(10000);
        }
        if (ps_now() >= until) {
            kill(m->pid, SIGTERM); /* mpirun takes its ranks down with it */
            s_reap(m->pid, 5.0);
        }
        m->pid = 0;
    }
    if (m->reply >= 0) {
        close(m->reply);
        m->reply = -1;
    }
    if (m->dir[0]) {
        char path[PATH_MAX + 32];
        for (int i = 0; i < m->n; i++) {
            snprintf(path, sizeof path, "%s/cmd-%d", m->dir, i);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/reply", m->dir);
        unlink(path);
        rmdir(m->dir);
        m->dir[0] = '\0';
    }
}

/* Starts mpirun -np n shardps-bench-mpi DIR (output in log) and waits until
 * MPI is up. */
static int s_mpi_start(ar_mpi_t *m, const char *mpirun, const char *helper, int n,
                       const char *log, char *err, size_t errlen)
{
    *m = (ar_mpi_t){.n = n, .reply = -1};
    for (int i = 0; i < n; i++) {
        m->cmd[i] = -1;
    }
    snprintf(m->dir, sizeof m->dir, "%s/sps-mpi.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(m->dir)) {
        snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
        m->dir[0] = '\0';
        return PS_EIO;
    }
    char path[PATH_MAX + 32];
    /* Read-write opens never block and never see end of file: the ranks open
     * their ends whenever they get there. */
    for (int i = 0; i <= n; i++) {
        if (i < n) {
            snprintf(path, sizeof path, "%s/cmd-%d", m->dir, i);
        } else {
            snprintf(path, sizeof path, "%s/reply", m->dir);
        }
        int fd = mkfifo(path, 0600) == 0 ? open(path, O_RDWR | O_CLOEXEC) : -1;
        if (fd < 0) {
            snprintf(err, errlen, "FIFO %.200s: %s", path, strerror(errno));
            return PS_EIO;
        }
        *(i < n ? &m->cmd[i] : &m->reply) = fd;
    }
    char np[16];
    snprintf(np, sizeof np, "%d", n);
    char *argv[32];
    int a = 0;
    argv[a++] = (char *)mpirun;
    argv[a++] = "--allow-run-as-root";
    argv[a++] = "--oversubscribe";
    argv[a++] = "--timeout"; /* seconds: a wedged reference must not hang the bench */
    argv[a++] = "1800";
    argv[a++] = "--mca";
    argv[a++] = "btl";
    argv[a++] = "self,tcp"; /* TCP even between local ranks, as our ring uses */
    argv[a++] = "--mca";
    argv[a++] = "btl_tcp_if_include";
    argv[a++] = "lo";
    argv[a++] = "--mca";
    argv[a++] = "pml";
    argv[a++] = "ob1";
#ifdef __SANITIZE_ADDRESS__
    argv[a++] = "-x";
    argv[a++] = "ASAN_OPTIONS=detect_leaks=0"; /* OpenMPI's own allocations */
#endif
    argv[a++] = "-np";
    argv[a++] = np;
    argv[a++] = (char *)helper;
    argv[a++] = m->dir;
    argv[a] = NULL;
    unlink(log);
    if (ps_bench_spawn(argv, log, &m->pid) != 0) {
        m->pid = 0;
        snprintf(err, errlen, "cannot run %.200s", mpirun);
        return PS_EIO;
    }
    double up;
    return s_mpi_reply(m, COMM_POLL_LIMIT_S, err, errlen, &up);
}

/* The reference's chunk (an ar_chunk_fn). */
static int s_mpi_chunk(void *side, uint64_t floats, long iters, char *err, size_t errlen,
                       double *seconds)
{
    ar_mpi_t *m = side;
    int64_t cmd[2] = {(int64_t)(floats * sizeof(float)), iters};
    int rc = s_mpi_alive(m, err, errlen);
    for (int i = 0; i < m->n && rc == 0; i++) {
        rc = s_write_all(m->cmd[i], cmd, sizeof cmd);
    }
    return rc ? rc : s_mpi_reply(m, COMM_POLL_LIMIT_S * 5, err, errlen, seconds);
}

/* One allreduce figure: both sides' busbw (medians), and the median, lowest
 * and highest of the back-to-back pairs' ratios (NAN where not measured). */
typedef struct {
    double ours, mpi, ratio, lo, hi;
} ar_result_t;

/*
 * n members: for each allreduce size, our ring and MPI_Allreduce (when mpirun
 * is not NULL) each warmed up and calibrated, then reps pairs of chunks, ours
 * then MPI's, back to back; each side waits on its FIFOs or pipes, using no
 * CPU, while the other runs. Results into res[] (one per size). Returns 0 or 1
 * (our ring failed, said on stderr); *mpi_failed is set when the reference
 * failed (its log is kept).
 */
static int s_allreduce_pair(const comm_cfg_t *cfg, int n, const char *mpirun,
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
    ar_ring_t g;
    ar_mpi_t m = {.n = 0, .reply = -1};
    char err[256] = "", merr[512] = "", log[PATH_MAX];
    snprintf(log, sizeof log, "%s/mpi-allreduce-n%d.log", cfg->out, n);
    int rc = s_ar_start(&g, cfg, n, max_floats, err, sizeof err);
    int mrc =
        mpirun ? s_mpi_start(&m, mpirun, helper, n, log, merr, sizeof merr) : PS_ENOENT;
    *mpi_failed = mpirun && mrc != 0;
    for (int i = 0; i < cfg->nar_sizes && (rc == 0 || mrc == 0); i++) {
        char name[32];
        long bytes = cfg->ar_sizes[i];
        uint64_t floats = (uint64_t)bytes / sizeof(float);
        ps_bench_size_name(bytes, name, sizeof name);
        double t0 = ps_now(), ts[COMM_MAX_REPS], tm[COMM_MAX_REPS], ratio[COMM_MAX_REPS];
        long is = 0, im = 0;
        if (rc == 0) {
            rc = s_ar_calibrate(s_ar_chunk, &g, cfg->seconds, floats, err, sizeof err, &is);
        }
        if (mrc == 0) {
            mrc = s_ar_calibrate(s_mpi_chunk, &m, cfg->seconds, floats, merr, sizeof merr,
                                 &im);
        }
        int k = 0, nr = 0;
        for (; k < cfg->reps && (rc == 0 || mrc == 0); k++) {
            if (rc == 0) {
                rc = s_ar_chunk(&g, floats, is, err, sizeof err, &ts[k]);
                ts[k] /= (double)is;
            }
            if (mrc == 0) {
                mrc = s_mpi_chunk(&m, floats, im, merr, sizeof merr, &tm[k]);
                tm[k] /= (double)im;
            }
            if (rc == 0 && mrc == 0) {
                ratio[nr++] = tm[k] / ts[k]; /* busbw ratio ours/MPI */
            }
        }
        if (rc == 0) {
            res[i].ours = s_busbw(bytes, s_median(ts, cfg->reps), n);
        }
        if (mrc == 0) {
            res[i].mpi = s_busbw(bytes, s_median(tm, cfg->reps), n);
        }
        if (nr == cfg->reps) {
            res[i].ratio = s_median(ratio, nr); /* sorts ratio */
            res[i].lo = ratio[0];
            res[i].hi = ratio[nr - 1];
        }
        fprintf(stderr,
                S_PROG
                ": allreduce %s, %d workers: shardps %.3f GB/s, MPI %.3f GB/s busbw, "
                "ratio %.2f [%.2f, %.2f] (%.1f s)\n",
                name, n, res[i].ours, res[i].mpi, res[i].ratio, res[i].lo, res[i].hi,
                ps_now() - t0);
    }
    s_ar_stop(&g, rc != 0);
    s_mpi_stop(&m);
    sigaction(SIGPIPE, &old, NULL);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": ring allreduce with %d members failed: %s\n", n,
                err[0] ? err : ps_strerror(rc));
    }
    if (mpirun && mrc != 0) {
        *mpi_failed = 1;
        fprintf(stderr, S_PROG ": MPI_Allreduce with %d ranks failed: %s (log: %s)\n", n,
                merr[0] ? merr : ps_strerror(mrc), log);
    } else {
        unlink(log); /* kept only when it failed */
    }
    return rc != 0;
}

/* Does v hold a measured (not NAN) value? */
static int s_any(const double *v, int n)
{
    for (int i = 0; i < n; i++) {
        if (!isnan(v[i])) {
            return 1;
        }
    }
    return 0;
}

/* The allreduce table (always written, with a note on what was skipped) and
 * its plot. Returns 0 or 1 (something failed). */
static int s_allreduce(const comm_cfg_t *cfg)
{
    char mpirun[PATH_MAX], helper[PATH_MAX], why[256] = "--mpi=0";
    int have_mpi =
        cfg->mpi && s_mpi_find(mpirun, helper, sizeof mpirun, why, sizeof why) == 0;
    const int nz = cfg->nar_sizes;
    ar_result_t res[PS_BENCH_LIST_MAX][PS_BENCH_LIST_MAX];
    double ours[PS_BENCH_LIST_MAX][PS_BENCH_LIST_MAX],
        mpi[PS_BENCH_LIST_MAX][PS_BENCH_LIST_MAX];
    int failed = 0, mpi_failed[PS_BENCH_LIST_MAX], nmpi_failed = 0;
    int ours_failed[PS_BENCH_LIST_MAX], nours_failed = 0;
    double load_before = ps_bench_loadavg();
    for (int w = 0; w < cfg->nar; w++) {
        int n = (int)cfg->ar_workers[w], mf = 0;
        /* The reference failing is worth a note, not a failed bench. */
        if (s_allreduce_pair(cfg, n, have_mpi ? mpirun : NULL, helper, res[w], &mf) != 0) {
            ours_failed[nours_failed++] = n;
            failed = 1;
        }
        for (int i = 0; i < nz; i++) {
            ours[w][i] = res[w][i].ours;
            mpi[w][i] = res[w][i].mpi;
        }
        if (mf) {
            mpi_failed[nmpi_failed++] = n;
        }
    }
    ps_bench_table_t *t;
    if (ps_bench_table_new(
            cfg->out, "allreduce",
            "### Allreduce bus bandwidth (busbw = bytes/time x 2(n-1)/n, GB/s)",
            "payload_bytes,payload,workers,shardps_busbw_gbs,mpi_busbw_gbs,ratio,ratio_min,"
            "ratio_max",
            "bytes,payload,workers,shardps busbw,MPI_Allreduce busbw,"
            "shardps/MPI,ratio min,ratio max",
            &t) != 0) {
        return 1;
    }
    ps_bench_str_t gp = {0};
    ps_bench_plot_header(&gp, cfg->out, "allreduce_busbw", 640, 400);
    s_plot_sizes(&gp, cfg->ar_sizes, nz, "busbw (GB/s)");
    ps_bench_str_t plot = {0};
    double worst = INFINITY;
    char worst_at[64] = "";
    int in_target = 0, met = 0;
    for (int w = 0; w < cfg->nar; w++) {
        ps_bench_str_addf(&gp, "$n%d << EOD\n", w);
        for (int i = 0; i < nz; i++) {
            char name[32], o[32] = "", m[32] = "", ratio[32] = "";
            const ar_result_t *q = &res[w][i];
            long bytes = cfg->ar_sizes[i];
            ps_bench_size_name(bytes, name, sizeof name);
            if (!isnan(ours[w][i])) {
                snprintf(o, sizeof o, "%.3f", ours[w][i]);
            }
            if (!isnan(mpi[w][i])) {
                snprintf(m, sizeof m, "%.3f", mpi[w][i]);
            }
            if (!isnan(q->ratio)) {
                double r = q->ratio;
                snprintf(ratio, sizeof ratio, "%.2f,%.2f,%.2f", r, q->lo, q->hi);
                if (bytes >= (16L << 20) && bytes <= (64L << 20) &&
                    (cfg->ar_workers[w] == 2 || cfg->ar_workers[w] == 4)) {
                    in_target++;
                    met += r >= AR_TARGET_RATIO;
                    if (r < worst) {
                        worst = r;
                        snprintf(worst_at, sizeof worst_at, "%s, %ld workers", name,
                                 cfg->ar_workers[w]);
                    }
                }
            }
            ps_bench_table_rowf(t, "%ld,%s,%ld,%s,%s,%s", bytes, name, cfg->ar_workers[w],
                                o, m, ratio[0] ? ratio : ",,");
            ps_bench_str_addf(&gp, "%ld %s %s\n", bytes, o[0] ? o : "NaN",
                              m[0] ? m : "NaN");
        }
        ps_bench_str_addf(&gp, "EOD\n");
        if (s_any(ours[w], nz)) {
            ps_bench_str_addf(&plot, "%s$n%d u 1:2 w lp lc %d pt 7 t 'shardps n=%ld'",
                              plot.len ? ", " : "", w, w + 1, cfg->ar_workers[w]);
        }
        if (s_any(mpi[w], nz)) {
            ps_bench_str_addf(&plot, "%s$n%d u 1:3 w lp lc %d dt 2 pt 6 t 'MPI n=%ld'",
                              plot.len ? ", " : "", w, w + 1, cfg->ar_workers[w]);
        }
    }
    if (cfg->nar == 0) {
        ps_bench_table_note(t, "No allreduce measured: --allreduce-workers 0.");
    } else {
        char machine[256];
        ps_bench_machine(machine, sizeof machine, load_before);
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
            "and max beside it). bytes = the payload; GB = 1e9 B. Machine: %s.",
            cfg->ring_kib, AR_WARMUP_CALLS, cfg->reps, cfg->seconds, cfg->reps, machine);
    }
    if (cfg->nar && have_mpi) {
        ps_bench_table_note(t,
                            "MPI: OpenMPI `mpirun --mca btl self,tcp --mca "
                            "btl_tcp_if_include lo --mca pml ob1` (TCP loopback, no shared "
                            "memory), its default (tuned) allreduce algorithm choice.");
    } else if (cfg->nar) {
        ps_bench_table_note(t, "MPI_Allreduce comparison skipped: %s.", why);
    }
    if (in_target) {
        ps_bench_table_note(
            t,
            "Target (16-64 MB, 2 and 4 workers: shardps busbw >= %.1fx "
            "MPI_Allreduce's): met in %d of %d rows; lowest ratio %.2f (%s).",
            AR_TARGET_RATIO, met, in_target, worst, worst_at);
    }
    for (int i = 0; i < nours_failed; i++) {
        ps_bench_table_note(t, "shardps's ring with %d members failed (n/a cells).",
                            ours_failed[i]);
    }
    for (int i = 0; i < nmpi_failed; i++) {
        ps_bench_table_note(
            t, "MPI_Allreduce with %d ranks failed: see mpi-allreduce-n%d.log.",
            mpi_failed[i], mpi_failed[i]);
    }
    ps_bench_table_destroy(&t, 1);
    if (plot.len) {
        ps_bench_str_addf(&gp, "plot %s\n", ps_bench_str_get(&plot));
        failed |=
            ps_bench_plot(cfg->out, "allreduce_busbw", ps_bench_str_get(&gp)) == PS_EIO;
    }
    ps_bench_str_fini(&plot);
    ps_bench_str_fini(&gp);
    return failed;
}

/* ---- the sweep ------------------------------------------------------------------- */

/* Goodput in GB/s from rounds per second: every round moves the payload twice. */
static double s_gbs(double rounds_per_s, long bytes)
{
    return rounds_per_s * 2.0 * (double)bytes / 1e9;
}

static int s_sweep(const comm_cfg_t *cfg)
{
    ps_bench_table_t *t;
    if (ps_bench_table_new(
            cfg->out, "comm",
            "### Parameter-server push+pull goodput vs raw ZeroMQ (same run, loopback TCP)",
            "payload_bytes,payload,servers,inflight,mode,ps_rounds_per_sec,ps_goodput_gbs,"
            "zmq_rounds_per_sec,zmq_goodput_gbs,ratio,ratio_min,ratio_max,ps_cpu_ms_per_round,"
            "zmq_cpu_ms_per_round",
            "bytes,payload,servers,in flight,mode,shardps rounds/s,shardps GB/s,"
            "ZeroMQ rounds/s,ZeroMQ GB/s,shardps/ZeroMQ,ratio min,ratio max,"
            "shardps CPU ms/round,ZeroMQ CPU ms/round",
            &t) != 0) {
        return 1;
    }
    int n = cfg->nservers * cfg->nsizes * cfg->ninflight, done = 0, failed = 0;
    comm_result_t *res = calloc((size_t)n, sizeof *res);
    if (!res) {
        ps_bench_table_destroy(&t, 0);
        return 1;
    }
    double worst = INFINITY;
    char worst_at[96] = "";
    int in_target = 0, met = 0;
    for (int w = 0; w < cfg->ninflight; w++) {
        for (int s = 0; s < cfg->nservers; s++) {
            for (int z = 0; z < cfg->nsizes; z++) {
                int W = (int)cfg->inflight[w], S = (int)cfg->servers[s];
                long bytes = cfg->sizes[z];
                int idx = (w * cfg->nservers + s) * cfg->nsizes + z;
                char name[32], err[256] = "";
                ps_bench_size_name(bytes, name, sizeof name);
                done++;
                double t0 = ps_now();
                comm_result_t *q = &res[idx];
                int rc = s_run_config(cfg, S, bytes, W, q, err, sizeof err);
                if (rc != 0) {
                    failed = 1;
                    q->ps = q->zmq = NAN;
                    fprintf(stderr,
                            S_PROG ": [%d/%d] %s servers=%d inflight=%d: failed: %s\n",
                            done, n, name, S, W, err[0] ? err : ps_strerror(rc));
                    ps_bench_table_rowf(t, "%ld,%s,%d,%d,%s,,,,,,,,,", bytes, name, S, W,
                                        W == 1 ? "sync" : "async");
                    continue;
                }
                double ratio = q->ratio;
                fprintf(stderr,
                        S_PROG ": [%d/%d] %s servers=%d inflight=%d: shardps %.3f GB/s, "
                               "ZeroMQ %.3f GB/s, ratio %.2f [%.2f, %.2f] (%.1f s)\n",
                        done, n, name, S, W, s_gbs(q->ps, bytes), s_gbs(q->zmq, bytes),
                        ratio, q->ratio_lo, q->ratio_hi, ps_now() - t0);
                ps_bench_table_rowf(t,
                                    "%ld,%s,%d,%d,%s,%.1f,%.3f,%.1f,%.3f,%.2f,%.2f,%.2f,%.3f,"
                                    "%.3f",
                                    bytes, name, S, W, W == 1 ? "sync" : "async", q->ps,
                                    s_gbs(q->ps, bytes), q->zmq, s_gbs(q->zmq, bytes),
                                    ratio, q->ratio_lo, q->ratio_hi, q->ps_cpu * 1e3,
                                    q->zmq_cpu * 1e3);
                if (bytes >= (1L << 20) && bytes <= (16L << 20)) {
                    in_target++;
                    met += ratio >= COMM_TARGET_RATIO;
                    if (ratio < worst) {
                        worst = ratio;
                        snprintf(worst_at, sizeof worst_at, "%s, %d servers, %d in flight",
                                 name, S, W);
                    }
                }
            }
        }
    }
    char machine[256];
    ps_bench_machine(machine, sizeof machine, cfg->load_before);
    ps_bench_table_note(
        t,
        "Round: push of the whole payload + pull of it (shardps; split over the "
        "servers by the shard map; servers apply plain SGD) or one echo of the "
        "same bytes (ZeroMQ DEALER->ROUTER->DEALER, zero-copy sends, same "
        "split, one echo process per server). Goodput = 2 x payload x rounds/s, "
        "GB = 1e9 B. In flight 1: sync mode; more: async. %d repetitions of "
        ">= %.2f s, ZeroMQ then shardps back to back; rates are medians, the ratio is "
        "the median of the %d back-to-back ratios (min and max beside it). CPU per round: "
        "user + system seconds of every process of that side (this one included), "
        "median; on a machine whose cores are all busy it bounds the rate. Machine: %s.",
        cfg->reps, cfg->seconds, cfg->reps, machine);
    if (in_target) {
        ps_bench_table_note(
            t,
            "Target (1-16 MB: shardps >= %.1fx ZeroMQ): met in %d of %d rows; "
            "lowest ratio %.2f (%s).",
            COMM_TARGET_RATIO, met, in_target, worst, worst_at);
    }
    ps_bench_table_destroy(&t, 1);

    /* Goodput against payload: one panel per in-flight count with data, one
     * line pair per server count with data (gnuplot fails on a series that
     * has no point). */
    ps_bench_str_t gp = {0}, panels = {0};
    int npanels = 0;
    for (int w = 0; w < cfg->ninflight; w++) {
        ps_bench_str_t plot = {0};
        for (int s = 0; s < cfg->nservers; s++) {
            int points = 0;
            ps_bench_str_addf(&gp, "$w%ds%d << EOD\n", w, s);
            for (int z = 0; z < cfg->nsizes; z++) {
                const comm_result_t *q = &res[(w * cfg->nservers + s) * cfg->nsizes + z];
                if (!isnan(q->ps)) {
                    ps_bench_str_addf(&gp, "%ld %.4f %.4f\n", cfg->sizes[z],
                                      s_gbs(q->ps, cfg->sizes[z]),
                                      s_gbs(q->zmq, cfg->sizes[z]));
                    points++;
                }
            }
            ps_bench_str_addf(&gp, "EOD\n");
            if (points) {
                ps_bench_str_addf(&plot,
                                  "%s$w%ds%d u 1:2 w lp lc %d pt 7 t 'shardps S=%ld', "
                                  "$w%ds%d u 1:3 w l lc %d dt 2 t 'ZeroMQ S=%ld'",
                                  plot.len ? ", " : "", w, s, s + 1, cfg->servers[s], w, s,
                                  s + 1, cfg->servers[s]);
            }
        }
        if (plot.len) {
            ps_bench_str_addf(&panels, "set title '%ld in flight (%s)'\nplot %s\n",
                              cfg->inflight[w], cfg->inflight[w] == 1 ? "sync" : "async",
                              ps_bench_str_get(&plot));
            npanels++;
        }
        ps_bench_str_fini(&plot);
    }
    if (npanels) {
        ps_bench_str_t head = {0};
        ps_bench_plot_header(&head, cfg->out, "comm_goodput", 420 * npanels, 380);
        s_plot_sizes(&head, cfg->sizes, cfg->nsizes, "goodput (GB/s)");
        ps_bench_str_addf(&head, "%sset multiplot layout 1,%d\n%sunset multiplot\n",
                          ps_bench_str_get(&gp), npanels, ps_bench_str_get(&panels));
        failed |=
            ps_bench_plot(cfg->out, "comm_goodput", ps_bench_str_get(&head)) == PS_EIO;
        ps_bench_str_fini(&head);
    }
    ps_bench_str_fini(&panels);
    ps_bench_str_fini(&gp);
    free(res);
    return failed | s_allreduce(cfg);
}

/* ---- flags ------------------------------------------------------------------------ */

/* Parses list flag `name` into vals with bounds; prints the error itself. */
static int s_list(const char *name, const char *text, long *vals, int *n, long lo, long hi)
{
    int got = ps_bench_parse_list(text, vals, PS_BENCH_LIST_MAX);
    for (int i = 0; got > 0 && i < got; i++) {
        if (vals[i] < lo || vals[i] > hi) {
            got = PS_EINVAL;
        }
    }
    if (got < 0) {
        fprintf(stderr,
                S_PROG ": error: --%s %s: expected a comma-separated list of %ld to %ld\n",
                name, text, lo, hi);
        return PS_EINVAL;
    }
    *n = got;
    return 0;
}

int ps_bench_comm_main(int argc, char **argv)
{
    comm_cfg_t cfg = {
        .out = "bench-out", .reps = 7, .seconds = 0, .mpi = 1, .ring_kib = 128};
    int quick = 0;
    const char *sizes = NULL, *servers = "1,2,4", *inflight = "1,4", *arw = "2,4";
    const char *ar_sizes = NULL;
    const char *log_level = "warn";
    ps_flag_t flags[] = {
        {"quick", PS_FLAG_BOOL, &quick, NULL,
         "a few sizes (4K,1M,4M,16M; allreduce 4K,1M,16M,64M), shorter repetitions"},
        {"out", PS_FLAG_STR, &cfg.out, "DIR", "where the CSV, markdown and PNG files go"},
        {"sizes", PS_FLAG_STR, &sizes, "LIST",
         "payload bytes, K/M suffixes (default 4K,16K,...,64M)"},
        {"servers", PS_FLAG_STR, &servers, "LIST", "server counts"},
        {"inflight", PS_FLAG_STR, &inflight, "LIST",
         "rounds in flight (1 = sync, more = async)"},
        {"allreduce-workers", PS_FLAG_STR, &arw, "LIST",
         "allreduce ranks (0 = no allreduce)"},
        {"allreduce-sizes", PS_FLAG_STR, &ar_sizes, "LIST",
         "allreduce payload bytes (default: --sizes when given, else as --sizes')"},
        {"ring-kib", PS_FLAG_INT, &cfg.ring_kib, "KIB",
         "shardps ring: KiB per message (the worker's --ring-kib default)"},
        {"seconds", PS_FLAG_DOUBLE, &cfg.seconds, "S",
         "least timed seconds per repetition (0 = 0.5; quick: 0.2)"},
        {"reps", PS_FLAG_INT, &cfg.reps, "N", "repetitions, median reported"},
        {"mpi", PS_FLAG_BOOL, &cfg.mpi, NULL,
         "compare allreduce with MPI_Allreduce where installed"},
        {"log-level", PS_FLAG_STR, &log_level, "LEVEL",
         "of the shardps roles: err, warn, info, debug"},
    };
    int rc =
        ps_config_parse(S_PROG,
                        "Push+pull goodput of the parameter server against payload size, "
                        "servers and requests\nin flight, each beside raw ZeroMQ between "
                        "the same endpoints in the same run;\nallreduce bus bandwidth "
                        "beside MPI_Allreduce. Writes comm.csv/.md, allreduce.csv/.md\n"
                        "and comm_goodput.png into --out.",
                        flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (!ar_sizes) {
        ar_sizes = sizes   ? sizes
                   : quick ? "4K,1M,16M,64M"
                           : "4K,16K,64K,256K,1M,4M,16M,64M";
    }
    if (!sizes) {
        sizes = quick ? "4K,1M,4M,16M" : "4K,16K,64K,256K,1M,4M,16M,64M";
    }
    cfg.seconds = cfg.seconds > 0 ? cfg.seconds : quick ? 0.2 : 0.5;
    cfg.reps = cfg.reps > 0 ? cfg.reps : 7;
    if (s_list("sizes", sizes, cfg.sizes, &cfg.nsizes, 4, 1L << 30) != 0 ||
        s_list("servers", servers, cfg.servers, &cfg.nservers, 1, COMM_MAX_SERVERS) != 0 ||
        s_list("inflight", inflight, cfg.inflight, &cfg.ninflight, 1, COMM_MAX_INFLIGHT) !=
            0 ||
        s_list("allreduce-workers", arw, cfg.ar_workers, &cfg.nar, 0, AR_MAX_MEMBERS) !=
            0 ||
        s_list("allreduce-sizes", ar_sizes, cfg.ar_sizes, &cfg.nar_sizes, 4, 1L << 30) !=
            0) {
        return 2;
    }
    if (cfg.ring_kib < 1 || cfg.ring_kib > 65536) {
        fprintf(stderr, S_PROG ": error: --ring-kib %d: expected 1 to 65536\n",
                cfg.ring_kib);
        return 2;
    }
    for (int i = 0; i < cfg.nsizes + cfg.nar_sizes; i++) {
        long b = i < cfg.nsizes ? cfg.sizes[i] : cfg.ar_sizes[i - cfg.nsizes];
        if (b % 4) {
            fprintf(stderr, S_PROG ": error: --%s: %ld is not a whole number of floats\n",
                    i < cfg.nsizes ? "sizes" : "allreduce-sizes", b);
            return 2;
        }
    }
    if (cfg.nar == 1 && cfg.ar_workers[0] == 0) {
        cfg.nar = 0;
    }
    for (int i = 0; i < cfg.nar; i++) {
        if (cfg.ar_workers[i] < 2) {
            fprintf(stderr,
                    S_PROG ": error: --allreduce-workers: allreduce needs 2 or more "
                           "(or 0 for none)\n");
            return 2;
        }
    }
    if (cfg.reps > COMM_MAX_REPS) {
        fprintf(stderr, S_PROG ": error: --reps: at most %d\n", COMM_MAX_REPS);
        return 2;
    }
    if (ps_log_set_level_flag(S_PROG, log_level) != 0) {
        return 2;
    }
    if (ps_bench_mkdirs(cfg.out) != 0) {
        fprintf(stderr, S_PROG ": error: cannot create %s: %s\n", cfg.out, strerror(errno));
        return 1;
    }
    ps_log_set_role("B", -1);
    cfg.load_before = ps_bench_loadavg();
    return s_sweep(&cfg) ? 1 : 0;
}
