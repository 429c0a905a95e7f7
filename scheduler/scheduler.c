/*
 * scheduler/scheduler.c - the scheduler's one event loop.
 *
 * Every node is a row of the node table (scheduler/members.h), keyed by its
 * ROUTER routing id. Any message from a node proves it alive; a node silent
 * for peer_timeout is lost, and unless a module takes the loss (a worker left
 * out, a server replaced) the job is aborted with a SHUTDOWN naming it, so no
 * process waits forever on a dead peer. The loop knows no message's meaning: it checks who sent one and
 * offers it, like every registration, loss and tick, to the modules in turn
 * (scheduler_impl.h, ps_sched_events_t). It serves the modules through the
 * ops (ops.c): sending, the phase, aborting, the restart state.
 */
#include "scheduler/scheduler.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "common/text.h"
#include "proto/codec.h"
#include "proto/curve.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/sock.h"
#include "scheduler/scheduler_impl.h"
#include "scheduler/summary.h"

/* Largest frame the scheduler takes: its messages are all small. */
#define PS_SCHEDULER_MAX_MESSAGE (1 << 20)
/* Messages queued per connection: a node has a few in flight (a heartbeat
 * every 0.5 s, a barrier, a report), so these only bound what a stranger
 * that never reads our answers (send) or floods us (receive: its connection
 * is then read as fast as we handle it) costs us. */
#define PS_SCHEDULER_SEND_QUEUE 1000
#define PS_SCHEDULER_RECV_QUEUE 16

/* A message's sender for the log, by the address its connection comes from. */
static const char *s_peer(const ps_msg_t *m)
{
    return m->peer_addr[0] ? m->peer_addr : "an unknown address";
}

void ps_scheduler_send_all(ps_scheduler_t *s, ps_msg_type_t type, const ProtobufCMessage *body)
{
    for (int i = 0; i < ps_members_count(s->members); i++) {
        const ps_node_t *n = ps_members_at(s->members, i);
        if (n->used) {
            ps_msg_send_ctrl(s->router, &n->route, type, PS_ROLE_SCHEDULER, 0, body);
        }
    }
    ps_failover_send_spares(s->failover, type, body);
}

void ps_scheduler_send_servers(ps_scheduler_t *s, ps_msg_type_t type,
                               const ProtobufCMessage *body)
{
    for (int i = 0; i < s->cfg->servers; i++) {
        ps_msg_send_ctrl(s->router, &ps_members_at(s->members, i)->route, type,
                         PS_ROLE_SCHEDULER, 0, body);
    }
}

void ps_scheduler_save_state(ps_scheduler_t *s)
{
    if (!s->cfg->checkpoint_dir || !ps_start_view(s->start)->num_params) {
        return;
    }
    Shardps__JoinSchedulerState st = SHARDPS__JOIN_SCHEDULER_STATE__INIT;
    int32_t lost[PS_MAX_WORKERS];
    st.run_id = s->facts.run_id;
    st.membership_changes = s->facts.membership_changes;
    st.workers_joined = ps_join_count(s->join);
    st.restarts = ps_restart_count(s->restart);
    st.checkpoint = ps_ckpt_newest(s->ckpt);
    st.seconds = ps_now() - s->facts.t_view;
    st.finished = s->facts.phase == PS_PHASE_FINISHED || s->facts.phase == PS_PHASE_FAILED;
    st.next_spare_id = ps_failover_next_id(s->failover);
    st.lost = lost;
    for (int w = 0; w < s->cfg->workers; w++) {
        if (ps_members_worker(s->members, w)->lost) {
            lost[st.n_lost++] = w;
        }
    }
    uint8_t *body;
    size_t len;
    if (ps_start_pack_state(s->start, &st, &body, &len) != 0) {
        ps_log_warn("cannot encode the scheduler's state");
        return;
    }
    ps_restart_save(s->restart, body, len);
    free(body);
}

int ps_scheduler_phase_event(ps_scheduler_t *s, ps_phase_event_t ev)
{
    ps_phase_t to;
    int rc = ps_phase_next(s->facts.phase, ev, &to);
    if (rc != 0) {
        ps_log_err("scheduler: no transition from %s on %s (a bug: the phase stays)",
                   ps_phase_name(s->facts.phase), ps_phase_event_name(ev));
        return rc;
    }
    s->facts.phase = to;
    return 0;
}

/* The signal that asked the scheduler to stop (SIGINT, SIGTERM, SIGHUP), 0
 * none. The one mutable global: a signal handler can reach nothing else. */
static volatile sig_atomic_t s_stop_signal;

static void s_on_stop_signal(int sig)
{
    s_stop_signal = sig;
}

/* While the loop runs, SIGINT, SIGTERM and SIGHUP end the job with its
 * summary (the loop sees s_stop_signal within 100 ms); a second one, or one
 * after the loop (on: 0), acts at once as before. */
static void s_catch_stop_signals(int on)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? s_on_stop_signal : SIG_DFL;
    sa.sa_flags = on ? SA_RESETHAND : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* The exit status of a job that ended in phase p. */
static int s_exit_status(const ps_scheduler_t *s)
{
    return s->facts.phase == PS_PHASE_FINISHED ? (s->no_progress[0] ? PS_EXIT_NO_PROGRESS : 0)
           : s->failure_usage                  ? 2
           : s_stop_signal                     ? 128 + s_stop_signal
                                               : 1;
}

/* The summary (scheduler/summary.h), with what the modules and the sockets
 * keep of the job. */
static int s_summary_write(ps_scheduler_t *s)
{
    ps_summary_from_t from = {
        .id = &s->id,
        .failover = s->failover,
        .preflight = s->preflight,
        .joins = ps_join_count(s->join),
        .restarts = ps_restart_count(s->restart),
        .ckpt = s->ckpt,
        .signal = s_stop_signal,
        .no_progress = s->no_progress[0] ? s->no_progress : NULL,
        .last_step = s->obs ? ps_sched_obs_last_step(s->obs) : 0,
        .exit_code = s_exit_status(s),
    };
    if (s->ctx) {
        ps_ctx_bytes(s->ctx, from.sent, from.received);
        from.secure_refused = ps_ctx_refused(s->ctx);
    }
    return ps_summary_write(&s->ops, &from);
}

/* Aborts the job for the reason fmt, ap says; usage: the flags' failure. */
static void s_failv(ps_scheduler_t *s, int usage, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

void ps_scheduler_fail(ps_scheduler_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_failv(s, 0, fmt, ap);
    va_end(ap);
}

void ps_scheduler_fail_usage(ps_scheduler_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_failv(s, 1, fmt, ap);
    va_end(ap);
}

static void s_failv(ps_scheduler_t *s, int usage, const char *fmt, va_list ap)
{
    vsnprintf(s->facts.failure, sizeof s->facts.failure, fmt, ap);
    ps_text_utf8_fix(s->facts.failure); /* it may quote a node's reason: JSON and protobuf need UTF-8 */
    if (usage) {
        /* The nodes exit on the SHUTDOWN and the launcher then stops us
         * with SIGTERM: held (until the exit, a lingering close away at
         * most), the signal cannot take the status 2 that tells it the
         * cause. */
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &stop, NULL);
        s->failure_usage = 1;
    }
    ps_log_err("job aborted: %s", s->facts.failure);
    ps_scheduler_phase_event(s, PS_PHASE_EV_ABORT);
    /* The summary first: once the nodes hear of the abort they exit, and a
     * launcher that sees them go may stop this process before it writes. */
    s_summary_write(s);
    ps_sched_obs_status_final(s->obs);
    ps_scheduler_save_state(s); /* its nodes are told to go: nothing to bring back */
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.status = PS_ECLOSED;
    sd.reason = s->facts.failure;
    ps_scheduler_send_all(s, PS_MSG_SHUTDOWN, &sd.base);
}

void ps_scheduler_send_ack(ps_scheduler_t *s, const ps_node_t *n)
{
    ps_job_pb_t job;
    ps_codec_job_to_pb(&s->cfg->job, &job);
    Shardps__RegisterAck ack = SHARDPS__REGISTER_ACK__INIT;
    ack.rank = n->rank;
    ack.token = n->token;
    ack.job = &job.pb;
    ack.job_id = (char *)s->id.job_id;
    ack.job_hash = (char *)s->id.job_hash;
    ack.run_id = s->facts.run_id;
    ps_msg_send_ctrl(s->router, &n->route, PS_MSG_REGISTER_ACK, PS_ROLE_SCHEDULER, 0, &ack.base);
}

/* ---- the events, offered to the modules in turn ------------------------ */

/* The order events are offered in. Registrations: a node of a saved job
 * (restart), a spare (failover), a worker joining the running job (join),
 * else a node of the job starting (start). Messages: the spares' first
 * (failover), then by type. Ticks: a restart's recovery before the running
 * job's agreements, those before the job's end. */
static void s_modules(ps_scheduler_t *s)
{
    const ps_sched_events_t *ev[PS_SCHED_MODULES] = {
        &ps_restart_events, &ps_failover_events,  &ps_join_events,    &ps_agree_events,
        &ps_ckpt_events,    &ps_preflight_events, &ps_members_events, &ps_start_events};
    void *self[PS_SCHED_MODULES] = {s->restart, s->failover,  s->join, s->agree,
                                    s->ckpt,    s->preflight, s->members, s->start};
    for (int i = 0; i < PS_SCHED_MODULES; i++) {
        s->mods[i].ev = ev[i];
        s->mods[i].self = self[i];
    }
}

static void s_on_register(ps_scheduler_t *s, ps_msg_t *m)
{
    const Shardps__Register *reg = ps_msg_unpack_body(m, &shardps__register__descriptor);
    if (!reg) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EPROTO,
                           "registration does not decode");
        return;
    }
    uint8_t nonce[PS_IDENTITY_NONCE_LEN];
    size_t nlen = 0;
    switch (ps_identity_prove(&s->id, reg, &m->route, m->peer_fd, ps_now(), nonce, &nlen)) {
    case PS_IDENTITY_CHALLENGED: {
        Shardps__Challenge c = SHARDPS__CHALLENGE__INIT;
        c.nonce = (ProtobufCBinaryData){nlen, nonce};
        ps_msg_send_ctrl(s->router, &m->route, PS_MSG_CHALLENGE, PS_ROLE_SCHEDULER, 0, &c.base);
        return;
    }
    case PS_IDENTITY_REFUSED:
        /* nothing of the job in the answer: the node has not shown it is one of ours */
        s->facts.registrations_refused++;
        ps_ratelog_reject(s->drops, "a registration", s_peer(m),
                          "no proof that it holds the job's secret");
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "registration refused: no proof of the job's secret");
        return;
    case PS_IDENTITY_PROVEN:
        break;
    }
    char why[400];
    if (ps_identity_check(&s->id, reg, why, sizeof why) != 0) {
        s->facts.registrations_refused++;
        ps_ratelog_reject(s->drops, "a registration", s_peer(m), why);
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL, "%s", why);
        return;
    }
    for (int i = 0; i < PS_SCHED_MODULES; i++) {
        const ps_sched_events_t *ev = s->mods[i].ev;
        if (ev->on_register && ev->on_register(s->mods[i].self, m, reg)) {
            return;
        }
    }
}

/* The roles that may send the scheduler each message type, as a mask of
 * (1 << role); types not listed are left to the modules. A registered node
 * sending another role's message (a worker's REPORT, say) changes nothing. */
static unsigned s_senders(int type)
{
    const unsigned S = 1u << PS_ROLE_SERVER, W = 1u << PS_ROLE_WORKER;
    switch (type) {
    case PS_MSG_MODEL_INFO:
    case PS_MSG_BARRIER:
    case PS_MSG_DONE:
    case PS_MSG_PREFLIGHT_RESULT:
        return W;
    case PS_MSG_REPORT:
    case PS_MSG_CHECKPOINT:
    case PS_MSG_PEER_READY:
    case PS_MSG_FAILOVER_READY:
    case PS_MSG_JOIN_STEP:
    case PS_MSG_RESUME_CHECK:
    case PS_MSG_REPLICA:
        return S;
    case PS_MSG_REGISTER_ACK:
    case PS_MSG_VIEW:
    case PS_MSG_BARRIER_DONE:
    case PS_MSG_MEMBERS:
    case PS_MSG_FAILOVER:
    case PS_MSG_JOIN_PREPARE:
    case PS_MSG_STATUS_REPLY:
    case PS_MSG_CHALLENGE:
    case PS_MSG_REPLICATE: /* between servers */
    case PS_MSG_REPLICA_SNAPSHOT:
    case PS_MSG_REPLICA_ACK:
        return 0; /* the scheduler's own */
    default:
        return S | W;
    }
}

static void s_on_disconnect(ps_scheduler_t *s, int fd);

/* Every connection closed so far, before a registration takes its fd: a
 * drain of many messages may reach a new node's REGISTER on a reused fd
 * before the loop sees the old connection's close, which would then be
 * taken for the new node's. */
static void s_closed_connections(ps_scheduler_t *s)
{
    for (int fd; s->monitor && ps_sock_disconnected(s->monitor, &fd);) {
        s_on_disconnect(s, fd);
    }
}

static void s_on_message(ps_scheduler_t *s, ps_msg_t *m)
{
    ps_sched_obs_message(s->obs, m->hdr.type);
    s->facts.messages++;
    if (m->hdr.type == PS_MSG_REGISTER) {
        s_closed_connections(s);
        s_on_register(s, m);
        return;
    }
    if (m->hdr.type == PS_MSG_STATUS) { /* read-only: anyone may ask */
        ps_sched_obs_status_reply(s->obs, m);
        return;
    }
    /* A node is the connection it registered on: a message from any other
     * connection, or naming another node, changes nothing and gets no data
     * (a module may know it: a spare's). */
    ps_node_t *row = ps_members_node_of(s->members, &m->route);
    ps_node_t *n = row && m->hdr.role == row->role && m->hdr.sender == row->rank ? row : NULL;
    char tag[16];
    if (n && !(s_senders(m->hdr.type) & (1u << n->role))) {
        s->facts.refused++;
        ps_ratelog_reject(s->drops, ps_codec_type_name(m->hdr.type),
                          ps_node_tag(n, tag, sizeof tag), "not a message its role sends");
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EPROTO, "a %s does not send %s",
                           n->role == PS_ROLE_SERVER ? "server" : "worker",
                           ps_codec_type_name(m->hdr.type));
        return;
    }
    if (n) {
        n->last_seen = ps_now();
    }
    for (int i = 0; i < PS_SCHED_MODULES; i++) {
        const ps_sched_events_t *ev = s->mods[i].ev;
        if (ev->on_message && ev->on_message(s->mods[i].self, n, m)) {
            return;
        }
    }
    if (!n) {
        char claim[64];
        snprintf(claim, sizeof claim, "claims %s%d %s", ps_codec_role_tag(m->hdr.role),
                 m->hdr.sender, row ? "on another node's connection" : "unregistered");
        ps_ratelog_reject(s->drops, ps_codec_type_name(m->hdr.type),
                          row ? ps_node_tag(row, tag, sizeof tag) : s_peer(m), claim);
        s->facts.refused++;
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           row ? "not the node this connection registered as"
                               : "register first");
        return;
    }
    ps_ratelog_reject(s->drops, ps_codec_type_name(m->hdr.type), ps_node_tag(n, tag, sizeof tag),
                      "unexpected message type");
    ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EPROTO, "unexpected %s",
                       ps_codec_type_name(m->hdr.type));
}

/* Offers node n's loss (NULL: a closed connection of no node) to the modules.
 * Returns 1 when one took it. */
static int s_lost(ps_scheduler_t *s, ps_node_t *n, const ps_loss_t *loss)
{
    for (int i = 0; i < PS_SCHED_MODULES; i++) {
        const ps_sched_events_t *ev = s->mods[i].ev;
        if (ev->on_lost && ev->on_lost(s->mods[i].self, n, loss)) {
            return 1;
        }
    }
    return 0;
}

/* A connection closed (its process died, most likely): its node is lost at
 * once when a module can go on without it (else its silence decides). */
static void s_on_disconnect(ps_scheduler_t *s, int fd)
{
    ps_node_t *n = NULL;
    const int count = ps_members_count(s->members);
    for (int k = 0; fd >= 0 && !n && k < count; k++) {
        /* workers first: the rows a closed connection most often is */
        ps_node_t *c = ps_members_at(s->members, (s->cfg->servers + k) % count);
        n = c->used && c->fd == fd ? c : NULL;
    }
    const double now = ps_now();
    s_lost(s, n, &(ps_loss_t){.silent = n ? now - n->last_seen : 0, .closed = 1, .fd = fd});
}

/* Heartbeats out, and the nodes silent for the peer timeout: lost. */
static void s_liveness(ps_scheduler_t *s, double now)
{
    if (now - s->last_beat >= PS_HEARTBEAT_SECONDS) {
        ps_scheduler_send_all(s, PS_MSG_HEARTBEAT, NULL);
        s->last_beat = now;
    }
    for (int i = 0; i < ps_members_count(s->members); i++) {
        ps_node_t *n = ps_members_at(s->members, i);
        if (!n->used || now - n->last_seen <= s->cfg->peer_timeout ||
            s_lost(s, n, &(ps_loss_t){.silent = now - n->last_seen, .fd = -1})) {
            continue;
        }
        n->used = 0; /* it cannot be told anything any more */
        ps_scheduler_fail(s, "lost peer %s (pid %u%s%s): silent for %.1f s",
                          ps_node_tag(n, s->facts.lost, sizeof s->facts.lost), n->pid,
                          n->endpoint[0] ? ", " : "", n->endpoint, now - n->last_seen);
        return;
    }
}

static void s_tick(ps_scheduler_t *s)
{
    const double now = ps_now();
    s_liveness(s, now);
    for (int i = 0; i < PS_SCHED_MODULES && s->facts.phase != PS_PHASE_FAILED; i++) {
        const ps_sched_events_t *ev = s->mods[i].ev;
        if (ev->on_tick) {
            ev->on_tick(s->mods[i].self, now);
        }
    }
}

/* ps_msg_drain's handler: one message from a node (or a malformed one). */
static int s_on_receive(void *arg, ps_msg_t *m, int rc)
{
    ps_scheduler_t *s = arg;
    if (rc == 0) {
        s_on_message(s, m);
    } else {
        ps_ratelog_reject(s->drops, "a malformed message", s_peer(m), m->why);
    }
    return 0;
}

/* ---- setup and the loop ------------------------------------------------- */

static int s_write_endpoint(const char *path, const char *endpoint)
{
    char line[160];
    int n = snprintf(line, sizeof line, "%s\n", endpoint);
    return ps_file_write_atomic(path, (const void *[]){line}, (size_t[]){(size_t)n}, 1,
                                NULL, 0);
}

/* The state and the modules; the socket bound, its endpoint announced. Returns
 * 0, or -1 when the scheduler cannot start (logged). */
static int s_open(ps_scheduler_t *s)
{
    const ps_scheduler_config_t *cfg = s->cfg;
    /* Tells this run's nodes from another's when they register again. */
    if (getrandom(&s->facts.run_id, sizeof s->facts.run_id, 0) != sizeof s->facts.run_id) {
        s->facts.run_id = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
    }
    s->facts.run_id |= 1; /* never 0: "no job id" */
    char why[128];
    ps_scheduler_ops_init(s);
    const ps_sched_ops_t *ops = &s->ops;
    if (ps_ratelog_new(&s->drops, PS_RATELOG_PERIOD) != 0 ||
        ps_agree_new(&s->agree, ops) != 0 || ps_join_new(&s->join, ops, s->agree) != 0 ||
        ps_ckpt_new(&s->ckpt, ops, s->agree) != 0 ||
        ps_failover_new(&s->failover, ops, s->agree, s->ckpt) != 0 ||
        ps_restart_new(&s->restart, ops, s->agree) != 0 ||
        ps_preflight_new(&s->preflight, ops) != 0 || ps_ctx_new(&s->ctx) != 0) {
        ps_log_err("out of memory");
        return -1;
    }
    char err[512];
    if (ps_curve_secure_ctx(s->ctx, cfg->secure, cfg->keys, PS_ROLE_SCHEDULER, err,
                            sizeof err) != 0) {
        ps_log_err("%s", err);
        return -1;
    }
    int rc = ps_sock_new(s->ctx, PS_SOCK_ROUTER, &s->router, why, sizeof why);
    if (rc == 0) {
        /* Registration and control only: a bigger frame is dropped unread. */
        ps_sock_set_max_message(s->router, PS_SCHEDULER_MAX_MESSAGE);
        ps_sock_set_queue_limit(s->router, PS_SCHEDULER_SEND_QUEUE, PS_SCHEDULER_RECV_QUEUE);
        rc = ps_sock_bind(s->router, cfg->bind, s->endpoint, sizeof s->endpoint, why,
                          sizeof why);
    }
    if (rc != 0) {
        ps_log_err("cannot bind %s: %s", cfg->bind, why);
        return -1;
    }
    /* before the endpoint is announced: a metrics port in use fails the start */
    if (ps_sched_obs_new(&s->ops, cfg->metrics_bind, &s->obs, why, sizeof why) != 0) {
        ps_log_err("%s", why);
        return -1;
    }
    if (ps_members_new(&s->members, ops, &s->facts, s->preflight, s->obs) != 0 ||
        ps_start_new(&s->start, ops, &s->facts, s->members, s->ckpt, s->join) != 0) {
        ps_log_err("out of memory");
        return -1;
    }
    s_modules(s);
    if (ps_sock_monitor_disconnects(s->ctx, s->router, &s->monitor, why, sizeof why) != 0) {
        /* expected under --secure: nothing for the user to act on */
        ps_log_write(cfg->secure ? PS_LOG_DEBUG : PS_LOG_WARN,
                     "closed connections go unseen (%s): lost nodes are found by silence", why);
    }
    if (cfg->endpoint_file && s_write_endpoint(cfg->endpoint_file, s->endpoint) != 0) {
        ps_log_err("cannot write the endpoint to %s", cfg->endpoint_file);
        return -1;
    }
    return 0;
}

static void s_close(ps_scheduler_t *s, int status)
{
    if (status != 0) {
        ps_sock_set_linger(s->router, PS_ABORT_LINGER_MS);
    }
    ps_sock_destroy(&s->monitor);
    ps_sock_destroy(&s->router); /* lingers so the SHUTDOWNs go out */
    ps_ctx_destroy(&s->ctx);
    ps_start_destroy(&s->start); /* before the modules they borrow */
    ps_members_destroy(&s->members);
    ps_sched_obs_destroy(&s->obs);
    ps_preflight_destroy(&s->preflight);
    ps_restart_destroy(&s->restart);
    ps_ckpt_destroy(&s->ckpt);
    ps_join_destroy(&s->join);
    ps_agree_destroy(&s->agree);
    ps_failover_destroy(&s->failover);
    ps_ratelog_destroy(&s->drops);
}

/* The job finished: the summary, the final state, SHUTDOWN to every node.
 * Returns the exit status. */
static int s_finish(ps_scheduler_t *s)
{
    ps_sched_obs_tick(s->obs, ps_failover_counts(s->failover));
    ps_sched_obs_mark_end(s->obs);
    char why[256];
    if (ps_summary_no_progress(&s->ops, why, sizeof why)) {
        if (s->cfg->no_progress_warn) {
            ps_log_warn("no progress: %s (--on-no-progress warn: the job ends ok)", why);
        } else {
            snprintf(s->no_progress, sizeof s->no_progress, "%s", why);
            ps_log_err("job ended with no progress: %s (--on-no-progress warn lets it end "
                       "ok)", why);
        }
    }
    int written = s_summary_write(s); /* ps_scheduler_fail wrote a failed job's */
    ps_sched_obs_status_final(s->obs);
    ps_scheduler_save_state(s);
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.reason = (char *)"job finished";
    ps_scheduler_send_all(s, PS_MSG_SHUTDOWN, &sd.base);
    ps_sched_obs_hold(s->obs, s->cfg->metrics_hold);
    return written == 0 ? s_exit_status(s) : 1;
}

int ps_scheduler_run(const ps_scheduler_config_t *cfg)
{
    ps_scheduler_t s = {.cfg = cfg, .facts.phase = PS_PHASE_WAITING};
    if (s_open(&s) != 0) {
        s_close(&s, 1);
        return 1;
    }
    ps_identity_init(&s.id, cfg->job_id, &cfg->job, cfg->servers, cfg->workers, &cfg->secret);
    ps_ckpt_set_job(s.ckpt, s.id.job_id);
    if (!cfg->secret.set && !cfg->secure) { /* CurveZMQ admits only the job's keys */
        ps_log_warn("no job secret (--secret-file): any process that reaches %s may register "
                    "as a node of this job", s.endpoint);
    }
    ps_log_info("listening on %s for %d servers and %d workers (job %s, configuration %s, "
                "build %s)%s", s.endpoint, cfg->servers, cfg->workers, s.id.job_id,
                s.id.job_hash, s.id.build,
                cfg->secure ? " (secure: CurveZMQ, this job's keys only)" : "");
    int next_spare_id = 0;
    if (ps_restart_load(s.restart, &s.facts.run_id, &next_spare_id)) {
        ps_failover_readmit_below(s.failover, next_spare_id);
    }
    s.facts.t_start = ps_now();
    s_catch_stop_signals(1);
    while (s.facts.phase != PS_PHASE_FINISHED && s.facts.phase != PS_PHASE_FAILED) {
        if (s_stop_signal) {
            ps_scheduler_fail(&s, "interrupted by SIG%s", sigabbrev_np(s_stop_signal));
            break;
        }
        ps_pollitem_t its[2] = {{.sock = s.router}, {.sock = s.monitor}};
        int rc = ps_poll(its, s.monitor ? 2 : 1, 100);
        if (rc < 0) {
            ps_scheduler_fail(&s, "poll failed: %s", ps_strerror(rc));
            break;
        }
        /* Closed connections first: the fd of one may be reused by a new one
         * whose messages come next. */
        if (its[1].ready) {
            s_closed_connections(&s);
        }
        /* Drain what is queued, but keep ticking so liveness stays checked. */
        if (its[0].ready) {
            ps_msg_drain(s.router, PS_RECV_ROUTER | PS_RECV_PEER, 256, s_on_receive, &s);
        }
        s_tick(&s);
        ps_ratelog_tick(s.drops);
        ps_sched_obs_tick(s.obs, ps_failover_counts(s.failover));
    }
    s_catch_stop_signals(0);
    ps_members_leave_flush(s.members);
    const int status = s.facts.phase == PS_PHASE_FINISHED ? s_finish(&s) : s_exit_status(&s);
    s_close(&s, status);
    return status;
}
