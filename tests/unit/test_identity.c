/*
 * tests/unit/test_identity.c - the job identity check at registration
 * (scheduler/identity.h): a node of another build, job or job configuration
 * is refused with one line naming both sides; a node that gives no job id or
 * hash is not checked on them; the build always is. And the proof of the
 * job's secret: a nonce holds only on the socket it was made for.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "scheduler/identity.h"

static ps_identity_t s_id(void)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ps_identity_t id;
    ps_identity_init(&id, "job-a", &job, 2, 2, NULL);
    return id;
}

/* A worker's registration with id's job and build (borrowed from id). */
static Shardps__Register s_reg(const ps_identity_t *id)
{
    Shardps__Register r = SHARDPS__REGISTER__INIT;
    r.role = PS_ROLE_WORKER;
    r.rank = -1;
    r.job_id = (char *)id->job_id;
    r.job_hash = (char *)id->job_hash;
    r.build = (char *)id->build;
    return r;
}

/* Asserts the check refuses r with a one-line reason holding a and b. */
static void s_refused(const ps_identity_t *id, const Shardps__Register *r, const char *a,
                      const char *b)
{
    char why[400] = "";
    ck_assert_int_eq(ps_identity_check(id, r, why, sizeof why), PS_EINVAL);
    ck_assert_msg(strstr(why, a) && strstr(why, b), "'%s' lacks '%s' or '%s'", why, a, b);
    ck_assert_ptr_null(strchr(why, '\n'));
}

START_TEST(the_same_job_and_build_pass)
{
    ps_identity_t id = s_id();
    Shardps__Register r = s_reg(&id);
    char why[400];
    ck_assert_int_eq(ps_identity_check(&id, &r, why, sizeof why), 0);
    r.job_hash = (char *)""; /* by hand: not checked on it */
    ck_assert_int_eq(ps_identity_check(&id, &r, why, sizeof why), 0);
    r.job_id = (char *)""; /* a named job takes no node that names none */
    ck_assert_int_eq(ps_identity_check(&id, &r, why, sizeof why), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "--job-id job-a"));
    ps_identity_t anon;
    ps_job_t job;
    ps_job_defaults(&job);
    ps_identity_init(&anon, NULL, &job, 2, 2, NULL); /* started by hand, unnamed */
    r = s_reg(&anon);
    r.job_id = r.job_hash = (char *)"";
    ck_assert_int_eq(ps_identity_check(&anon, &r, why, sizeof why), 0);
}
END_TEST

/* id's verdict on r's answer on connection (route, fd) a second after the
 * challenge at 100.0. */
static ps_identity_proof_t s_answer(const ps_identity_t *id, const Shardps__Register *r,
                                    const ps_route_t *route, int fd)
{
    return ps_identity_prove(id, r, route, fd, 101.0, NULL, NULL);
}

/* A registration of a job with a secret: no proof gets a nonce for this
 * connection; the right proof passes; a wrong one, one for another
 * connection (another routing id, or another socket under the same routing
 * id), role or job, or a stale nonce, is refused, as is one whose socket has
 * closed. The sockets are socketpairs: real ones, with their own cookies. */
START_TEST(a_secret_needs_the_proof_for_our_nonce)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ps_secret_t sec, other;
    ck_assert_int_eq(ps_secret_new(&sec), 0);
    ck_assert_int_eq(ps_secret_new(&other), 0);
    ps_identity_t id;
    ps_identity_init(&id, "job-a", &job, 2, 2, &sec);
    Shardps__Register r = s_reg(&id);
    const ps_route_t route = {.id = {1, 2, 3, 4, 5}, .len = 5};
    const ps_route_t elsewhere = {.id = {1, 2, 3, 4, 6}, .len = 5};
    int a[2], b[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    const int fd = a[0];
    uint8_t nonce[PS_IDENTITY_NONCE_LEN], proof[PS_HMAC_LEN];
    size_t nlen = 0;
    ck_assert_int_eq(ps_identity_prove(&id, &r, &route, fd, 100.0, nonce, &nlen),
                     PS_IDENTITY_CHALLENGED);
    ck_assert_uint_eq(nlen, PS_IDENTITY_NONCE_LEN);
    r.nonce = (ProtobufCBinaryData){nlen, nonce};
    r.proof = (ProtobufCBinaryData){sizeof proof, proof};
    ps_secret_proof(&sec, nonce, nlen, r.role, r.job_id, proof);
    ck_assert_int_eq(s_answer(&id, &r, &route, fd), PS_IDENTITY_PROVEN);
    ck_assert_int_eq(s_answer(&id, &r, &elsewhere, fd), PS_IDENTITY_REFUSED);
    /* the same routing id on another socket: a client that chose its id */
    ck_assert_int_eq(s_answer(&id, &r, &route, b[0]), PS_IDENTITY_REFUSED);
    ck_assert_int_eq(s_answer(&id, &r, &route, a[1]), PS_IDENTITY_REFUSED);
    ck_assert_int_eq(s_answer(&id, &r, &route, -1), PS_IDENTITY_REFUSED);
    const double late = 100.0 + PS_IDENTITY_NONCE_SECONDS + 1;
    ck_assert_int_eq(ps_identity_prove(&id, &r, &route, fd, late, NULL, NULL),
                     PS_IDENTITY_REFUSED);
    r.role = PS_ROLE_SERVER; /* the proof was a worker's */
    ck_assert_int_eq(s_answer(&id, &r, &route, fd), PS_IDENTITY_REFUSED);
    r.role = PS_ROLE_WORKER;
    ps_secret_proof(&other, nonce, nlen, r.role, r.job_id, proof);
    ck_assert_int_eq(s_answer(&id, &r, &route, fd), PS_IDENTITY_REFUSED);
    r.proof.len = 0; /* a nonce without a proof */
    ck_assert_int_eq(s_answer(&id, &r, &route, fd), PS_IDENTITY_REFUSED);
    ps_identity_t open;
    ps_identity_init(&open, "job-a", &job, 2, 2, NULL); /* no secret: open registration */
    ck_assert_int_eq(s_answer(&open, &r, &route, fd), PS_IDENTITY_PROVEN);
    /* inproc (no socket): bound to the route alone */
    r.nonce.len = 0;
    ck_assert_int_eq(ps_identity_prove(&id, &r, &route, -1, 100.0, nonce, &nlen),
                     PS_IDENTITY_CHALLENGED);
    ps_secret_proof(&sec, nonce, nlen, r.role, r.job_id, proof);
    r.nonce.len = nlen;
    r.proof.len = sizeof proof;
    ck_assert_int_eq(s_answer(&id, &r, &route, -1), PS_IDENTITY_PROVEN);
    ck_assert_int_eq(s_answer(&id, &r, &route, fd), PS_IDENTITY_REFUSED);
    /* a socket closed since: nothing to challenge or admit */
    r.nonce.len = r.proof.len = 0;
    ck_assert_int_eq(ps_identity_prove(&id, &r, &route, fd, 100.0, nonce, &nlen),
                     PS_IDENTITY_CHALLENGED);
    ps_secret_proof(&sec, nonce, nlen, r.role, r.job_id, proof);
    r.nonce.len = nlen;
    r.proof.len = sizeof proof;
    ck_assert_int_eq(s_answer(&id, &r, &route, fd), PS_IDENTITY_PROVEN);
    close(fd);
    ck_assert_int_eq(s_answer(&id, &r, &route, fd), PS_IDENTITY_REFUSED);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}
END_TEST

START_TEST(another_job_configuration_or_build_is_refused_naming_both)
{
    ps_identity_t id = s_id();
    Shardps__Register r = s_reg(&id);
    r.job_id = (char *)"job-b";
    s_refused(&id, &r, "job-b", "job-a");
    r = s_reg(&id);
    r.job_hash = (char *)"0123456789abcdef";
    s_refused(&id, &r, "0123456789abcdef", id.job_hash);
    r = s_reg(&id);
    r.build = (char *)"v0.0-other protocol 4";
    s_refused(&id, &r, "v0.0-other protocol 4", id.build);
    r.build = (char *)""; /* a build must always be given */
    s_refused(&id, &r, "build ''", id.build);
}
END_TEST

START_TEST(a_scheduler_without_an_id_draws_one)
{
    ps_job_t job;
    ps_job_defaults(&job);
    ps_identity_t a, b;
    ps_identity_init(&a, NULL, &job, 1, 1, NULL);
    ps_identity_init(&b, "", &job, 1, 1, NULL);
    ck_assert_int_eq(strncmp(a.job_id, "job-", 4), 0);
    ck_assert_int_eq(strncmp(b.job_id, "job-", 4), 0);
    ck_assert_str_eq(a.job_hash, b.job_hash);
    ps_identity_init(&b, NULL, &job, 1, 2, NULL);
    ck_assert_str_ne(a.job_hash, b.job_hash);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("identity");
    TCase *tc = tcase_create("identity");
    tcase_add_test(tc, the_same_job_and_build_pass);
    tcase_add_test(tc, a_secret_needs_the_proof_for_our_nonce);
    tcase_add_test(tc, another_job_configuration_or_build_is_refused_naming_both);
    tcase_add_test(tc, a_scheduler_without_an_id_draws_one);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
