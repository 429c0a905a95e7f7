/*
 * tests/unit/test_curve.c - --secure's keys and key check (proto/curve.h)
 * over real sockets on loopback TCP: keygen's files, the refusals of
 * ps_curve_load (a file others may read, keys of two jobs, a missing file),
 * a secure DEALER -> ROUTER exchange, and strangers (no CurveZMQ, another
 * job's keys, another job's keypair knowing our public key) that never get a
 * message through and are counted. Contexts are made inside the tests, after
 * Check has forked.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "proto/curve.h"
#include "proto/msg.h"
#include "proto/sock.h"

/* A fresh directory under /tmp for one test's keys. */
static void s_tmpdir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/sps-curve.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void s_rmdir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static mode_t s_mode(const char *dir, const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_int_eq(stat(path, &st), 0);
    return st.st_mode & 07777;
}

START_TEST(keygen_writes_owner_only_files_and_never_overwrites)
{
    char dir[64], sub[128], err[512];
    s_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/k", dir);
    ck_assert_int_eq(ps_curve_keygen(sub, err, sizeof err), 0);
    ck_assert_int_eq(s_mode(dir, "k"), 0700);
    static const char *const files[] = {"job.key", "job.pub", "server.key",
                                        "server.pub", "worker.key", "worker.pub"};
    for (size_t i = 0; i < 6; i++) {
        ck_assert_int_eq(s_mode(sub, files[i]), 0600);
    }
    ck_assert_int_eq(ps_curve_keygen(sub, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "job.key"));
    s_rmdir(dir);
}
END_TEST

START_TEST(load_refuses_a_key_file_others_may_read)
{
    char dir[64], path[128], err[512];
    s_tmpdir(dir, sizeof dir);
    ck_assert_int_eq(ps_curve_keygen(dir, err, sizeof err), 0);
    ps_curve_t *c = NULL;
    ck_assert_int_eq(ps_curve_load(dir, PS_ROLE_SERVER, &c, err, sizeof err), 0);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(strlen(ps_curve_public(c)), PS_CURVE_KEY_LEN - 1);
    ps_curve_destroy(&c);
    ck_assert_ptr_null(c);
    snprintf(path, sizeof path, "%s/server.key", dir);
    ck_assert_int_eq(chmod(path, 0640), 0);
    ck_assert_int_eq(ps_curve_load(dir, PS_ROLE_SERVER, &c, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_nonnull(strstr(err, "0640"));
    /* the worker does not read server.key */
    ck_assert_int_eq(ps_curve_load(dir, PS_ROLE_WORKER, &c, err, sizeof err), 0);
    ps_curve_destroy(&c);
    ck_assert_int_eq(ps_curve_check_flags(1, dir, PS_ROLE_SERVER, err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_curve_check_flags(1, NULL, PS_ROLE_WORKER, err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_curve_check_flags(0, dir, PS_ROLE_WORKER, err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_curve_check_flags(0, NULL, PS_ROLE_WORKER, err, sizeof err), 0);
    s_rmdir(dir);
}
END_TEST

/* A Kubernetes Secret volume: DIR/..2026_x/FILE, DIR/..data -> ..2026_x and
 * DIR/FILE -> ..data/FILE, each link resolved before the file is checked. */
START_TEST(load_follows_a_secret_volumes_links_to_an_owner_only_file)
{
    char dir[64], cmd[1024], err[512];
    s_tmpdir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir ..2026_11_26 && ln -s ..2026_11_26 ..data && "
             "for f in job server worker; do for e in key pub; do "
             "ln -s ..data/$f.$e $f.$e; done; done", dir);
    ck_assert_int_eq(system(cmd), 0);
    char data[128];
    snprintf(data, sizeof data, "%s/..2026_11_26", dir);
    ck_assert_int_eq(rmdir(data), 0);
    ck_assert_int_eq(ps_curve_keygen(data, err, sizeof err), 0);
    ps_curve_t *c = NULL;
    static const ps_role_t roles[] = {PS_ROLE_SCHEDULER, PS_ROLE_SERVER, PS_ROLE_WORKER};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_msg(ps_curve_load(dir, roles[i], &c, err, sizeof err) == 0, "%s", err);
        ps_curve_destroy(&c);
    }
    snprintf(cmd, sizeof cmd, "chmod 644 '%s/worker.pub'", data);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(ps_curve_load(dir, PS_ROLE_WORKER, &c, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "/worker.pub -> "));
    ck_assert_ptr_nonnull(strstr(err, "0644"));
    s_rmdir(dir);
}
END_TEST

START_TEST(load_refuses_two_jobs_keys_and_a_missing_file)
{
    char a[64], b[64], cmd[256], err[512];
    s_tmpdir(a, sizeof a);
    s_tmpdir(b, sizeof b);
    ck_assert_int_eq(ps_curve_keygen(a, err, sizeof err), 0);
    ck_assert_int_eq(ps_curve_keygen(b, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "cp -p '%s/worker.pub' '%s/worker.pub'", b, a);
    ck_assert_int_eq(system(cmd), 0);
    ps_curve_t *c = NULL;
    ck_assert_int_eq(ps_curve_load(a, PS_ROLE_WORKER, &c, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "different jobs"));
    snprintf(cmd, sizeof cmd, "rm '%s/job.pub'", b);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(ps_curve_load(b, PS_ROLE_WORKER, &c, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "job.pub"));
    ck_assert_ptr_null(c);
    s_rmdir(a);
    s_rmdir(b);
}
END_TEST

/* A secure server's ROUTER on loopback: the context and the bound endpoint. */
typedef struct {
    ps_ctx_t *ctx;
    ps_sock_t *router;
    char ep[128];
} s_server_t;

static void s_server_open(s_server_t *s, const char *dir, ps_role_t role)
{
    char err[512];
    ck_assert_int_eq(ps_ctx_new(&s->ctx), 0);
    ck_assert_int_eq(ps_curve_secure_ctx(s->ctx, 1, dir, role, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_new(s->ctx, PS_SOCK_ROUTER, &s->router, err, sizeof err), 0);
    ck_assert_int_eq(
        ps_sock_bind(s->router, "tcp://127.0.0.1:*", s->ep, sizeof s->ep, err, sizeof err), 0);
}

static void s_server_close(s_server_t *s)
{
    ps_sock_destroy(&s->router);
    ps_ctx_destroy(&s->ctx);
}

/* A client (keys of dir as role, or "-" for none) connecting to ep,
 * expecting peer_key (NULL: the job's), sends one heartbeat; 1 when the
 * server received it within timeout_ms. */
static int s_gets_through(s_server_t *srv, const char *dir, ps_role_t role, const char *peer_key,
                          int timeout_ms)
{
    char err[512];
    ps_ctx_t *ctx;
    ps_sock_t *d;
    ck_assert_int_eq(ps_ctx_new(&ctx), 0);
    if (strcmp(dir, "-") != 0) {
        ck_assert_int_eq(ps_curve_secure_ctx(ctx, 1, dir, role, err, sizeof err), 0);
    }
    ck_assert_int_eq(ps_sock_new(ctx, PS_SOCK_DEALER, &d, err, sizeof err), 0);
    if (peer_key) {
        ck_assert_int_eq(ps_sock_set_peer_key(d, peer_key), 0);
    }
    ck_assert_int_eq(ps_sock_connect(d, srv->ep), 0);
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_HEARTBEAT, PS_ROLE_WORKER, 0);
    ck_assert_int_eq(ps_msg_send(d, NULL, h, NULL, 0, 0), 0);
    ps_pollitem_t it = {.sock = srv->router};
    int got = ps_poll(&it, 1, timeout_ms) > 0;
    if (got) {
        ps_msg_t m = {0};
        ck_assert_int_eq(ps_msg_recv(srv->router, PS_RECV_ROUTER, &m), 0);
        ck_assert_int_eq(m.hdr.type, PS_MSG_HEARTBEAT);
        ps_msg_close(&m);
    }
    ps_sock_set_linger(d, 0);
    ps_sock_destroy(&d);
    ps_ctx_destroy(&ctx);
    return got;
}

START_TEST(only_this_jobs_keys_get_through_and_refusals_are_counted)
{
    char job[64], other[64], mixed[64], cmd[512], err[512];
    s_tmpdir(job, sizeof job);
    s_tmpdir(other, sizeof other);
    s_tmpdir(mixed, sizeof mixed);
    ck_assert_int_eq(ps_curve_keygen(job, err, sizeof err), 0);
    ck_assert_int_eq(ps_curve_keygen(other, err, sizeof err), 0);
    /* another job's worker keypair beside this job's public keys */
    snprintf(cmd, sizeof cmd, "cp -p %s/worker.* %s/ && cp -p %s/job.pub %s/server.pub %s/",
             other, mixed, job, job, mixed);
    ck_assert_int_eq(system(cmd), 0);

    s_server_t srv = {0};
    s_server_open(&srv, job, PS_ROLE_SCHEDULER); /* serves with the job's key */
    ck_assert_int_eq(ps_ctx_refused(srv.ctx), 0);
    ck_assert(s_gets_through(&srv, job, PS_ROLE_WORKER, NULL, 5000));
    ck_assert(s_gets_through(&srv, job, PS_ROLE_SERVER, NULL, 5000));
    ck_assert_int_eq(ps_ctx_refused(srv.ctx), 0);

    ck_assert(!s_gets_through(&srv, "-", PS_ROLE_WORKER, NULL, 500));
    ck_assert(!s_gets_through(&srv, other, PS_ROLE_WORKER, NULL, 500));
    uint64_t before_zap = ps_ctx_refused(srv.ctx);
    ck_assert(!s_gets_through(&srv, mixed, PS_ROLE_WORKER, NULL, 500));
    /* the refusals are counted by the key check's thread: wait for it */
    double until = ps_now() + 5;
    while (ps_ctx_refused(srv.ctx) <= before_zap && ps_now() < until) {
        usleep(10000);
    }
    ck_assert_uint_ge(before_zap, 2);
    ck_assert_uint_gt(ps_ctx_refused(srv.ctx), before_zap);
    s_server_close(&srv);

    /* A server admits workers only: a server key does not get in. */
    s_server_open(&srv, job, PS_ROLE_SERVER);
    char server_key[PS_CURVE_KEY_LEN];
    snprintf(server_key, sizeof server_key, "%s", ps_ctx_public_key(srv.ctx));
    ck_assert(s_gets_through(&srv, job, PS_ROLE_WORKER, server_key, 5000));
    ck_assert(!s_gets_through(&srv, job, PS_ROLE_SERVER, server_key, 500));
    ck_assert(!s_gets_through(&srv, job, PS_ROLE_WORKER, NULL, 500)); /* expects the job's */
    s_server_close(&srv);
    s_rmdir(job);
    s_rmdir(other);
    s_rmdir(mixed);
}
END_TEST

START_TEST(set_peer_key_checks_the_key_only_on_a_secure_context)
{
    char dir[64], err[512];
    s_tmpdir(dir, sizeof dir);
    ck_assert_int_eq(ps_curve_keygen(dir, err, sizeof err), 0);
    ps_ctx_t *ctx;
    ps_sock_t *s;
    ck_assert_int_eq(ps_ctx_new(&ctx), 0);
    ck_assert_int_eq(ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_set_peer_key(s, ""), 0); /* plain: nothing to check */
    ck_assert_str_eq(ps_ctx_public_key(ctx), "");
    ps_sock_destroy(&s);
    ps_ctx_destroy(&ctx);
    ck_assert_int_eq(ps_ctx_new(&ctx), 0);
    ck_assert_int_eq(ps_curve_secure_ctx(ctx, 1, dir, PS_ROLE_WORKER, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_set_peer_key(s, ""), PS_EINVAL);
    ck_assert_int_eq(ps_sock_set_peer_key(s, NULL), PS_EINVAL);
    ck_assert_int_eq(ps_sock_set_peer_key(s, "not a key"), PS_EINVAL);
    ck_assert_int_eq(ps_sock_set_peer_key(s, ps_ctx_public_key(ctx)), 0);
    ps_sock_destroy(&s);
    ps_ctx_destroy(&ctx);
    s_rmdir(dir);
}
END_TEST

int main(void)
{
    if (!ps_curve_available()) {
        printf("skipped: this libzmq has no CURVE\n");
        return 77;
    }
    Suite *s = suite_create("curve");
    TCase *tc = tcase_create("curve");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, keygen_writes_owner_only_files_and_never_overwrites);
    tcase_add_test(tc, load_refuses_a_key_file_others_may_read);
    tcase_add_test(tc, load_follows_a_secret_volumes_links_to_an_owner_only_file);
    tcase_add_test(tc, load_refuses_two_jobs_keys_and_a_missing_file);
    tcase_add_test(tc, only_this_jobs_keys_get_through_and_refusals_are_counted);
    tcase_add_test(tc, set_peer_key_checks_the_key_only_on_a_secure_context);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
