/*
 * tests/unit/test_consistency.c - the consistency modes as a state machine,
 * fed plain float arrays: sync steps complete only when every live worker
 * pushed every key, and sum in worker-rank order whatever the arrival order
 * (bitwise); ssp's window and pull gating; sync:k/n's k pushes, late and
 * partial pushes dropped and counted; async staleness and its weighted lr;
 * duplicate, out-of-window and too-many-part pushes refused with the exact
 * PS_E*; waiting pulls answered (chunk by chunk during an update, the
 * workers in turns from the server's rank's); the
 * live-worker set; every frame given back. Each test takes milliseconds.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "server/consistency.h"
#include "server/store.h"
#include "tests/unit/testutil.h"

enum { S_MAX_EVENTS = 4096, S_MAX_FRAMES = 1024, S_BASE = 100 };

/* What the state machine asked for, in order. */
typedef enum { S_ACK, S_REPLY } s_kind_t;
typedef struct {
    s_kind_t kind;
    int asker;         /* the request's asker: an int */
    ps_range_t range;  /* acked keys, or the part sent */
    int64_t version;   /* the version sent */
    float first;       /* S_REPLY: the value of the part's first key */
} s_event_t;

/* One state machine over a store of keys [S_BASE, S_BASE + n), and a record
 * of what it asked for. */
typedef struct {
    ps_store_t *store;
    ps_consistency_t *c;
    ps_job_t job;
    uint64_t n;
    int workers;
    s_event_t ev[S_MAX_EVENTS];
    int nev;
    int released[S_MAX_FRAMES]; /* times frame i was given back */
    int next_frame;             /* frames handed out so far */
    char why[160];
} s_fix_t;

static void s_on_ack(void *ctx, const void *asker, ps_range_t range, int64_t version)
{
    s_fix_t *f = ctx;
    ck_assert_int_lt(f->nev, S_MAX_EVENTS);
    f->ev[f->nev++] = (s_event_t){S_ACK, *(const int *)asker, range, version, 0};
}

static void s_on_reply(void *ctx, const void *asker, ps_range_t part, const float *values,
                       int64_t version)
{
    s_fix_t *f = ctx;
    ck_assert_int_lt(f->nev, S_MAX_EVENTS);
    f->ev[f->nev++] = (s_event_t){S_REPLY, *(const int *)asker, part, version, values[0]};
}

static void s_on_release(void *ctx, void *frame)
{
    s_fix_t *f = ctx;
    f->released[(int *)frame - f->released]++;
}

static ps_job_t s_job(ps_mode_t mode)
{
    ps_job_t j;
    ps_job_defaults(&j);
    j.mode = mode;
    j.lr = 0.5;
    j.momentum = 0.0;
    j.staleness_lr = 0;
    j.schedule.kind = PS_LR_CONSTANT;
    return j;
}

/* Updates a primary applied (ps_consistency_ops_t.update), for its replica. */
enum { S_MAX_UPDATES = 64 };
typedef struct {
    ps_range_t range;
    float *grad; /* a copy */
    float lr, scale;
    int64_t version;
} s_update_t;
static s_update_t s_updates[S_MAX_UPDATES];
static int s_nupdates;

static void s_on_update(void *ctx, ps_range_t range, const float *grad, float lr, float scale,
                        int64_t version)
{
    (void)ctx;
    ck_assert_int_lt(s_nupdates, S_MAX_UPDATES);
    s_update_t *u = &s_updates[s_nupdates++];
    u->range = range;
    u->grad = malloc(ps_range_len(range) * sizeof(float));
    memcpy(u->grad, grad, ps_range_len(range) * sizeof(float));
    u->lr = lr;
    u->scale = scale;
    u->version = version;
}

static void s_updates_free(void)
{
    for (int i = 0; i < s_nupdates; i++) {
        free(s_updates[i].grad);
    }
    s_nupdates = 0;
}

static s_fix_t *s_new_server(ps_job_t job, uint64_t n, int workers, int rank, int replicated);

/* A fixture for job with n keys and workers workers. Caller frees with s_free. */
static s_fix_t *s_new(ps_job_t job, uint64_t n, int workers)
{
    return s_new_server(job, n, workers, 0, 0);
}

/* As s_new, for the server of rank; replicated: updates are recorded
 * (s_updates) and pushes of an applied step are acked and dropped, as under
 * --replicas. */
static s_fix_t *s_new_server(ps_job_t job, uint64_t n, int workers, int rank, int replicated)
{
    s_fix_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    f->job = job;
    f->n = n;
    f->workers = workers;
    ps_job_t run = job; /* as the server sets its store and consistency up */
    double rate;
    run.momentum = ps_job_async_momentum(&job, workers, &rate);
    ck_assert_int_eq(ps_store_new(&f->store, (ps_range_t){S_BASE, S_BASE + n}, &run), 0);
    ps_consistency_config_t cfg = {
        .job = job,
        .workers = workers,
        .rank = rank,
        .steps_per_epoch = 100,
        .total_steps = 1000,
        .report_missing = 5,
        .asker_size = sizeof(int),
        .ops = {f, s_on_ack, s_on_reply, s_on_release, NULL, replicated ? s_on_update : NULL},
        .resent = replicated,
        .async_rate = (float)rate,
    };
    ck_assert_int_eq(ps_consistency_new(&f->c, &cfg, f->store), 0);
    return f;
}

/* Destroys the state machine and checks every frame came back exactly once. */
static void s_free(s_fix_t *f)
{
    ps_consistency_destroy(&f->c);
    ck_assert_ptr_null(f->c);
    for (int i = 0; i < f->next_frame; i++) {
        ck_assert_msg(f->released[i] == 1, "frame %d released %d times", i, f->released[i]);
    }
    ps_store_destroy(&f->store);
    free(f);
}

static ps_range_t s_keys(uint64_t a, uint64_t b)
{
    return (ps_range_t){S_BASE + a, S_BASE + b};
}

/* Initialises every key to 1 + key/1000 from worker 0. */
static void s_init_all(s_fix_t *f)
{
    float *v = malloc(f->n * sizeof(float));
    for (uint64_t i = 0; i < f->n; i++) {
        v[i] = 1.0f + (float)i / 1000.0f;
    }
    int asker = 0;
    ps_request_t r = {0, 0, 0, s_keys(0, f->n), v, NULL, &asker};
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), 0);
    free(v);
    f->nev = 0;
}

/* Worker w pushes g (keys [a, b) of the shard) for step, computed on version;
 * its asker is w. Returns what the push returned; frames are counted. */
static int s_push(s_fix_t *f, int w, int64_t step, int64_t version, uint64_t a, uint64_t b,
                  const void *g)
{
    ck_assert_int_lt(f->next_frame, S_MAX_FRAMES);
    ps_request_t r = {w, step, version, s_keys(a, b), g, &f->released[f->next_frame++], &w};
    return ps_consistency_push(f->c, &r, f->why, sizeof f->why);
}

/* A pull by worker asker % workers. */
static int s_pull(s_fix_t *f, int asker, int64_t min_version, uint64_t a, uint64_t b)
{
    ps_request_t r = {asker % f->workers, min_version, 0, s_keys(a, b), NULL, NULL, &asker};
    return ps_consistency_pull(f->c, &r, f->why, sizeof f->why);
}

static int s_count(const s_fix_t *f, s_kind_t kind)
{
    int k = 0;
    for (int i = 0; i < f->nev; i++) {
        k += f->ev[i].kind == kind;
    }
    return k;
}

/* The expected parameters: the initial ones updated with ps_optim_step by the
 * sum (in the order given) of grads, each weighted, times scale. */
static void s_expect(const s_fix_t *f, float *w, float *state, const float *const *grads,
                     const float *weights, int ngrads, float scale, int64_t t)
{
    ps_optim_t o;
    ck_assert_int_eq(ps_optim_from_job(&f->job, &o), 0);
    float *sum = calloc(f->n, sizeof(float));
    for (uint64_t i = 0; i < f->n; i++) {
        for (int k = 0; k < ngrads; k++) {
            sum[i] = k == 0 ? weights[k] * grads[k][i] : sum[i] + weights[k] * grads[k][i];
        }
    }
    ps_optim_step(&o, (float)f->job.lr, t, w, state, f->n, sum, scale, f->n);
    free(sum);
}

static void s_initial(const s_fix_t *f, float *w)
{
    for (uint64_t i = 0; i < f->n; i++) {
        w[i] = 1.0f + (float)i / 1000.0f;
    }
}

static void s_assert_params(const s_fix_t *f, const float *want)
{
    const float *got = ps_store_values(f->store, S_BASE);
    for (uint64_t i = 0; i < f->n; i++) {
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                      "key %llu: got %.9g, want %.9g", (unsigned long long)i, got[i], want[i]);
    }
}

/* Gradients whose float sum depends on the order of summation. */
static void s_fill_grads(float g[][16], int k)
{
    const float big[3] = {1e8f, 1.0f, -1e8f};
    for (int w = 0; w < k; w++) {
        for (int i = 0; i < 16; i++) {
            g[w][i] = big[w % 3] * (1.0f + (float)i / 7.0f) + (float)w * 0.37f;
        }
    }
}

START_TEST(nonfinite_pushes_are_refused_and_never_count)
{
    const ps_mode_t modes[] = {PS_MODE_SYNC, PS_MODE_ASYNC};
    for (int m = 0; m < 2; m++) {
        s_fix_t *f = s_new(s_job(modes[m]), 8, 2);
        s_init_all(f);
        float g[8] = {1, 2, 3, 4, 5, 6, 7, 8}, bad[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        bad[3] = NAN;
        ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 8, bad), PS_ENONFINITE);
        bad[3] = -INFINITY;
        ck_assert_int_eq(s_push(f, 1, 0, 0, 4, 8, bad), PS_ENONFINITE);
        ck_assert_int_eq(ps_consistency_version(f->c), 0);
        /* not held: the honest pushes of the step complete it */
        ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 8, g), 0);
        ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 8, g), 0);
        ck_assert_int_eq(ps_consistency_version(f->c), m == 0 ? 1 : 2);
        ck_assert_uint_eq(ps_consistency_stats(f->c)->nonfinite, 2);
        ck_assert_uint_eq(ps_consistency_stats(f->c)->pushes, 2);
        s_free(f);
    }
}
END_TEST

START_TEST(sync_step_completes_only_when_every_worker_pushed_every_key)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 16, 3);
    s_init_all(f);
    float g[3][16];
    s_fill_grads(g, 3);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 16, g[0]), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 16, g[1]), 0);
    ck_assert_int_eq(s_push(f, 2, 0, 0, 0, 8, g[2]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(f->released[0] + f->released[1] + f->released[2], 0);
    ck_assert_int_eq(s_push(f, 2, 0, 0, 8, 16, g[2] + 8), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    /* every push acked, at the version before the step applied */
    ck_assert_int_eq(s_count(f, S_ACK), 4);
    for (int i = 0; i < f->nev; i++) {
        ck_assert_int_eq(f->ev[i].version, 0);
    }
    ck_assert_int_eq(f->released[0] + f->released[1] + f->released[2] + f->released[3], 4);
    const ps_consistency_stats_t *st = ps_consistency_stats(f->c);
    ck_assert_uint_eq(st->pushes, 4);
    ck_assert_uint_eq(st->staleness.n, 3);
    ck_assert_int_eq(st->staleness.max, 0);
    s_free(f);
}
END_TEST

/* Applies step 0 of 3 workers pushing in `order`, the unaligned ones from
 * one byte into a buffer; returns the fixture. */
static s_fix_t *s_sync_in_order(const int *order, int unaligned)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 16, 3);
    s_init_all(f);
    static float g[3][16];
    static unsigned char raw[3][16 * sizeof(float) + 1];
    s_fill_grads(g, 3);
    for (int k = 0; k < 3; k++) {
        int w = order[k];
        const void *data = g[w];
        if (unaligned) {
            memcpy(raw[w] + 1, g[w], sizeof g[w]);
            data = raw[w] + 1;
        }
        ck_assert_int_eq(s_push(f, w, 0, 0, 0, 16, data), 0);
    }
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    float want[16], state[16] = {0};
    s_initial(f, want);
    const float *grads[3] = {g[0], g[1], g[2]};
    const float ones[3] = {1, 1, 1};
    s_expect(f, want, state, grads, ones, 3, 1.0f / 3.0f, 1);
    s_assert_params(f, want);
    return f;
}

START_TEST(sync_sums_in_worker_rank_order_whatever_the_arrival_order)
{
    const int orders[3][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}};
    s_fix_t *first = s_sync_in_order(orders[0], 0);
    for (int o = 0; o < 3; o++) {
        for (int unaligned = 0; unaligned < 2; unaligned++) {
            s_fix_t *f = s_sync_in_order(orders[o], unaligned);
            ck_assert_int_eq(memcmp(ps_store_values(f->store, S_BASE),
                                    ps_store_values(first->store, S_BASE), 16 * sizeof(float)),
                             0);
            s_free(f);
        }
    }
    /* and the order matters to floats: another order gives other bits */
    float a = (1e8f + 1.37f) + -1e8f, b = (1e8f + -1e8f) + 1.37f;
    ck_assert(a != b);
    s_free(first);
}
END_TEST

START_TEST(sync_one_worker_uses_its_push_as_it_is)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 16, 1);
    s_init_all(f);
    float g[1][16];
    s_fill_grads(g, 1);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 16, g[0]), 0);
    float want[16], state[16] = {0};
    s_initial(f, want);
    const float *grads[1] = {g[0]};
    const float one = 1;
    s_expect(f, want, state, grads, &one, 1, 1.0f, 1);
    s_assert_params(f, want);
    s_free(f);
}
END_TEST

/* A shard of 2.5 chunks: the sum is made chunk by chunk just before each
 * chunk's update, from parts cut anywhere (worker 1: three parts across the
 * chunk borders; worker 2: one byte off alignment) and stale weights (a
 * second step with worker 2 two versions behind); the parameters and the
 * momentum are bitwise those of one sum of the whole shard then one update. */
START_TEST(sync_sums_chunk_by_chunk_bitwise_as_the_whole_shard)
{
    const uint64_t n = PS_STORE_CHUNK_KEYS * 5 / 2, cut1 = 1000;
    const uint64_t cut2 = PS_STORE_CHUNK_KEYS + 7;
    ps_job_t job = s_job(PS_MODE_SYNC);
    job.momentum = 0.9;
    job.staleness_lr = 1;
    s_fix_t *f = s_new(job, n, 3);
    s_init_all(f);
    float *g[3], *want = malloc(n * sizeof(float)), *state = calloc(n, sizeof(float));
    unsigned char *odd = malloc(n * sizeof(float) + 1);
    ck_assert(want && state && odd);
    s_initial(f, want);
    const float big[3] = {1e8f, 1.0f, -1e8f}; /* the sum's bits depend on its order */
    for (int w = 0; w < 3; w++) {
        g[w] = malloc(n * sizeof(float));
        ps_test_fill(g[w], n, -1, 1, (uint64_t)(40 + w));
        for (uint64_t i = 0; i < n; i++) {
            g[w][i] *= big[w];
        }
    }
    memcpy(odd + 1, g[2], n * sizeof(float));
    for (int64_t t = 0; t < 2; t++) {
        const int64_t v2 = t == 0 ? 0 : -1; /* step 1: worker 2 is two versions behind */
        ck_assert_int_eq(s_push(f, 2, t, v2, 0, n, odd + 1), 0);
        ck_assert_int_eq(s_push(f, 1, t, t, cut2, n, g[1] + cut2), 0);
        ck_assert_int_eq(s_push(f, 1, t, t, 0, cut1, g[1]), 0);
        ck_assert_int_eq(s_push(f, 1, t, t, cut1, cut2, g[1] + cut1), 0);
        ck_assert_int_eq(s_push(f, 0, t, t, 0, n, g[0]), 0);
        ck_assert_int_eq(ps_consistency_version(f->c), t + 1);
        const float *grads[3] = {g[0], g[1], g[2]};
        const float weights[3] = {1, 1, t == 0 ? 1.0f : 0.5f};
        s_expect(f, want, state, grads, weights, 3, 1.0f / 3.0f, t + 1);
        const float *got = ps_store_values(f->store, S_BASE); /* flat: nothing held */
        ck_assert_int_eq(memcmp(got, want, n * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(ps_store_state(f->store, 0), state, n * sizeof(float)), 0);
    }
    for (int w = 0; w < 3; w++) {
        free(g[w]);
    }
    free(want);
    free(state);
    free(odd);
    s_free(f);
}
END_TEST

/* The last reply event to asker, or NULL. */
static const s_event_t *s_last_reply(const s_fix_t *f, int asker)
{
    for (int i = f->nev - 1; i >= 0; i--) {
        if (f->ev[i].kind == S_REPLY && f->ev[i].asker == asker) {
            return &f->ev[i];
        }
    }
    return NULL;
}

/* --chunk-kib 4 (1024 keys), a shard of three chunks: a chunk is applied
 * once both workers pushed it, and a pull waiting for the step gets the
 * applied chunks in key order as they come, at the end of the server's
 * loop turn (the last chunk, applied first, waits behind the
 * first); a pull arriving mid-step gets the applied prefix
 * at once; the parameters are bitwise those of the whole step. */
START_TEST(sync_applies_each_chunk_once_every_worker_pushed_it)
{
    enum { N = 3000, CK = 1024 };
    ps_job_t job = s_job(PS_MODE_SYNC);
    job.momentum = 0.9;
    job.chunk_kib = 4;
    s_fix_t *f = s_new(job, N, 2);
    s_init_all(f);
    float *g[2], *want = malloc(N * sizeof(float)), *state = calloc(N, sizeof(float));
    for (int w = 0; w < 2; w++) {
        g[w] = malloc(N * sizeof(float));
        for (int i = 0; i < N; i++) {
            g[w][i] = (float)(w + 1) * 0.001f * (float)(i % 97) - 0.03f;
        }
    }
    ck_assert_int_eq(s_pull(f, 7, 1, 0, N), 0);
    for (int w = 0; w < 2; w++) { /* the last chunk first, as backward makes it */
        ck_assert_int_eq(s_push(f, w, 0, 0, 2 * CK, N, g[w] + 2 * CK), 0);
    }
    ck_assert_int_eq(s_count(f, S_REPLY), 0); /* the first keys are not there yet */
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, CK, g[1]), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 0); /* chunk 0 waits for worker 0 */
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, CK, g[0]), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 0); /* sent at the turn's end */
    ps_consistency_send_applied(f->c);
    const s_event_t *e = s_last_reply(f, 7);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->range.begin, S_BASE);
    ck_assert_uint_eq(e->range.end, S_BASE + CK);
    ck_assert_int_eq(e->version, 1);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(s_pull(f, 8, 1, 0, N), 0); /* mid-step: the applied prefix at once */
    e = s_last_reply(f, 8);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->range.end, S_BASE + CK);
    ck_assert_int_eq(s_push(f, 0, 0, 0, CK, 2 * CK, g[0] + CK), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, CK, 2 * CK, g[1] + CK), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    for (int asker = 7; asker <= 8; asker++) { /* the rest, in one part */
        e = s_last_reply(f, asker);
        ck_assert_uint_eq(e->range.begin, S_BASE + CK);
        ck_assert_uint_eq(e->range.end, S_BASE + N);
        ck_assert_int_eq(e->version, 1);
    }
    ck_assert_int_eq(s_count(f, S_REPLY), 4);
    ck_assert_int_eq(ps_consistency_pending_pulls(f->c), 0);
    s_initial(f, want);
    const float *grads[2] = {g[0], g[1]}, weights[2] = {1, 1};
    s_expect(f, want, state, grads, weights, 2, 0.5f, 1);
    s_assert_params(f, want);
    free(g[0]);
    free(g[1]);
    free(want);
    free(state);
    s_free(f);
}
END_TEST

/* A worker's pulls for one version are answered in the order they came:
 * worker 0 asks for chunk 0 and then chunk 1 of step 1 in two pulls; chunk
 * 1 applies first, and its pull waits until chunk 0's is answered; worker
 * 1's pull of chunk 1 does not wait for worker 0's, nor do worker 0's wait
 * for its pull of a version far ahead (one a killed worker left). */
START_TEST(a_workers_pulls_are_answered_in_the_order_they_came)
{
    enum { N = 2048, CK = 1024 };
    ps_job_t job = s_job(PS_MODE_SSP);
    job.staleness = 0;
    job.chunk_kib = 4;
    s_fix_t *f = s_new(job, N, 2);
    s_init_all(f);
    float *g = calloc(N, sizeof(float));
    ck_assert_int_eq(s_pull(f, 4, 9, 0, N), 0);       /* worker 0, for version 9 */
    ck_assert_int_eq(s_pull(f, 0, 1, 0, CK), 0);      /* worker 0 */
    ck_assert_int_eq(s_pull(f, 2, 1, CK, N), 0);      /* worker 0 again */
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(s_push(f, w, 0, 0, CK, N, g + CK), 0);
    }
    ps_consistency_send_applied(f->c);
    ck_assert_int_eq(s_count(f, S_REPLY), 0); /* chunk 1 applied; chunk 0's pull first */
    ck_assert_int_eq(s_pull(f, 1, 1, CK, N), 0); /* worker 1: at once */
    const s_event_t *e = s_last_reply(f, 1);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->range.begin, S_BASE + CK);
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(s_push(f, w, 0, 0, 0, CK, g), 0);
    }
    ck_assert_int_eq(s_count(f, S_REPLY), 3);
    ck_assert_int_eq(f->ev[f->nev - 2].asker, 0);
    ck_assert_uint_eq(f->ev[f->nev - 2].range.begin, S_BASE);
    ck_assert_int_eq(f->ev[f->nev - 1].asker, 2);
    ck_assert_uint_eq(f->ev[f->nev - 1].range.begin, S_BASE + CK);
    ck_assert_int_eq(ps_consistency_pending_pulls(f->c), 1); /* version 9's */
    free(g);
    s_free(f);
}
END_TEST

/* When a step applies, a server answers the workers' waiting pulls a worker
 * at a time from worker rank % N on, whatever order they came in: the
 * servers' replies start down different workers' links. */
START_TEST(waiting_pulls_are_answered_from_the_servers_rank_on)
{
    enum { N = 8, W = 3 };
    for (int rank = 0; rank < 4; rank++) {
        s_fix_t *f = s_new_server(s_job(PS_MODE_SYNC), N, W, rank, 0);
        s_init_all(f);
        float g[N] = {0};
        for (int w = W - 1; w >= 0; w--) {
            ck_assert_int_eq(s_pull(f, w, 1, 0, N), 0);
        }
        for (int w = 0; w < W; w++) {
            ck_assert_int_eq(s_push(f, w, 0, 0, 0, N, g), 0);
        }
        ck_assert_int_eq(s_count(f, S_REPLY), W);
        for (int k = 0, seen = 0; k < f->nev; k++) {
            if (f->ev[k].kind == S_REPLY) {
                ck_assert_int_eq(f->ev[k].asker, (rank + seen++) % W);
            }
        }
        ck_assert_int_eq(ps_consistency_pending_pulls(f->c), 0);
        s_free(f);
    }
}
END_TEST

START_TEST(sync_refuses_steps_outside_the_one_being_collected)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 4, 1);
    float g[4] = {1, 2, 3, 4};
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 4, g), PS_ESTATE); /* before init */
    ck_assert_str_eq(f->why, "push before the parameters were initialised");
    s_init_all(f);
    ck_assert_int_eq(s_push(f, 0, 1, 0, 0, 4, g), PS_ESTATE);
    ck_assert_str_eq(f->why, "push for step 1, but steps 0 to 0 are being collected");
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 4, g), 0);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 4, g), PS_ESTATE); /* step 0 is over */
    ck_assert_int_eq(s_push(f, 0, -1, 0, 0, 4, g), PS_ESTATE);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(s_count(f, S_ACK), 1);
    s_free(f); /* refused frames were given back too */
}
END_TEST

START_TEST(duplicate_keys_of_a_step_are_refused)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 8, 2);
    s_init_all(f);
    float g[8] = {0};
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 5, g), 0);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 3, 8, g), PS_ESTATE);
    ck_assert_str_eq(f->why, "W0 pushed keys of step 0 twice");
    ck_assert_int_eq(f->released[1], 1); /* refused: given back at once */
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 5, g), PS_ESTATE);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 5, g), 0); /* another worker's are its own */
    ck_assert_int_eq(s_push(f, 0, 0, 0, 5, 8, g), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 5, 8, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_uint_eq(ps_consistency_stats(f->c)->pushes, 4);
    s_free(f);
}
END_TEST

START_TEST(a_share_may_come_in_up_to_max_parts)
{
    const int parts = PS_CONSISTENCY_MAX_PARTS;
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), (uint64_t)parts + 1, 1);
    s_init_all(f);
    float g[PS_CONSISTENCY_MAX_PARTS + 1];
    for (int i = 0; i <= parts; i++) {
        g[i] = (float)i;
    }
    /* last part first, as a layer-wise push goes */
    for (int i = parts - 1; i >= 1; i--) {
        ck_assert_int_eq(s_push(f, 0, 0, 0, (uint64_t)i, (uint64_t)i + 1, &g[i]), 0);
    }
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 1, &g[0]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(s_push(f, 0, 0, 0, (uint64_t)parts, (uint64_t)parts + 1, &g[parts]),
                     PS_ENOMEM);
    ck_assert_str_eq(f->why, "W0 split step 0 into too many pushes");
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    s_free(f);

    /* the same keys in parts give the bits of one push */
    f = s_new(s_job(PS_MODE_SYNC), 64, 1);
    s_fix_t *whole = s_new(s_job(PS_MODE_SYNC), 64, 1);
    s_init_all(f);
    s_init_all(whole);
    float h[64];
    ps_test_fill(h, 64, -1, 1, 3);
    for (int i = 0; i < 64; i += 16) {
        ck_assert_int_eq(s_push(f, 0, 0, 0, (uint64_t)i, (uint64_t)i + 16, h + i), 0);
    }
    ck_assert_int_eq(s_push(whole, 0, 0, 0, 0, 64, h), 0);
    ck_assert_int_eq(memcmp(ps_store_values(f->store, S_BASE),
                            ps_store_values(whole->store, S_BASE), sizeof h),
                     0);
    s_free(f);
    s_free(whole);
}
END_TEST

START_TEST(ssp_collects_a_window_of_steps)
{
    ps_job_t j = s_job(PS_MODE_SSP);
    j.staleness = 2;
    s_fix_t *f = s_new(j, 4, 2);
    s_init_all(f);
    float g[4] = {1, 1, 1, 1};
    for (int t = 0; t < 3; t++) {
        ck_assert_int_eq(s_push(f, 0, t, 0, 0, 4, g), 0); /* W0 runs ahead on version 0 */
    }
    ck_assert_int_eq(s_push(f, 0, 3, 0, 0, 4, g), PS_ESTATE);
    ck_assert_str_eq(f->why, "push for step 3, but steps 0 to 2 are being collected");
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 4, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(s_push(f, 0, 3, 1, 0, 4, g), 0); /* the window moved */
    ck_assert_int_eq(s_push(f, 1, 2, 1, 0, 4, g), 0); /* step 2 waits for step 1 */
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(s_push(f, 1, 1, 1, 0, 4, g), 0); /* steps 1 and 2 apply */
    ck_assert_int_eq(ps_consistency_version(f->c), 3);
    /* staleness: step 1 applied W0's gradient of version 0 (1) and W1's of 1
     * (0); step 2 W0's of 0 (2) and W1's of 1 (1) */
    const ps_hist_t *h = &ps_consistency_stats(f->c)->staleness;
    ck_assert_uint_eq(h->n, 6);
    ck_assert_int_eq(h->max, 2);
    ck_assert_uint_eq(h->counts[0], 3);
    ck_assert_uint_eq(h->counts[1], 2);
    ck_assert_uint_eq(h->counts[2], 1);
    s_free(f);
}
END_TEST

START_TEST(ssp_gates_pulls_at_the_bound)
{
    ps_job_t j = s_job(PS_MODE_SSP);
    j.staleness = 1;
    s_fix_t *f = s_new(j, 4, 2);
    s_init_all(f);
    float g[4] = {1, 1, 1, 1};
    /* W0 at step 1 may read version >= 0; at step 2 it needs version >= 1 */
    ck_assert_int_eq(s_pull(f, 10, 0, 0, 4), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 1);
    ck_assert_int_eq(s_pull(f, 11, 1, 0, 4), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 1); /* waits */
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 4, g), 0);
    ck_assert_int_eq(s_push(f, 0, 1, 0, 0, 4, g), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 1);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 4, g), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 2);
    const s_event_t *e = &f->ev[f->nev - 1];
    ck_assert_int_eq(e->kind, S_REPLY);
    ck_assert_int_eq(e->asker, 11);
    ck_assert_int_eq(e->version, 1);
    ck_assert_uint_eq(e->range.begin, S_BASE);
    ck_assert_uint_eq(e->range.end, S_BASE + 4);
    ck_assert_uint_eq(ps_consistency_stats(f->c)->pulls, 2);
    s_free(f);
}
END_TEST

START_TEST(backup_applies_with_k_pushes_and_drops_late_ones)
{
    ps_job_t j = s_job(PS_MODE_BACKUP);
    j.backup_k = 2;
    j.backup_n = 3;
    s_fix_t *f = s_new(j, 16, 3);
    s_init_all(f);
    float g[3][16];
    s_fill_grads(g, 3);
    ck_assert_int_eq(s_push(f, 2, 0, 0, 0, 16, g[2]), 0);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 8, g[0]), 0); /* W0: half of its share */
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 16, g[1]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    /* the mean of W1 and W2, in rank order; W0's half dropped */
    float want[16], state[16] = {0};
    s_initial(f, want);
    const float *grads[2] = {g[1], g[2]};
    const float ones[2] = {1, 1};
    s_expect(f, want, state, grads, ones, 2, 0.5f, 1);
    s_assert_params(f, want);
    ck_assert_uint_eq(ps_consistency_stats(f->c)->dropped, 1);
    ck_assert_int_eq(f->released[1], 1);
    /* W0's other half is late for an applied step: acked, dropped, counted */
    int acks = s_count(f, S_ACK);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 8, 16, g[0] + 8), 0);
    ck_assert_int_eq(s_count(f, S_ACK), acks + 1);
    ck_assert_int_eq(f->ev[f->nev - 1].version, 1);
    ck_assert_uint_eq(ps_consistency_stats(f->c)->dropped, 2);
    ck_assert_uint_eq(ps_consistency_stats(f->c)->pushes, 3);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    /* a push too far ahead is still refused */
    ck_assert_int_eq(s_push(f, 0, 2, 0, 0, 16, g[0]), PS_ESTATE);
    s_assert_params(f, want);
    s_free(f);
}
END_TEST

START_TEST(async_applies_on_arrival_and_records_staleness)
{
    for (int pass = 0; pass < 3; pass++) {
        const int weighted = pass > 0;
        ps_job_t j = s_job(PS_MODE_ASYNC);
        j.staleness_lr = weighted;
        j.momentum = pass == 2 ? 0.9 : 0;
        j.schedule.warmup_steps = 4; /* so the lr moves with version / workers */
        s_fix_t *f = s_new(j, 16, 2);
        s_init_all(f);
        float g[3][16];
        ps_test_fill(g[0], 48, -1, 1, 5);
        unsigned char raw[16 * sizeof(float) + 1];
        memcpy(raw + 1, g[2], sizeof g[2]);
        /* computed on version 0, applied at 0, 1 and 2: tau 0, 1, 2 */
        ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 16, g[0]), 0);
        ck_assert_int_eq(f->ev[f->nev - 1].version, 1); /* acked after its update */
        ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 16, g[1]), 0);
        ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 16, raw + 1), 0);
        ck_assert_int_eq(ps_consistency_version(f->c), 3);
        const ps_hist_t *h = &ps_consistency_stats(f->c)->staleness;
        ck_assert_uint_eq(h->n, 3);
        ck_assert_int_eq(h->max, 2);
        ck_assert(h->sum == 3.0);
        /* with momentum 0.9 over 2 workers the store runs 0.4, the rate x6 */
        ps_job_t run = j;
        run.momentum = pass == 2 ? 0.4 : 0;
        const float rate = pass == 2 ? 6.0f : 1.0f;
        ps_optim_t o;
        ck_assert_int_eq(ps_optim_from_job(&run, &o), 0);
        float want[16], state[16] = {0};
        s_initial(f, want);
        for (int k = 0; k < 3; k++) {
            float lr = ps_optim_lr(&j, k / 2, 100, 1000);
            /* weighted: 1/tau for tau > 1, and every push of the 2 workers (2-1)/2 */
            float weight = weighted && k == 2 ? 0.5f : 1.0f;
            weight = weighted ? weight * rate * 0.5f : weight;
            ps_optim_step(&o, lr, k + 1, want, state, 16, g[k], weight, 16);
        }
        s_assert_params(f, want);
        s_free(f);
    }
}
END_TEST

START_TEST(pulls_wait_for_initialisation_and_their_version)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 8, 1);
    ck_assert_int_eq(s_pull(f, 7, 0, 0, 8), 0);
    ck_assert_int_eq(s_pull(f, 8, 2, 2, 6), 0);
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int asker = 0;
    ps_request_t r = {0, 0, 0, s_keys(0, 4), v, NULL, &asker};
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 0); /* half initialised */
    r.range = s_keys(4, 8);
    r.data = v + 4;
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), 0);
    ck_assert_int_eq(s_count(f, S_ACK), 2);
    ck_assert_int_eq(s_count(f, S_REPLY), 1);
    ck_assert_int_eq(f->ev[f->nev - 1].asker, 7);
    ck_assert(f->ev[f->nev - 1].first == 1.0f);
    float g[8] = {0};
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 8, g), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 1);
    ck_assert_int_eq(s_push(f, 0, 1, 1, 0, 8, g), 0);
    ck_assert_int_eq(s_count(f, S_REPLY), 2);
    const s_event_t *e = &f->ev[f->nev - 1];
    ck_assert_int_eq(e->asker, 8);
    ck_assert_int_eq(e->version, 2);
    ck_assert_uint_eq(e->range.begin, S_BASE + 2);
    ck_assert_uint_eq(e->range.end, S_BASE + 6);
    ck_assert(e->first == 3.0f);
    /* the table of waiting pulls is bounded: a round's pulls per worker */
    const int cap = PS_CONSISTENCY_MAX_PARTS / 2 + 8;
    for (int i = 0; i < cap; i++) {
        ck_assert_int_eq(s_pull(f, 100 + i, 10, 0, 8), 0);
    }
    ck_assert_int_eq(s_pull(f, 100 + cap, 10, 0, 8), PS_ENOMEM);
    char want[64];
    snprintf(want, sizeof want, "too many pulls waiting (%d)", cap);
    ck_assert_str_eq(f->why, want);
    s_free(f);
}
END_TEST

START_TEST(init_is_worker_0s_and_once_per_key)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 8, 2);
    float v[8] = {0};
    int asker = 0;
    ps_request_t r = {1, 0, 0, s_keys(0, 8), v, NULL, &asker};
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), PS_ESTATE);
    ck_assert_str_eq(f->why, "only worker 0 initialises parameters");
    r.worker = 0;
    r.range = s_keys(0, 5);
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), 0);
    r.range = s_keys(4, 8);
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), PS_ESTATE);
    ck_assert_str_eq(f->why, "keys [104, 108) overlap keys already initialised");
    r.range = s_keys(5, 8);
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), 0);
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), PS_ESTATE);
    ck_assert_str_eq(f->why, "parameters are already initialised");
    ck_assert_int_eq(s_count(f, S_ACK), 2);
    s_free(f);
}
END_TEST

START_TEST(waiting_pulls_are_answered_whole_once_the_update_is_done)
{
    const uint64_t n = PS_CONSISTENCY_REPLY_KEYS + 10;
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), n, 1);
    s_init_all(f);
    ck_assert_int_eq(s_pull(f, 5, 0, 0, n), 0); /* answered now, in one reply of two chunks */
    ck_assert_int_eq(s_count(f, S_REPLY), 1);
    ck_assert_uint_eq(f->ev[0].range.begin, S_BASE);
    ck_assert_uint_eq(f->ev[0].range.end, S_BASE + n);
    f->nev = 0;
    ck_assert_int_eq(s_pull(f, 6, 1, 5, n), 0);
    float *g = calloc(n, sizeof(float));
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, n, g), 0);
    /* ack, then the whole range after the update, at the new version */
    ck_assert_int_eq(f->nev, 2);
    ck_assert_int_eq(f->ev[0].kind, S_ACK);
    ck_assert_int_eq(f->ev[0].version, 0);
    ck_assert_uint_eq(f->ev[1].range.begin, S_BASE + 5);
    ck_assert_uint_eq(f->ev[1].range.end, S_BASE + n);
    ck_assert_int_eq(f->ev[1].version, 1);
    ck_assert_uint_eq(ps_consistency_stats(f->c)->pulls, 2);
    /* answered and forgotten: the next step sends nothing more */
    ck_assert_int_eq(s_push(f, 0, 1, 1, 0, n, g), 0);
    ck_assert_int_eq(f->nev, 3);
    free(g);
    s_free(f);
}
END_TEST

START_TEST(sync_completes_with_the_live_workers)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 16, 3);
    s_init_all(f);
    float g[3][16];
    s_fill_grads(g, 3);
    const unsigned char none[3] = {0, 0, 0}, w01[3] = {1, 1, 0}, all[3] = {1, 1, 1};
    ck_assert_int_eq(ps_consistency_set_workers(f->c, none), PS_EINVAL);
    ck_assert_int_eq(s_push(f, 2, 0, 0, 0, 8, g[2]), 0); /* W2: half, then it goes */
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 16, g[0]), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 16, g[1]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w01), 0); /* completes step 0 */
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    float want[16], state[16] = {0};
    s_initial(f, want);
    const float *grads[2] = {g[0], g[1]};
    const float ones[2] = {1, 1};
    s_expect(f, want, state, grads, ones, 2, 0.5f, 1);
    s_assert_params(f, want);
    ck_assert_uint_eq(ps_consistency_stats(f->c)->dropped, 1);
    ck_assert_int_eq(f->released[0], 1);
    ck_assert_int_eq(s_push(f, 2, 1, 1, 0, 16, g[2]), PS_ENOENT);
    ck_assert_str_eq(f->why, "W2 is not a live worker");
    /* step 1 with the two live workers */
    ck_assert_int_eq(s_push(f, 1, 1, 1, 0, 16, g[1]), 0);
    ck_assert_int_eq(s_push(f, 0, 1, 1, 0, 16, g[0]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 2);
    /* W2 back: step 2 waits for it again */
    ck_assert_int_eq(ps_consistency_set_workers(f->c, all), 0);
    ck_assert_int_eq(s_push(f, 0, 2, 2, 0, 16, g[0]), 0);
    ck_assert_int_eq(s_push(f, 1, 2, 2, 0, 16, g[1]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 2);
    ck_assert_int_eq(s_push(f, 2, 2, 2, 0, 16, g[2]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 3);
    /* W2 pushes all of step 3 and goes: its share is not in the mean */
    ck_assert_int_eq(s_push(f, 2, 3, 3, 0, 16, g[2]), 0);
    ck_assert_int_eq(s_push(f, 0, 3, 3, 0, 16, g[0]), 0);
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w01), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 3);
    memcpy(want, ps_store_values(f->store, S_BASE), sizeof want);
    ck_assert_int_eq(s_push(f, 1, 3, 3, 0, 16, g[1]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 4);
    memset(state, 0, sizeof state);
    s_expect(f, want, state, grads, ones, 2, 0.5f, 4);
    s_assert_params(f, want);
    ck_assert_uint_eq(ps_consistency_stats(f->c)->dropped, 2);
    s_free(f);
}
END_TEST

/* A worker joins at an agreed step: the hold stops the version one above
 * the answer, steps before J complete without the joiner, J waits for it. */
START_TEST(a_worker_joins_at_the_agreed_step)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 16, 2);
    s_init_all(f);
    float g[2][16];
    s_fill_grads(g, 2);
    const unsigned char w0[2] = {1, 0}, all[2] = {1, 1};
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w0), 0);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 16, g[0]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(ps_consistency_stats(f->c)->steps_fewer, 1);
    /* held at 1: step 1 may still apply, step 2 may not */
    ck_assert_int_eq(ps_consistency_hold(f->c), 1);
    ck_assert_int_eq(s_push(f, 0, 1, 1, 0, 16, g[0]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 2);
    ck_assert_int_eq(s_push(f, 0, 2, 2, 0, 16, g[0]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 2);
    /* a step already passed is refused, and the hold ends all the same */
    ck_assert_int_eq(ps_consistency_join(f->c, 1, 1), PS_ESTATE);
    ck_assert_int_eq(ps_consistency_version(f->c), 3);
    /* again, agreed J = 4: step 3 without W1 */
    ck_assert_int_eq(ps_consistency_hold(f->c), 3);
    ck_assert_int_eq(ps_consistency_join(f->c, 1, 4), 0);
    ck_assert_int_eq(s_push(f, 1, 3, 3, 0, 16, g[1]), PS_ENOENT);
    /* a membership change meanwhile does not make it live early */
    ck_assert_int_eq(ps_consistency_set_workers(f->c, all), 0);
    ck_assert_int_eq(s_push(f, 0, 3, 3, 0, 16, g[0]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 4);
    ck_assert_int_eq(ps_consistency_stats(f->c)->steps_fewer, 4);
    ck_assert_int_eq(s_push(f, 0, 4, 4, 0, 16, g[0]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 4); /* waits for W1 */
    ck_assert_int_eq(s_push(f, 1, 4, 4, 0, 16, g[1]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 5);
    ck_assert_int_eq(ps_consistency_stats(f->c)->steps_fewer, 4);
    ck_assert_int_eq(ps_consistency_join(f->c, 1, 6), PS_ESTATE); /* live already */
    s_free(f);
}
END_TEST

/* The last live worker goes while a joiner waits for its step: the steps
 * before it are skipped, not waited for forever. */
START_TEST(only_a_joiner_left_skips_to_its_step)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 16, 2);
    s_init_all(f);
    float g[2][16];
    s_fill_grads(g, 2);
    const unsigned char w0[2] = {1, 0}, w1[2] = {0, 1};
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w0), 0);
    ck_assert_int_eq(ps_consistency_hold(f->c), 0);
    ck_assert_int_eq(ps_consistency_join(f->c, 1, 3), 0);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 16, g[0]), 0);
    ck_assert_int_eq(s_push(f, 0, 1, 1, 0, 8, g[0]), 0); /* half of step 1: held */
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    float want[16];
    memcpy(want, ps_store_values(f->store, S_BASE), sizeof want);
    const int replies = s_count(f, S_REPLY);
    ck_assert_int_eq(s_pull(f, 7, 3, 0, 16), 0); /* the joiner's first pull waits */
    ck_assert_int_eq(s_count(f, S_REPLY), replies);
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w1), 0); /* W0 goes */
    ck_assert_int_eq(ps_consistency_version(f->c), 3);
    s_assert_params(f, want); /* steps 1 and 2: no update */
    ck_assert_int_gt(s_count(f, S_REPLY), replies);
    ck_assert_int_eq(s_push(f, 1, 3, 3, 0, 16, g[1]), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 4);
    s_free(f); /* checks every frame came back once */
}
END_TEST

START_TEST(backup_needs_k_or_every_live_worker_when_fewer)
{
    ps_job_t j = s_job(PS_MODE_BACKUP);
    j.backup_k = 2;
    j.backup_n = 3;
    s_fix_t *f = s_new(j, 4, 3);
    s_init_all(f);
    float g[4] = {1, 2, 3, 4};
    const unsigned char w1[3] = {0, 1, 0};
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w1), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 4, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(s_push(f, 0, 1, 0, 0, 4, g), PS_ENOENT);
    s_free(f);
}
END_TEST

START_TEST(async_refuses_workers_that_are_not_live)
{
    s_fix_t *f = s_new(s_job(PS_MODE_ASYNC), 4, 2);
    s_init_all(f);
    float g[4] = {1, 2, 3, 4};
    const unsigned char w0[2] = {1, 0};
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w0), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 4, g), PS_ENOENT);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 4, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    s_free(f);
}
END_TEST

START_TEST(destroy_gives_back_the_held_frames)
{
    ps_job_t j = s_job(PS_MODE_SSP);
    j.staleness = 3;
    s_fix_t *f = s_new(j, 4, 2);
    s_init_all(f);
    float g[4] = {0};
    for (int t = 0; t < 4; t++) {
        ck_assert_int_eq(s_push(f, 0, t, 0, 0, 2, g), 0);
        ck_assert_int_eq(s_push(f, 0, t, 0, 2, 4, g), 0);
    }
    ck_assert_int_eq(ps_consistency_max_held(f->c), 4 * 2 * PS_CONSISTENCY_MAX_PARTS);
    for (int i = 0; i < f->next_frame; i++) {
        ck_assert_int_eq(f->released[i], 0);
    }
    s_free(f); /* checks each came back once */
}
END_TEST

/* A failover during a join: the rollback ends the hold, and a worker agreed
 * to join at a later step rolls back with the others, so it is live from the
 * checkpoint on (its pushes there count). */
START_TEST(rollback_ends_a_hold_and_makes_a_pending_joiner_live)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 4, 2);
    s_init_all(f);
    float g[4] = {1, 2, 3, 4};
    const unsigned char w0[2] = {1, 0};
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w0), 0);
    for (int t = 0; t < 3; t++) {
        ck_assert_int_eq(s_push(f, 0, t, t, 0, 4, g), 0);
    }
    ck_assert_int_eq(ps_consistency_hold(f->c), 3);
    ck_assert_int_eq(ps_consistency_join(f->c, 1, 5), 0); /* W1 live from 5 */
    ck_assert_int_eq(ps_consistency_hold(f->c), 3);       /* another agreement, held */
    ck_assert_int_eq(s_push(f, 0, 3, 3, 0, 4, g), 0);
    ck_assert_int_eq(s_push(f, 0, 4, 4, 0, 4, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 4); /* held at 4 */
    ck_assert_int_eq(ps_consistency_rollback(f->c, 2), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 2);
    ck_assert_int_eq(s_push(f, 0, 2, 2, 0, 4, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 2); /* waits for W1, live now */
    ck_assert_int_eq(s_push(f, 1, 2, 2, 0, 4, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 3);
    for (int t = 3; t < 5; t++) { /* no hold any more: past the old one at 4 */
        ck_assert_int_eq(s_push(f, 0, t, t, 0, 4, g), 0);
        ck_assert_int_eq(s_push(f, 1, t, t, 0, 4, g), 0);
    }
    ck_assert_int_eq(ps_consistency_version(f->c), 5);
    s_free(f);
}
END_TEST

START_TEST(rollback_drops_held_pushes_and_waiting_pulls_and_sets_the_version)
{
    s_fix_t *f = s_new(s_job(PS_MODE_SYNC), 4, 2);
    float g[4] = {1, 2, 3, 4};
    ck_assert_int_eq(ps_consistency_rollback(f->c, 3), PS_ESTATE); /* not initialised */
    s_init_all(f);
    ck_assert_int_eq(s_push(f, 0, 0, 0, 0, 4, g), 0);
    ck_assert_int_eq(s_push(f, 1, 0, 0, 0, 4, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(s_push(f, 0, 1, 1, 0, 4, g), 0); /* held for step 1 */
    ck_assert_int_eq(s_pull(f, 7, 2, 0, 4), 0);       /* waits for version 2 */
    const unsigned char w0[2] = {1, 0};
    ck_assert_int_eq(ps_consistency_set_workers(f->c, w0), 0); /* completes step 1 */
    ck_assert_int_eq(s_push(f, 0, 2, 2, 0, 2, g), 0);         /* half of step 2 held */
    ck_assert_int_eq(ps_consistency_version(f->c), 2);
    /* The store is reloaded (here: initialised again), then the rollback. */
    ck_assert_int_eq(ps_store_reset(f->store), 0);
    ck_assert(!ps_store_initialized(f->store));
    float v[4] = {5, 6, 7, 8};
    ck_assert_int_eq(ps_store_init(f->store, s_keys(0, 4), v), 1);
    ck_assert_int_eq(ps_consistency_rollback(f->c, 1), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(f->released[3], 1); /* the held half came back */
    f->nev = 0;
    ck_assert_int_eq(s_pull(f, 8, 2, 0, 4), 0); /* waits: nothing of the old ones answered */
    ck_assert_int_eq(s_count(f, S_REPLY), 0);
    /* The live workers stay: W0 alone applies step 1 again, the new pull gets it. */
    ck_assert_int_eq(s_push(f, 1, 1, 1, 0, 4, g), PS_ENOENT);
    ck_assert_int_eq(s_push(f, 0, 1, 1, 0, 4, g), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 2);
    ck_assert_int_eq(s_count(f, S_REPLY), 1);
    ck_assert_int_eq(f->ev[f->nev - 1].asker, 8);
    s_free(f);
}
END_TEST

/* A replica filled from its primary's cut in the middle of a step, then
 * fed the primary's later updates, holds bitwise the primary's values and
 * optimizer state at the same version and chunks; after a takeover
 * (ps_consistency_forget) the workers' step sent again completes it
 * bitwise as the primary did, and a push of a step applied before is acked
 * and dropped. Updates out of order are refused. */
START_TEST(a_replica_replays_its_primarys_updates_bitwise)
{
    enum { N = 3000, CK = 1024 };
    ps_job_t job = s_job(PS_MODE_SYNC);
    job.momentum = 0.9;
    job.chunk_kib = 4;
    s_fix_t *p = s_new_server(job, N, 2, 0, 1), *r = s_new_server(job, N, 2, 0, 1);
    s_init_all(p);
    float *g[2];
    for (int w = 0; w < 2; w++) {
        g[w] = malloc(N * sizeof(float));
        ps_test_fill(g[w], N, -1, 1, (uint64_t)(60 + w));
    }
    for (int w = 0; w < 2; w++) { /* step 0, then chunk 0 of step 1 */
        ck_assert_int_eq(s_push(p, w, 0, 0, 0, N, g[w]), 0);
    }
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(s_push(p, w, 1, 1, 0, CK, g[w]), 0);
    }
    ck_assert_int_eq(s_nupdates, 4); /* three chunks, then one */
    /* The cut: step 1 with chunk 0 applied. */
    int64_t version;
    unsigned char done[8];
    ck_assert_uint_eq(ps_consistency_cut(p->c, &version, done, sizeof done), 3);
    ck_assert_int_eq(version, 1);
    ck_assert(done[0] && !done[1] && !done[2]);
    ck_assert_int_eq(ps_store_init(r->store, s_keys(0, N), ps_store_values(p->store, S_BASE)), 1);
    memcpy(ps_store_state(r->store, 0), ps_store_state(p->store, 0), N * sizeof(float));
    ck_assert_int_eq(ps_consistency_restore(r->c, version, done, 2), PS_ESTATE);
    ck_assert_int_eq(ps_consistency_restore(r->c, version, done, 3), 0);
    /* The primary goes on: chunk 1 of step 1; the replica replays it. */
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(s_push(p, w, 1, 1, CK, 2 * CK, g[w] + CK), 0);
    }
    const s_update_t *u = &s_updates[4];
    ck_assert_int_eq(ps_consistency_replay(r->c, s_updates[0].range, s_updates[0].grad,
                                           s_updates[0].lr, s_updates[0].scale,
                                           s_updates[0].version),
                     PS_ESTATE); /* an old one */
    ck_assert_int_eq(ps_consistency_replay(r->c, u->range, u->grad, u->lr, u->scale, u->version),
                     0);
    ck_assert_int_eq(ps_consistency_replay(r->c, u->range, u->grad, u->lr, u->scale, u->version),
                     PS_ESTATE); /* the same chunk twice */
    /* The primary is lost before chunk 2: the replica takes over, the
     * workers send step 1 again; both finish the step the same way. */
    ck_assert_int_eq(ps_consistency_forget(r->c), 0);
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(s_push(r, w, 1, 1, 0, N, g[w]), 0);
        ck_assert_int_eq(s_push(p, w, 1, 1, 2 * CK, N, g[w] + 2 * CK), 0);
    }
    ck_assert_int_eq(ps_consistency_version(r->c), 2);
    ck_assert_int_eq(ps_consistency_version(p->c), 2);
    ck_assert_int_eq(memcmp(ps_store_values(r->store, S_BASE), ps_store_values(p->store, S_BASE),
                            N * sizeof(float)),
                     0);
    ck_assert_int_eq(memcmp(ps_store_state(r->store, 0), ps_store_state(p->store, 0),
                            N * sizeof(float)),
                     0);
    /* A worker that did not hear the step end sends it once more. */
    r->nev = 0;
    ck_assert_int_eq(s_push(r, 0, 1, 1, 0, N, g[0]), 0);
    ck_assert_int_eq(s_count(r, S_ACK), 1);
    ck_assert_uint_eq(ps_consistency_stats(r->c)->resent, 1);
    ck_assert_int_eq(ps_consistency_version(r->c), 2);
    free(g[0]);
    free(g[1]);
    s_free(p);
    s_free(r);
    s_updates_free();
}
END_TEST

/* Chunked rounds: the last live worker goes in the middle of a step whose
 * first chunk its push applied, and a joiner waits for a later step: the
 * step ends where it stood and the next is the joiner's, whole (every chunk
 * of it updated, none taken as done already); a replica that applied the
 * same chunk skips with its primary, and replays the joiner's step. */
START_TEST(a_step_cut_short_by_skipped_steps_leaves_no_chunk_done)
{
    enum { N = 3000, CK = 1024 };
    ps_job_t job = s_job(PS_MODE_SYNC);
    job.chunk_kib = 4;
    s_fix_t *p = s_new_server(job, N, 2, 0, 1), *r = s_new_server(job, N, 2, 0, 1);
    s_init_all(p);
    s_init_all(r);
    float *g = malloc(N * sizeof(float));
    ps_test_fill(g, N, -1, 1, 70);
    const unsigned char w0[2] = {1, 0}, w1[2] = {0, 1};
    ck_assert_int_eq(ps_consistency_set_workers(p->c, w0), 0); /* W1 lost */
    ck_assert_int_eq(ps_consistency_join(p->c, 1, 2), 0);      /* W1 joins at 2 */
    ck_assert_int_eq(s_push(p, 0, 0, 0, 0, CK, g), 0);         /* chunk 0 of step 0 */
    ck_assert_int_eq(s_nupdates, 1);
    ck_assert_int_eq(ps_consistency_replay(r->c, s_updates[0].range, s_updates[0].grad,
                                           s_updates[0].lr, s_updates[0].scale,
                                           s_updates[0].version),
                     0);
    ck_assert_int_eq(ps_consistency_set_workers(p->c, w1), 0); /* W0 lost: skip to 2 */
    ck_assert_int_eq(ps_consistency_version(p->c), 2);
    unsigned char live[2];
    int64_t join_at[2];
    ck_assert_int_eq(ps_consistency_members(p->c, live, join_at), 2);
    ck_assert_int_eq(ps_consistency_set_members(r->c, live, join_at, 2, 2), 0);
    ck_assert_int_eq(ps_consistency_version(r->c), 2);
    const int before = s_nupdates; /* the replica's replay counts too */
    ck_assert_int_eq(s_push(p, 1, 2, 2, 0, N, g), 0); /* the joiner's step, whole */
    ck_assert_int_eq(ps_consistency_version(p->c), 3);
    ck_assert_int_eq(s_nupdates, before + 3); /* its three chunks */
    for (int i = before; i < before + 3; i++) {
        const s_update_t *u = &s_updates[i];
        ck_assert_int_eq(
            ps_consistency_replay(r->c, u->range, u->grad, u->lr, u->scale, u->version), 0);
    }
    ck_assert_int_eq(ps_consistency_version(r->c), 3);
    ck_assert_int_eq(memcmp(ps_store_values(r->store, S_BASE), ps_store_values(p->store, S_BASE),
                            N * sizeof(float)),
                     0);
    free(g);
    s_free(p);
    s_free(r);
    s_updates_free();
}
END_TEST

/* A replica takes its primary's live workers and joiners, and skips with it
 * the steps no worker was live for: after a takeover it waits for the same
 * pushes as the primary would have. */
START_TEST(a_replica_takes_its_primarys_members_and_skipped_steps)
{
    s_fix_t *p = s_new_server(s_job(PS_MODE_SYNC), 4, 2, 0, 1);
    s_fix_t *r = s_new_server(s_job(PS_MODE_SYNC), 4, 2, 0, 1);
    s_init_all(p);
    s_init_all(r);
    const unsigned char none[2] = {0, 0};
    ck_assert_int_eq(ps_consistency_join(p->c, -1, 0), 0);
    ck_assert_int_eq(ps_consistency_hold(p->c), 0);
    const unsigned char w0[2] = {1, 0};
    ck_assert_int_eq(ps_consistency_set_workers(p->c, w0), 0); /* W1 lost */
    ck_assert_int_eq(ps_consistency_join(p->c, 1, 3), 0);      /* W1 joins at 3 */
    ck_assert_int_eq(ps_consistency_set_workers(p->c, none), PS_EINVAL);
    const unsigned char w1[2] = {0, 1};
    ck_assert_int_eq(ps_consistency_set_workers(p->c, w1), 0); /* W0 lost: skip to 3 */
    ck_assert_int_eq(ps_consistency_version(p->c), 3);
    unsigned char live[2];
    int64_t join_at[2];
    ck_assert_int_eq(ps_consistency_members(p->c, live, join_at), 2);
    ck_assert_int_eq(ps_consistency_set_members(r->c, none, (int64_t[]){-1, -1}, 2, 3),
                     PS_EINVAL);
    ck_assert_int_eq(ps_consistency_set_members(r->c, live, join_at, 2, 3), 0);
    ck_assert_int_eq(ps_consistency_version(r->c), 3);
    float g[4] = {1, 2, 3, 4};
    ck_assert_int_eq(s_push(r, 0, 3, 3, 0, 4, g), PS_ENOENT); /* W0 is not live */
    ck_assert_int_eq(s_push(r, 1, 3, 3, 0, 4, g), 0);         /* W1 alone makes step 3 */
    ck_assert_int_eq(ps_consistency_version(r->c), 4);
    s_free(p);
    s_free(r);
    s_updates_free();
}
END_TEST

int main(void)
{
    ps_log_set_level("err");
    Suite *s = suite_create("consistency");
    TCase *tc = tcase_create("consistency");
    tcase_add_test(tc, sync_step_completes_only_when_every_worker_pushed_every_key);
    tcase_add_test(tc, a_replica_replays_its_primarys_updates_bitwise);
    tcase_add_test(tc, a_replica_takes_its_primarys_members_and_skipped_steps);
    tcase_add_test(tc, sync_applies_each_chunk_once_every_worker_pushed_it);
    tcase_add_test(tc, a_workers_pulls_are_answered_in_the_order_they_came);
    tcase_add_test(tc, waiting_pulls_are_answered_from_the_servers_rank_on);
    tcase_add_test(tc, a_worker_joins_at_the_agreed_step);
    tcase_add_test(tc, only_a_joiner_left_skips_to_its_step);
    tcase_add_test(tc, a_step_cut_short_by_skipped_steps_leaves_no_chunk_done);
    tcase_add_test(tc, nonfinite_pushes_are_refused_and_never_count);
    tcase_add_test(tc, sync_sums_in_worker_rank_order_whatever_the_arrival_order);
    tcase_add_test(tc, sync_one_worker_uses_its_push_as_it_is);
    tcase_add_test(tc, sync_sums_chunk_by_chunk_bitwise_as_the_whole_shard);
    tcase_add_test(tc, sync_refuses_steps_outside_the_one_being_collected);
    tcase_add_test(tc, duplicate_keys_of_a_step_are_refused);
    tcase_add_test(tc, a_share_may_come_in_up_to_max_parts);
    tcase_add_test(tc, ssp_collects_a_window_of_steps);
    tcase_add_test(tc, ssp_gates_pulls_at_the_bound);
    tcase_add_test(tc, backup_applies_with_k_pushes_and_drops_late_ones);
    tcase_add_test(tc, async_applies_on_arrival_and_records_staleness);
    tcase_add_test(tc, pulls_wait_for_initialisation_and_their_version);
    tcase_add_test(tc, init_is_worker_0s_and_once_per_key);
    tcase_add_test(tc, waiting_pulls_are_answered_whole_once_the_update_is_done);
    tcase_add_test(tc, sync_completes_with_the_live_workers);
    tcase_add_test(tc, backup_needs_k_or_every_live_worker_when_fewer);
    tcase_add_test(tc, async_refuses_workers_that_are_not_live);
    tcase_add_test(tc, destroy_gives_back_the_held_frames);
    tcase_add_test(tc, rollback_drops_held_pushes_and_waiting_pulls_and_sets_the_version);
    tcase_add_test(tc, rollback_ends_a_hold_and_makes_a_pending_joiner_live);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
