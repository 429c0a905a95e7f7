/*
 * tests/unit/test_secret.c - the job's secret (common/secret.h): SHA-256 and
 * HMAC-SHA256 against the published vectors (FIPS 180-4 examples, RFC 4231),
 * the registration proof binding nonce, role and job id, and the secret file:
 * written owner-only, never replaced, read back, refused when others may
 * read it or when it holds no secret.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/secret.h"
#include "tests/unit/testutil.h"

static void s_hexeq(const uint8_t *got, const char *want)
{
    char hex[2 * PS_HMAC_LEN + 1];
    for (int i = 0; i < PS_HMAC_LEN; i++) {
        snprintf(hex + 2 * i, 3, "%02x", got[i]);
    }
    ck_assert_str_eq(hex, want);
}

START_TEST(sha256_matches_the_published_vectors)
{
    uint8_t out[PS_HMAC_LEN];
    ps_sha256("abc", 3, out);
    s_hexeq(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ps_sha256("", 0, out);
    s_hexeq(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    ps_sha256(two, strlen(two), out);
    s_hexeq(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    static char mil[1000000];
    memset(mil, 'a', sizeof mil);
    ps_sha256(mil, sizeof mil, out);
    s_hexeq(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

START_TEST(hmac_matches_rfc4231)
{
    uint8_t out[PS_HMAC_LEN], key[131];
    memset(key, 0x0b, 20);
    const void *p[2] = {"Hi ", "There"};
    const size_t l[2] = {3, 5};
    ps_hmac_sha256(key, 20, p, l, 2, out); /* case 1, in two parts */
    s_hexeq(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    const void *p2[1] = {"what do ya want for nothing?"};
    const size_t l2[1] = {28};
    ps_hmac_sha256("Jefe", 4, p2, l2, 1, out); /* case 2 */
    s_hexeq(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(key, 0xaa, sizeof key); /* case 6: a key longer than a block */
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    const void *p6[1] = {m6};
    const size_t l6[1] = {strlen(m6)};
    ps_hmac_sha256(key, sizeof key, p6, l6, 1, out);
    s_hexeq(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}
END_TEST

START_TEST(proof_binds_nonce_role_and_job)
{
    ps_secret_t s, other;
    ck_assert_int_eq(ps_secret_new(&s), 0);
    ck_assert_int_eq(ps_secret_new(&other), 0);
    const uint8_t nonce[4] = {1, 2, 3, 4}, nonce2[4] = {1, 2, 3, 5};
    uint8_t a[PS_HMAC_LEN], b[PS_HMAC_LEN];
    ps_secret_proof(&s, nonce, 4, 3, "job-a", a);
    ps_secret_proof(&s, nonce, 4, 3, "job-a", b);
    ck_assert(ps_secret_equal(a, b, sizeof a));
    ps_secret_proof(&s, nonce2, 4, 3, "job-a", b);
    ck_assert(!ps_secret_equal(a, b, sizeof a));
    ps_secret_proof(&s, nonce, 4, 2, "job-a", b);
    ck_assert(!ps_secret_equal(a, b, sizeof a));
    ps_secret_proof(&s, nonce, 4, 3, "job-b", b);
    ck_assert(!ps_secret_equal(a, b, sizeof a));
    ps_secret_proof(&other, nonce, 4, 3, "job-a", b);
    ck_assert(!ps_secret_equal(a, b, sizeof a));
}
END_TEST

START_TEST(file_is_owner_only_and_reads_back)
{
    char dir[] = "/tmp/test_secret.XXXXXX", path[64], err[256] = "";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/job.secret", dir);
    ck_assert_int_eq(ps_secret_write(path, err, sizeof err), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(ps_secret_write(path, err, sizeof err), PS_EINVAL); /* never replaced */
    ps_secret_t s, t;
    ck_assert_int_eq(ps_secret_read(path, &s, err, sizeof err), 0);
    ck_assert_int_eq(s.set, 1);
    ck_assert_int_eq(ps_secret_read(path, &t, err, sizeof err), 0);
    ck_assert(ps_secret_equal(s.key, t.key, PS_SECRET_LEN));
    chmod(path, 0640);
    ck_assert_int_eq(ps_secret_read(path, &t, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "may be read or changed by others"));
    ck_assert_int_eq(t.set, 0);
    FILE *f = fopen(path, "w");
    fputs("# nothing\nabcd\n", f);
    fclose(f);
    chmod(path, 0600);
    ck_assert_int_eq(ps_secret_read(path, &t, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "holds no secret"));
    ck_assert_ptr_null(strchr(err, '\n'));
    unlink(path);
    ck_assert_int_eq(ps_secret_read(path, &t, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "shardps-keygen"));
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("secret");
    TCase *tc = tcase_create("secret");
    tcase_add_test(tc, sha256_matches_the_published_vectors);
    tcase_add_test(tc, hmac_matches_rfc4231);
    tcase_add_test(tc, proof_binds_nonce_role_and_job);
    tcase_add_test(tc, file_is_owner_only_and_reads_back);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
