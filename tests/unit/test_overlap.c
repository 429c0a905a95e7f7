/*
 * tests/unit/test_overlap.c - worker/overlap: bucket plans, and the
 * communication thread over real rings on 127.0.0.1.
 *
 * The plan is checked as arithmetic on the MLP's and CNN's tensor offsets
 * (buckets tile the vector, end at tensor boundaries, last bucket first).
 * Then 1 to 3 members each run an overlap over their ring for several steps,
 * writing their integer-valued "gradients" tensor by tensor from the last
 * one and reporting each as final, as backward does: every member gets the
 * exact sums, bitwise the same. Finally the failure paths: a silent
 * neighbour makes wait return the ring's PS_ECLOSED (sticky), and destroy
 * returns while a bucket is in flight once the check function fails.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "proto/range.h"
#include "tests/unit/testutil.h"
#include "worker/overlap.h"
#include "worker/ring.h"

enum { S_MAX_M = 3 };

/* The MLP's and the CNN's tensor offsets and sizes (worker/models). */
static const size_t s_mlp[] = {0, 200704, 200960, 233728, 233856, 235136};
static const uint64_t s_mlp_n = 235146;
static const size_t s_cnn[] = {0, 800, 832, 52032, 52096, 453504, 453632, 454912};
static const uint64_t s_cnn_n = 454922;

/* Buckets tile [0, n) from the end, each starting at a tensor offset. */
static void s_check_plan(const size_t *off, size_t nt, uint64_t n, const ps_range_t *b,
                         int nb)
{
    ck_assert_int_ge(nb, 1);
    uint64_t end = n;
    for (int i = 0; i < nb; i++) {
        ck_assert_uint_eq(b[i].end, end);
        ck_assert_uint_lt(b[i].begin, b[i].end);
        int at_tensor = 0;
        for (size_t t = 0; t < nt; t++) {
            at_tensor |= off[t] == b[i].begin;
        }
        ck_assert(at_tensor);
        end = b[i].begin;
    }
    ck_assert_uint_eq(end, 0);
}

START_TEST(plan_cuts_at_layer_boundaries_last_bucket_first)
{
    ps_range_t b[PS_OVERLAP_MAX_BUCKETS];
    int nb = ps_overlap_plan(s_mlp, 6, s_mlp_n, 0, b, PS_OVERLAP_MAX_BUCKETS);
    ck_assert_int_eq(nb, 2); /* fc2 + fc3, then fc1 */
    s_check_plan(s_mlp, 6, s_mlp_n, b, nb);
    ck_assert_uint_eq(b[0].begin, 200960);
    nb = ps_overlap_plan(s_cnn, 8, s_cnn_n, 0, b, PS_OVERLAP_MAX_BUCKETS);
    ck_assert_int_eq(nb, 3); /* fc1 + fc2, conv2, conv1 */
    s_check_plan(s_cnn, 8, s_cnn_n, b, nb);
    ck_assert_uint_eq(b[0].begin, 52096);
    ck_assert_uint_eq(b[1].begin, 832);
    /* cap 1: a bucket per tensor; max bounds the count */
    nb = ps_overlap_plan(s_cnn, 8, s_cnn_n, 1, b, PS_OVERLAP_MAX_BUCKETS);
    ck_assert_int_eq(nb, 8);
    s_check_plan(s_cnn, 8, s_cnn_n, b, nb);
    nb = ps_overlap_plan(s_cnn, 8, s_cnn_n, 1, b, 3);
    ck_assert_int_eq(nb, 3);
    s_check_plan(s_cnn, 8, s_cnn_n, b, nb);
    ck_assert_uint_eq(b[2].begin, 0); /* the earliest bucket takes the rest */
    ck_assert_uint_eq(b[2].end, 453632);
    nb = ps_overlap_plan(s_mlp, 6, s_mlp_n, 0, b, 1);
    ck_assert_int_eq(nb, 1);
    ck_assert_uint_eq(b[0].begin, 0);
    ck_assert_uint_eq(b[0].end, s_mlp_n);
}
END_TEST

START_TEST(plan_refuses_bad_layouts)
{
    ps_range_t b[4];
    const size_t unordered[] = {0, 5, 5}, not_zero[] = {1, 5};
    ck_assert_int_eq(ps_overlap_plan(s_mlp, 6, 0, 0, b, 4), PS_EINVAL);
    ck_assert_int_eq(ps_overlap_plan(s_mlp, 0, s_mlp_n, 0, b, 4), PS_EINVAL);
    ck_assert_int_eq(ps_overlap_plan(s_mlp, 6, s_mlp_n, 0, b, 0), PS_EINVAL);
    ck_assert_int_eq(ps_overlap_plan(s_mlp, 6, 200000, 0, b, 4), PS_EINVAL);
    ck_assert_int_eq(ps_overlap_plan(unordered, 3, 10, 0, b, 4), PS_EINVAL);
    ck_assert_int_eq(ps_overlap_plan(not_zero, 2, 10, 0, b, 4), PS_EINVAL);
    ps_overlap_t *o = (ps_overlap_t *)1;
    float buf[4];
    ck_assert_int_eq(ps_overlap_new(NULL, buf, 4, b, 1, &o), PS_EINVAL);
    ck_assert_ptr_null(o);
    ps_overlap_destroy(&o); /* NULL-safe */
}
END_TEST

/* ---- over sockets ----------------------------------------------------------- */

typedef struct s_test s_test_t;

typedef struct {
    s_test_t *t;
    int rank;
    int rc;          /* first failure */
    long wrong;      /* elements that were not the exact sum */
    float *buf;      /* the member's vector */
    char err[256];
} s_member_t;

struct s_test {
    int m;
    int steps;
    pthread_barrier_t bound;
    char endpoints[S_MAX_M][128];
    s_member_t members[S_MAX_M];
};

static float s_value(int r, int s, uint64_t i)
{
    return (float)((int64_t)((i * 7 + (uint64_t)r * 13 + (uint64_t)s) % 101) - 50);
}

static void *s_member_main(void *arg)
{
    s_member_t *me = arg;
    s_test_t *t = me->t;
    const uint64_t n = s_cnn_n;
    ps_ctx_t *ctx = NULL;
    ps_ctx_new(&ctx);
    ps_ring_t *ring = NULL;
    ps_overlap_t *o = NULL;
    me->rc = ps_ring_new(ctx, "tcp://127.0.0.1:*", 0, &ring, t->endpoints[me->rank],
                         sizeof t->endpoints[me->rank], me->err, sizeof me->err);
    pthread_barrier_wait(&t->bound);
    if (me->rc == 0) {
        ps_ring_config_t cfg = {.rank = me->rank,
                                .size = t->m,
                                .right = t->endpoints[(me->rank + 1) % t->m],
                                .sub_floats = 4096,
                                .timeout = 20};
        me->rc = ps_ring_connect(ring, &cfg, me->err, sizeof me->err);
    }
    ps_range_t b[PS_OVERLAP_MAX_BUCKETS];
    int nb = ps_overlap_plan(s_cnn, 8, n, 1000, b, PS_OVERLAP_MAX_BUCKETS);
    if (me->rc == 0) {
        me->rc = ps_overlap_new(ring, me->buf, n, b, nb, &o);
    }
    for (int s = 0; s < t->steps && me->rc == 0; s++) {
        ps_overlap_begin(o, s);
        uint64_t end = n;
        for (size_t k = 8; k-- > 0;) {
            for (uint64_t i = s_cnn[k]; i < end; i++) {
                me->buf[i] = s_value(me->rank, s, i);
            }
            ps_overlap_ready(o, s_cnn[k]);
            end = s_cnn[k];
        }
        me->rc = ps_overlap_wait(o);
        if (me->rc != 0) {
            snprintf(me->err, sizeof me->err, "%s", ps_ring_error(ring));
            break;
        }
        for (uint64_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < t->m; r++) {
                want += s_value(r, s, i);
            }
            me->wrong += me->buf[i] != want;
        }
    }
    ps_overlap_destroy(&o);
    ps_ring_destroy(&ring);
    ps_ctx_destroy(&ctx);
    return NULL;
}

START_TEST(members_get_exact_identical_sums_bucket_by_bucket)
{
    for (int m = 1; m <= S_MAX_M; m++) {
        s_test_t t = {.m = m, .steps = 4};
        pthread_t th[S_MAX_M];
        pthread_barrier_init(&t.bound, NULL, (unsigned)m);
        for (int r = 0; r < m; r++) {
            t.members[r] = (s_member_t){.t = &t, .rank = r};
            t.members[r].buf = malloc(s_cnn_n * sizeof(float));
            ck_assert_ptr_nonnull(t.members[r].buf);
            ck_assert_int_eq(pthread_create(&th[r], NULL, s_member_main, &t.members[r]), 0);
        }
        for (int r = 0; r < m; r++) {
            pthread_join(th[r], NULL);
        }
        pthread_barrier_destroy(&t.bound);
        for (int r = 0; r < m; r++) {
            ck_assert_msg(t.members[r].rc == 0, "m=%d W%d: %s (%s)", m, r,
                          ps_strerror(t.members[r].rc), t.members[r].err);
            ck_assert_int_eq(t.members[r].wrong, 0);
            ck_assert(!memcmp(t.members[r].buf, t.members[0].buf, s_cnn_n * sizeof(float)));
        }
        for (int r = 0; r < m; r++) {
            free(t.members[r].buf);
        }
    }
}
END_TEST

static atomic_int s_gone;

static int s_check(void *arg)
{
    (void)arg;
    return atomic_load(&s_gone) ? PS_ECLOSED : 0;
}

/* W0 of a 2-ring whose W1 is bound but never takes part, with an overlap over
 * the MLP's buckets on W0's ring. */
typedef struct {
    ps_ctx_t *ctx;
    ps_ring_t *r0, *r1;
    float *buf; /* [s_mlp_n] W0's vector */
    ps_range_t b[PS_OVERLAP_MAX_BUCKETS];
    ps_overlap_t *o;
} s_lonely_t;

/* gone: what s_check answers from the start (1: the job is gone). */
static void s_lonely_init(s_lonely_t *l, int gone)
{
    char ep0[128], ep1[128], err[256];
    ck_assert_int_eq(ps_ctx_new(&l->ctx), 0);
    ck_assert_int_eq(ps_ring_new(l->ctx, "tcp://127.0.0.1:*", 0, &l->r0, ep0, sizeof ep0, err,
                                 sizeof err), 0);
    ck_assert_int_eq(ps_ring_new(l->ctx, "tcp://127.0.0.1:*", 0, &l->r1, ep1, sizeof ep1, err,
                                 sizeof err), 0);
    ps_ring_config_t cfg = {.rank = 0, .size = 2, .right = ep1, .check = s_check};
    ck_assert_int_eq(ps_ring_connect(l->r0, &cfg, err, sizeof err), 0);
    atomic_store(&s_gone, gone);
    l->buf = calloc(s_mlp_n, sizeof(float));
    int nb = ps_overlap_plan(s_mlp, 6, s_mlp_n, 0, l->b, PS_OVERLAP_MAX_BUCKETS);
    l->o = NULL;
    ck_assert_int_eq(ps_overlap_new(l->r0, l->buf, s_mlp_n, l->b, nb, &l->o), 0);
}

/* Destroys the overlap (it must be NULLed), then the rings. */
static void s_lonely_fini(s_lonely_t *l)
{
    ps_overlap_destroy(&l->o);
    ck_assert_ptr_null(l->o);
    ps_ring_destroy(&l->r0);
    ps_ring_destroy(&l->r1);
    ps_ctx_destroy(&l->ctx);
    free(l->buf);
}

START_TEST(a_failing_bucket_is_the_steps_error_and_stays)
{
    s_lonely_t l;
    s_lonely_init(&l, 1);
    ps_overlap_begin(l.o, 0);
    ps_overlap_ready(l.o, l.b[0].begin);
    ck_assert_int_eq(ps_overlap_wait(l.o), PS_ECLOSED);
    ps_overlap_begin(l.o, 1);
    ck_assert_int_eq(ps_overlap_wait(l.o), PS_ECLOSED);
    s_lonely_fini(&l);
}
END_TEST

START_TEST(destroy_returns_while_a_bucket_is_in_flight)
{
    s_lonely_t l;
    s_lonely_init(&l, 0);
    ps_overlap_begin(l.o, 0);
    ps_overlap_ready(l.o, 0); /* the thread starts the first bucket and waits for W1 */
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    atomic_store(&s_gone, 1); /* what the worker does before destroying */
    s_lonely_fini(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("overlap");
    TCase *tp = tcase_create("plan");
    tcase_add_test(tp, plan_cuts_at_layer_boundaries_last_bucket_first);
    tcase_add_test(tp, plan_refuses_bad_layouts);
    suite_add_tcase(s, tp);
    TCase *tr = tcase_create("ring");
    tcase_set_timeout(tr, 120);
    tcase_add_test(tr, members_get_exact_identical_sums_bucket_by_bucket);
    tcase_add_test(tr, a_failing_bucket_is_the_steps_error_and_stays);
    tcase_add_test(tr, destroy_returns_while_a_bucket_is_in_flight);
    suite_add_tcase(s, tr);
    return ps_test_run(s);
}
