/*
 * tests/unit/test_flags.c - the roles' flag tables (scheduler/flags.h,
 * server/flags.h, worker/flags.h): each table is well formed (names unique,
 * every entry has a help line and points into its struct), its defaults pass
 * its check, and each check gives PS_EINVAL with the one-line reason the
 * program prints.
 */
#include <check.h>
#include <string.h>

#include "common/error.h"
#include "scheduler/flags.h"
#include "server/flags.h"
#include "tests/unit/testutil.h"
#include "worker/flags.h"

/* Checks one table: n entries, names unique and without "--", each with help,
 * each destination inside [base, base + size). */
static void s_check_table(const ps_flag_t *t, size_t n, size_t want, const void *base,
                          size_t size)
{
    ck_assert_uint_eq(n, want);
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(t[i].name);
        ck_assert(t[i].name[0] && t[i].name[0] != '-');
        ck_assert_msg(t[i].help && t[i].help[0], "--%s has no help", t[i].name);
        ck_assert_msg(t[i].type == PS_FLAG_BOOL || t[i].metavar, "--%s has no metavar",
                      t[i].name);
        const char *d = t[i].dst, *b = base;
        ck_assert_msg(d >= b && d < b + size, "--%s points outside its struct", t[i].name);
        for (size_t k = 0; k < i; k++) {
            ck_assert_msg(strcmp(t[i].name, t[k].name), "--%s twice", t[i].name);
        }
    }
}

START_TEST(tables_are_well_formed)
{
    ps_scheduler_flags_t c;
    ps_server_flags_t s;
    ps_worker_flags_t w;
    ps_flag_t t[64];
    ps_scheduler_flags_init(&c);
    s_check_table(t, ps_scheduler_flags_table(&c, t), PS_SCHEDULER_NFLAGS, &c, sizeof c);
    ps_server_flags_init(&s);
    s_check_table(t, ps_server_flags_table(&s, t), PS_SERVER_NFLAGS, &s, sizeof s);
    ps_worker_flags_init(&w);
    s_check_table(t, ps_worker_flags_table(&w, t), PS_WORKER_NFLAGS, &w, sizeof w);
}
END_TEST

START_TEST(scheduler_defaults_pass_and_fill_the_job)
{
    ps_scheduler_flags_t f;
    char err[200] = "";
    ps_scheduler_flags_init(&f);
    f.model = "cnn";
    f.mode = "ssp:2";
    f.seed = 9;
    f.max_steps = 100;
    f.warmup = 10;
    f.straggler = "0:2";
    ck_assert_int_eq(ps_scheduler_flags_check(&f, err, sizeof err), 0);
    ck_assert_str_eq(f.cfg.job.model, "cnn");
    ck_assert_int_eq(f.cfg.job.mode, PS_MODE_SSP);
    ck_assert_int_eq(f.cfg.job.staleness, 2);
    ck_assert_uint_eq(f.cfg.job.seed, 9);
    ck_assert_int_eq(f.cfg.job.max_steps, 100);
    ck_assert_int_eq(f.cfg.job.schedule.warmup_steps, 10);
    ck_assert_int_eq(f.cfg.job.straggler_rank, 0);
}
END_TEST

/* ps_scheduler_flags_check on defaults changed by set(); asserts the reason. */
static void s_sched_bad(void (*set)(ps_scheduler_flags_t *), const char *want)
{
    ps_scheduler_flags_t f;
    char err[200] = "";
    ps_scheduler_flags_init(&f);
    set(&f);
    ck_assert_int_eq(ps_scheduler_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, want);
}

static void s_bad_mode(ps_scheduler_flags_t *f)
{
    f->mode = "bogus";
}
static void s_bad_schedule(ps_scheduler_flags_t *f)
{
    f->schedule = "step:0:2";
}
static void s_bad_straggler(ps_scheduler_flags_t *f)
{
    f->straggler = "1:0.5";
}
static void s_no_servers(ps_scheduler_flags_t *f)
{
    f->cfg.servers = 0;
}
static void s_bad_wait(ps_scheduler_flags_t *f)
{
    f->cfg.wait = 0;
}
static void s_bad_batch(ps_scheduler_flags_t *f)
{
    f->cfg.job.batch = 0;
}
static void s_bad_model(ps_scheduler_flags_t *f)
{
    f->model = "bogus";
}

START_TEST(scheduler_check_names_the_flag)
{
    s_sched_bad(s_bad_mode, "--mode bogus: expected sync, async, ssp:S (0 <= S <= 32), "
                            "sync:K/N (1 <= K <= N) or allreduce");
    s_sched_bad(s_bad_schedule, "--lr-schedule step:0:2: expected constant, cosine or "
                                "step:EVERY:GAMMA (EVERY >= 1 epochs, 0 < GAMMA <= 1)");
    s_sched_bad(s_bad_straggler, "--straggler 1:0.5: expected RANK:FACTOR with FACTOR in "
                                 "[1, 1000]");
    s_sched_bad(s_no_servers, "--servers 0: expected 1 to 256 (0 only with --mode allreduce)");
    s_sched_bad(s_bad_wait, "--wait 0: out of range (0, 86400]");
    s_sched_bad(s_bad_batch, "--batch 0: expected 1 to 65536");
    s_sched_bad(s_bad_model, "unknown model 'bogus' (expected mlp, cnn or ctr)");
}
END_TEST

START_TEST(server_check)
{
    ps_server_flags_t f;
    char err[200] = "";
    ps_server_flags_init(&f);
    ck_assert_int_eq(ps_server_flags_check(&f, err, sizeof err), 0);
    f.cfg.report_missing = 0;
    ck_assert_int_eq(ps_server_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "--report-missing 0: out of range (0, 86400]");
    ps_server_flags_init(&f);
    f.cfg.connect_timeout = -1;
    ck_assert_int_eq(ps_server_flags_check(&f, err, sizeof err), PS_EINVAL);
    ps_server_flags_init(&f);
    f.cfg.rank = -2147483647; /* was taken as "any rank" */
    ck_assert_int_eq(ps_server_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "--rank -2147483647: out of range [-1, 65535]");
}
END_TEST

START_TEST(worker_check_and_cpu_gemm)
{
    ps_worker_flags_t f;
    char err[200] = "";
    ps_worker_flags_init(&f);
    ck_assert_int_eq(ps_worker_flags_check(&f, err, sizeof err), 0);
    ck_assert_int_eq(f.gemm, PS_CPU_GEMM_AUTO);
    f.cpu_gemm = "blas";
    ck_assert_int_eq(ps_worker_flags_check(&f, err, sizeof err), 0);
    ck_assert_int_eq(f.gemm, PS_CPU_GEMM_BLAS);
    f.cpu_gemm = "fast";
    ck_assert_int_eq(ps_worker_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "--cpu-gemm fast: expected auto, blas or avx512");
    ps_worker_flags_init(&f);
    f.cfg.overlap = 2;
    ck_assert_int_eq(ps_worker_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "--overlap 2: expected 0 or 1");
    ps_worker_flags_init(&f);
    ck_assert_int_eq(f.cfg.tf32, 0);
    ck_assert_int_eq(f.cfg.graph, 1);
    f.cfg.tf32 = 2;
    ck_assert_int_eq(ps_worker_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "--tf32 2: expected 0 or 1");
    ps_worker_flags_init(&f);
    f.cfg.graph = -1;
    ck_assert_int_eq(ps_worker_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "--cuda-graph -1: expected 0 or 1");
    ps_worker_flags_init(&f);
    f.cfg.ring_kib = 0;
    ck_assert_int_eq(ps_worker_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "--ring-kib 0: expected 1 to 65536");
    ps_worker_flags_init(&f);
    f.cfg.threads = -1;
    ck_assert_int_eq(ps_worker_flags_check(&f, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "--threads -1: out of range [0, 1024]");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("flags");
    TCase *tc = tcase_create("flags");
    tcase_add_test(tc, tables_are_well_formed);
    tcase_add_test(tc, scheduler_defaults_pass_and_fill_the_job);
    tcase_add_test(tc, scheduler_check_names_the_flag);
    tcase_add_test(tc, server_check);
    tcase_add_test(tc, worker_check_and_cpu_gemm);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
