/*
 * tests/unit/test_optim.c - the optimizers against their reference formulas
 * (torch.optim's documented updates, FTRL-Proximal's Algorithm 1) evaluated
 * in float64 over several steps, the learning-rate schedules against theirs,
 * and the embedding rows' initial values (deterministic, uniform).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/optim.h"
#include "tests/unit/testutil.h"

enum { S_N = 257, S_STEPS = 5 };

/* Runs S_STEPS of the optimizer and of the float64 formula side by side. */
static void s_check(float lr, float mu, float wd, float scale)
{
    float w[S_N], v[S_N], g[S_N];
    double rw[S_N], rv[S_N];
    ps_test_fill(w, S_N, -1, 1, 1);
    memset(v, 0, sizeof(v));
    for (int i = 0; i < S_N; i++) {
        rw[i] = w[i];
        rv[i] = 0.0;
    }
    const ps_optim_sgd_t o = {.lr = lr, .momentum = mu, .weight_decay = wd};
    for (int t = 0; t < S_STEPS; t++) {
        ps_test_fill(g, S_N, -1, 1, 100 + t);
        ps_optim_sgd_step(&o, w, v, g, scale, S_N);
        for (int i = 0; i < S_N; i++) {
            double gg = (double)g[i] * scale + (double)wd * rw[i];
            if (mu != 0.0f) {
                rv[i] = mu * rv[i] + gg;
                gg = rv[i];
            }
            rw[i] -= lr * gg;
        }
    }
    for (int i = 0; i < S_N; i++) {
        ck_assert_msg(ps_test_close(w[i], rw[i], 1e-6, 1e-5), "w[%d]=%g want %g", i, w[i],
                      rw[i]);
        if (mu != 0.0f) {
            ck_assert(ps_test_close(v[i], rv[i], 1e-6, 1e-5));
        }
    }
}

START_TEST(plain_sgd_matches_formula)
{
    s_check(0.1f, 0.0f, 0.0f, 1.0f);
}
END_TEST

START_TEST(momentum_matches_formula)
{
    s_check(0.05f, 0.9f, 0.0f, 1.0f);
}
END_TEST

START_TEST(momentum_with_weight_decay_and_scale_matches_formula)
{
    s_check(0.05f, 0.9f, 5e-4f, 0.25f);
}
END_TEST

START_TEST(plain_sgd_leaves_velocity_untouched)
{
    float w[4] = {1, 2, 3, 4}, v[4] = {7, 7, 7, 7}, g[4] = {1, 1, 1, 1};
    const ps_optim_sgd_t o = {.lr = 0.5f, .momentum = 0.0f, .weight_decay = 0.0f};
    ps_optim_sgd_step(&o, w, v, g, 1.0f, 4);
    ck_assert_float_eq(w[0], 0.5f);
    ck_assert_float_eq(v[3], 7.0f);
    /* n == 0 touches nothing */
    ps_optim_sgd_step(&o, w, v, g, 1.0f, 0);
    ck_assert_float_eq(w[0], 0.5f);
}
END_TEST

/* Float64 reference of one update of every optimizer kind (see optim.h). */
typedef struct {
    double w[S_N], a[S_N], b[S_N]; /* parameters and up to two state arrays */
} s_ref_t;

static void s_ref_step(const ps_optim_t *o, double lr, int64_t t, s_ref_t *r,
                       const float *g, double scale)
{
    for (int i = 0; i < S_N; i++) {
        double gg = (double)g[i] * scale + (double)o->weight_decay * r->w[i];
        switch (o->kind) {
        case PS_OPT_SGD:
            if (o->momentum > 0) {
                r->a[i] = o->momentum * r->a[i] + gg;
                gg = r->a[i];
            }
            r->w[i] -= lr * gg;
            break;
        case PS_OPT_NESTEROV:
            r->a[i] = o->momentum * r->a[i] + gg;
            r->w[i] -= lr * (gg + o->momentum * r->a[i]);
            break;
        case PS_OPT_ADAM: {
            double b1 = o->beta1, b2 = o->beta2;
            r->a[i] = b1 * r->a[i] + (1 - b1) * gg;
            r->b[i] = b2 * r->b[i] + (1 - b2) * gg * gg;
            double mh = r->a[i] / (1 - pow(b1, (double)t));
            double vh = r->b[i] / (1 - pow(b2, (double)t));
            r->w[i] -= lr * mh / (sqrt(vh) + o->eps);
            break;
        }
        case PS_OPT_ADAGRAD:
            r->a[i] += gg * gg;
            r->w[i] -= lr * gg / (sqrt(r->a[i]) + o->eps);
            break;
        case PS_OPT_FTRL: {
            if (r->b[i] == 0) { /* z whose closed form is the weight */
                r->a[i] = -(r->w[i] * (o->beta / lr + o->l2) + (r->w[i] < 0 ? -o->l1 : o->l1));
            }
            double l1 = o->l1, n1 = r->b[i] + gg * gg;
            double sigma = (sqrt(n1) - sqrt(r->b[i])) / lr;
            r->a[i] += gg - sigma * r->w[i];
            r->b[i] = n1;
            double z = r->a[i], sgn = z > 0 ? 1.0 : -1.0;
            r->w[i] = fabs(z) <= l1
                          ? 0.0
                          : -(z - sgn * l1) / ((o->beta + sqrt(n1)) / lr + o->l2);
            break;
        }
        }
    }
}

/* Runs S_STEPS of ps_optim_step on the whole vector, split into two
 * sub-range updates (stride semantics), and of the reference, side by side. */
static void s_check_kind(const char *name, double lr, double mu, double wd, double l1,
                         double l2)
{
    ps_job_t job;
    ps_job_defaults(&job);
    snprintf(job.optimizer, sizeof job.optimizer, "%s", name);
    job.momentum = mu;
    job.weight_decay = wd;
    job.l1 = l1;
    job.l2 = l2;
    ps_optim_t o;
    ck_assert_int_eq(ps_optim_from_job(&job, &o), 0);
    const int nstate = ps_optim_state_floats(&o);
    float w[S_N], state[2 * S_N], g[S_N];
    static s_ref_t r;
    ps_test_fill(w, S_N, -1, 1, 3);
    memset(state, 0, sizeof state);
    memset(&r, 0, sizeof r);
    for (int i = 0; i < S_N; i++) {
        r.w[i] = w[i];
    }
    const int cut = 100; /* update [0,cut) and [cut,S_N) separately */
    for (int t = 1; t <= S_STEPS; t++) {
        ps_test_fill(g, S_N, -1, 1, 200 + t);
        ps_optim_step(&o, (float)lr, t, w, state, S_N, g, 0.5f, cut);
        ps_optim_step(&o, (float)lr, t, w + cut, state + cut, S_N, g + cut, 0.5f, S_N - cut);
        s_ref_step(&o, (float)lr, t, &r, g, 0.5);
    }
    for (int i = 0; i < S_N; i++) {
        ck_assert_msg(ps_test_close(w[i], r.w[i], 1e-6, 1e-5), "%s: w[%d]=%.9g want %.9g",
                      name, i, w[i], r.w[i]);
        if (nstate >= 1) {
            ck_assert_msg(ps_test_close(state[i], r.a[i], 1e-6, 1e-5), "%s: state", name);
        }
        if (nstate == 2) {
            ck_assert_msg(ps_test_close(state[S_N + i], r.b[i], 1e-6, 1e-5), "%s: 2nd", name);
        }
    }
}

START_TEST(every_optimizer_matches_its_formula)
{
    s_check_kind("sgd", 0.1, 0.0, 0.0, 0.0, 0.0);
    s_check_kind("sgd", 0.05, 0.9, 1e-4, 0.0, 0.0);
    s_check_kind("nesterov", 0.05, 0.9, 1e-4, 0.0, 0.0);
    s_check_kind("adam", 0.01, 0.0, 0.0, 0.0, 0.0);
    s_check_kind("adam", 0.001, 0.0, 1e-2, 0.0, 0.0);
    s_check_kind("adagrad", 0.1, 0.0, 0.0, 0.0, 0.0);
    s_check_kind("adagrad", 0.05, 0.0, 1e-3, 0.0, 0.0);
    s_check_kind("ftrl", 0.1, 0.0, 0.0, 0.0, 0.0);
    s_check_kind("ftrl", 0.05, 0.0, 1e-3, 0.05, 0.5);
}
END_TEST

/* FTRL with an L1 strength: the weights whose |z| stays within l1 are
 * exactly 0 (sparsity), the others follow the float64 formula, over several
 * steps from non-zero starting weights. */
START_TEST(ftrl_l1_makes_weights_exactly_zero)
{
    ps_job_t job;
    ps_job_defaults(&job);
    snprintf(job.optimizer, sizeof job.optimizer, "ftrl");
    job.l1 = 0.3;
    job.l2 = 0.1;
    ps_optim_t o;
    ck_assert_int_eq(ps_optim_from_job(&job, &o), 0);
    ck_assert_int_eq(o.kind, PS_OPT_FTRL);
    ck_assert_float_eq(o.l1, 0.3f);
    ck_assert_float_eq(o.l2, 0.1f);
    ck_assert_float_eq(o.beta, 1.0f);
    ck_assert_int_eq(ps_optim_state_floats(&o), 2);
    float w[S_N], state[2 * S_N] = {0}, g[S_N];
    static s_ref_t r;
    memset(&r, 0, sizeof r);
    ps_test_fill(w, S_N, -1, 1, 11);
    for (int i = 0; i < S_N; i++) {
        r.w[i] = w[i];
    }
    for (int t = 1; t <= S_STEPS; t++) {
        ps_test_fill(g, S_N, -1, 1, 400 + (uint64_t)t);
        ps_optim_step(&o, 0.1f, t, w, state, S_N, g, 1.0f, S_N);
        s_ref_step(&o, 0.1f, t, &r, g, 1.0);
    }
    int zeros = 0;
    for (int i = 0; i < S_N; i++) {
        ck_assert_msg(ps_test_close(w[i], r.w[i], 1e-6, 1e-5), "w[%d]=%.9g want %.9g", i,
                      w[i], r.w[i]);
        ck_assert_msg((w[i] == 0.0f) == (r.w[i] == 0.0), "w[%d]: zero in one only", i);
        ck_assert(ps_test_close(state[i], r.a[i], 1e-6, 1e-5));
        ck_assert(ps_test_close(state[S_N + i], r.b[i], 1e-6, 1e-5));
        zeros += w[i] == 0.0f;
    }
    ck_assert_msg(zeros > 0 && zeros < S_N, "%d of %d weights are 0", zeros, S_N);
}
END_TEST

/* The same update in float, one element at a time, in optim.c's order of
 * operations: what every build of the loops (vector widths, kernels/optim.c)
 * must produce bit for bit, sync results being checked bitwise. */
static void s_float_step(const ps_optim_t *o, float lr, int64_t t, float *w, float *a,
                         float *b, const float *g, float scale, size_t n)
{
    const float wd = o->weight_decay, mu = o->momentum;
    const float c1 = 1.0f / (float)(1.0 - pow(o->beta1, (double)t));
    const float c2 = 1.0f / (float)(1.0 - pow(o->beta2, (double)t));
    for (size_t i = 0; i < n; i++) {
        float gg = g[i] * scale + wd * w[i];
        switch (o->kind) {
        case PS_OPT_SGD:
            if (mu == 0.0f) {
                w[i] = w[i] - lr * gg;
                break;
            }
            a[i] = mu * a[i] + gg;
            w[i] = w[i] - lr * a[i];
            break;
        case PS_OPT_NESTEROV:
            a[i] = mu * a[i] + gg;
            w[i] = w[i] - lr * (gg + mu * a[i]);
            break;
        case PS_OPT_ADAM:
            a[i] = o->beta1 * a[i] + (1.0f - o->beta1) * gg;
            b[i] = o->beta2 * b[i] + (1.0f - o->beta2) * gg * gg;
            w[i] = w[i] - lr * (a[i] * c1) / (sqrtf(b[i] * c2) + o->eps);
            break;
        case PS_OPT_ADAGRAD:
            a[i] += gg * gg;
            w[i] = w[i] - lr * gg / (sqrtf(a[i]) + o->eps);
            break;
        case PS_OPT_FTRL: {
            if (b[i] == 0.0f) {
                a[i] = -(w[i] * (o->beta / lr + o->l2) + copysignf(o->l1, w[i]));
            }
            float n1 = b[i] + gg * gg, root = sqrtf(n1);
            float sigma = (root - sqrtf(b[i])) / lr;
            a[i] += gg - sigma * w[i];
            b[i] = n1;
            if (fabsf(a[i]) <= o->l1) {
                w[i] = 0.0f;
            } else {
                float shrunk = a[i] > 0 ? a[i] - o->l1 : a[i] + o->l1;
                w[i] = -shrunk / ((o->beta + root) / lr + o->l2);
            }
            break;
        }
        }
    }
}

enum { S_BN = 1031 }; /* odd: every vector loop has a tail */

START_TEST(every_optimizer_is_bitwise_the_scalar_float_formula)
{
    const char *names[] = {"sgd", "sgd", "nesterov", "adam", "adagrad", "ftrl", "ftrl"};
    const double mus[] = {0.0, 0.9, 0.9, 0.0, 0.0, 0.0, 0.0};
    const double l1s[] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.02};
    static float w[S_BN + 4], st[2 * S_BN + 4], g[S_BN + 4], wo[S_BN + 4];
    static float rw[S_BN], ra[S_BN], rb[S_BN];
    for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++) {
        ps_job_t job;
        ps_job_defaults(&job);
        snprintf(job.optimizer, sizeof job.optimizer, "%s", names[k]);
        job.momentum = mus[k];
        job.weight_decay = 1e-3;
        job.l1 = l1s[k];
        job.l2 = l1s[k] * 10;
        ps_optim_t o;
        ck_assert_int_eq(ps_optim_from_job(&job, &o), 0);
        for (int off = 0; off < 4; off++) { /* vector loops start off the alignment */
            ps_test_fill(w + off, S_BN, -1, 1, 5);
            ps_test_fill(st + off, 2 * S_BN, 0, 1, 6);
            memcpy(rw, w + off, sizeof rw);
            memcpy(ra, st + off, sizeof ra);
            memcpy(rb, st + off + S_BN, sizeof rb);
            for (int t = 1; t <= 3; t++) {
                ps_test_fill(g + off, S_BN, -1, 1, (uint64_t)(300 + t));
                if (t == 2) { /* the copy-on-write form: same bits, other buffer */
                    ps_optim_step_from(&o, 0.01f, t, wo, w + off, st + off, S_BN, g + off,
                                       0.25f, S_BN);
                    memcpy(w + off, wo, S_BN * sizeof(float));
                } else {
                    ps_optim_step(&o, 0.01f, t, w + off, st + off, S_BN, g + off, 0.25f,
                                  S_BN);
                }
                s_float_step(&o, 0.01f, t, rw, ra, rb, g + off, 0.25f, S_BN);
            }
            ck_assert_msg(!memcmp(rw, w + off, sizeof rw), "%s mu=%g: w differs", names[k],
                          mus[k]);
            if (ps_optim_state_floats(&o) >= 1) {
                ck_assert_msg(!memcmp(ra, st + off, sizeof ra), "%s: state differs",
                              names[k]);
            }
            if (ps_optim_state_floats(&o) == 2) {
                ck_assert_msg(!memcmp(rb, st + off + S_BN, sizeof rb),
                              "%s: 2nd state differs", names[k]);
            }
        }
    }
}
END_TEST

/* For every optimizer, ps_optim_step_ok writes nothing and says exactly
 * whether the step would leave every value and state float finite: a
 * gradient that overflows the step at the first, a middle or the last key
 * is found, and the ordinary one is not. */
START_TEST(step_ok_foresees_an_overflowing_step_and_writes_nothing)
{
    const char *names[] = {"sgd", "sgd", "nesterov", "adam", "adagrad", "ftrl"};
    const double mus[] = {0.0, 0.9, 0.9, 0.0, 0.0, 0.0};
    static float w[S_BN], st[2 * S_BN], g[S_BN], w0[S_BN], st0[2 * S_BN];
    const size_t at[] = {0, 500, S_BN - 1};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        ps_job_t job;
        ps_job_defaults(&job);
        snprintf(job.optimizer, sizeof job.optimizer, "%s", names[k]);
        job.momentum = mus[k];
        ps_optim_t o;
        ck_assert_int_eq(ps_optim_from_job(&job, &o), 0);
        for (size_t i = 0; i <= sizeof at / sizeof at[0]; i++) {
            ps_test_fill(w0, S_BN, -1, 1, 11);
            ps_test_fill(st0, 2 * S_BN, 0, 1, 12);
            ps_test_fill(g, S_BN, -1, 1, 13);
            if (i < sizeof at / sizeof at[0]) {
                g[at[i]] = 3e38f; /* finite; ten times it is not */
            }
            memcpy(w, w0, sizeof w);
            memcpy(st, st0, sizeof st);
            const int ok = ps_optim_step_ok(&o, 10.0f, 2, w, st, S_BN, g, 1.0f, S_BN);
            ck_assert_msg(!memcmp(w, w0, sizeof w) && !memcmp(st, st0, sizeof st),
                          "%s: the check wrote", names[k]);
            ck_assert_msg(ok == (i == sizeof at / sizeof at[0]), "%s: ok %d with case %zu",
                          names[k], ok, i);
            ps_optim_step(&o, 10.0f, 2, w, st, S_BN, g, 1.0f, S_BN);
            const int finite = ps_optim_finite(w, S_BN) &&
                               ps_optim_finite(st, (size_t)ps_optim_state_floats(&o) * S_BN);
            ck_assert_msg(ok == finite, "%s: ok %d but the step is %sfinite", names[k], ok,
                          finite ? "" : "not ");
        }
    }
}
END_TEST

/* A NaN or an infinity anywhere (first, middle, last element; any byte
 * alignment of the array) is found; finite extremes are not. */
START_TEST(finite_finds_any_nonfinite_value_at_any_place)
{
    static unsigned char buf[4 * S_BN + 8];
    const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
    const float good[] = {3.4028235e38f, -3.4028235e38f, 1e-45f, -0.0f};
    for (int shift = 0; shift < 4; shift++) {
        float *f = (float *)(void *)(buf + 4); /* aligned base for filling */
        ps_test_fill(f, S_BN, -1, 1, 9);
        memmove(buf + shift, f, S_BN * sizeof(float));
        const unsigned char *p = buf + shift;
        ck_assert(ps_optim_finite(p, S_BN));
        ck_assert(ps_optim_finite(p, 0));
        const size_t at[] = {0, 1, 7, 8, 500, S_BN - 2, S_BN - 1};
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
            float keep;
            memcpy(&keep, p + 4 * at[i], 4);
            for (int b = 0; b < 4; b++) {
                memcpy((unsigned char *)p + 4 * at[i], &bad[b], 4);
                ck_assert_msg(!ps_optim_finite(p, S_BN), "shift %d at %zu kind %d", shift,
                              at[i], b);
                ck_assert(ps_optim_finite(p, at[i])); /* the values before it */
                memcpy((unsigned char *)p + 4 * at[i], &good[b], 4);
                ck_assert(ps_optim_finite(p, S_BN));
            }
            memcpy((unsigned char *)p + 4 * at[i], &keep, 4);
        }
    }
}
END_TEST

START_TEST(optimizer_names_and_state_sizes)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ps_optim_t o;
    const char *names[] = {"sgd", "nesterov", "adam", "adagrad", "ftrl"};
    const int floats[] = {1, 1, 2, 1, 2}; /* default momentum 0.9: sgd keeps velocity */
    char err[128];
    job.schedule.kind = PS_LR_CONSTANT; /* ftrl's */
    for (int i = 0; i < 5; i++) {
        snprintf(job.optimizer, sizeof job.optimizer, "%s", names[i]);
        ck_assert_int_eq(ps_optim_from_job(&job, &o), 0);
        ck_assert_int_eq((int)o.kind, i);
        ck_assert_int_eq(ps_optim_state_floats(&o), floats[i]);
        /* every name the optimizers know is a valid job */
        ck_assert_msg(ps_job_validate(&job, err, sizeof err) == 0, "%s: %s", names[i], err);
    }
    job.momentum = 0;
    snprintf(job.optimizer, sizeof job.optimizer, "sgd");
    ck_assert_int_eq(ps_optim_from_job(&job, &o), 0);
    ck_assert_int_eq(ps_optim_state_floats(&o), 0);
    snprintf(job.optimizer, sizeof job.optimizer, "rmsprop");
    ck_assert_int_eq(ps_optim_from_job(&job, &o), PS_EINVAL);
    ck_assert_int_eq(ps_job_validate(&job, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "adagrad or ftrl"));
    /* ftrl's weights are a closed form in lr: a falling lr would shrink them */
    snprintf(job.optimizer, sizeof job.optimizer, "ftrl");
    job.schedule.kind = PS_LR_COSINE;
    ck_assert_int_eq(ps_job_validate(&job, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "--lr-schedule constant"));
}
END_TEST

enum { S_DIM = 16, S_ROWS = 4096 };

/* Row initial values depend on (seed, key, i) alone: the same bits every
 * time, whatever was computed before; in [-bound, bound); another key or
 * seed gives other values; uniform (mean near 0, variance near bound^2/3). */
START_TEST(row_init_is_a_deterministic_uniform_hash)
{
    float a[S_DIM], b[S_DIM], c[S_DIM];
    ps_optim_row_init(7, 12345, S_DIM, 0.05f, a);
    ps_optim_row_init(7, 99, S_DIM, 0.05f, c);
    ps_optim_row_init(7, 12345, S_DIM, 0.05f, b);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    /* a prefix of a wider row is the narrower row */
    ps_optim_row_init(7, 12345, 5, 0.05f, c);
    ck_assert_int_eq(memcmp(a, c, 5 * sizeof(float)), 0);
    ps_optim_row_init(8, 12345, S_DIM, 0.05f, b);
    ps_optim_row_init(7, 12346, S_DIM, 0.05f, c);
    int same_seed = 0, same_key = 0;
    for (int i = 0; i < S_DIM; i++) {
        same_seed += a[i] == b[i];
        same_key += a[i] == c[i];
    }
    ck_assert_int_le(same_seed, 1);
    ck_assert_int_le(same_key, 1);
    /* sequential keys, as ids often are: in range, unbiased, spread */
    const float bound = 0.25f;
    double sum = 0, sq = 0;
    float lo = 1, hi = -1, row[S_DIM];
    for (uint64_t k = 0; k < S_ROWS; k++) {
        ps_optim_row_init(1, k, S_DIM, bound, row);
        for (int i = 0; i < S_DIM; i++) {
            sum += row[i];
            sq += (double)row[i] * row[i];
            lo = row[i] < lo ? row[i] : lo;
            hi = row[i] > hi ? row[i] : hi;
        }
    }
    const double m = S_DIM * (double)S_ROWS, mean = sum / m, var = sq / m - mean * mean;
    /* the mean's standard error is bound / sqrt(3 m) = 0.0011 */
    ck_assert_msg(fabs(mean) < 0.005, "mean %g", mean);
    ck_assert_msg(fabs(var - bound * bound / 3) < 0.05 * bound * bound / 3, "variance %g",
                  var);
    ck_assert_msg(lo >= -bound && hi < bound, "values in [%g, %g]", lo, hi);
    ck_assert(lo < -0.99f * bound && hi > 0.99f * bound);
    /* bound 0: zeros, +0 */
    ps_optim_row_init(1, 5, S_DIM, 0.0f, row);
    for (int i = 0; i < S_DIM; i++) {
        ck_assert(row[i] == 0.0f && !signbit(row[i]));
    }
}
END_TEST

START_TEST(schedules_match_their_formulas)
{
    ps_job_t job;
    ps_job_defaults(&job);
    job.lr = 0.1;
    ck_assert_int_eq(ps_job_parse_schedule("constant", &job.schedule), 0);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 500, 100, 1000), 0.1f, 1e-7f);
    ck_assert_int_eq(ps_job_parse_schedule("cosine", &job.schedule), 0);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 0, 100, 1000), 0.1f, 1e-7f);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 500, 100, 1000), 0.05f, 1e-7f);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 250, 100, 1000),
                           (float)(0.05 * (1 + cos(M_PI / 4))), 1e-7f);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 1000, 100, 1000), 0.0f, 1e-7f);
    ck_assert_int_eq(ps_job_parse_schedule("step:2:0.5", &job.schedule), 0);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 199, 100, 1000), 0.1f, 1e-7f);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 200, 100, 1000), 0.05f, 1e-7f);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 450, 100, 1000), 0.025f, 1e-7f);
    job.schedule.warmup_steps = 10;
    ck_assert_float_eq_tol(ps_optim_lr(&job, 0, 100, 1000), 0.01f, 1e-7f);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 4, 100, 1000), 0.05f, 1e-7f);
    ck_assert_float_eq_tol(ps_optim_lr(&job, 10, 100, 1000), 0.1f, 1e-7f);
    const char *bad[] = {"", "linear", "step", "step:0:0.5", "step:2:0", "step:2:1.5",
                         "step:2:0.5x", "cosine "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(ps_job_parse_schedule(bad[i], &job.schedule), PS_EINVAL);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("sgd");
    tcase_add_test(tc, plain_sgd_matches_formula);
    tcase_add_test(tc, momentum_matches_formula);
    tcase_add_test(tc, momentum_with_weight_decay_and_scale_matches_formula);
    tcase_add_test(tc, plain_sgd_leaves_velocity_untouched);
    tcase_add_test(tc, every_optimizer_matches_its_formula);
    tcase_add_test(tc, ftrl_l1_makes_weights_exactly_zero);
    tcase_add_test(tc, every_optimizer_is_bitwise_the_scalar_float_formula);
    tcase_add_test(tc, finite_finds_any_nonfinite_value_at_any_place);
    tcase_add_test(tc, step_ok_foresees_an_overflowing_step_and_writes_nothing);
    tcase_add_test(tc, optimizer_names_and_state_sizes);
    tcase_add_test(tc, row_init_is_a_deterministic_uniform_hash);
    tcase_add_test(tc, schedules_match_their_formulas);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
