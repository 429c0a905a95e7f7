/*
 * tests/unit/test_ring.c - worker/ring: the allreduce schedule and the ring
 * itself over real TCP sockets on 127.0.0.1.
 *
 * The schedule (chunks, who sends and receives which chunk at which ring
 * step, sub-chunks) is checked as arithmetic, then run in memory for 1 to 5
 * members on sizes that do not divide evenly (fewer floats than members
 * included). The socket tests start M members as threads, each with its own
 * ZeroMQ context (created after Check has forked), and check: the known sum
 * of integer-valued vectors exactly, random vectors against a float64
 * reference with every member bitwise identical, several steps in a row, a
 * silent neighbour (the check function or the timeout ends the wait), a
 * stranger's messages dropped, and a neighbour that breaks the sequence.
 * The allgather of variable-sized blocks likewise: 1 to 5 members, empty
 * blocks included, between allreduces on the same ring, its bytes, a block
 * over the room refused, and each way a neighbour can break its sequence.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "tests/unit/testutil.h"
#include "testutil.h"
#include "worker/ring.h"

enum { S_MAX_M = 5 };

/* ---- the schedule ------------------------------------------------------- */

START_TEST(chunks_tile_the_vector_like_the_shard_map)
{
    const uint64_t ns[] = {0, 1, 2, 3, 4, 5, 7, 10, 1001, 235146};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        for (int m = 1; m <= 7; m++) {
            ps_range_t want[7];
            ck_assert_int_eq(ps_range_split(ns[i], m, want), 0);
            uint64_t next = 0;
            for (int c = 0; c < m; c++) {
                ps_range_t r = ps_ring_chunk(ns[i], m, c);
                ck_assert_uint_eq(r.begin, next);
                ck_assert_uint_eq(r.begin, want[c].begin);
                ck_assert_uint_eq(r.end, want[c].end);
                uint64_t len = ps_range_len(r);
                ck_assert(len == ns[i] / (uint64_t)m || len == ns[i] / (uint64_t)m + 1);
                next = r.end;
            }
            ck_assert_uint_eq(next, ns[i]);
        }
    }
}
END_TEST

START_TEST(schedule_passes_each_chunk_round_the_ring)
{
    for (int m = 1; m <= 7; m++) {
        const int G = ps_ring_num_steps(m);
        ck_assert_int_eq(G, m > 1 ? 2 * (m - 1) : 0);
        for (int r = 0; r < m; r++) {
            const int left = (r + m - 1) % m;
            int seen[7] = {0};
            for (int g = 0; g < G; g++) {
                /* what we receive is what the left neighbour sends */
                ck_assert_int_eq(ps_ring_recv_chunk(r, m, g),
                                 ps_ring_send_chunk(left, m, g));
                /* and what we forward at the next step */
                ck_assert_int_eq(ps_ring_recv_chunk(r, m, g),
                                 ps_ring_send_chunk(r, m, g + 1));
                if (g < m - 1) {
                    seen[ps_ring_recv_chunk(r, m, g)]++;
                }
            }
            if (m > 1) {
                /* reduce-scatter: M-1 different chunks added in, never our own */
                ck_assert_int_eq(ps_ring_send_chunk(r, m, 0), r);
                ck_assert_int_eq(seen[r], 0);
                for (int c = 0; c < m; c++) {
                    ck_assert_int_le(seen[c], 1);
                }
                /* after it we hold the finished sum of chunk r+1 */
                ck_assert_int_eq(ps_ring_recv_chunk(r, m, m - 2), (r + 1) % m);
            }
        }
    }
}
END_TEST

START_TEST(sub_chunks_tile_each_chunk)
{
    const uint64_t lens[] = {0, 1, 2, 6, 7, 8, 100};
    const size_t subs[] = {1, 3, 7, 8, 1000};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (size_t k = 0; k < sizeof subs / sizeof subs[0]; k++) {
            ps_range_t chunk = {50, 50 + lens[i]};
            uint64_t n = ps_ring_num_subs(chunk, subs[k]);
            ck_assert_uint_eq(n, (lens[i] + subs[k] - 1) / subs[k]);
            uint64_t next = chunk.begin;
            for (uint64_t j = 0; j < n; j++) {
                ps_range_t r = ps_ring_sub(chunk, subs[k], j);
                ck_assert_uint_eq(r.begin, next);
                ck_assert_uint_gt(r.end, r.begin);
                ck_assert_uint_le(ps_range_len(r), subs[k]);
                next = r.end;
            }
            ck_assert_uint_eq(next, chunk.end);
        }
    }
}
END_TEST

/* Runs the schedule in memory: at each ring step every member sends, then
 * every member receives what its left neighbour sent. */
static void s_simulate(int m, uint64_t n, float **bufs)
{
    float *msg[S_MAX_M];
    for (int r = 0; r < m; r++) {
        msg[r] = malloc((n ? n : 1) * sizeof(float));
        ck_assert_ptr_nonnull(msg[r]);
    }
    for (int g = 0; g < ps_ring_num_steps(m); g++) {
        for (int r = 0; r < m; r++) {
            ps_range_t c = ps_ring_chunk(n, m, ps_ring_send_chunk(r, m, g));
            memcpy(msg[r] + c.begin, bufs[r] + c.begin, ps_range_len(c) * sizeof(float));
        }
        for (int r = 0; r < m; r++) {
            const int left = (r + m - 1) % m;
            ps_range_t c = ps_ring_chunk(n, m, ps_ring_recv_chunk(r, m, g));
            for (uint64_t i = c.begin; i < c.end; i++) {
                bufs[r][i] = g < m - 1 ? bufs[r][i] + msg[left][i] : msg[left][i];
            }
        }
    }
    for (int r = 0; r < m; r++) {
        free(msg[r]);
    }
}

/* Member r's test vector: integers, so every order of additions is exact. */
static float s_int_value(int r, uint64_t i)
{
    return (float)((int64_t)((i * 7 + (uint64_t)r * 13) % 101) - 50 + r);
}

/* The exact sum over m members of s_int_value. */
static float s_int_sum(int m, uint64_t i)
{
    double s = 0;
    for (int r = 0; r < m; r++) {
        s += s_int_value(r, i);
    }
    return (float)s;
}

START_TEST(schedule_in_memory_sums_every_size)
{
    const uint64_t ns[] = {1, 2, 3, 4, 5, 7, 11, 1000, 1001};
    for (int m = 1; m <= S_MAX_M; m++) {
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            uint64_t n = ns[k];
            float *bufs[S_MAX_M];
            for (int r = 0; r < m; r++) {
                bufs[r] = malloc(n * sizeof(float));
                ck_assert_ptr_nonnull(bufs[r]);
                for (uint64_t i = 0; i < n; i++) {
                    bufs[r][i] = s_int_value(r, i);
                }
            }
            s_simulate(m, n, bufs);
            for (int r = 0; r < m; r++) {
                for (uint64_t i = 0; i < n; i++) {
                    ck_assert_msg(bufs[r][i] == s_int_sum(m, i), "m=%d n=%llu r=%d i=%llu",
                                  m, (unsigned long long)n, r, (unsigned long long)i);
                }
                free(bufs[r]);
            }
        }
    }
}
END_TEST

/* ---- the ring over sockets ---------------------------------------------- */

typedef struct s_ring_test s_ring_test_t;

typedef struct {
    s_ring_test_t *t;
    int rank;
    float *buf; /* n floats */
    int rc;     /* of the last allreduce */
    char err[256];
    uint64_t sent, received, dropped;
} s_member_t;

struct s_ring_test {
    int m;                   /* members */
    uint64_t n;              /* floats */
    size_t sub;              /* floats per message */
    int steps;               /* allreduces in a row */
    int random;              /* random values instead of integers */
    pthread_barrier_t bound; /* every member has bound its endpoint */
    char endpoints[S_MAX_M][128];
    s_member_t members[S_MAX_M];
};

/* Fills member r's vector for step s. */
static void s_fill(const s_ring_test_t *t, int r, int s, float *buf)
{
    if (t->random) {
        ps_test_fill(buf, t->n, -1.0f, 1.0f, (uint64_t)(1000 * s + r + 1));
    } else {
        for (uint64_t i = 0; i < t->n; i++) {
            buf[i] = s_int_value(r, i) + (float)s;
        }
    }
}

static void *s_member_main(void *arg)
{
    s_member_t *me = arg;
    s_ring_test_t *t = me->t;
    ps_ctx_t *ctx = NULL;
    ps_ctx_new(&ctx);
    ps_ring_t *ring = NULL;
    me->rc = ps_ring_new(ctx, "tcp://127.0.0.1:*", 0, &ring, t->endpoints[me->rank],
                         sizeof t->endpoints[me->rank], me->err, sizeof me->err);
    pthread_barrier_wait(&t->bound);
    if (me->rc == 0) {
        ps_ring_config_t cfg = {.rank = me->rank,
                                .size = t->m,
                                .right = t->endpoints[(me->rank + 1) % t->m],
                                .sub_floats = t->sub,
                                .timeout = 20};
        me->rc = ps_ring_connect(ring, &cfg, me->err, sizeof me->err);
    }
    for (int s = 0; s < t->steps && me->rc == 0; s++) {
        s_fill(t, me->rank, s, me->buf);
        me->rc = ps_ring_allreduce(ring, me->buf, t->n, 100 + s);
        if (me->rc != 0) {
            snprintf(me->err, sizeof me->err, "%s", ps_ring_error(ring));
        }
        /* each step's result is checked against the last one's inputs below */
    }
    if (ring) {
        ps_ring_bytes(ring, &me->sent, &me->received);
        me->dropped = ps_ring_dropped(ring);
    }
    ps_ring_destroy(&ring);
    ps_ctx_destroy(&ctx);
    return NULL;
}

/* Runs t->m members for t->steps allreduces; leaves the results in t. */
static void s_run_ring(s_ring_test_t *t)
{
    pthread_t th[S_MAX_M];
    pthread_barrier_init(&t->bound, NULL, (unsigned)t->m);
    for (int r = 0; r < t->m; r++) {
        s_member_t *me = &t->members[r];
        me->t = t;
        me->rank = r;
        me->buf = malloc((t->n ? t->n : 1) * sizeof(float));
        ck_assert_ptr_nonnull(me->buf);
        ck_assert_int_eq(pthread_create(&th[r], NULL, s_member_main, me), 0);
    }
    for (int r = 0; r < t->m; r++) {
        pthread_join(th[r], NULL);
    }
    pthread_barrier_destroy(&t->bound);
}

static void s_free_ring(s_ring_test_t *t)
{
    for (int r = 0; r < t->m; r++) {
        free(t->members[r].buf);
    }
}

/* Every member succeeded and holds bitwise the same vector. */
static void s_check_agree(const s_ring_test_t *t)
{
    for (int r = 0; r < t->m; r++) {
        ck_assert_msg(t->members[r].rc == 0, "m=%d n=%llu sub=%zu: W%d failed: %s (%s)",
                      t->m, (unsigned long long)t->n, t->sub, r,
                      ps_strerror(t->members[r].rc), t->members[r].err);
        ck_assert_msg(!memcmp(t->members[r].buf, t->members[0].buf, t->n * sizeof(float)),
                      "m=%d n=%llu: W%d differs from W0", t->m, (unsigned long long)t->n,
                      r);
    }
}

START_TEST(ring_sums_integers_exactly_for_1_to_5_members)
{
    const uint64_t ns[] = {1, 3, 4, 1000, 12347};
    const size_t subs[] = {1, 7, 1024};
    for (int m = 1; m <= S_MAX_M; m++) {
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            for (size_t q = 0; q < sizeof subs / sizeof subs[0]; q++) {
                if (subs[q] == 1 && ns[k] > 1000) {
                    continue; /* 12347 one-float messages per chunk: slow, adds nothing */
                }
                s_ring_test_t t = {.m = m, .n = ns[k], .sub = subs[q], .steps = 2};
                s_run_ring(&t);
                s_check_agree(&t);
                for (uint64_t i = 0; i < t.n; i++) {
                    float want = s_int_sum(m, i) + (float)m; /* step 1 adds s = 1 each */
                    ck_assert_msg(t.members[0].buf[i] == want,
                                  "m=%d n=%llu sub=%zu: [%llu] = %g, want %g", m,
                                  (unsigned long long)t.n, subs[q], (unsigned long long)i,
                                  (double)t.members[0].buf[i], (double)want);
                }
                /* each member sends and receives 2(M-1) chunks per step */
                uint64_t want_bytes = 0;
                for (int g = 0; g < ps_ring_num_steps(m); g++) {
                    want_bytes +=
                        ps_range_len(ps_ring_chunk(t.n, m, ps_ring_send_chunk(0, m, g)));
                }
                ck_assert_uint_eq(t.members[0].sent, 2 * want_bytes * sizeof(float));
                ck_assert_uint_eq(t.members[(m > 1) ? 1 : 0].received, t.members[0].sent);
                s_free_ring(&t);
            }
        }
    }
}
END_TEST

START_TEST(ring_sums_random_floats_like_a_float64_reference)
{
    for (int m = 2; m <= S_MAX_M; m++) {
        s_ring_test_t t = {.m = m, .n = 100003, .sub = 4096, .steps = 3, .random = 1};
        s_run_ring(&t);
        s_check_agree(&t);
        float *in = malloc(t.n * sizeof(float));
        double *ref = calloc(t.n, sizeof(double));
        ck_assert(in && ref);
        for (int r = 0; r < m; r++) {
            s_fill(&t, r, t.steps - 1, in);
            for (uint64_t i = 0; i < t.n; i++) {
                ref[i] += in[i];
            }
        }
        for (uint64_t i = 0; i < t.n; i++) {
            ck_assert_msg(ps_test_close(t.members[0].buf[i], ref[i], 1e-6, 1e-5),
                          "m=%d [%llu] = %.9g, want %.9g", m, (unsigned long long)i,
                          (double)t.members[0].buf[i], ref[i]);
        }
        free(in);
        free(ref);
        s_free_ring(&t);
    }
}
END_TEST

/* ---- failures ------------------------------------------------------------ */

static int s_gone_after(void *arg)
{
    return ps_now() > *(double *)arg ? PS_ECLOSED : 0;
}

/* Member 0 of 2 whose neighbour never comes: one endpoint that nobody serves. */
static ps_ring_t *s_lonely(ps_ctx_t *ctx, ps_ring_config_t *cfg, char *ep, size_t cap)
{
    char err[256];
    ps_ring_t *ring = NULL;
    ck_assert_int_eq(ps_ring_new(ctx, "tcp://127.0.0.1:*", 0, &ring, ep, cap, err, sizeof err),
                     0);
    cfg->rank = 0;
    cfg->size = 2;
    cfg->right = ep; /* ourselves: what we send arrives as if from W0, not W1 */
    ck_assert_int_eq(ps_ring_connect(ring, cfg, err, sizeof err), 0);
    return ring;
}

START_TEST(ring_gives_up_when_the_job_is_gone)
{
    ps_ctx_t *ctx = NULL;
    ck_assert_int_eq(ps_ctx_new(&ctx), 0);
    char ep[128];
    double deadline = ps_now() + 0.3;
    ps_ring_config_t cfg = {
        .sub_floats = 16, .check = s_gone_after, .check_arg = &deadline};
    ps_ring_t *ring = s_lonely(ctx, &cfg, ep, sizeof ep);
    float buf[64] = {0};
    double t0 = ps_now();
    ck_assert_int_eq(ps_ring_allreduce(ring, buf, 64, 0), PS_ECLOSED);
    ck_assert_double_lt(ps_now() - t0, 2.0);
    ck_assert_ptr_nonnull(strstr(ps_ring_error(ring), "job ended"));
    /* our own messages came back from "W0": dropped, not added */
    ck_assert_uint_ge(ps_ring_dropped(ring), 1);
    /* broken for good */
    ck_assert_int_eq(ps_ring_allreduce(ring, buf, 64, 1), PS_ESTATE);
    ps_ring_destroy(&ring);
    ck_assert_ptr_null(ring);
    ps_ctx_destroy(&ctx);
}
END_TEST

START_TEST(ring_times_out_without_a_check)
{
    ps_ctx_t *ctx = NULL;
    ck_assert_int_eq(ps_ctx_new(&ctx), 0);
    char ep[128];
    ps_ring_config_t cfg = {.timeout = 0.3};
    ps_ring_t *ring = s_lonely(ctx, &cfg, ep, sizeof ep);
    float buf[8] = {0};
    double t0 = ps_now();
    ck_assert_int_eq(ps_ring_allreduce(ring, buf, 8, 0), PS_ETIMEDOUT);
    ck_assert_double_lt(ps_now() - t0, 2.0);
    ps_ring_destroy(&ring);
    ps_ctx_destroy(&ctx);
}
END_TEST

START_TEST(ring_refuses_bad_configurations)
{
    ps_ctx_t *ctx = NULL;
    ck_assert_int_eq(ps_ctx_new(&ctx), 0);
    char ep[128], err[256];
    ps_ring_t *ring = NULL;
    ck_assert_int_eq(ps_ring_new(ctx, "nonsense", 0, &ring, ep, sizeof ep, err, sizeof err),
                     PS_EINVAL);
    ck_assert_ptr_null(ring);
    ck_assert_int_eq(
        ps_ring_new(ctx, "tcp://127.0.0.1:*", 0, &ring, ep, sizeof ep, err, sizeof err), 0);
    float buf[4] = {0};
    ck_assert_int_eq(ps_ring_allreduce(ring, buf, 4, 0), PS_ESTATE); /* not connected */
    ps_ring_config_t bad[] = {
        {.rank = 0, .size = 0},
        {.rank = 2, .size = 2, .right = ep},
        {.rank = -1, .size = 2, .right = ep},
        {.rank = 0, .size = 2, .right = NULL},
        {.rank = 0, .size = 2, .right = "nonsense"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(ps_ring_connect(ring, &bad[i], err, sizeof err), PS_EINVAL);
    }
    /* one member: no sockets used, the sum is the vector itself */
    ps_ring_config_t one = {.rank = 0, .size = 1};
    ck_assert_int_eq(ps_ring_connect(ring, &one, err, sizeof err), 0);
    buf[2] = 5;
    ck_assert_int_eq(ps_ring_allreduce(ring, buf, 4, 0), 0);
    ck_assert(buf[2] == 5);
    ps_ring_destroy(&ring);
    ps_ring_destroy(&ring); /* NULL-safe */
    ps_ctx_destroy(&ctx);
}
END_TEST

/* A hand-made ring-data message to ep. */
static void s_send_raw(ps_sock_t *sock, int sender, int64_t step, int g, uint64_t b, uint64_t e,
                       size_t bytes)
{
    static float payload[64];
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_WORKER, sender);
    h.key_begin = b;
    h.key_end = e;
    h.step = step;
    h.ring_step = g;
    ps_frame_t f = {payload, bytes};
    ck_assert_int_eq(ps_msg_send(sock, NULL, h, &f, 1, PS_SEND_COPY), 0);
}

/* Member 1 of 2 facing a hand-driven W0: ours is a PUSH to its endpoint. */
typedef struct {
    ps_ctx_t *ctx;
    ps_ring_t *ring;
    ps_sock_t *w0_rx; /* plays W0's receiving end: W1's messages land here */
    ps_sock_t *w0_tx; /* plays W0's sending end */
    char ep1[128], ep0[128];
} s_duo_t;

static void s_duo_open(s_duo_t *d)
{
    char err[256];
    ck_assert_int_eq(ps_ctx_new(&d->ctx), 0);
    ck_assert_int_eq(ps_ring_new(d->ctx, "tcp://127.0.0.1:*", 0, &d->ring, d->ep1,
                                 sizeof d->ep1, err, sizeof err),
                     0);
    ck_assert_int_eq(ps_sock_new(d->ctx, PS_SOCK_PULL, &d->w0_rx, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_new(d->ctx, PS_SOCK_PUSH, &d->w0_tx, err, sizeof err), 0);
    ck_assert_int_eq(
        ps_sock_bind(d->w0_rx, "tcp://127.0.0.1:*", d->ep0, sizeof d->ep0, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_connect(d->w0_tx, d->ep1), 0);
    ps_ring_config_t cfg = {.rank = 1, .size = 2, .right = d->ep0, .timeout = 5};
    ck_assert_int_eq(ps_ring_connect(d->ring, &cfg, err, sizeof err), 0);
}

static void s_duo_close(s_duo_t *d)
{
    ps_ring_destroy(&d->ring);
    ps_sock_set_linger(d->w0_rx, 0);
    ps_sock_set_linger(d->w0_tx, 0);
    ps_sock_destroy(&d->w0_rx);
    ps_sock_destroy(&d->w0_tx);
    ps_ctx_destroy(&d->ctx);
}

START_TEST(ring_drops_strangers_and_still_completes)
{
    s_duo_t d;
    s_duo_open(&d);
    /* n = 4, M = 2: W1 receives chunk 0 = [0, 2) at ring step 0, chunk 1 = [2, 4) at 1 */
    ps_sock_t *stranger;
    char err[128];
    ck_assert_int_eq(ps_sock_new(d.ctx, PS_SOCK_PUSH, &stranger, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_connect(stranger, d.ep1), 0);
    s_send_raw(stranger, 3, 7, 0, 0, 2, 8); /* W3: not our left neighbour */
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 0); /* a push, not ring data */
    ck_assert_int_eq(ps_msg_send(stranger, NULL, h, NULL, 0, 0), 0);
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_SERVER, 0); /* a server */
    ck_assert_int_eq(ps_msg_send(stranger, NULL, h, NULL, 0, 0), 0);
    const void *junk = "junk";
    size_t junk_len = 4;
    ps_sock_send_raw(stranger, &junk, &junk_len, 1); /* not even a header */
    /* W0's real part, once the strangers' messages wait in W1's queue: W1 then
     * reads the two connections in turn, so it meets a stranger before W0's
     * second message (the ones it meets are dropped, the rest never read). */
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    float zero[2] = {0, 0};
    ps_frame_t f = {zero, sizeof zero};
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_WORKER, 0);
    h.step = 7;
    h.key_begin = 0;
    h.key_end = 2;
    h.ring_step = 0;
    ck_assert_int_eq(ps_msg_send(d.w0_tx, NULL, h, &f, 1, PS_SEND_COPY), 0);
    float done[2] = {10, 20}; /* the finished sum of chunk 1, as W0 would send it */
    f.data = done;
    h.key_begin = 2;
    h.key_end = 4;
    h.ring_step = 1;
    ck_assert_int_eq(ps_msg_send(d.w0_tx, NULL, h, &f, 1, PS_SEND_COPY), 0);
    float buf[4] = {1, 2, 3, 4};
    ck_assert_int_eq(ps_ring_allreduce(d.ring, buf, 4, 7), 0);
    ck_assert(buf[0] == 1 && buf[1] == 2 && buf[2] == 10 && buf[3] == 20);
    ck_assert_uint_ge(ps_ring_dropped(d.ring), 1);
    ps_sock_set_linger(stranger, 0);
    ps_sock_destroy(&stranger);
    s_duo_close(&d);
}
END_TEST

START_TEST(ring_fails_when_the_neighbour_breaks_the_sequence)
{
    /* wrong step, wrong ring step, wrong range, wrong length: each breaks it */
    const int64_t steps[] = {8, 7, 7, 7};
    const int gs[] = {0, 1, 0, 0};
    const uint64_t ends[] = {2, 2, 1, 2};
    const size_t bytes[] = {8, 8, 4, 4};
    for (int k = 0; k < 4; k++) {
        s_duo_t d;
        s_duo_open(&d);
        s_send_raw(d.w0_tx, 0, steps[k], gs[k], 0, ends[k], bytes[k]);
        float buf[4] = {1, 2, 3, 4};
        ck_assert_int_eq(ps_ring_allreduce(d.ring, buf, 4, 7), PS_EPROTO);
        ck_assert_msg(strstr(ps_ring_error(d.ring), "broke the ring") != NULL, "%s",
                      ps_ring_error(d.ring));
        /* nothing received was added */
        ck_assert(buf[0] == 1 && buf[1] == 2);
        s_duo_close(&d);
    }
}
END_TEST

/* ---- the allgather ---------------------------------------------------------- */

enum { S_AG_DIM = 3, S_AG_CAP = 40, S_AG_STEPS = 3 };

/* Member r's block at step s: its keys, 0 to S_AG_CAP of them (member 0's
 * first one empty). */
static uint64_t s_ag_n(int r, int s)
{
    return (uint64_t)((r * 17 + s * 5) % (S_AG_CAP + 1));
}

static uint64_t s_ag_key(int r, int s, uint64_t i)
{
    return ((uint64_t)r << 40) | ((uint64_t)s << 20) | i;
}

static float s_ag_value(int r, int s, uint64_t i, int j)
{
    return (float)r + 0.25f * (float)s + 0.5f * (float)i + 0.125f * (float)j;
}

typedef struct {
    int m, rank, rc, bad;  /* members; ours; the first failure; blocks that came wrong */
    pthread_barrier_t *bound;
    char (*endpoints)[128];
    char err[256];
    uint64_t sent, received;
} s_ag_member_t;

/* Member thread: for each step an allreduce of 10 floats (the ring's
 * sequence mixes both), then the allgather, every block checked. */
static void *s_ag_main(void *arg)
{
    s_ag_member_t *me = arg;
    ps_ctx_t *ctx = NULL;
    ps_ctx_new(&ctx);
    ps_ring_t *ring = NULL;
    uint64_t keys[S_MAX_M][S_AG_CAP];
    float rows[S_MAX_M][S_AG_CAP * S_AG_DIM], vec[10];
    ps_ring_block_t blocks[S_MAX_M];
    me->rc = ps_ring_new(ctx, "tcp://127.0.0.1:*", S_AG_CAP * S_AG_DIM, &ring,
                         me->endpoints[me->rank], 128, me->err, sizeof me->err);
    pthread_barrier_wait(me->bound);
    if (me->rc == 0) {
        ps_ring_config_t cfg = {.rank = me->rank,
                                .size = me->m,
                                .right = me->endpoints[(me->rank + 1) % me->m],
                                .sub_floats = 4,
                                .timeout = 20};
        me->rc = ps_ring_connect(ring, &cfg, me->err, sizeof me->err);
    }
    for (int s = 0; s < S_AG_STEPS && me->rc == 0; s++) {
        for (int r = 0; r < me->m; r++) {
            blocks[r] = (ps_ring_block_t){keys[r], rows[r], r == me->rank ? s_ag_n(r, s) : 7};
        }
        for (uint64_t i = 0; i < blocks[me->rank].n; i++) {
            keys[me->rank][i] = s_ag_key(me->rank, s, i);
            for (int j = 0; j < S_AG_DIM; j++) {
                rows[me->rank][i * S_AG_DIM + j] = s_ag_value(me->rank, s, i, j);
            }
        }
        for (int i = 0; i < 10; i++) {
            vec[i] = (float)(me->rank + i);
        }
        me->rc = ps_ring_allreduce(ring, vec, 10, s);
        if (me->rc == 0) {
            me->rc = ps_ring_allgather(ring, blocks, S_AG_DIM, S_AG_CAP, s);
        }
        if (me->rc != 0) {
            snprintf(me->err, sizeof me->err, "%s", ps_ring_error(ring));
            break;
        }
        for (int r = 0; r < me->m; r++) {
            int ok = blocks[r].n == s_ag_n(r, s);
            for (uint64_t i = 0; ok && i < blocks[r].n; i++) {
                ok = keys[r][i] == s_ag_key(r, s, i);
                for (int j = 0; ok && j < S_AG_DIM; j++) {
                    ok = rows[r][i * S_AG_DIM + j] == s_ag_value(r, s, i, j);
                }
            }
            me->bad += !ok;
        }
    }
    if (ring) {
        ps_ring_bytes(ring, &me->sent, &me->received);
    }
    ps_ring_destroy(&ring);
    ps_ctx_destroy(&ctx);
    return NULL;
}

START_TEST(allgather_passes_every_block_to_every_member)
{
    for (int m = 1; m <= S_MAX_M; m++) {
        pthread_t th[S_MAX_M];
        pthread_barrier_t bound;
        char endpoints[S_MAX_M][128];
        s_ag_member_t members[S_MAX_M];
        pthread_barrier_init(&bound, NULL, (unsigned)m);
        for (int r = 0; r < m; r++) {
            members[r] = (s_ag_member_t){.m = m, .rank = r, .bound = &bound,
                                         .endpoints = endpoints};
            ck_assert_int_eq(pthread_create(&th[r], NULL, s_ag_main, &members[r]), 0);
        }
        for (int r = 0; r < m; r++) {
            pthread_join(th[r], NULL);
        }
        pthread_barrier_destroy(&bound);
        for (int r = 0; r < m; r++) {
            ck_assert_msg(members[r].rc == 0, "m=%d: W%d failed: %s (%s)", m, r,
                          ps_strerror(members[r].rc), members[r].err);
            ck_assert_msg(members[r].bad == 0, "m=%d: W%d got %d blocks wrong", m, r,
                          members[r].bad);
            /* every block but the right neighbour's own, once a step, and the
             * allreduces' 2(M-1) chunks of 10 floats */
            uint64_t want = 0;
            for (int s = 0; s < S_AG_STEPS; s++) {
                for (int g = 0; g < m - 1; g++) {
                    want += s_ag_n(ps_ring_send_chunk(r, m, g), s) *
                            (sizeof(uint64_t) + S_AG_DIM * sizeof(float));
                }
                for (int g = 0; g < ps_ring_num_steps(m); g++) {
                    want += ps_range_len(ps_ring_chunk(10, m, ps_ring_send_chunk(r, m, g))) *
                            sizeof(float);
                }
            }
            ck_assert_uint_eq(members[r].sent, want);
            ck_assert_uint_eq(members[(r + 1) % m].received, m > 1 ? want : 0);
        }
    }
}
END_TEST

/* A hand-made allgather message: frames of klen and vlen bytes (nframes of
 * them, 1 or 2) for block [b, e). */
static void s_send_block_raw(ps_sock_t *sock, int64_t step, int g, uint64_t b, uint64_t e,
                             size_t klen, size_t vlen, int nframes)
{
    static unsigned char payload[2][(S_AG_CAP + 2) * S_AG_DIM * sizeof(float)];
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_WORKER, 0);
    h.key_begin = b;
    h.key_end = e;
    h.step = step;
    h.ring_step = g;
    ps_frame_t f[2] = {{payload[0], klen}, {payload[1], vlen}};
    ck_assert_int_eq(ps_msg_send(sock, NULL, h, f, nframes, PS_SEND_COPY), 0);
}

START_TEST(allgather_takes_the_left_neighbours_block)
{
    s_duo_t d;
    s_duo_open(&d);
    /* W0's block 0 of 2 keys, then ours (block 1, 3 keys) goes to W0 */
    const uint64_t k0[2] = {11, 12};
    const float v0[2 * S_AG_DIM] = {1, 2, 3, 4, 5, 6};
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_WORKER, 0);
    h.step = 9;
    h.key_begin = 0;
    h.key_end = 1;
    ps_frame_t f[2] = {{k0, sizeof k0}, {v0, sizeof v0}};
    ck_assert_int_eq(ps_msg_send(d.w0_tx, NULL, h, f, 2, PS_SEND_COPY), 0);
    uint64_t keys[2][S_AG_CAP] = {{0}, {21, 22, 23}};
    float rows[2][S_AG_CAP * S_AG_DIM] = {{0}, {7, 8, 9}};
    ps_ring_block_t blocks[2] = {{keys[0], rows[0], 0}, {keys[1], rows[1], 3}};
    ck_assert_int_eq(ps_ring_allgather(d.ring, blocks, S_AG_DIM, S_AG_CAP, 9), 0);
    ck_assert_uint_eq(blocks[0].n, 2);
    ck_assert(keys[0][0] == 11 && keys[0][1] == 12);
    ck_assert(!memcmp(rows[0], v0, sizeof v0));
    ck_assert_uint_eq(blocks[1].n, 3); /* ours untouched */
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(d.w0_rx, 0, &m), 0);
    size_t klen, vlen;
    ck_assert_int_eq(m.nframes, 2);
    const uint64_t *k1 = ps_msg_frame(&m, 0, &klen);
    ps_msg_frame(&m, 1, &vlen);
    ck_assert(m.hdr.key_begin == 1 && m.hdr.key_end == 2 && m.hdr.step == 9 &&
              m.hdr.ring_step == 0);
    ck_assert_uint_eq(klen, 3 * sizeof(uint64_t));
    ck_assert_uint_eq(vlen, 3 * S_AG_DIM * sizeof(float));
    ck_assert(k1[0] == 21 && k1[2] == 23);
    ps_msg_close(&m);
    /* a block of ours over the room is refused before anything is sent */
    blocks[1].n = S_AG_CAP + 1;
    ck_assert_int_eq(ps_ring_allgather(d.ring, blocks, S_AG_DIM, S_AG_CAP, 10), PS_EINVAL);
    s_duo_close(&d);
}
END_TEST

START_TEST(allgather_fails_when_the_neighbour_breaks_the_sequence)
{
    /* expected: step 9, ring step 0, block [0, 1), 2 frames, 8n + 12n bytes,
     * n <= S_AG_CAP. Each case breaks one of those. */
    const size_t row = S_AG_DIM * sizeof(float);
    const struct {
        int64_t step;
        int g;
        uint64_t b, e;
        size_t klen, vlen;
        int nframes;
    } bad[] = {
        {8, 0, 0, 1, 16, 2 * row, 2},                                 /* step */
        {9, 1, 0, 1, 16, 2 * row, 2},                                 /* ring step */
        {9, 0, 1, 2, 16, 2 * row, 2},                                 /* block */
        {9, 0, 0, 1, 16, 0, 1},                                       /* an allreduce's */
        {9, 0, 0, 1, 12, 2 * row, 2},                                 /* half a key */
        {9, 0, 0, 1, 16, 3 * row, 2},                                 /* rows for 3 keys */
        {9, 0, 0, 1, 8 * (S_AG_CAP + 1), (S_AG_CAP + 1) * row, 2},     /* over the room */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        s_duo_t d;
        s_duo_open(&d);
        s_send_block_raw(d.w0_tx, bad[k].step, bad[k].g, bad[k].b, bad[k].e, bad[k].klen,
                         bad[k].vlen, bad[k].nframes);
        uint64_t keys[2][S_AG_CAP] = {{0}};
        float rows[2][S_AG_CAP * S_AG_DIM] = {{0}};
        ps_ring_block_t blocks[2] = {{keys[0], rows[0], 5}, {keys[1], rows[1], 1}};
        ck_assert_int_eq(ps_ring_allgather(d.ring, blocks, S_AG_DIM, S_AG_CAP, 9), PS_EPROTO);
        ck_assert_msg(strstr(ps_ring_error(d.ring), "broke the ring") != NULL, "case %zu: %s",
                      k, ps_ring_error(d.ring));
        ck_assert_uint_eq(blocks[0].n, 5); /* nothing taken */
        /* broken for good */
        ck_assert_int_eq(ps_ring_allgather(d.ring, blocks, S_AG_DIM, S_AG_CAP, 10), PS_ESTATE);
        s_duo_close(&d);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ring");
    TCase *ts = tcase_create("schedule");
    tcase_add_test(ts, chunks_tile_the_vector_like_the_shard_map);
    tcase_add_test(ts, schedule_passes_each_chunk_round_the_ring);
    tcase_add_test(ts, sub_chunks_tile_each_chunk);
    tcase_add_test(ts, schedule_in_memory_sums_every_size);
    suite_add_tcase(s, ts);
    TCase *tr = tcase_create("sockets");
    tcase_set_timeout(tr, 60);
    tcase_add_test(tr, ring_sums_integers_exactly_for_1_to_5_members);
    tcase_add_test(tr, ring_sums_random_floats_like_a_float64_reference);
    tcase_add_test(tr, ring_gives_up_when_the_job_is_gone);
    tcase_add_test(tr, ring_times_out_without_a_check);
    tcase_add_test(tr, ring_refuses_bad_configurations);
    tcase_add_test(tr, ring_drops_strangers_and_still_completes);
    tcase_add_test(tr, ring_fails_when_the_neighbour_breaks_the_sequence);
    suite_add_tcase(s, tr);
    TCase *tg = tcase_create("allgather");
    tcase_set_timeout(tg, 60);
    tcase_add_test(tg, allgather_passes_every_block_to_every_member);
    tcase_add_test(tg, allgather_takes_the_left_neighbours_block);
    tcase_add_test(tg, allgather_fails_when_the_neighbour_breaks_the_sequence);
    suite_add_tcase(s, tg);
    return ps_test_run(s);
}
