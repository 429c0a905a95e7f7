/*
 * proto/codec.c - what protobuf-c does not do for our messages: the checks
 * of every message type (one function each, found by descriptor), unpacking
 * into an arena, and the two domain types at the edge (the view, the job).
 * A NULL from a protobuf-c unpack becomes PS_EPROTO here, with a reason.
 */
#include "proto/codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "proto/build_id.h"

/* Formats the reason into why and returns PS_EPROTO. */
__attribute__((format(printf, 3, 4))) static int s_fail(char *why, size_t cap,
                                                         const char *fmt, ...)
{
    if (why && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return PS_EPROTO;
}

/* A string field must be shorter than max characters (a NULL one is ""). */
static int s_str(const char *msg, const char *field, const char *s, size_t max, char *why,
                 size_t cap)
{
    size_t n = s ? strlen(s) : 0;
    return n < max ? 0 : s_fail(why, cap, "%s: %s of %zu characters (at most %zu)", msg, field,
                                n, max - 1);
}

/* Copies a checked string field into a fixed buffer. */
static void s_copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* ---- header ----------------------------------------------------------------- */

int ps_codec_pack_header(const Shardps__Header *h, uint8_t *buf, size_t cap)
{
    if (shardps__header__get_packed_size(h) > cap) {
        return PS_EINVAL;
    }
    return (int)shardps__header__pack(h, buf);
}

static int s_check_header(const Shardps__Header *m, char *why, size_t cap)
{
    int dtype = (int)m->dtype;
    if (m->protocol != PS_PROTOCOL_VERSION) {
        return s_fail(why, cap, "protocol version %u, expected %u", m->protocol,
                      PS_PROTOCOL_VERSION);
    }
    if ((int)m->type <= PS_MSG_NONE || (int)m->type > PS_MSG_TYPE_MAX) {
        return s_fail(why, cap, "unknown message type %d", (int)m->type);
    }
    if ((int)m->role < PS_ROLE_SCHEDULER || (int)m->role > PS_ROLE_WORKER) {
        return s_fail(why, cap, "unknown sender role %d", (int)m->role);
    }
    if (m->key_end < m->key_begin) {
        return s_fail(why, cap, "key range [%llu, %llu) is reversed",
                      (unsigned long long)m->key_begin, (unsigned long long)m->key_end);
    }
    if (m->payload_len && (dtype < PS_DTYPE_F32 || dtype > PS_DTYPE_MAX)) {
        return s_fail(why, cap, "unknown dtype %d", dtype);
    }
    if (m->nnz && (dtype < PS_DTYPE_SPARSE_F32 || dtype > PS_DTYPE_MAX)) {
        return s_fail(why, cap, "nnz %llu on a dense payload", (unsigned long long)m->nnz);
    }
    if (m->n_keys) {
        return s_fail(why, cap, "sparse key lists are not supported yet");
    }
    if (m->ring_step < 0) {
        return s_fail(why, cap, "negative ring step %d", (int)m->ring_step);
    }
    if (m->generation < 0) {
        return s_fail(why, cap, "negative generation %lld", (long long)m->generation);
    }
    if (m->pull_version < 0) {
        return s_fail(why, cap, "negative pull version %lld", (long long)m->pull_version);
    }
    return 0;
}

int ps_codec_unpack_header(const void *data, size_t len, ps_arena_t *a, Shardps__Header *h,
                           char *why, size_t cap)
{
    shardps__header__init(h);
    Shardps__Header *m = shardps__header__unpack(&a->pc, len, data);
    if (!m) {
        return s_fail(why, cap, "header does not decode (%zu bytes)", len);
    }
    *h = *m;
    if (strlen(h->error) >= PS_ERROR_MAX) {
        h->error = (char *)protobuf_c_empty_string;
    }
    return s_check_header(h, why, cap);
}

/* ---- the job and the view: domain types, converted at the edge --------------- */

void ps_codec_job_to_pb(const ps_job_t *j, ps_job_pb_t *out)
{
    Shardps__JobConfig *m = &out->pb;
    shardps__job_config__init(m);
    ps_job_schedule_name(&j->schedule, out->schedule, sizeof out->schedule);
    ps_job_mode_str(j, out->mode, sizeof out->mode);
    m->lr_schedule = out->schedule;
    m->straggler_rank = j->straggler_rank;
    m->straggler_factor = j->straggler_factor;
    m->staleness_lr = j->staleness_lr;
    m->warmup_steps = j->schedule.warmup_steps;
    m->model = (char *)j->model;
    m->mode = out->mode;
    m->optimizer = (char *)j->optimizer;
    m->lr = j->lr;
    m->momentum = j->momentum;
    m->weight_decay = j->weight_decay;
    m->batch = j->batch;
    m->epochs = j->epochs;
    m->max_steps = j->max_steps;
    m->seed = j->seed;
    m->wire = (char *)ps_job_wire_name(j);
    m->topk = j->topk;
}

int ps_codec_job_from_pb(const Shardps__JobConfig *m, ps_job_t *j, char *why, size_t cap)
{
    memset(j, 0, sizeof *j);
    if (!m) {
        return s_fail(why, cap, "no job configuration");
    }
    if (s_str("job", "model", m->model, sizeof j->model, why, cap) ||
        s_str("job", "optimizer", m->optimizer, sizeof j->optimizer, why, cap)) {
        return PS_EPROTO;
    }
    s_copy(j->model, sizeof j->model, m->model);
    s_copy(j->optimizer, sizeof j->optimizer, m->optimizer);
    if (ps_job_parse_mode(m->mode, j) != 0) {
        return s_fail(why, cap, "job: unknown mode '%.32s'", m->mode);
    }
    if (ps_job_parse_schedule(m->lr_schedule, &j->schedule) != 0) {
        return s_fail(why, cap, "job: unknown learning-rate schedule '%.64s'", m->lr_schedule);
    }
    if (m->wire && m->wire[0] && ps_job_parse_wire(m->wire, j) != 0) {
        return s_fail(why, cap, "job: unknown wire format '%.16s'", m->wire);
    }
    j->topk = m->topk;
    j->schedule.warmup_steps = m->warmup_steps;
    j->straggler_rank = m->straggler_rank;
    j->straggler_factor = m->straggler_factor;
    j->staleness_lr = m->staleness_lr;
    j->lr = m->lr;
    j->momentum = m->momentum;
    j->weight_decay = m->weight_decay;
    j->batch = m->batch;
    j->epochs = m->epochs;
    j->max_steps = m->max_steps;
    j->seed = m->seed;
    char err[160];
    if (ps_job_validate(j, err, sizeof err) != 0) {
        return s_fail(why, cap, "job: %s", err);
    }
    return 0;
}

/* Servers: allreduce has none, every other mode at least one. */
static int s_servers_ok(const ps_job_t *job, size_t n)
{
    return ps_job_has_servers(job) ? (n >= 1 && n <= PS_MAX_SERVERS) : n == 0;
}

/* Workers of the view: every one, in rank order, each with an endpoint, in
 * allreduce mode; none otherwise. */
static int s_workers_ok(const ps_job_t *job, size_t n, int num_workers)
{
    return job->mode == PS_MODE_ALLREDUCE ? n == (size_t)num_workers : n == 0;
}

/* The view's entries: servers tile [0, P) in rank order (the client relies
 * on it); in allreduce mode every worker, in rank order, with an endpoint. */
static int s_check_view_entries(const Shardps__ClusterView *m, char *why, size_t cap)
{
    uint64_t next = 0;
    for (size_t i = 0; i < m->n_servers; i++) {
        const Shardps__ServerInfo *s = m->servers[i];
        if (s->rank != (int)i) {
            return s_fail(why, cap, "view: server %zu has rank %d", i, (int)s->rank);
        }
        if (s->key_begin != next || s->key_end < s->key_begin) {
            return s_fail(why, cap, "view: S%zu's keys [%llu, %llu) do not follow %llu", i,
                          (unsigned long long)s->key_begin, (unsigned long long)s->key_end,
                          (unsigned long long)next);
        }
        if (s_str("view", "a server endpoint", s->endpoint, PS_ENDPOINT_MAX, why, cap) ||
            s_str("view", "a server key", s->curve_key, PS_CURVE_KEY_LEN, why, cap)) {
            return PS_EPROTO;
        }
        next = s->key_end;
    }
    if (m->n_servers && next != m->num_params) {
        return s_fail(why, cap, "view: the servers' keys end at %llu, not at P = %llu",
                      (unsigned long long)next, (unsigned long long)m->num_params);
    }
    for (size_t i = 0; i < m->n_workers; i++) {
        const Shardps__WorkerInfo *w = m->workers[i];
        if (w->rank != (int)i || !w->endpoint || !w->endpoint[0]) {
            return s_fail(why, cap, "view: worker %zu has rank %d and endpoint '%.64s'", i,
                          (int)w->rank, w->endpoint ? w->endpoint : "");
        }
        if (s_str("view", "a worker endpoint", w->endpoint, PS_ENDPOINT_MAX, why, cap) ||
            s_str("view", "a worker key", w->curve_key, PS_CURVE_KEY_LEN, why, cap)) {
            return PS_EPROTO;
        }
    }
    return 0;
}

static int s_check_view(const Shardps__ClusterView *m, char *why, size_t cap)
{
    ps_job_t job;
    if (m->num_workers < 1 || m->num_workers > PS_MAX_WORKERS) {
        return s_fail(why, cap, "view: %d workers (1 to %d)", (int)m->num_workers,
                      PS_MAX_WORKERS);
    }
    if (ps_codec_job_from_pb(m->job, &job, why, cap) != 0) {
        return PS_EPROTO;
    }
    if (!s_servers_ok(&job, m->n_servers) || !s_workers_ok(&job, m->n_workers, m->num_workers)) {
        return s_fail(why, cap, "view: %zu servers and %zu workers listed in mode %.32s",
                      m->n_servers, m->n_workers, m->job->mode);
    }
    if (m->steps_per_epoch < 1 || m->total_steps < 0 || m->checkpoint_every < 0 ||
        m->start_step < 0 || m->resume_step < 0 || m->resume_parts < 0 ||
        m->resume_parts > PS_MAX_SERVERS || m->generation < 0 || m->replaced_rank < 0 ||
        (size_t)m->replaced_rank > m->n_servers) {
        return s_fail(why, cap, "view: a step, count or rank out of range");
    }
    if (m->n_worker_tokens != 0 && m->n_worker_tokens != (size_t)m->num_workers) {
        return s_fail(why, cap, "view: %zu worker tokens for %d workers", m->n_worker_tokens,
                      (int)m->num_workers);
    }
    if (s_str("view", "checkpoint_dir", m->checkpoint_dir, PS_DIR_MAX, why, cap) ||
        s_str("view", "resume_dir", m->resume_dir, PS_RESUME_DIR_MAX, why, cap)) {
        return PS_EPROTO;
    }
    return s_check_view_entries(m, why, cap);
}

int ps_codec_view_to_pb(const ps_view_t *v, ps_view_pb_t *out)
{
    int ring = v->job.mode == PS_MODE_ALLREDUCE;
    int nworkers = ring ? v->num_workers : 0;
    if (v->num_servers < 0 || !s_servers_ok(&v->job, (size_t)v->num_servers) ||
        (ring && (v->num_workers < 1 || v->num_workers > PS_MAX_WORKERS)) ||
        v->generation < 0 || v->replaced < 0 || v->replaced > v->num_servers) {
        return PS_EINVAL;
    }
    for (int i = 0; i < nworkers; i++) {
        if (v->workers[i].rank != i || !v->workers[i].endpoint[0]) {
            return PS_EINVAL;
        }
        Shardps__WorkerInfo *w = &out->workers[i];
        shardps__worker_info__init(w);
        w->rank = v->workers[i].rank;
        w->endpoint = (char *)v->workers[i].endpoint;
        w->curve_key = (char *)v->workers[i].curve_key;
        out->worker_ptrs[i] = w;
    }
    for (int i = 0; i < v->num_servers; i++) {
        Shardps__ServerInfo *s = &out->servers[i];
        shardps__server_info__init(s);
        s->rank = v->servers[i].rank;
        s->endpoint = (char *)v->servers[i].endpoint;
        s->key_begin = v->servers[i].begin;
        s->key_end = v->servers[i].end;
        s->curve_key = (char *)v->servers[i].curve_key;
        out->server_ptrs[i] = s;
    }
    ps_codec_job_to_pb(&v->job, &out->job);
    Shardps__ClusterView *m = &out->pb;
    shardps__cluster_view__init(m);
    m->num_params = v->num_params;
    m->num_workers = v->num_workers;
    m->steps_per_epoch = v->steps_per_epoch;
    m->total_steps = v->total_steps;
    m->n_servers = (size_t)v->num_servers;
    m->servers = out->server_ptrs;
    m->n_workers = (size_t)nworkers;
    m->workers = out->worker_ptrs;
    m->job = &out->job.pb;
    m->checkpoint_dir = (char *)v->checkpoint_dir;
    m->checkpoint_every = v->checkpoint_every;
    m->start_step = v->start_step;
    m->resume_dir = (char *)v->resume_dir;
    m->resume_parts = v->resume_parts;
    /* Tokens only in the servers' copy: the scheduler zeroes them for workers. */
    int has_tokens = 0;
    for (int i = 0; i < v->num_workers && i < PS_MAX_WORKERS; i++) {
        has_tokens |= v->worker_tokens[i] != 0;
    }
    m->n_worker_tokens = has_tokens ? (size_t)v->num_workers : 0;
    m->worker_tokens = (uint64_t *)v->worker_tokens;
    m->preflight = v->preflight != 0;
    m->generation = v->generation;
    m->replaced_rank = v->replaced;
    m->joining = v->joining != 0;
    m->resume_step = v->resume_step;
    return 0;
}

int ps_codec_view_from_pb(const Shardps__ClusterView *m, ps_view_t *v, char *why, size_t cap)
{
    memset(v, 0, sizeof *v);
    if (s_check_view(m, why, cap) != 0) {
        return PS_EPROTO;
    }
    ps_codec_job_from_pb(m->job, &v->job, NULL, 0);
    v->num_params = m->num_params;
    v->num_workers = m->num_workers;
    v->num_servers = (int)m->n_servers;
    v->steps_per_epoch = m->steps_per_epoch;
    v->total_steps = m->total_steps;
    s_copy(v->checkpoint_dir, sizeof v->checkpoint_dir, m->checkpoint_dir);
    s_copy(v->resume_dir, sizeof v->resume_dir, m->resume_dir);
    v->checkpoint_every = m->checkpoint_every;
    v->start_step = m->start_step;
    v->resume_parts = m->resume_parts;
    for (size_t i = 0; i < m->n_worker_tokens; i++) {
        v->worker_tokens[i] = m->worker_tokens[i];
    }
    v->preflight = m->preflight;
    v->generation = m->generation;
    v->replaced = m->replaced_rank;
    v->joining = m->joining;
    v->resume_step = m->resume_step;
    for (size_t i = 0; i < m->n_servers; i++) {
        const Shardps__ServerInfo *s = m->servers[i];
        ps_server_info_t *d = &v->servers[i];
        d->rank = s->rank;
        d->begin = s->key_begin;
        d->end = s->key_end;
        s_copy(d->endpoint, sizeof d->endpoint, s->endpoint);
        s_copy(d->curve_key, sizeof d->curve_key, s->curve_key);
    }
    for (size_t i = 0; i < m->n_workers; i++) {
        const Shardps__WorkerInfo *w = m->workers[i];
        v->workers[i].rank = w->rank;
        s_copy(v->workers[i].endpoint, sizeof v->workers[i].endpoint, w->endpoint);
        s_copy(v->workers[i].curve_key, sizeof v->workers[i].curve_key, w->curve_key);
    }
    return 0;
}

void ps_codec_part_to_pb(const ps_checkpoint_part_t *p, Shardps__Checkpoint *out)
{
    shardps__checkpoint__init(out);
    out->step = p->step;
    out->file = (char *)p->file;
    out->size = p->size;
    out->crc32 = p->crc32;
    out->key_begin = p->begin;
    out->key_end = p->end;
    out->version = p->version;
}

static int s_check_checkpoint(const void *pm, char *why, size_t cap);

int ps_codec_part_from_pb(const Shardps__Checkpoint *m, ps_checkpoint_part_t *p, char *why,
                          size_t cap)
{
    memset(p, 0, sizeof *p);
    if (s_check_checkpoint(m, why, cap) != 0) {
        return PS_EPROTO;
    }
    p->step = m->step;
    s_copy(p->file, sizeof p->file, m->file);
    p->size = m->size;
    p->crc32 = m->crc32;
    p->begin = m->key_begin;
    p->end = m->key_end;
    p->version = m->version;
    return 0;
}

/* ---- the checks of the control bodies, by type ------------------------------ */

/* Each takes the message as its generated struct, through the base. */
typedef int s_check_fn(const void *m, char *why, size_t cap);

static int s_check_header_m(const void *m, char *why, size_t cap)
{
    return s_check_header(m, why, cap);
}

static int s_check_view_m(const void *m, char *why, size_t cap)
{
    return s_check_view(m, why, cap);
}

static int s_check_register(const void *pm, char *why, size_t cap)
{
    const Shardps__Register *m = pm;
    if (m->role != PS_ROLE_SERVER && m->role != PS_ROLE_WORKER) {
        return s_fail(why, cap, "Register: role %d is neither a server's nor a worker's",
                      (int)m->role);
    }
    return s_str("Register", "endpoint", m->endpoint, PS_ENDPOINT_MAX, why, cap) ||
                   s_str("Register", "curve_key", m->curve_key, PS_CURVE_KEY_LEN, why, cap) ||
                   s_str("Register", "job_id", m->job_id, PS_JOB_ID_MAX, why, cap) ||
                   s_str("Register", "job_hash", m->job_hash, PS_JOB_HASH_LEN + 1, why, cap) ||
                   s_str("Register", "build", m->build, PS_BUILD_MAX, why, cap)
               ? PS_EPROTO
               : 0;
}

static int s_check_register_ack(const void *pm, char *why, size_t cap)
{
    const Shardps__RegisterAck *m = pm;
    ps_job_t job;
    return ps_codec_job_from_pb(m->job, &job, why, cap) ||
                   s_str("RegisterAck", "job_id", m->job_id, PS_JOB_ID_MAX, why, cap) ||
                   s_str("RegisterAck", "job_hash", m->job_hash, PS_JOB_HASH_LEN + 1, why, cap)
               ? PS_EPROTO
               : 0;
}

static int s_check_model_info(const void *pm, char *why, size_t cap)
{
    const Shardps__ModelInfo *m = pm;
    return s_str("ModelInfo", "endpoint", m->endpoint, PS_ENDPOINT_MAX, why, cap);
}

static int s_check_barrier(const void *pm, char *why, size_t cap)
{
    const Shardps__Barrier *m = pm;
    return s_str("Barrier", "name", m->name, PS_BARRIER_NAME_MAX, why, cap);
}

/* Byte counts by message type: no more types than we know. */
static int s_check_counts(const char *msg, size_t sent, size_t received, char *why, size_t cap)
{
    if (sent > PS_BYTE_TYPES || received > PS_BYTE_TYPES) {
        return s_fail(why, cap, "%s: byte counts of %zu and %zu message types (at most %d)", msg,
                      sent, received, PS_BYTE_TYPES);
    }
    return 0;
}

static int s_check_done(const void *pm, char *why, size_t cap)
{
    const Shardps__Done *m = pm;
    if (m->n_test_accuracy > PS_MAX_EPOCHS) {
        return s_fail(why, cap, "Done: %zu epochs evaluated (at most %d)", m->n_test_accuracy,
                      PS_MAX_EPOCHS);
    }
    return s_check_counts("Done", m->n_bytes_sent, m->n_bytes_received, why, cap);
}

static int s_check_checkpoint(const void *pm, char *why, size_t cap)
{
    const Shardps__Checkpoint *m = pm;
    if (m->step <= 0 || m->version < 0 || m->key_end < m->key_begin) {
        return s_fail(why, cap, "Checkpoint: step %lld, version %lld, keys [%llu, %llu)",
                      (long long)m->step, (long long)m->version,
                      (unsigned long long)m->key_begin, (unsigned long long)m->key_end);
    }
    if (!m->file || !m->file[0] || strchr(m->file, '/')) {
        return s_fail(why, cap, "Checkpoint: file name '%.64s' is empty or has a '/'",
                      m->file ? m->file : "");
    }
    return s_str("Checkpoint", "file", m->file, PS_CHECKPOINT_FILE_MAX, why, cap);
}

static int s_check_server_report(const void *pm, char *why, size_t cap)
{
    const Shardps__ServerReport *m = pm;
    if (m->n_staleness != PS_HIST_BUCKETS) {
        return s_fail(why, cap, "ServerReport: %zu staleness buckets, expected %d",
                      m->n_staleness, PS_HIST_BUCKETS);
    }
    return s_check_counts("ServerReport", m->n_bytes_sent, m->n_bytes_received, why, cap);
}

static int s_check_peer_ready(const void *pm, char *why, size_t cap)
{
    const Shardps__PeerReady *m = pm;
    if (!m->endpoint || !m->endpoint[0]) {
        return s_fail(why, cap, "PeerReady: no endpoint");
    }
    return s_str("PeerReady", "endpoint", m->endpoint, PS_ENDPOINT_MAX, why, cap);
}

static int s_check_members(const void *pm, char *why, size_t cap)
{
    const Shardps__Members *m = pm;
    if (m->num_workers < 1 || m->num_workers > PS_MAX_WORKERS || m->n_live == 0) {
        return s_fail(why, cap, "Members: %zu live of %d workers", m->n_live,
                      (int)m->num_workers);
    }
    for (size_t i = 0; i < m->n_live; i++) {
        if (m->live[i] < 0 || m->live[i] >= m->num_workers) {
            return s_fail(why, cap, "Members: live rank %d of %d workers", (int)m->live[i],
                          (int)m->num_workers);
        }
    }
    return 0;
}

static int s_check_preflight(const void *pm, char *why, size_t cap)
{
    const Shardps__PreflightResult *m = pm;
    if (m->n_pairs > PS_MAX_SERVERS) {
        return s_fail(why, cap, "PreflightResult: %zu pairs (at most %d)", m->n_pairs,
                      PS_MAX_SERVERS);
    }
    return 0;
}

static int s_check_metrics(const void *pm, char *why, size_t cap)
{
    const Shardps__MetricsReport *m = pm;
    if (m->n_waiting_for > PS_REPORT_MAX_WAITING) {
        return s_fail(why, cap, "MetricsReport: %zu workers waited for (at most %d)",
                      m->n_waiting_for, PS_REPORT_MAX_WAITING);
    }
    return s_str("MetricsReport", "text", m->text, PS_METRICS_TEXT_MAX + 1, why, cap);
}

static int s_check_status(const void *pm, char *why, size_t cap)
{
    const Shardps__StatusReply *m = pm;
    if (m->n_nodes > PS_MAX_SERVERS + PS_MAX_WORKERS) {
        return s_fail(why, cap, "StatusReply: %zu nodes", m->n_nodes);
    }
    if (s_str("StatusReply", "phase", m->phase, PS_STATUS_WORD_MAX, why, cap) ||
        s_str("StatusReply", "model", m->model, PS_STATUS_WORD_MAX, why, cap) ||
        s_str("StatusReply", "mode", m->mode, PS_STATUS_MODE_MAX, why, cap)) {
        return PS_EPROTO;
    }
    for (size_t i = 0; i < m->n_nodes; i++) {
        const Shardps__StatusNode *n = m->nodes[i];
        if (s_str("StatusReply", "a node's endpoint", n->endpoint, PS_ENDPOINT_MAX, why, cap) ||
            s_str("StatusReply", "a node's state", n->state, PS_STATUS_WORD_MAX, why, cap) ||
            (n->report && s_check_metrics(n->report, why, cap))) {
            return PS_EPROTO;
        }
    }
    return 0;
}

static int s_check_failover_ready(const void *pm, char *why, size_t cap)
{
    const Shardps__FailoverReady *m = pm;
    if (m->generation < 0 || m->step < 0 || m->from_version < 0) {
        return s_fail(why, cap, "FailoverReady: generation %lld, step %lld, version %lld",
                      (long long)m->generation, (long long)m->step,
                      (long long)m->from_version);
    }
    return 0;
}

static int s_check_join_step(const void *pm, char *why, size_t cap)
{
    const Shardps__JoinStep *m = pm;
    if (m->step < 0 || m->step > PS_JOIN_MAX_STEP || m->worker < -1 ||
        m->worker >= PS_MAX_WORKERS) {
        return s_fail(why, cap, "JoinStep: step %lld, worker %d", (long long)m->step,
                      (int)m->worker);
    }
    return 0;
}

static int s_check_sched_state(const void *pm, char *why, size_t cap)
{
    const Shardps__JoinSchedulerState *m = pm;
    Shardps__ClusterView *v = shardps__cluster_view__unpack(NULL, m->view.len, m->view.data);
    int rc = v ? s_check_view(v, why, cap) : s_fail(why, cap, "scheduler state: no view");
    for (size_t i = 0; rc == 0 && i < m->n_lost; i++) {
        if (m->lost[i] < 0 || m->lost[i] >= v->num_workers) {
            rc = s_fail(why, cap, "scheduler state: lost worker %d of %d", (int)m->lost[i],
                        (int)v->num_workers);
        }
    }
    if (v) {
        shardps__cluster_view__free_unpacked(v, NULL);
    }
    return rc;
}

static const struct {
    const ProtobufCMessageDescriptor *d;
    s_check_fn *check;
} s_checks[] = {
    {&shardps__header__descriptor, s_check_header_m},
    {&shardps__register__descriptor, s_check_register},
    {&shardps__register_ack__descriptor, s_check_register_ack},
    {&shardps__model_info__descriptor, s_check_model_info},
    {&shardps__cluster_view__descriptor, s_check_view_m},
    {&shardps__barrier__descriptor, s_check_barrier},
    {&shardps__done__descriptor, s_check_done},
    {&shardps__checkpoint__descriptor, s_check_checkpoint},
    {&shardps__server_report__descriptor, s_check_server_report},
    {&shardps__peer_ready__descriptor, s_check_peer_ready},
    {&shardps__members__descriptor, s_check_members},
    {&shardps__preflight_result__descriptor, s_check_preflight},
    {&shardps__metrics_report__descriptor, s_check_metrics},
    {&shardps__status_reply__descriptor, s_check_status},
    {&shardps__failover_ready__descriptor, s_check_failover_ready},
    {&shardps__join_step__descriptor, s_check_join_step},
    {&shardps__join_scheduler_state__descriptor, s_check_sched_state},
};

int ps_codec_check(const ProtobufCMessage *m, char *why, size_t cap)
{
    for (size_t i = 0; i < sizeof s_checks / sizeof s_checks[0]; i++) {
        if (s_checks[i].d == m->descriptor) {
            return s_checks[i].check(m, why, cap);
        }
    }
    return 0; /* Shutdown and the rest: nothing to check without context */
}

void *ps_codec_unpack(const ProtobufCMessageDescriptor *d, const void *data, size_t len,
                      ps_arena_t *a, char *why, size_t cap)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(d, a ? &a->pc : NULL, len, data);
    if (!m) {
        s_fail(why, cap, "%s does not decode (%zu bytes)", d->short_name, len);
        return NULL;
    }
    if (ps_codec_check(m, why, cap) != 0) {
        if (!a) {
            protobuf_c_message_free_unpacked(m, NULL);
        }
        return NULL;
    }
    return m;
}

int ps_codec_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        return PS_ENOMEM;
    }
    *len = protobuf_c_message_pack(m, buf);
    *out = buf;
    return 0;
}

size_t ps_codec_byte_types(const uint64_t *counts)
{
    size_t n = PS_BYTE_TYPES;
    while (n > 0 && counts[n - 1] == 0) {
        n--;
    }
    return n;
}

/* ---- names ------------------------------------------------------------------ */

void ps_codec_build_id(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s protocol %u", PS_BUILD_VCS, PS_PROTOCOL_VERSION);
}

const char *ps_codec_type_name(int type)
{
    static const char *names[PS_MSG_TYPE_MAX + 1] = {
        "none",    "register", "register-ack", "model-info", "view",      "barrier",
        "barrier-done", "heartbeat", "shutdown", "done",   "push",      "push-ack",
        "pull",    "pull-reply", "init",       "init-ack", "error",     "report",
        "ring-data", "checkpoint", "members", "peer-ready",
        [PS_MSG_FAILOVER] = "failover",
        [PS_MSG_FAILOVER_READY] = "failover-ready",
        [PS_MSG_JOIN_PREPARE] = "join-prepare",
        [PS_MSG_JOIN_STEP] = "join-step",
        [PS_MSG_STATUS] = "status",
        [PS_MSG_STATUS_REPLY] = "status-reply",
        [PS_MSG_PREFLIGHT_PROBE] = "preflight-probe",
        [PS_MSG_PREFLIGHT_RESULT] = "preflight-result",
        [PS_MSG_PUSH_PULL] = "push-pull"};
    if (type < 0 || type > PS_MSG_TYPE_MAX || !names[type]) {
        return "unknown";
    }
    return names[type];
}

const char *ps_codec_role_tag(ps_role_t role)
{
    switch ((int)role) {
    case PS_ROLE_SCHEDULER: return "C";
    case PS_ROLE_SERVER: return "S";
    case PS_ROLE_WORKER: return "W";
    default: return "?";
    }
}

/* ---- transitional: the hand mirror, until its last users move ---------- */

/* Copies a protobuf string into a fixed buffer; fails if it does not fit. */
static int s_copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) {
        return PS_EPROTO;
    }
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
    return 0;
}

int ps_codec_pack_view(const ps_view_t *v, uint8_t **out, size_t *len)
{
    ps_view_pb_t *pb = malloc(sizeof *pb);
    int rc = pb ? ps_codec_view_to_pb(v, pb) : PS_ENOMEM;
    rc = rc ? rc : ps_codec_pack(&pb->pb.base, out, len);
    free(pb);
    return rc;
}

int ps_codec_unpack_view(const void *data, size_t len, ps_view_t *v)
{
    Shardps__ClusterView *m = shardps__cluster_view__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = ps_codec_view_from_pb(m, v, NULL, 0);
    shardps__cluster_view__free_unpacked(m, NULL);
    return rc;
}

/* Packs any generated message into a fresh buffer. */
static int s_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        return PS_ENOMEM;
    }
    *len = protobuf_c_message_pack(m, buf);
    *out = buf;
    return 0;
}

int ps_codec_pack_register(const ps_register_t *r, uint8_t **out, size_t *len)
{
    Shardps__Register m = SHARDPS__REGISTER__INIT;
    m.role = (Shardps__Role)r->role;
    m.rank = r->rank;
    m.endpoint = (char *)r->endpoint;
    m.pid = r->pid;
    m.curve_key = (char *)r->curve_key;
    m.job_id = (char *)r->job_id;
    m.job_hash = (char *)r->job_hash;
    m.build = (char *)r->build;
    m.spare = r->spare;
    m.run_id = r->run_id;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_register(const void *data, size_t len, ps_register_t *r)
{
    Shardps__Register *m = shardps__register__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    memset(r, 0, sizeof *r);
    r->role = (ps_role_t)m->role;
    r->rank = m->rank;
    r->pid = m->pid;
    r->run_id = m->run_id;
    r->spare = m->spare;
    int rc = s_copy_str(r->endpoint, sizeof r->endpoint, m->endpoint) ||
                     s_copy_str(r->curve_key, sizeof r->curve_key, m->curve_key) ||
                     s_copy_str(r->job_id, sizeof r->job_id, m->job_id) ||
                     s_copy_str(r->job_hash, sizeof r->job_hash, m->job_hash) ||
                     s_copy_str(r->build, sizeof r->build, m->build)
                 ? PS_EPROTO
                 : 0;
    if (r->role != PS_ROLE_SERVER && r->role != PS_ROLE_WORKER) {
        rc = PS_EPROTO;
    }
    shardps__register__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_register_ack(const ps_register_ack_t *a, uint8_t **out, size_t *len)
{
    ps_job_pb_t jm;
    ps_codec_job_to_pb(&a->job, &jm);
    Shardps__RegisterAck m = SHARDPS__REGISTER_ACK__INIT;
    m.rank = a->rank;
    m.token = a->token;
    m.job = &jm.pb;
    m.job_id = (char *)a->job_id;
    m.job_hash = (char *)a->job_hash;
    m.run_id = a->run_id;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_register_ack(const void *data, size_t len, ps_register_ack_t *a)
{
    Shardps__RegisterAck *m = shardps__register_ack__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    memset(a, 0, sizeof *a);
    a->rank = m->rank;
    a->token = m->token;
    a->run_id = m->run_id;
    int rc = ps_codec_job_from_pb(m->job, &a->job, NULL, 0);
    if (rc == 0 && (s_copy_str(a->job_id, sizeof a->job_id, m->job_id) ||
                    s_copy_str(a->job_hash, sizeof a->job_hash, m->job_hash))) {
        rc = PS_EPROTO;
    }
    shardps__register_ack__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_model_info(const ps_model_info_t *mi, uint8_t **out, size_t *len)
{
    Shardps__ModelInfo m = SHARDPS__MODEL_INFO__INIT;
    m.num_params = mi->num_params;
    m.train_samples = mi->train_samples;
    m.endpoint = (char *)mi->endpoint;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_model_info(const void *data, size_t len, ps_model_info_t *mi)
{
    Shardps__ModelInfo *m = shardps__model_info__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    memset(mi, 0, sizeof *mi);
    mi->num_params = m->num_params;
    mi->train_samples = m->train_samples;
    int rc = s_copy_str(mi->endpoint, sizeof mi->endpoint, m->endpoint);
    shardps__model_info__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_barrier(const char *name, uint8_t **out, size_t *len)
{
    Shardps__Barrier m = SHARDPS__BARRIER__INIT;
    m.name = (char *)name;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_barrier(const void *data, size_t len, char *name, size_t cap)
{
    Shardps__Barrier *m = shardps__barrier__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = s_copy_str(name, cap, m->name);
    shardps__barrier__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_shutdown(int status, const char *reason, uint8_t **out, size_t *len)
{
    Shardps__Shutdown m = SHARDPS__SHUTDOWN__INIT;
    m.status = status;
    m.reason = (char *)reason;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_shutdown(const void *data, size_t len, int *status, char *reason,
                             size_t cap)
{
    Shardps__Shutdown *m = shardps__shutdown__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    *status = m->status;
    snprintf(reason, cap, "%s", m->reason ? m->reason : "");
    shardps__shutdown__free_unpacked(m, NULL);
    return 0;
}

/* Byte counts on the wire: trailing zero types left out. */
static size_t s_counts_len(const uint64_t *c)
{
    size_t n = PS_BYTE_TYPES;
    while (n > 0 && c[n - 1] == 0) {
        n--;
    }
    return n;
}

/* Unpacks two repeated byte counts; refuses more types than we know. */
static int s_counts_from_pb(ps_byte_counts_t *b, size_t ns, const uint64_t *sent, size_t nr,
                            const uint64_t *received)
{
    if (ns > PS_BYTE_TYPES || nr > PS_BYTE_TYPES) {
        return PS_EPROTO;
    }
    for (size_t t = 0; t < ns; t++) {
        b->sent[t] = sent[t];
    }
    for (size_t t = 0; t < nr; t++) {
        b->received[t] = received[t];
    }
    return 0;
}

int ps_codec_pack_done(const ps_done_t *d, uint8_t **out, size_t *len)
{
    Shardps__Done m = SHARDPS__DONE__INIT;
    m.steps = d->steps;
    m.samples = d->samples;
    m.bytes_pushed = d->bytes_pushed;
    m.bytes_pulled = d->bytes_pulled;
    m.train_seconds = d->train_seconds;
    m.compute_seconds = d->compute_seconds;
    m.wait_seconds = d->wait_seconds;
    m.n_test_accuracy = (size_t)d->num_epochs_evaluated;
    m.test_accuracy = (double *)d->test_accuracy;
    m.final_loss = d->final_loss;
    m.n_bytes_sent = s_counts_len(d->bytes.sent);
    m.bytes_sent = (uint64_t *)d->bytes.sent;
    m.n_bytes_received = s_counts_len(d->bytes.received);
    m.bytes_received = (uint64_t *)d->bytes.received;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_done(const void *data, size_t len, ps_done_t *d)
{
    Shardps__Done *m = shardps__done__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = 0;
    memset(d, 0, sizeof *d);
    if (m->n_test_accuracy > PS_MAX_EPOCHS) {
        rc = PS_EPROTO;
    } else {
        d->steps = m->steps;
        d->samples = m->samples;
        d->bytes_pushed = m->bytes_pushed;
        d->bytes_pulled = m->bytes_pulled;
        d->train_seconds = m->train_seconds;
        d->compute_seconds = m->compute_seconds;
        d->wait_seconds = m->wait_seconds;
        d->num_epochs_evaluated = (int)m->n_test_accuracy;
        if (m->n_test_accuracy) { /* none: the array is NULL, which memcpy may not get */
            memcpy(d->test_accuracy, m->test_accuracy, m->n_test_accuracy * sizeof(double));
        }
        d->final_loss = m->final_loss;
        rc = s_counts_from_pb(&d->bytes, m->n_bytes_sent, m->bytes_sent, m->n_bytes_received,
                              m->bytes_received);
    }
    shardps__done__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_checkpoint(const ps_checkpoint_part_t *c, uint8_t **out, size_t *len)
{
    Shardps__Checkpoint m = SHARDPS__CHECKPOINT__INIT;
    m.step = c->step;
    m.file = (char *)c->file;
    m.size = c->size;
    m.crc32 = c->crc32;
    m.key_begin = c->begin;
    m.key_end = c->end;
    m.version = c->version;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_checkpoint(const void *data, size_t len, ps_checkpoint_part_t *c)
{
    Shardps__Checkpoint *m = shardps__checkpoint__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    memset(c, 0, sizeof *c);
    int rc = m->step > 0 && m->version >= 0 && m->key_end >= m->key_begin && m->file &&
                     m->file[0] &&
                     !strchr(m->file, '/') &&
                     s_copy_str(c->file, sizeof c->file, m->file) == 0
                 ? 0
                 : PS_EPROTO;
    c->step = m->step;
    c->size = m->size;
    c->crc32 = m->crc32;
    c->begin = m->key_begin;
    c->end = m->key_end;
    c->version = m->version;
    shardps__checkpoint__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_report(const ps_server_report_t *r, uint8_t **out, size_t *len)
{
    Shardps__ServerReport m = SHARDPS__SERVER_REPORT__INIT;
    m.pushes = r->pushes;
    m.pulls = r->pulls;
    m.rejected = r->rejected;
    m.dropped = r->dropped;
    m.nonfinite = r->nonfinite;
    m.version = r->version;
    m.n_staleness = PS_HIST_BUCKETS;
    m.staleness = (uint64_t *)r->staleness.counts;
    m.staleness_sum = r->staleness.sum;
    m.staleness_max = r->staleness.max;
    m.steps_fewer_workers = r->steps_fewer_workers;
    m.secure_refused = r->secure_refused;
    m.forged = r->forged;
    m.unread_refused = r->unread_refused;
    m.cpu_seconds = r->cpu_seconds;
    m.n_bytes_sent = s_counts_len(r->bytes.sent);
    m.bytes_sent = (uint64_t *)r->bytes.sent;
    m.n_bytes_received = s_counts_len(r->bytes.received);
    m.bytes_received = (uint64_t *)r->bytes.received;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_report(const void *data, size_t len, ps_server_report_t *r)
{
    Shardps__ServerReport *m = shardps__server_report__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = m->n_staleness == PS_HIST_BUCKETS ? 0 : PS_EPROTO;
    memset(r, 0, sizeof *r);
    if (rc == 0) {
        r->pushes = m->pushes;
        r->pulls = m->pulls;
        r->rejected = m->rejected;
        r->dropped = m->dropped;
        r->nonfinite = m->nonfinite;
        r->version = m->version;
        memcpy(r->staleness.counts, m->staleness, sizeof r->staleness.counts);
        for (int i = 0; i < PS_HIST_BUCKETS; i++) {
            r->staleness.n += m->staleness[i];
        }
        r->staleness.sum = m->staleness_sum;
        r->staleness.max = m->staleness_max;
        r->steps_fewer_workers = m->steps_fewer_workers;
        r->secure_refused = m->secure_refused;
        r->forged = m->forged;
        r->unread_refused = m->unread_refused;
        r->cpu_seconds = m->cpu_seconds;
        rc = s_counts_from_pb(&r->bytes, m->n_bytes_sent, m->bytes_sent, m->n_bytes_received,
                              m->bytes_received);
    }
    shardps__server_report__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_peer_ready(const char *endpoint, uint8_t **out, size_t *len)
{
    Shardps__PeerReady m = SHARDPS__PEER_READY__INIT;
    m.endpoint = (char *)endpoint;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_peer_ready(const void *data, size_t len, char *endpoint, size_t cap)
{
    Shardps__PeerReady *m = shardps__peer_ready__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = s_copy_str(endpoint, cap, m->endpoint);
    rc = rc ? rc : (endpoint[0] ? 0 : PS_EPROTO);
    shardps__peer_ready__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_members(const unsigned char *live, int n, uint8_t **out, size_t *len)
{
    if (n < 1 || n > PS_MAX_WORKERS) {
        return PS_EINVAL;
    }
    int32_t ranks[PS_MAX_WORKERS];
    size_t k = 0;
    for (int w = 0; w < n; w++) {
        if (live[w]) {
            ranks[k++] = w;
        }
    }
    Shardps__Members m = SHARDPS__MEMBERS__INIT;
    m.num_workers = n;
    m.n_live = k;
    m.live = ranks;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_members(const void *data, size_t len, unsigned char *live, int *n)
{
    Shardps__Members *m = shardps__members__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = m->num_workers >= 1 && m->num_workers <= PS_MAX_WORKERS && m->n_live > 0
                 ? 0
                 : PS_EPROTO;
    if (rc == 0) {
        *n = m->num_workers;
        memset(live, 0, (size_t)*n);
        for (size_t i = 0; i < m->n_live && rc == 0; i++) {
            rc = m->live[i] >= 0 && m->live[i] < *n ? 0 : PS_EPROTO;
            live[rc == 0 ? m->live[i] : 0] = 1;
        }
    }
    shardps__members__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_preflight(const ps_preflight_pair_t *pairs, int n, uint8_t **out,
                            size_t *len)
{
    Shardps__PreflightPair pm[PS_MAX_SERVERS], *pp[PS_MAX_SERVERS];
    if (n < 0 || n > PS_MAX_SERVERS) {
        return PS_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        shardps__preflight_pair__init(&pm[i]);
        pm[i].server = pairs[i].server;
        pm[i].reached = pairs[i].reached != 0;
        pm[i].rtt_ms = pairs[i].rtt_ms;
        pm[i].mbytes_per_s = pairs[i].mbytes_per_s;
        pp[i] = &pm[i];
    }
    Shardps__PreflightResult m = SHARDPS__PREFLIGHT_RESULT__INIT;
    m.n_pairs = (size_t)n;
    m.pairs = pp;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_preflight(const void *data, size_t len, ps_preflight_pair_t *pairs)
{
    Shardps__PreflightResult *m = shardps__preflight_result__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int n = m->n_pairs <= PS_MAX_SERVERS ? (int)m->n_pairs : PS_EPROTO;
    for (int i = 0; i < n; i++) {
        pairs[i] = (ps_preflight_pair_t){.server = m->pairs[i]->server,
                                         .reached = m->pairs[i]->reached,
                                         .rtt_ms = m->pairs[i]->rtt_ms,
                                         .mbytes_per_s = m->pairs[i]->mbytes_per_s};
    }
    shardps__preflight_result__free_unpacked(m, NULL);
    return n;
}

/* The report's fields without the text, both ways. */
static void s_report_to_pb(const ps_metrics_report_t *r, Shardps__MetricsReport *m,
                           int32_t *waiting)
{
    m->step = r->step;
    m->samples = r->samples;
    m->loss = r->loss;
    m->test_accuracy = r->test_accuracy;
    m->epoch = r->epoch;
    m->waited_seconds = r->waited_seconds;
    m->bytes_pushed = r->bytes_pushed;
    m->bytes_pulled = r->bytes_pulled;
    int n = r->nwaiting < PS_REPORT_MAX_WAITING ? r->nwaiting : PS_REPORT_MAX_WAITING;
    for (int i = 0; i < n; i++) {
        waiting[i] = r->waiting_for[i];
    }
    m->n_waiting_for = (size_t)(n > 0 ? n : 0);
    m->waiting_for = waiting;
}

static int s_report_from_pb(const Shardps__MetricsReport *m, ps_metrics_report_t *r)
{
    memset(r, 0, sizeof *r);
    if (m->n_waiting_for > PS_REPORT_MAX_WAITING) {
        return PS_EPROTO;
    }
    r->step = m->step;
    r->samples = m->samples;
    r->loss = m->loss;
    r->test_accuracy = m->test_accuracy;
    r->epoch = m->epoch;
    r->waited_seconds = m->waited_seconds;
    r->bytes_pushed = m->bytes_pushed;
    r->bytes_pulled = m->bytes_pulled;
    r->nwaiting = (int)m->n_waiting_for;
    for (size_t i = 0; i < m->n_waiting_for; i++) {
        r->waiting_for[i] = m->waiting_for[i];
    }
    return 0;
}

int ps_codec_pack_metrics(const ps_metrics_report_t *r, uint8_t **out, size_t *len)
{
    Shardps__MetricsReport m = SHARDPS__METRICS_REPORT__INIT;
    int32_t waiting[PS_REPORT_MAX_WAITING];
    s_report_to_pb(r, &m, waiting);
    m.text = r->text ? r->text : (char *)"";
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_metrics(const void *data, size_t len, ps_metrics_report_t *r)
{
    Shardps__MetricsReport *m = shardps__metrics_report__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = s_report_from_pb(m, r);
    size_t n = m->text ? strlen(m->text) : 0;
    if (rc == 0 && n > (1u << 20)) {
        rc = PS_EPROTO;
    }
    if (rc == 0 && n > 0 && !(r->text = strdup(m->text))) {
        rc = PS_ENOMEM;
    }
    shardps__metrics_report__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_status(const ps_status_t *st, uint8_t **out, size_t *len)
{
    Shardps__StatusReply m = SHARDPS__STATUS_REPLY__INIT;
    m.phase = (char *)st->phase;
    m.model = (char *)st->model;
    m.mode = (char *)st->mode;
    m.total_steps = st->total_steps;
    m.elapsed_seconds = st->elapsed_seconds;
    m.num_params = st->num_params;
    int n = st->nnodes > 0 ? st->nnodes : 0;
    Shardps__StatusNode *nodes = calloc((size_t)n + 1, sizeof *nodes);
    Shardps__StatusNode **ptrs = calloc((size_t)n + 1, sizeof *ptrs);
    Shardps__MetricsReport *reps = calloc((size_t)n + 1, sizeof *reps);
    int32_t *waiting = calloc((size_t)(n + 1) * PS_REPORT_MAX_WAITING, sizeof *waiting);
    int rc = nodes && ptrs && reps && waiting ? 0 : PS_ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++) {
        const ps_status_node_t *sn = &st->nodes[i];
        Shardps__StatusNode *pn = &nodes[i];
        shardps__status_node__init(pn);
        shardps__metrics_report__init(&reps[i]);
        s_report_to_pb(&sn->report, &reps[i], waiting + (size_t)i * PS_REPORT_MAX_WAITING);
        reps[i].text = (char *)"";
        pn->role = (Shardps__Role)sn->role;
        pn->rank = sn->rank;
        pn->endpoint = (char *)sn->endpoint;
        pn->pid = sn->pid;
        pn->key_begin = sn->begin;
        pn->key_end = sn->end;
        pn->state = (char *)sn->state;
        pn->silent_seconds = sn->silent_seconds;
        pn->report = &reps[i];
        pn->steps_per_second = sn->steps_per_second;
        pn->samples_per_second = sn->samples_per_second;
        ptrs[i] = pn;
    }
    m.n_nodes = (size_t)n;
    m.nodes = ptrs;
    if (rc == 0) {
        rc = s_pack(&m.base, out, len);
    }
    free(nodes);
    free(ptrs);
    free(reps);
    free(waiting);
    return rc;
}

int ps_codec_unpack_status(const void *data, size_t len, ps_status_t *st)
{
    memset(st, 0, sizeof *st);
    Shardps__StatusReply *m = shardps__status_reply__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = m->n_nodes <= PS_MAX_SERVERS + PS_MAX_WORKERS ? 0 : PS_EPROTO;
    if (rc == 0 && m->n_nodes && !(st->nodes = calloc(m->n_nodes, sizeof *st->nodes))) {
        rc = PS_ENOMEM;
    }
    if (rc == 0) {
        rc = s_copy_str(st->phase, sizeof st->phase, m->phase) ||
                     s_copy_str(st->model, sizeof st->model, m->model) ||
                     s_copy_str(st->mode, sizeof st->mode, m->mode)
                 ? PS_EPROTO
                 : 0;
        st->total_steps = m->total_steps;
        st->elapsed_seconds = m->elapsed_seconds;
        st->num_params = m->num_params;
    }
    for (size_t i = 0; rc == 0 && i < m->n_nodes; i++) {
        const Shardps__StatusNode *pn = m->nodes[i];
        ps_status_node_t *sn = &st->nodes[i];
        sn->role = (ps_role_t)pn->role;
        sn->rank = pn->rank;
        sn->pid = pn->pid;
        sn->begin = pn->key_begin;
        sn->end = pn->key_end;
        sn->silent_seconds = pn->silent_seconds;
        sn->steps_per_second = pn->steps_per_second;
        sn->samples_per_second = pn->samples_per_second;
        if (s_copy_str(sn->endpoint, sizeof sn->endpoint, pn->endpoint) ||
            s_copy_str(sn->state, sizeof sn->state, pn->state) ||
            (pn->report && s_report_from_pb(pn->report, &sn->report) != 0)) {
            rc = PS_EPROTO;
        }
        st->nnodes = (int)i + 1;
    }
    shardps__status_reply__free_unpacked(m, NULL);
    if (rc != 0) {
        ps_codec_status_fini(st);
    }
    return rc;
}

void ps_codec_status_fini(ps_status_t *st)
{
    free(st->nodes);
    st->nodes = NULL;
    st->nnodes = 0;
}

int ps_codec_pack_failover_ready(const ps_failover_ready_t *r, uint8_t **out, size_t *len)
{
    Shardps__FailoverReady m = SHARDPS__FAILOVER_READY__INIT;
    m.generation = r->generation;
    m.step = r->step;
    m.from_version = r->from_version;
    m.stepped = r->stepped != 0;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_failover_ready(const void *data, size_t len, ps_failover_ready_t *r)
{
    Shardps__FailoverReady *m = shardps__failover_ready__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = m->generation >= 0 && m->step >= 0 && m->from_version >= 0 ? 0 : PS_EPROTO;
    r->generation = m->generation;
    r->step = m->step;
    r->from_version = m->from_version;
    r->stepped = m->stepped;
    shardps__failover_ready__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_join_step(const ps_join_step_t *j, uint8_t **out, size_t *len)
{
    Shardps__JoinStep m = SHARDPS__JOIN_STEP__INIT;
    m.step = j->step;
    m.worker = j->worker;
    m.checkpoint = j->checkpoint != 0;
    m.members = j->members != 0;
    m.token = j->token;
    return s_pack(&m.base, out, len);
}

int ps_codec_unpack_join_step(const void *data, size_t len, ps_join_step_t *j)
{
    Shardps__JoinStep *m = shardps__join_step__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    int rc = m->step >= 0 && m->step <= PS_JOIN_MAX_STEP && m->worker >= -1 &&
                     m->worker < PS_MAX_WORKERS
                 ? 0
                 : PS_EPROTO;
    j->step = m->step;
    j->worker = m->worker;
    j->checkpoint = m->checkpoint;
    j->members = m->members;
    j->token = m->token;
    shardps__join_step__free_unpacked(m, NULL);
    return rc;
}

int ps_codec_pack_sched_state(const ps_sched_state_t *st, const ps_view_t *v, uint8_t **out,
                              size_t *len)
{
    uint8_t *view;
    size_t vlen;
    int rc = ps_codec_pack_view(v, &view, &vlen);
    if (rc != 0) {
        return rc;
    }
    int32_t lost[PS_MAX_WORKERS];
    size_t k = 0;
    for (int w = 0; w < v->num_workers; w++) {
        if (st->lost[w]) {
            lost[k++] = w;
        }
    }
    Shardps__JoinSchedulerState m = SHARDPS__JOIN_SCHEDULER_STATE__INIT;
    m.run_id = st->run_id;
    m.view.data = view;
    m.view.len = vlen;
    m.n_lost = k;
    m.lost = lost;
    m.membership_changes = st->membership_changes;
    m.workers_joined = st->workers_joined;
    m.restarts = st->restarts;
    m.checkpoint = st->checkpoint;
    m.seconds = st->seconds;
    m.finished = st->finished != 0;
    rc = s_pack(&m.base, out, len);
    free(view);
    return rc;
}

int ps_codec_unpack_sched_state(const void *data, size_t len, ps_sched_state_t *st,
                                ps_view_t *v)
{
    Shardps__JoinSchedulerState *m = shardps__join_scheduler_state__unpack(NULL, len, data);
    if (!m) {
        return PS_EPROTO;
    }
    memset(st, 0, sizeof *st);
    int rc = ps_codec_unpack_view(m->view.data, m->view.len, v);
    for (size_t i = 0; i < m->n_lost && rc == 0; i++) {
        rc = m->lost[i] >= 0 && m->lost[i] < v->num_workers ? 0 : PS_EPROTO;
        st->lost[rc == 0 ? m->lost[i] : 0] = 1;
    }
    st->run_id = m->run_id;
    st->membership_changes = m->membership_changes;
    st->workers_joined = m->workers_joined;
    st->restarts = m->restarts;
    st->checkpoint = m->checkpoint;
    st->seconds = m->seconds;
    st->finished = m->finished;
    shardps__join_scheduler_state__free_unpacked(m, NULL);
    return rc;
}

