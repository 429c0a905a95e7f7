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
#include "common/text.h"

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
    /* A reason may quote what a peer sent (its build, say) or be cut in the
     * middle of a character: strict decoders refuse a string that is not
     * UTF-8, so what we send always is. */
    char error[PS_ERROR_MAX];
    Shardps__Header fixed;
    if (h->error && h->error[0] && strlen(h->error) < sizeof error) { /* longer: read as "" */
        snprintf(error, sizeof error, "%s", h->error);
        if (ps_text_utf8_fix(error)) {
            fixed = *h;
            fixed.error = error;
            h = &fixed;
        }
    }
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
    const int rows = m->type == PS_MSG_ROWS_PULL || m->type == PS_MSG_ROWS ||
                     m->type == PS_MSG_ROWS_PUSH;
    if (rows && (m->nnz > PS_MAX_ROWS_MSG || (m->nnz && dtype != PS_DTYPE_F32))) {
        return s_fail(why, cap, "rows message of %llu keys (at most %d) and dtype %d (fp32)",
                      (unsigned long long)m->nnz, PS_MAX_ROWS_MSG, dtype);
    }
    if (!rows && m->nnz && (dtype < PS_DTYPE_SPARSE_F32 || dtype > PS_DTYPE_MAX)) {
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
    m->hidden = (char *)j->hidden;
    m->chunk_kib = (uint32_t)j->chunk_kib;
    m->embed_dim = (uint32_t)j->embed_dim;
    m->min_count = (uint32_t)j->min_count;
    m->max_rows = j->max_rows;
    m->l1 = j->l1;
    m->l2 = j->l2;
    m->micro_batch = (uint32_t)j->micro_batch;
    m->ring_rows = (char *)ps_job_ring_rows_name(j);
}

int ps_codec_job_from_pb(const Shardps__JobConfig *m, ps_job_t *j, char *why, size_t cap)
{
    memset(j, 0, sizeof *j);
    if (!m) {
        return s_fail(why, cap, "no job configuration");
    }
    if (s_str("job", "model", m->model, sizeof j->model, why, cap) ||
        s_str("job", "optimizer", m->optimizer, sizeof j->optimizer, why, cap) ||
        s_str("job", "hidden", m->hidden, sizeof j->hidden, why, cap)) {
        return PS_EPROTO;
    }
    s_copy(j->model, sizeof j->model, m->model);
    s_copy(j->hidden, sizeof j->hidden, m->hidden);
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
    if (m->ring_rows && m->ring_rows[0] && ps_job_parse_ring_rows(m->ring_rows, j) != 0) {
        return s_fail(why, cap, "job: unknown ring rows '%.16s'", m->ring_rows);
    }
    j->topk = m->topk;
    j->chunk_kib = m->chunk_kib ? (int)(m->chunk_kib < INT32_MAX ? m->chunk_kib : INT32_MAX)
                                : PS_JOB_CHUNK_KIB_DEFAULT;
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
    j->embed_dim = m->embed_dim < INT32_MAX ? (int)m->embed_dim : INT32_MAX;
    j->min_count = m->min_count < INT32_MAX ? (int)m->min_count : INT32_MAX;
    j->max_rows = m->max_rows;
    j->l1 = m->l1;
    j->l2 = m->l2;
    j->micro_batch = m->micro_batch < INT32_MAX ? (int)m->micro_batch : INT32_MAX;
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

/* A job with embedding rows: the servers' row ranges tile the hashed space
 * in rank order; without: none is set. */
static int s_check_view_rows(const Shardps__ClusterView *m, const ps_job_t *job, char *why,
                             size_t cap)
{
    ps_rowrange_t rows[PS_MAX_SERVERS];
    int any = 0;
    for (size_t i = 0; i < m->n_servers; i++) {
        rows[i].first = m->servers[i]->row_first;
        rows[i].last = m->servers[i]->row_last;
        any |= rows[i].first != 0 || rows[i].last != 0;
    }
    if (!ps_job_has_rows(job) || !m->n_servers) {
        return any ? s_fail(why, cap, "view: row ranges in a job without embedding rows") : 0;
    }
    if (!ps_range_rows_tile(rows, (int)m->n_servers)) {
        return s_fail(why, cap, "view: the servers' row ranges do not tile the hashed keys");
    }
    return 0;
}

/* The view's entries: servers tile [0, P) in rank order (the client relies
 * on it), and the hashed row keys in a job with rows; in allreduce mode
 * every worker, in rank order, with an endpoint. */
static int s_check_view_entries(const Shardps__ClusterView *m, const ps_job_t *job, char *why,
                                size_t cap)
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
    if (s_check_view_rows(m, job, why, cap) != 0) {
        return PS_EPROTO;
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

static int s_check_checkpoint(const void *pm, char *why, size_t cap);

/* What a part's file name may hold. */
#define S_PART_NAME_CHARS                                                                    \
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+"

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
        (size_t)m->replaced_rank > m->n_servers || m->replicas < 0 ||
        m->replicas > PS_MAX_REPLICAS || m->replica_of < 0 ||
        (size_t)m->replica_of > m->n_servers) {
        return s_fail(why, cap, "view: a step, count or rank out of range");
    }
    if (m->n_worker_tokens != 0 && m->n_worker_tokens != (size_t)m->num_workers) {
        return s_fail(why, cap, "view: %zu worker tokens for %d workers", m->n_worker_tokens,
                      (int)m->num_workers);
    }
    if (m->n_resume_files != (size_t)m->resume_parts) {
        return s_fail(why, cap, "view: %zu resume files for %d parts", m->n_resume_files,
                      (int)m->resume_parts);
    }
    for (size_t i = 0; i < m->n_resume_files; i++) {
        if (s_check_checkpoint(m->resume_files[i], why, cap) != 0) {
            return PS_EPROTO;
        }
    }
    if (s_str("view", "checkpoint_dir", m->checkpoint_dir, PS_DIR_MAX, why, cap) ||
        s_str("view", "resume_dir", m->resume_dir, PS_RESUME_DIR_MAX, why, cap)) {
        return PS_EPROTO;
    }
    return s_check_view_entries(m, &job, why, cap);
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
        s->row_first = v->servers[i].rows.first;
        s->row_last = v->servers[i].rows.last;
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
    for (int i = 0; i < v->resume_parts && i < PS_MAX_SERVERS; i++) {
        ps_codec_part_to_pb(&v->resume_files[i], &out->files[i]);
        out->file_ptrs[i] = &out->files[i];
    }
    m->n_resume_files = (size_t)(v->resume_parts < PS_MAX_SERVERS ? v->resume_parts
                                                                   : PS_MAX_SERVERS);
    m->resume_files = out->file_ptrs;
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
    m->replicas = v->replicas;
    m->replica_of = v->replica_of;
    m->replica_token = v->replica_token;
    m->takeover = v->takeover != 0;
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
    for (size_t i = 0; i < m->n_resume_files; i++) {
        ps_codec_part_from_pb(m->resume_files[i], &v->resume_files[i], NULL, 0);
    }
    for (size_t i = 0; i < m->n_worker_tokens; i++) {
        v->worker_tokens[i] = m->worker_tokens[i];
    }
    v->preflight = m->preflight;
    v->generation = m->generation;
    v->replaced = m->replaced_rank;
    v->joining = m->joining;
    v->resume_step = m->resume_step;
    v->replicas = m->replicas;
    v->replica_of = m->replica_of;
    v->replica_token = m->replica_token;
    v->takeover = m->takeover;
    for (size_t i = 0; i < m->n_servers; i++) {
        const Shardps__ServerInfo *s = m->servers[i];
        ps_server_info_t *d = &v->servers[i];
        d->rank = s->rank;
        d->begin = s->key_begin;
        d->end = s->key_end;
        d->rows.first = s->row_first;
        d->rows.last = s->row_last;
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
    /* A name inside the step's directory, never a path out of it, and
     * nothing that breaks a log line. */
    const char *f = m->file ? m->file : "";
    const size_t ok = strspn(f, S_PART_NAME_CHARS);
    if (!f[0] || f[ok] || !strcmp(f, ".") || !strcmp(f, "..")) {
        return s_fail(why, cap, "Checkpoint: file '%.*s%s' is not a name in the step's "
                      "directory (empty, '.', '..', or a character outside [A-Za-z0-9._+-])",
                      (int)(ok < 64 ? ok : 64), f, f[ok] ? "..." : "");
    }
    return s_str("Checkpoint", "file", f, PS_CHECKPOINT_FILE_MAX, why, cap);
}

static int s_check_resume_check(const void *pm, char *why, size_t cap)
{
    const Shardps__ResumeCheck *m = pm;
    if (m->n_parts > PS_MAX_RESUME_CHECK) {
        return s_fail(why, cap, "ResumeCheck: %zu parts (at most %d)", m->n_parts,
                      PS_MAX_RESUME_CHECK);
    }
    for (size_t i = 0; i < m->n_parts; i++) {
        if (s_check_checkpoint(m->parts[i], why, cap) != 0) {
            return PS_EPROTO;
        }
    }
    return s_str("ResumeCheck", "dir", m->dir, PS_DIR_MAX, why, cap);
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
    {&shardps__resume_check__descriptor, s_check_resume_check},
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
