/*
 * tests/unit/test_job.c - the job configuration (common/job.h): defaults that
 * validate, the text forms (mode: sync, async, ssp:S, sync:K/N, allreduce;
 * straggler RANK:FACTOR; lr schedule) with their edge cases and round trips,
 * ps_job_validate on each field, and ps_job_validate_nodes on the cluster
 * shape; every failure is PS_EINVAL with a one-line reason.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/job.h"
#include "tests/unit/testutil.h"

/* Asserts that ps_job_validate fails with a reason containing want. */
static void s_invalid(const ps_job_t *job, const char *want)
{
    char err[256] = "";
    ck_assert_int_eq(ps_job_validate(job, err, sizeof err), PS_EINVAL);
    ck_assert_msg(strstr(err, want), "reason '%s' lacks '%s'", err, want);
    ck_assert_ptr_null(strchr(err, '\n'));
}

/* Asserts that ps_job_validate_nodes fails with exactly the reason want. */
static void s_bad_nodes(const ps_job_t *job, int servers, int workers, const char *want)
{
    char err[256] = "";
    ck_assert_int_eq(ps_job_validate_nodes(job, servers, workers, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, want);
}

START_TEST(defaults_are_valid)
{
    ps_job_t job;
    char err[256] = "";
    ps_job_defaults(&job);
    ck_assert_int_eq(ps_job_validate(&job, err, sizeof err), 0);
    ck_assert_int_eq(ps_job_validate_nodes(&job, 1, 1, err, sizeof err), 0);
    ck_assert_str_eq(job.model, "mlp");
    ck_assert_str_eq(job.optimizer, "sgd");
    ck_assert_int_eq(job.mode, PS_MODE_SYNC);
    ck_assert_int_eq(job.straggler_rank, -1);
    ck_assert_int_eq(job.batch, 64);
    ck_assert_int_eq(job.schedule.kind, PS_LR_COSINE);
}
END_TEST

START_TEST(mode_parses_each_form_and_round_trips)
{
    static const struct {
        const char *text;
        ps_mode_t mode;
        int staleness, k, n;
    } ok[] = {
        {"sync", PS_MODE_SYNC, 0, 0, 0},        {"async", PS_MODE_ASYNC, 0, 0, 0},
        {"allreduce", PS_MODE_ALLREDUCE, 0, 0, 0}, {"ssp:0", PS_MODE_SSP, 0, 0, 0},
        {"ssp:3", PS_MODE_SSP, 3, 0, 0},        {"ssp:32", PS_MODE_SSP, PS_MAX_STALENESS, 0, 0},
        {"sync:1/1", PS_MODE_BACKUP, 0, 1, 1},  {"sync:3/4", PS_MODE_BACKUP, 0, 3, 4},
        {"sync:4/4", PS_MODE_BACKUP, 0, 4, 4},  {"sync:1/256", PS_MODE_BACKUP, 0, 1, 256},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ps_job_t job;
        char back[32];
        ps_job_defaults(&job);
        ck_assert_msg(ps_job_parse_mode(ok[i].text, &job) == 0, "'%s' rejected", ok[i].text);
        ck_assert_int_eq(job.mode, ok[i].mode);
        ck_assert_int_eq(job.staleness, ok[i].staleness);
        ck_assert_int_eq(job.backup_k, ok[i].k);
        ck_assert_int_eq(job.backup_n, ok[i].n);
        ps_job_mode_str(&job, back, sizeof back);
        ck_assert_str_eq(back, ok[i].text);
        ck_assert_int_eq(ps_job_is_stepped(&job), ok[i].mode != PS_MODE_ASYNC);
        ck_assert_int_eq(ps_job_has_servers(&job), ok[i].mode != PS_MODE_ALLREDUCE);
    }
}
END_TEST

START_TEST(mode_rejects_bad_forms_and_keeps_the_mode)
{
    static const char *const bad[] = {
        "",          "SYNC",     "sync ",     " sync",   "ssp",       "ssp:",
        "ssp:-1",    "ssp:33",   "ssp:1x",    "ssp:1.5", "sync:",     "sync:1",
        "sync:0/2",  "sync:3/2", "sync:1/2x", "sync:/2", "sync:1/-1", "sync:-1/2",
        "async:1",   "allreduce:2", "bogus",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_job_t job;
        ps_job_defaults(&job);
        job.mode = PS_MODE_ASYNC;
        ck_assert_msg(ps_job_parse_mode(bad[i], &job) == PS_EINVAL, "'%s' accepted", bad[i]);
        ck_assert_int_eq(job.mode, PS_MODE_ASYNC);
    }
}
END_TEST

START_TEST(straggler_parses_rank_and_factor_in_range)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ck_assert_int_eq(ps_job_parse_straggler("0:1", &job), 0);
    ck_assert_int_eq(job.straggler_rank, 0);
    ck_assert_double_eq(job.straggler_factor, 1.0);
    ck_assert_int_eq(ps_job_parse_straggler("3:2.5", &job), 0);
    ck_assert_int_eq(job.straggler_rank, 3);
    ck_assert_double_eq(job.straggler_factor, 2.5);
    ck_assert_int_eq(ps_job_parse_straggler("1:1000", &job), 0);
    static const char *const bad[] = {"", "1", "1:", ":2", "-1:2", "1:0.99", "1:1001",
                                      "1:2x", "1:nan", "a:2", "1:2:3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_job_defaults(&job);
        ck_assert_msg(ps_job_parse_straggler(bad[i], &job) == PS_EINVAL, "'%s' accepted",
                      bad[i]);
        ck_assert_int_eq(job.straggler_rank, -1);
    }
}
END_TEST

START_TEST(schedule_parses_each_form_and_round_trips)
{
    ps_lr_schedule_t s = {0};
    char back[32];
    ck_assert_int_eq(ps_job_parse_schedule("constant", &s), 0);
    ck_assert_int_eq(s.kind, PS_LR_CONSTANT);
    ck_assert_int_eq(ps_job_parse_schedule("cosine", &s), 0);
    ck_assert_int_eq(s.kind, PS_LR_COSINE);
    ps_job_schedule_name(&s, back, sizeof back);
    ck_assert_str_eq(back, "cosine");
    ck_assert_int_eq(ps_job_parse_schedule("step:2:0.5", &s), 0);
    ck_assert_int_eq(s.kind, PS_LR_STEP);
    ck_assert_int_eq(s.every, 2);
    ck_assert_double_eq(s.gamma, 0.5);
    ps_job_schedule_name(&s, back, sizeof back);
    ck_assert_str_eq(back, "step:2:0.5");
    ck_assert_int_eq(ps_job_parse_schedule("step:1:1", &s), 0);
    static const char *const bad[] = {"", "linear", "step", "step:0:0.5", "step:2:0",
                                      "step:2:1.5", "step:2:0.5x", "step:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(ps_job_parse_schedule(bad[i], &s) == PS_EINVAL, "'%s' accepted", bad[i]);
    }
}
END_TEST

START_TEST(validate_checks_each_field)
{
    ps_job_t job;
    ps_job_defaults(&job);
    snprintf(job.model, sizeof job.model, "resnet");
    s_invalid(&job, "unknown model 'resnet'");
    ps_job_defaults(&job);
    snprintf(job.model, sizeof job.model, "cnn");
    ck_assert_int_eq(ps_job_validate(&job, NULL, 0), 0);

    ps_job_defaults(&job);
    job.mode = (ps_mode_t)7;
    s_invalid(&job, "bad consistency mode");
    ps_job_defaults(&job);
    job.mode = PS_MODE_SSP;
    job.staleness = PS_MAX_STALENESS + 1;
    s_invalid(&job, "bad consistency mode");
    ps_job_defaults(&job);
    job.mode = PS_MODE_BACKUP;
    job.backup_k = 3;
    job.backup_n = 2;
    s_invalid(&job, "bad consistency mode");

    ps_job_defaults(&job);
    job.straggler_rank = 0;
    job.straggler_factor = 0.5;
    s_invalid(&job, "straggler factor must be in [1, 1000], got 0.5");

    static const char *const opts[] = {"sgd", "nesterov", "adam", "adagrad"};
    for (int i = 0; i < 4; i++) {
        ps_job_defaults(&job);
        snprintf(job.optimizer, sizeof job.optimizer, "%s", opts[i]);
        ck_assert_int_eq(ps_job_validate(&job, NULL, 0), 0);
    }
    snprintf(job.optimizer, sizeof job.optimizer, "lbfgs");
    s_invalid(&job, "unknown optimizer 'lbfgs'");

    ps_job_defaults(&job);
    job.lr = 0;
    s_invalid(&job, "--lr 0: out of range (0, 10]");
    job.lr = -1;
    s_invalid(&job, "--lr -1: out of range (0, 10]");
    job.lr = 1e39; /* would overflow a float32 */
    s_invalid(&job, "--lr 1e+39: out of range (0, 10]");
    job.lr = 1e-300; /* would become 0 in a float32 */
    s_invalid(&job, "--lr 1e-300: out of range (0, 10] (too small for a float32)");
    job.lr = 10;
    ck_assert_int_eq(ps_job_validate(&job, NULL, 0), 0);

    ps_job_defaults(&job);
    job.momentum = 1.0;
    s_invalid(&job, "--momentum 1: out of range [0, 1)");
    job.momentum = -0.1;
    s_invalid(&job, "--momentum -0.1: out of range [0, 1)");
    job.momentum = 0.0;
    ck_assert_int_eq(ps_job_validate(&job, NULL, 0), 0);

    ps_job_defaults(&job);
    job.weight_decay = -1e-4;
    s_invalid(&job, "--weight-decay -0.0001: out of range [0, 1)");
    job.weight_decay = 1e308;
    s_invalid(&job, "--weight-decay 1e+308: out of range [0, 1)");

    ps_job_defaults(&job);
    job.batch = 0;
    s_invalid(&job, "--batch 0: expected 1 to 65536");
    job.batch = 65537;
    s_invalid(&job, "--batch 65537: expected 1 to 65536");
    job.batch = 65536;
    ck_assert_int_eq(ps_job_validate(&job, NULL, 0), 0);

    ps_job_defaults(&job);
    job.epochs = 0;
    s_invalid(&job, "--epochs 0: expected 1 or more");

    ps_job_defaults(&job);
    job.schedule.warmup_steps = -1;
    s_invalid(&job, "--warmup-steps -1: expected 0 or more");

    ps_job_defaults(&job);
    job.max_steps = -5;
    s_invalid(&job, "--max-steps -5: expected 0 or more");
}
END_TEST

START_TEST(validate_rejects_nan)
{
    ps_job_t job;
    ps_job_defaults(&job);
    job.lr = NAN;
    s_invalid(&job, "--lr nan: out of range");
    ps_job_defaults(&job);
    job.straggler_rank = 1;
    job.straggler_factor = NAN;
    s_invalid(&job, "straggler factor");
}
END_TEST

START_TEST(nodes_servers_and_workers_in_range)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ck_assert_int_eq(ps_job_validate_nodes(&job, PS_JOB_MAX_NODES, PS_JOB_MAX_NODES, NULL, 0),
                     0);
    s_bad_nodes(&job, 0, 1, "--servers 0: expected 1 to 256 (0 only with --mode allreduce)");
    s_bad_nodes(&job, 257, 1, "--servers 257: expected 1 to 256 (0 only with --mode allreduce)");
    s_bad_nodes(&job, 1, 0, "--workers 0: expected 1 to 256");
    s_bad_nodes(&job, 1, 300, "--workers 300: expected 1 to 256");
    s_bad_nodes(&job, 1, -1, "--workers -1: expected 1 to 256");
}
END_TEST

START_TEST(nodes_allreduce_runs_without_servers)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ck_assert_int_eq(ps_job_parse_mode("allreduce", &job), 0);
    ck_assert_int_eq(ps_job_validate_nodes(&job, 0, 4, NULL, 0), 0);
    s_bad_nodes(&job, 1, 4, "--servers 1: --mode allreduce runs without servers (use 0)");
    s_bad_nodes(&job, 0, 0, "--workers 0: expected 1 to 256");
}
END_TEST

START_TEST(nodes_sync_k_of_n_needs_n_workers)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ck_assert_int_eq(ps_job_parse_mode("sync:2/3", &job), 0);
    ck_assert_int_eq(ps_job_validate_nodes(&job, 1, 3, NULL, 0), 0);
    s_bad_nodes(&job, 1, 4, "--mode sync:2/3: N must be the number of workers (4)");
    s_bad_nodes(&job, 1, 2, "--mode sync:2/3: N must be the number of workers (2)");
}
END_TEST

START_TEST(nodes_straggler_must_be_a_worker)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ck_assert_int_eq(ps_job_parse_straggler("1:2", &job), 0);
    ck_assert_int_eq(ps_job_validate_nodes(&job, 1, 2, NULL, 0), 0);
    s_bad_nodes(&job, 1, 1, "--straggler: rank 1 is not a worker (1 workers)");
}
END_TEST

START_TEST(hash_tells_configurations_apart_and_is_stable)
{
    ps_job_t a, b;
    ps_job_defaults(&a);
    ps_job_defaults(&b);
    char ha[PS_JOB_HASH_LEN + 1], hb[PS_JOB_HASH_LEN + 1];
    ps_job_hash(&a, 2, 2, ha, sizeof ha);
    ps_job_hash(&b, 2, 2, hb, sizeof hb);
    ck_assert_uint_eq(strlen(ha), PS_JOB_HASH_LEN);
    ck_assert_str_eq(ha, hb);
    ps_job_hash(&a, 2, 3, hb, sizeof hb); /* the node counts are the job's too */
    ck_assert_str_ne(ha, hb);
    b.lr = nextafter(a.lr, 1.0); /* one bit of a double */
    ps_job_hash(&b, 2, 2, hb, sizeof hb);
    ck_assert_str_ne(ha, hb);
    b = a;
    b.seed = 2;
    ps_job_hash(&b, 2, 2, hb, sizeof hb);
    ck_assert_str_ne(ha, hb);
}
END_TEST

START_TEST(async_momentum_lowers_momentum_and_keeps_the_step)
{
    ps_job_t j;
    ps_job_defaults(&j);
    double rate;
    /* sync, one worker, --staleness-lr 0, adam: the job's momentum, rate 1 */
    ck_assert(ps_job_async_momentum(&j, 4, &rate) == j.momentum && rate == 1);
    j.mode = PS_MODE_ASYNC;
    ck_assert(ps_job_async_momentum(&j, 1, &rate) == j.momentum && rate == 1);
    j.staleness_lr = 0;
    ck_assert(ps_job_async_momentum(&j, 4, &rate) == j.momentum && rate == 1);
    j.staleness_lr = 1;
    snprintf(j.optimizer, sizeof j.optimizer, "adam");
    ck_assert(ps_job_async_momentum(&j, 4, &rate) == j.momentum && rate == 1);
    snprintf(j.optimizer, sizeof j.optimizer, "nesterov");
    /* 4 workers: staleness adds 0.75; lr / (1 - momentum) stays the job's */
    j.momentum = 0.9;
    const double mu = ps_job_async_momentum(&j, 4, &rate);
    ck_assert_double_eq_tol(mu, 0.15, 1e-12);
    ck_assert_double_eq_tol(j.lr * rate / (1 - mu), j.lr / (1 - j.momentum), 1e-12);
    /* many workers: not below 0 */
    ck_assert(ps_job_async_momentum(&j, 20, &rate) == 0);
    ck_assert_double_eq_tol(rate, 10, 1e-9);
}
END_TEST

/* --chunk-kib 0: the shards' chunk, a power of two from 4 to 16 KiB that
 * cuts a mean shard into 32 chunks or more (the MLP's 235,146 keys: 4 KiB
 * at 8 servers, 8 at 2, 16 at one); the view carries it resolved. */
START_TEST(auto_chunk_follows_the_shard)
{
    ck_assert_int_eq(ps_job_auto_chunk_kib(235146, 8), 4);
    ck_assert_int_eq(ps_job_auto_chunk_kib(235146, 4), 4);
    ck_assert_int_eq(ps_job_auto_chunk_kib(235146, 2), 8);
    ck_assert_int_eq(ps_job_auto_chunk_kib(235146, 1), 16);
    ck_assert_int_eq(ps_job_auto_chunk_kib(1 << 18, 2), 16); /* 512 KiB: 32 of 16 */
    ck_assert_int_eq(ps_job_auto_chunk_kib((1 << 18) - 1, 2), 8);
    ck_assert_int_eq(ps_job_auto_chunk_kib(10, 0), 4);
    ps_job_t job;
    ps_job_defaults(&job);
    ck_assert_int_eq(job.chunk_kib, 0);
    char err[128];
    ck_assert_int_eq(ps_job_validate(&job, err, sizeof err), 0);
}
END_TEST

START_TEST(new_ids_differ)
{
    char a[64], b[64];
    ps_job_new_id(a, sizeof a);
    ck_assert_int_eq(strncmp(a, "job-", 4), 0);
    int same = 0;
    for (int i = 0; i < 4; i++) { /* 16 random bits: 4 equal draws in a row are 2^-64 */
        ps_job_new_id(b, sizeof b);
        same += !strcmp(a, b);
    }
    ck_assert_int_lt(same, 4);
}
END_TEST

START_TEST(resume_fields_name_the_arithmetic_in_flag_text)
{
    ps_job_t a, b;
    ps_job_field_t fa[PS_JOB_RESUME_FIELDS], fb[PS_JOB_RESUME_FIELDS];
    char ha[PS_JOB_HASH_LEN + 1], hb[PS_JOB_HASH_LEN + 1];
    ps_job_defaults(&a);
    b = a;
    b.epochs = a.epochs + 5; /* may change on a resume: not a field */
    b.max_steps = 7;
    ps_job_resume_fields(&a, fa);
    ps_job_resume_fields(&b, fb);
    ps_job_resume_hash(fa, ha, sizeof ha);
    ps_job_resume_hash(fb, hb, sizeof hb);
    ck_assert_str_eq(ha, hb);
    ck_assert_int_eq(ps_job_resume_index("epochs"), -1);
    const int lr = ps_job_resume_index("lr");
    ck_assert_int_ge(lr, 0);
    ck_assert_str_eq(fa[lr].flag, "lr");
    ck_assert_str_eq(fa[lr].value, "0.05"); /* the shortest text that reads back */
    b.lr = 0.5;
    ps_job_resume_fields(&b, fb);
    ps_job_resume_hash(fb, hb, sizeof hb);
    ck_assert_str_ne(ha, hb);
    ck_assert_str_eq(fb[lr].value, "0.5");
    ck_assert_str_eq(fa[ps_job_resume_index("mode")].value, "sync");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("job");
    TCase *tc = tcase_create("job");
    tcase_add_test(tc, defaults_are_valid);
    tcase_add_test(tc, mode_parses_each_form_and_round_trips);
    tcase_add_test(tc, mode_rejects_bad_forms_and_keeps_the_mode);
    tcase_add_test(tc, straggler_parses_rank_and_factor_in_range);
    tcase_add_test(tc, schedule_parses_each_form_and_round_trips);
    tcase_add_test(tc, validate_checks_each_field);
    tcase_add_test(tc, validate_rejects_nan);
    tcase_add_test(tc, nodes_servers_and_workers_in_range);
    tcase_add_test(tc, nodes_allreduce_runs_without_servers);
    tcase_add_test(tc, nodes_sync_k_of_n_needs_n_workers);
    tcase_add_test(tc, nodes_straggler_must_be_a_worker);
    tcase_add_test(tc, hash_tells_configurations_apart_and_is_stable);
    tcase_add_test(tc, async_momentum_lowers_momentum_and_keeps_the_step);
    tcase_add_test(tc, auto_chunk_follows_the_shard);
    tcase_add_test(tc, new_ids_differ);
    tcase_add_test(tc, resume_fields_name_the_arithmetic_in_flag_text);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
