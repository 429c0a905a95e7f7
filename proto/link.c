/* proto/link.c - registration, cluster view and heartbeats, node side. */
#include "proto/link.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

ps_flag_t ps_link_scheduler_flag(const char **dst)
{
    return (ps_flag_t){"scheduler", PS_FLAG_STR, dst, "ENDPOINT",
                       "the scheduler's endpoint"};
}

ps_flag_t ps_link_rank_flag(int *dst, ps_role_t role)
{
    return (ps_flag_t){"rank", PS_FLAG_INT, dst, "R",
                       role == PS_ROLE_SERVER ? "wanted server rank, 0 to 65535 (-1 = any)"
                                              : "wanted worker rank, 0 to 65535 (-1 = any)"};
}

ps_flag_t ps_link_connect_timeout_flag(double *dst)
{
    return (ps_flag_t){"connect-timeout", PS_FLAG_DOUBLE, dst, "SECONDS",
                       "give up if the scheduler does not answer; in (0, 86400]"};
}

ps_flag_t ps_link_peer_timeout_flag(double *dst)
{
    return (ps_flag_t){"peer-timeout", PS_FLAG_DOUBLE, dst, "SECONDS",
                       "the scheduler silent this long is lost; in (0, 86400]"};
}

ps_flag_t ps_link_job_id_flag(const char **dst)
{
    return (ps_flag_t){"job-id", PS_FLAG_STR, dst, "ID",
                       "the job this node belongs to: a scheduler of another job refuses it "
                       "(default: any)"};
}

ps_flag_t ps_link_job_hash_flag(const char **dst)
{
    return (ps_flag_t){"job-hash", PS_FLAG_STR, dst, "HEX",
                       "the job configuration's hash the scheduler must have (set by "
                       "shardps-launch; default: unchecked)"};
}

ps_flag_t ps_link_secret_flag(const char **dst)
{
    return (ps_flag_t){"secret-file", PS_FLAG_STR, dst, "PATH",
                       "the job's secret (owner-only; shardps-keygen --secret PATH makes one): "
                       "proves this node belongs to the job at registration"};
}

int ps_link_read_secret(const char *path, ps_secret_t *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    return path && path[0] ? ps_secret_read(path, s, err, errlen) : 0;
}

ps_flag_t ps_link_scheduler_grace_flag(double *dst)
{
    return (ps_flag_t){"scheduler-grace", PS_FLAG_DOUBLE, dst, "SECONDS",
                       "go on without a lost scheduler and register again with it (a "
                       "restarted one) for this long; 0 = give up at once; in [0, 86400]"};
}

int ps_link_check_grace(double grace, char *err, size_t errlen)
{
    return ps_config_check_range("scheduler-grace", grace, 0, PS_CONFIG_MAX_SECONDS,
                                 PS_RANGE_CLOSED, err, errlen)
               ? PS_EINVAL
               : 0;
}

int ps_link_check_timeouts(double connect_timeout, double peer_timeout)
{
    return ps_link_check_flags(-1, connect_timeout, peer_timeout, NULL, 0);
}

int ps_link_check_flags(int rank, double connect_timeout, double peer_timeout, char *err,
                        size_t errlen)
{
    return ps_config_check_range("rank", rank, -1, 65535, PS_RANGE_CLOSED, err, errlen) ||
                   ps_config_check_range("connect-timeout", connect_timeout, 0,
                                         PS_CONFIG_MAX_SECONDS, PS_RANGE_OPEN_MIN, err, errlen) ||
                   ps_config_check_range("peer-timeout", peer_timeout, 0, PS_CONFIG_MAX_SECONDS,
                                         PS_RANGE_OPEN_MIN, err, errlen)
               ? PS_EINVAL
               : 0;
}

struct ps_link {
    ps_sock_t *sock;     /* DEALER connected to the scheduler */
    ps_role_t role;      /* this node's role */
    int rank;            /* this node's rank, from REGISTER_ACK */
    uint64_t token;      /* this node's secret, from REGISTER_ACK */
    uint64_t run_id;     /* this run of the job, from REGISTER_ACK */
    /* Our registration, sent again to a restarted scheduler: */
    char endpoint[PS_ENDPOINT_MAX];    /* servers: where workers connect */
    char curve_key[PS_CURVE_KEY_LEN];  /* --secure: the key we serve with */
    char job_id[PS_JOB_ID_MAX];        /* the job we belong to; "" = any */
    char job_hash[PS_JOB_HASH_LEN + 1]; /* its configuration's hash; "" = unchecked */
    char build[PS_BUILD_MAX];          /* ps_codec_build_id() */
    ps_secret_t secret;  /* the job's secret (set 0: none) */
    int follows, in_step;    /* a hot replica's, registered again (ps_link_set_replica) */
    uint64_t replica_token;
    int reg_rank, reg_spare; /* our last REGISTER's, answered again on a challenge */
    uint64_t reg_run_id;
    double grace;        /* seconds to wait for a lost scheduler to come back */
    double lost_since;   /* ps_now() when the scheduler fell silent; 0 while alive */
    double last_register; /* ps_now() of our last registration while it is lost */
    uint8_t *done;       /* our DONE, sent again to a restarted scheduler */
    size_t done_len;
    char scheduler[128]; /* the scheduler's endpoint, for messages */
    double peer_timeout; /* seconds of scheduler silence that mean it is lost */
    double last_seen;    /* ps_now() of the last message from the scheduler */
    double last_sent;    /* ps_now() of our last heartbeat */
    double clock_offset; /* the scheduler's clock minus ours, from registration */
    ps_link_report_fn report; /* fills each heartbeat's metrics report; NULL: none */
    void *report_arg;
    ps_link_message_fn on_message; /* before the view: what else it sends; NULL: dropped */
    void *on_message_arg;
    int64_t generation;  /* failovers seen, stamped on every message we send */
    /* ps_link_keepalive_start's thread, and how its wait ended: */
    pthread_t keeper;
    int keeping;
    atomic_int keep_stop;
    int keep_rc;
    char keep_err[256];
};

/* Waits up to timeout seconds for one message on l->sock. Returns 1 when one
 * was received into *m, 0 on timeout, or a negative PS_E*. */
static int s_recv(ps_link_t *l, ps_msg_t *m, double timeout)
{
    ps_pollitem_t it = {.sock = l->sock};
    if (ps_poll(&it, 1, (long)(timeout * 1000)) <= 0) {
        return 0;
    }
    int rc = ps_msg_recv(l->sock, 0, m);
    if (rc == 0) {
        l->last_seen = ps_now();
        return 1;
    }
    return rc == PS_EPROTO ? 0 : rc;
}

/* A header of type from this node. */
static Shardps__Header s_header(const ps_link_t *l, ps_msg_type_t type)
{
    Shardps__Header h;
    ps_msg_header(&h, type, l->role, l->rank);
    h.generation = l->generation;
    return h;
}

/* Sends a body already packed (copied). */
static int s_send_packed(ps_link_t *l, ps_msg_type_t type, const void *body, size_t len)
{
    ps_frame_t f = {body, len};
    return ps_msg_send(l->sock, NULL, s_header(l, type), &f, body ? 1 : 0, PS_SEND_COPY);
}

/* Sends our REGISTER (the last one's fields), with the proof for nonce
 * (NULL: none, a first REGISTER). */
static int s_send_register(ps_link_t *l, const ProtobufCBinaryData *nonce)
{
    Shardps__Register r = SHARDPS__REGISTER__INIT;
    uint8_t proof[PS_HMAC_LEN];
    if (nonce) {
        ps_secret_proof(&l->secret, nonce->data, nonce->len, l->role, l->job_id, proof);
        r.nonce = *nonce;
        r.proof = (ProtobufCBinaryData){sizeof proof, proof};
    }
    r.role = l->role;
    r.rank = l->reg_rank;
    r.endpoint = l->endpoint;
    r.pid = (uint32_t)getpid();
    r.curve_key = l->curve_key;
    r.job_id = l->job_id;
    r.job_hash = l->job_hash;
    r.build = l->build;
    r.spare = l->reg_spare != 0;
    r.run_id = l->reg_run_id;
    r.follows = l->follows;
    r.replica_token = l->replica_token;
    r.in_step = l->in_step != 0;
    return ps_link_send(l, PS_MSG_REGISTER, &r.base);
}

/* Registers: first as rank (-1 any; spare), again with the run id of a
 * registration answered before. */
static int s_register(ps_link_t *l, int rank, int spare, uint64_t run_id)
{
    l->reg_rank = rank;
    l->reg_spare = spare;
    l->reg_run_id = run_id;
    return s_send_register(l, NULL);
}

/* The scheduler's challenge m: registers again with the proof that we hold
 * the job's secret. Returns 0, or PS_EINVAL (we have none, or m is bad) with
 * a one-line reason in err. */
static int s_answer(ps_link_t *l, ps_msg_t *m, char *err, size_t errlen)
{
    const Shardps__Challenge *c = ps_msg_unpack_body(m, &shardps__challenge__descriptor);
    if (!l->secret.set) {
        snprintf(err, errlen, "the scheduler at %s asks for this job's secret: give the job's "
                 "--secret-file (or SHARDPS_SECRET_FILE)", l->scheduler);
        return PS_EINVAL;
    }
    if (!c || c->nonce.len == 0 || c->nonce.len > 256) {
        snprintf(err, errlen, "the scheduler sent a bad challenge");
        return PS_EPROTO;
    }
    return s_send_register(l, &c->nonce);
}

/* Why a handshake with the scheduler failed, as a hint for the operator;
 * "" while none did. secure: this node runs --secure. The side that sees a
 * mechanism mismatch first breaks the handshake off, so the other may only
 * see failures: a plain node's fail against a --secure scheduler alone, a
 * --secure node's against a plain one or other keys. */
static const char *s_handshake_hint(const ps_connect_seen_t *seen, int secure)
{
    const int failed = seen->mismatch || seen->auth || seen->refused >= 3;
    if (!failed) {
        return "";
    }
    if (!secure) {
        return "the scheduler is --secure and this node is not: give it --secure "
               "--keys DIR with the job's keys (and --secret-file DIR/job.secret)";
    }
    return seen->mismatch
               ? "the scheduler is not --secure and this node is: start every role "
                 "with the same --secure"
               : "the scheduler refused this node's handshake: is it --secure, "
                 "with the job's keys in --keys DIR?";
}

/* Whether the handshakes watch saw so far (added to *seen) failed for a
 * reason no retry mends: 1 with the one-line cause in err, else 0. */
static int s_handshake_failed(const ps_link_t *l, ps_sock_t *watch, ps_connect_seen_t *seen,
                              int secure, char *err, size_t errlen)
{
    char how[128];
    ps_sock_connect_seen(watch, seen);
    const char *hint = s_handshake_hint(seen, secure);
    if (!hint[0]) {
        return 0;
    }
    snprintf(err, errlen, "cannot reach the scheduler at %s: %s (%s)", l->scheduler, hint,
             ps_connect_seen_str(seen, how, sizeof how));
    return 1;
}

/* A link to scheduler, its DEALER connected and watched (*watch; NULL when
 * the watch could not be made: the errors then just say less). */
static int s_join_open(ps_link_t **out, ps_ctx_t *ctx, const char *scheduler,
                       ps_role_t role, int want_rank, double peer_timeout,
                       ps_sock_t **watch, char *err, size_t errlen)
{
    ps_link_t *l = *out = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    l->role = role;
    l->rank = want_rank;
    l->peer_timeout = peer_timeout;
    snprintf(l->scheduler, sizeof l->scheduler, "%s", scheduler);
    int bad = ps_sock_new(ctx, PS_SOCK_DEALER, &l->sock, err, errlen);
    if (bad == 0) {
        ps_sock_watch_connect(ctx, l->sock, watch);
        bad = ps_sock_connect(l->sock, scheduler);
    }
    if (bad != 0) {
        snprintf(err, errlen, "bad scheduler endpoint '%s' (expected tcp://HOST:PORT)",
                 scheduler);
        return PS_EINVAL;
    }
    return 0;
}

/* What our REGISTER says besides the rank: where we serve, our key, the job. */
static void s_join_ident(ps_link_t *l, ps_ctx_t *ctx, const char *endpoint,
                         const ps_link_ident_t *ident)
{
    snprintf(l->endpoint, sizeof l->endpoint, "%s", endpoint ? endpoint : "");
    snprintf(l->curve_key, sizeof l->curve_key, "%s", ps_ctx_public_key(ctx));
    if (ident) {
        snprintf(l->job_id, sizeof l->job_id, "%s", ident->job_id ? ident->job_id : "");
        snprintf(l->job_hash, sizeof l->job_hash, "%s", ident->job_hash ? ident->job_hash : "");
        if (ident->secret) {
            l->secret = *ident->secret;
        }
    }
    ps_codec_build_id(l->build, sizeof l->build);
}

/* One answer m to our registration (sent at t_sent). Returns 1 when we
 * joined (rank, token and job taken), 0 to wait on, or a negative PS_E*
 * with a one-line reason in err. */
static int s_join_answer(ps_link_t *l, ps_msg_t *m, double t_sent, ps_job_t *job, char *err,
                         size_t errlen)
{
    if (m->hdr.type == PS_MSG_ERROR) {
        snprintf(err, errlen, "the scheduler refused us: %s", m->hdr.error);
        return PS_ESTATE;
    }
    if (m->hdr.type == PS_MSG_CHALLENGE) {
        return s_answer(l, m, err, errlen);
    }
    if (m->hdr.type != PS_MSG_REGISTER_ACK || m->nframes != 1) {
        return 0;
    }
    const Shardps__RegisterAck *ack =
        ps_msg_unpack_body(m, &shardps__register_ack__descriptor);
    if (!ack) {
        snprintf(err, errlen, "the scheduler sent a bad registration answer: %s", m->why);
        return PS_EPROTO;
    }
    l->rank = ack->rank;
    l->token = ack->token;
    l->run_id = ack->run_id;
    ps_codec_job_from_pb(ack->job, job, NULL, 0);
    ps_log_debug("joined job %s (configuration %s) at %s", ack->job_id, ack->job_hash,
                 l->scheduler);
    l->last_sent = ps_now();
    /* half the round trip each way, as NTP assumes */
    l->clock_offset = m->hdr.clock ? m->hdr.clock - (t_sent + l->last_sent) / 2 : 0;
    return 1;
}

/* Registers and waits up to connect_timeout seconds for the answer, saying
 * every PS_LINK_WAIT_LOG_SECONDS that it still waits; a failed handshake
 * (one side --secure, another job's keys) ends the wait at once: no retry
 * can mend it. Returns 0 once joined, or a negative PS_E* with err. */
static int s_join_wait(ps_link_t *l, ps_ctx_t *ctx, ps_sock_t *watch, int want_rank,
                       double connect_timeout, ps_job_t *job, char *err, size_t errlen)
{
    const int spare = want_rank == PS_LINK_RANK_SPARE, secure = ps_ctx_public_key(ctx)[0];
    ps_connect_seen_t seen = {0};
    char how[128];
    /* DONTWAIT-free send: the pipe exists as soon as connect() returns. */
    int rc = s_register(l, spare ? -1 : want_rank, spare, 0);
    const double start = ps_now(), deadline = start + connect_timeout;
    double next_log = start + PS_LINK_WAIT_LOG_SECONDS;
    while (rc == 0) {
        double now = ps_now(), left = deadline - now;
        if (s_handshake_failed(l, watch, &seen, secure, err, errlen)) {
            return PS_ECLOSED;
        }
        if (left <= 0) {
            snprintf(
                err, errlen, "cannot reach the scheduler at %s: no answer in %.0f s (%s)%s",
                l->scheduler, connect_timeout, ps_connect_seen_str(&seen, how, sizeof how),
                secure ? " (with --secure: is it secure, with the same job's keys?)" : "");
            return PS_ETIMEDOUT;
        }
        if (now >= next_log) {
            ps_log_info(
                "still waiting for the scheduler at %s (%.0f s of --connect-timeout "
                "%.0f; %s)",
                l->scheduler, now - start, connect_timeout,
                ps_connect_seen_str(&seen, how, sizeof how));
            next_log += PS_LINK_WAIT_LOG_SECONDS * (now - start < 30 ? 1 : 10);
        }
        ps_msg_t m = {0};
        /* short turns: a failed handshake is seen within a fraction of a second */
        int got = s_recv(l, &m, left < 0.2 ? left : 0.2);
        if (got > 0) {
            rc = s_join_answer(l, &m, start, job, err, errlen);
            ps_msg_close(&m);
        } else {
            rc = got;
        }
    }
    if (rc < 0 && rc != PS_ESTATE && rc != PS_EPROTO && rc != PS_EINVAL) {
        /* A handshake refused before our REGISTER left ends the connection
         * for good, and the send times out: say why. */
        if (s_handshake_failed(l, watch, &seen, secure, err, errlen)) {
            return PS_ECLOSED;
        }
        snprintf(err, errlen, "registering with the scheduler at %s failed: %s",
                 l->scheduler, ps_strerror(rc));
    }
    return rc < 0 ? rc : 0;
}

int ps_link_join(ps_link_t **out, ps_ctx_t *ctx, const char *scheduler, ps_role_t role,
                 int want_rank, const char *endpoint, const ps_link_ident_t *ident,
                 double connect_timeout, double peer_timeout, ps_job_t *job, char *err,
                 size_t errlen)
{
    *out = NULL;
    ps_link_t *l = NULL;
    ps_sock_t *watch = NULL;
    int rc =
        s_join_open(&l, ctx, scheduler, role, want_rank, peer_timeout, &watch, err, errlen);
    if (rc == 0) {
        s_join_ident(l, ctx, endpoint, ident);
        rc = s_join_wait(l, ctx, watch, want_rank, connect_timeout, job, err, errlen);
    }
    if (l && l->sock) {
        ps_sock_watch_end(l->sock, &watch);
    }
    if (rc != 0) {
        ps_link_destroy(&l);
        return rc;
    }
    *out = l;
    return 0;
}

int ps_link_rank(const ps_link_t *l)
{
    return l->rank;
}

uint64_t ps_link_token(const ps_link_t *l)
{
    return l->token;
}

ps_sock_t *ps_link_sock(ps_link_t *l)
{
    return l->sock;
}

/* One turn of waiting for the view: a heartbeat when due and at most 0.1 s
 * for the scheduler's next message. Returns 1 with *rc set when the wait is
 * over (the view decoded into view, or the job's end), 0 to go on. Without a
 * view to fill (a keepalive) every message goes to on_message. */
static int s_wait_turn(ps_link_t *l, ps_view_t *view, int *rc, char *err, size_t errlen)
{
    *rc = 0;
    if (ps_link_tick(l, err, errlen) == PS_LINK_LOST) {
        *rc = PS_ECLOSED;
        return 1;
    }
    ps_msg_t m = {0};
    int got = s_recv(l, &m, 0.1);
    if (got < 0) {
        snprintf(err, errlen, "waiting for the cluster view: %s", ps_strerror(got));
        *rc = got;
        return 1;
    }
    if (got == 0) {
        return 0;
    }
    ps_link_event_t ev = ps_link_handle(l, &m, err, errlen);
    if (ev == PS_LINK_MESSAGE && view && m.hdr.type == PS_MSG_VIEW) {
        const Shardps__ClusterView *cv =
            ps_msg_unpack_body(&m, &shardps__cluster_view__descriptor);
        *rc = cv ? ps_codec_view_from_pb(cv, view, NULL, 0) : PS_EPROTO;
        if (*rc != 0) {
            snprintf(err, errlen, "the scheduler sent a cluster view that does not decode: %s",
                     m.why);
        }
        ps_msg_close(&m);
        return 1;
    }
    if (ev == PS_LINK_MESSAGE && l->on_message) {
        l->on_message(l->on_message_arg, &m);
    }
    ps_msg_close(&m);
    if (ev == PS_LINK_ABORTED) {
        *rc = PS_ECLOSED;
    } else if (ev == PS_LINK_ERROR) {
        *rc = PS_EPROTO;
    } else if (ev == PS_LINK_SHUTDOWN) {
        snprintf(err, errlen, "the scheduler ended the job before it started");
        *rc = PS_ENOENT;
    }
    return *rc != 0;
}

int ps_link_wait_view(ps_link_t *l, const Shardps__ModelInfo *info, ps_view_t *view,
                      char *err, size_t errlen)
{
    if (info) {
        int rc = ps_link_send(l, PS_MSG_MODEL_INFO, &info->base);
        if (rc != 0) {
            snprintf(err, errlen, "cannot send the model size: %s", ps_strerror(rc));
            return rc;
        }
    }
    int rc;
    while (!s_wait_turn(l, view, &rc, err, errlen)) {
    }
    return rc;
}

static void *s_keeper_main(void *arg)
{
    ps_link_t *l = arg;
    int rc = 0;
    while (!atomic_load(&l->keep_stop) &&
           !s_wait_turn(l, NULL, &rc, l->keep_err, sizeof l->keep_err)) {
    }
    l->keep_rc = rc;
    return NULL;
}

int ps_link_keepalive_start(ps_link_t *l)
{
    atomic_store(&l->keep_stop, 0);
    l->keep_rc = 0;
    l->keep_err[0] = '\0';
    l->keeping = pthread_create(&l->keeper, NULL, s_keeper_main, l) == 0;
    return l->keeping ? 0 : PS_ENOMEM;
}

int ps_link_keepalive_stop(ps_link_t *l, char *err, size_t errlen)
{
    if (!l->keeping) {
        return 0;
    }
    atomic_store(&l->keep_stop, 1);
    pthread_join(l->keeper, NULL);
    l->keeping = 0;
    if (l->keep_rc != 0) {
        snprintf(err, errlen, "%s", l->keep_err);
    }
    return l->keep_rc;
}

void ps_link_set_on_message(ps_link_t *l, ps_link_message_fn fn, void *arg)
{
    l->on_message = fn;
    l->on_message_arg = arg;
}

void ps_link_set_grace(ps_link_t *l, double grace)
{
    l->grace = grace;
}

/* Registers again with a lost scheduler: the same node of the same job. */
static void s_register_again(ps_link_t *l, double now)
{
    s_register(l, l->rank, 0, l->run_id);
    l->last_register = now;
}

/* The scheduler is silent: lost, or (with a grace) gone for a while. */
static ps_link_event_t s_silent(ps_link_t *l, double now, char *err, size_t errlen)
{
    if (!l->lost_since && l->grace > 0) {
        l->lost_since = now;
        ps_log_warn("lost the scheduler at %s: silent for %.1f s; going on and registering "
                    "again for up to %.0f s (--scheduler-grace)", l->scheduler,
                    now - l->last_seen, l->grace);
    }
    if (!l->lost_since) {
        snprintf(err, errlen, "lost the scheduler at %s: silent for %.1f s", l->scheduler,
                 now - l->last_seen);
        return PS_LINK_LOST;
    }
    if (now - l->lost_since > l->grace) {
        snprintf(err, errlen, "lost the scheduler at %s: it did not come back within %.0f s "
                 "(--scheduler-grace)", l->scheduler, l->grace);
        return PS_LINK_LOST;
    }
    if (now - l->last_register >= PS_LINK_REJOIN_SECONDS) {
        s_register_again(l, now);
    }
    return PS_LINK_ALIVE;
}

ps_link_event_t ps_link_tick(ps_link_t *l, char *err, size_t errlen)
{
    double now = ps_now();
    if (l->lost_since || now - l->last_seen > l->peer_timeout) {
        return s_silent(l, now, err, errlen);
    }
    if (now - l->last_sent >= PS_HEARTBEAT_SECONDS) {
        ps_link_report_now(l);
    }
    return PS_LINK_ALIVE;
}

void ps_link_set_report(ps_link_t *l, ps_link_report_fn fn, void *arg)
{
    l->report = fn;
    l->report_arg = arg;
}

void ps_link_report_now(ps_link_t *l)
{
    Shardps__MetricsReport r = SHARDPS__METRICS_REPORT__INIT;
    int32_t waiting[PS_REPORT_MAX_WAITING];
    ps_text_t text = {0};
    int rc = PS_ENOMEM;
    r.test_accuracy = -1;
    r.waiting_for = waiting;
    if (l->report) {
        l->report(l->report_arg, &r, &text);
        if (r.n_waiting_for > PS_REPORT_MAX_WAITING) {
            r.n_waiting_for = PS_REPORT_MAX_WAITING;
        }
        if (!text.oom && text.p) {
            r.text = text.p;
        }
        rc = ps_link_send(l, PS_MSG_HEARTBEAT, &r.base);
    }
    if (rc == PS_ENOMEM) { /* no report, or no memory for it: a bare heartbeat says we live */
        ps_link_send(l, PS_MSG_HEARTBEAT, NULL);
    }
    l->last_sent = ps_now();
    free(text.p);
}

double ps_link_clock_offset(const ps_link_t *l)
{
    return l->clock_offset;
}

/* While the scheduler is lost: its answer to registering again. */
static ps_link_event_t s_on_rejoin(ps_link_t *l, ps_msg_t *m)
{
    if (m->hdr.type == PS_MSG_ERROR) {
        ps_log_debug("registering again: the scheduler says: %s", m->hdr.error);
    }
    char why[256];
    if (m->hdr.type == PS_MSG_CHALLENGE && s_answer(l, m, why, sizeof why) != 0) {
        ps_log_debug("registering again: %s", why);
    }
    const Shardps__RegisterAck *ack =
        m->hdr.type == PS_MSG_REGISTER_ACK
            ? ps_msg_unpack_body(m, &shardps__register_ack__descriptor)
            : NULL;
    if (!ack || ack->rank != l->rank || ack->run_id != l->run_id) {
        return PS_LINK_ALIVE; /* anything else waits for the answer */
    }
    ps_log_info("registered again with the scheduler at %s after %.1f s", l->scheduler,
                ps_now() - l->lost_since);
    l->lost_since = 0;
    l->last_seen = l->last_sent = ps_now();
    if (l->done) {
        s_send_packed(l, PS_MSG_DONE, l->done, l->done_len);
    }
    return PS_LINK_ALIVE;
}

ps_link_event_t ps_link_handle(ps_link_t *l, ps_msg_t *m, char *err, size_t errlen)
{
    if (l->lost_since && m->hdr.type != PS_MSG_SHUTDOWN) {
        return s_on_rejoin(l, m); /* a restarted scheduler may also tell us to go */
    }
    if (m->hdr.type == PS_MSG_ERROR && m->hdr.status == PS_ESTATE && l->grace > 0) {
        /* "register first": a restarted scheduler answered before we missed it */
        l->lost_since = ps_now();
        ps_log_warn("the scheduler at %s does not know us (%s): registering again for up to "
                    "%.0f s (--scheduler-grace)", l->scheduler, m->hdr.error, l->grace);
        s_register_again(l, l->lost_since);
        return PS_LINK_ALIVE;
    }
    l->last_seen = ps_now();
    if (m->hdr.type == PS_MSG_HEARTBEAT || m->hdr.type == PS_MSG_REGISTER_ACK) {
        return PS_LINK_ALIVE; /* an ACK: to a registration sent again */
    }
    if (m->hdr.type == PS_MSG_SHUTDOWN) {
        const Shardps__Shutdown *sd =
            m->nframes == 1 ? ps_msg_unpack_body(m, &shardps__shutdown__descriptor) : NULL;
        if (sd && sd->status == 0) {
            return PS_LINK_SHUTDOWN;
        }
        snprintf(err, errlen, "job aborted by the scheduler: %.159s",
                 sd ? sd->reason : "no reason given");
        return PS_LINK_ABORTED;
    }
    if (m->hdr.type == PS_MSG_ERROR) {
        snprintf(err, errlen, "the scheduler says: %s", m->hdr.error);
        return PS_LINK_ERROR;
    }
    return PS_LINK_MESSAGE;
}

int ps_link_send(ps_link_t *l, ps_msg_type_t type, const ProtobufCMessage *body)
{
    uint8_t *copy;
    size_t len;
    if (type == PS_MSG_DONE && body && ps_codec_pack(body, &copy, &len) == 0) {
        free(l->done); /* kept for a restarted scheduler */
        l->done = copy;
        l->done_len = len;
    }
    return ps_msg_send_body(l->sock, NULL, s_header(l, type), body);
}

void ps_link_set_replica(ps_link_t *l, int follows, uint64_t token, const char *endpoint,
                         int in_step)
{
    l->follows = follows;
    l->replica_token = token;
    l->in_step = in_step;
    if (endpoint) {
        snprintf(l->endpoint, sizeof l->endpoint, "%s", endpoint);
    }
}

void ps_link_set_rank(ps_link_t *l, int rank)
{
    l->rank = rank;
}

void ps_link_set_generation(ps_link_t *l, int64_t generation)
{
    l->generation = generation;
}

void ps_link_abort(ps_link_t *l, const char *reason)
{
    ps_link_abort_with(l, PS_ECLOSED, reason);
}

void ps_link_abort_with(ps_link_t *l, int status, const char *reason)
{
    if (!l) {
        return;
    }
    Shardps__Shutdown m = SHARDPS__SHUTDOWN__INIT;
    m.status = status;
    m.reason = (char *)reason;
    ps_link_send(l, PS_MSG_SHUTDOWN, &m.base);
}

void ps_link_destroy(ps_link_t **lp)
{
    ps_link_t *l = *lp;
    if (l) {
        ps_link_keepalive_stop(l, NULL, 0);
        ps_sock_destroy(&l->sock);
        free(l->done);
        explicit_bzero(&l->secret, sizeof l->secret);
        free(l);
        *lp = NULL;
    }
}
