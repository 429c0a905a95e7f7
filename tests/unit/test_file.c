/*
 * tests/unit/test_file.c - durable files (common/file.h): an atomic write
 * leaves the old file or the new one, never a part of one, and no temp file
 * (a write cut short by RLIMIT_FSIZE, a missing or read-only directory, a
 * directory in the way); the CRC-32 against zlib's check value; the
 * writability check; opening a file to read, exact reads and directory
 * fsyncs.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "tests/unit/testutil.h"

static char s_dir[64];   /* a fresh directory per test */
static char s_path[128]; /* s_dir/f.bin */

static void s_make_dir(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/ps_file_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s_dir));
    snprintf(s_path, sizeof s_path, "%s/f.bin", s_dir);
}

static void s_remove_dir(void)
{
    char cmd[192];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", s_dir, s_dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* One-part atomic write of the string text. */
static int s_write(const char *path, const char *text, char *why, size_t cap)
{
    return ps_file_write_atomic(path, (const void *[]){text}, (size_t[]){strlen(text)}, 1,
                                why, cap);
}

/* Whether the file at path holds exactly text. */
static int s_holds(const char *path, const char *text)
{
    char buf[256];
    FILE *f = fopen(path, "rb");
    if (!f) {
        return 0;
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return n == strlen(text) && !memcmp(buf, text, n);
}

/* The number of entries in dir (a temp file left behind shows here). */
static int s_entries(const char *dir)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "exit $(ls -A %s | wc -l)", dir);
    return WEXITSTATUS(system(cmd));
}

START_TEST(atomic_write_puts_the_parts_back_to_back_over_the_old_file)
{
    char why[256] = "";
    ck_assert_int_eq(s_write(s_path, "old contents", why, sizeof why), 0);
    ck_assert(s_holds(s_path, "old contents"));
    const char *parts[] = {"ab", "", "cdef"};
    size_t lens[] = {2, 0, 4};
    ck_assert_int_eq(
        ps_file_write_atomic(s_path, (const void *const *)parts, lens, 3, why, sizeof why),
        0);
    ck_assert(s_holds(s_path, "abcdef"));
    ck_assert_int_eq(ps_file_write_atomic(s_path, NULL, NULL, 0, why, sizeof why), 0);
    ck_assert(s_holds(s_path, ""));
    ck_assert_int_eq(s_entries(s_dir), 1);
}
END_TEST

START_TEST(a_write_cut_short_keeps_the_old_file_whole_and_no_temp)
{
    char why[256] = "", big[200];
    ck_assert_int_eq(s_write(s_path, "old contents", why, sizeof why), 0);
    /* files may not grow past 64 bytes: write() fails with EFBIG midway */
    struct rlimit old;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    struct rlimit small = {64, old.rlim_max};
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    int rc = s_write(s_path, big, why, sizeof why);
    setrlimit(RLIMIT_FSIZE, &old);
    ck_assert_int_eq(rc, PS_EIO);
    ck_assert_msg(strstr(why, s_path) == why && strstr(why, "writing"), "%s", why);
    ck_assert_ptr_null(strchr(why, '\n'));
    ck_assert(s_holds(s_path, "old contents"));
    ck_assert_int_eq(s_entries(s_dir), 1);
}
END_TEST

START_TEST(a_write_where_no_file_can_go_fails_and_leaves_no_temp)
{
    char why[256] = "", bad[160];
    /* a missing directory, and a regular file used as one */
    snprintf(bad, sizeof bad, "%s/no/such/f.bin", s_dir);
    ck_assert_int_eq(s_write(bad, "new", why, sizeof why), PS_EIO);
    ck_assert_msg(strstr(why, bad) == why, "%s", why);
    ck_assert_int_eq(s_write(s_path, "old", why, sizeof why), 0);
    snprintf(bad, sizeof bad, "%s/x", s_path);
    ck_assert_int_eq(s_write(bad, "new", why, sizeof why), PS_EIO);
    /* a non-empty directory in the way: the rename fails, the temp goes */
    snprintf(bad, sizeof bad, "%s/d", s_dir);
    ck_assert_int_eq(mkdir(bad, 0755), 0);
    snprintf(bad, sizeof bad, "%s/d/inside", s_dir);
    ck_assert_int_eq(s_write(bad, "x", why, sizeof why), 0);
    snprintf(bad, sizeof bad, "%s/d", s_dir);
    ck_assert_int_eq(s_write(bad, "new", why, sizeof why), PS_EIO);
    ck_assert_ptr_nonnull(strstr(why, "rename"));
    ck_assert_int_eq(s_entries(s_dir), 2);
    /* a read-only directory (root writes there anyway) */
    if (geteuid() != 0) {
        ck_assert_int_eq(chmod(s_dir, 0555), 0);
        ck_assert_int_eq(s_write(s_path, "new", why, sizeof why), PS_EIO);
        ck_assert(s_holds(s_path, "old"));
        ck_assert_int_eq(s_entries(s_dir), 2);
    }
}
END_TEST

START_TEST(crc32_is_zlibs_and_sees_one_flipped_bit)
{
    uint32_t a = 1, b = 0;
    ck_assert_int_eq(ps_file_crc32(s_path, &a), PS_ENOENT);
    ck_assert_int_eq(s_write(s_path, "", NULL, 0), 0);
    ck_assert_int_eq(ps_file_crc32(s_path, &a), 0);
    ck_assert_uint_eq(a, 0);
    ck_assert_int_eq(s_write(s_path, "123456789", NULL, 0), 0);
    ck_assert_int_eq(ps_file_crc32(s_path, &a), 0);
    ck_assert_uint_eq(a, 0xCBF43926u); /* the CRC-32 check value */
    ck_assert_int_eq(s_write(s_path, "123456788", NULL, 0), 0);
    ck_assert_int_eq(ps_file_crc32(s_path, &b), 0);
    ck_assert_uint_ne(a, b);
    ck_assert_int_eq(ps_file_crc32(s_dir, &b), PS_EIO);
}
END_TEST

START_TEST(check_writable_wants_a_file_name_in_a_writable_directory)
{
    char why[256] = "", bad[160];
    snprintf(bad, sizeof bad, "%s/no/f.bin", s_dir);
    ck_assert_int_eq(ps_file_check_writable(bad, why, sizeof why), PS_EIO);
    ck_assert_msg(strstr(why, bad) == why, "%s", why);
    ck_assert_ptr_null(strchr(why, '\n'));
    ck_assert_int_eq(ps_file_check_writable(s_dir, why, sizeof why), PS_EIO);
    ck_assert_ptr_nonnull(strstr(why, "not a file name"));
    snprintf(bad, sizeof bad, "%s/new/", s_dir);
    ck_assert_int_eq(ps_file_check_writable(bad, why, sizeof why), PS_EIO);
    ck_assert_int_eq(ps_file_check_writable("", NULL, 0), PS_EIO);
    ck_assert_int_eq(ps_file_check_writable(s_path, why, sizeof why), 0);
    ck_assert_int_eq(access(s_path, F_OK), -1); /* checked, not created */
    ck_assert_int_eq(s_write(s_path, "x", NULL, 0), 0);
    ck_assert_int_eq(ps_file_check_writable(s_path, why, sizeof why), 0);
}
END_TEST

START_TEST(read_all_reads_exactly_n_bytes_or_fails)
{
    char buf[16] = "";
    ck_assert_int_eq(s_write(s_path, "0123456789", NULL, 0), 0);
    FILE *f = fopen(s_path, "rb");
    ck_assert_ptr_nonnull(f);
    int fd = fileno(f);
    ck_assert_int_eq(ps_file_read_all(fd, buf, 4), 0);
    ck_assert_int_eq(ps_file_read_all(fd, buf + 4, 6), 0);
    ck_assert_str_eq(buf, "0123456789");
    ck_assert_int_eq(ps_file_read_all(fd, buf, 0), 0);
    ck_assert_int_eq(ps_file_read_all(fd, buf, 1), PS_EIO); /* at the end */
    fclose(f);
}
END_TEST

START_TEST(open_read_gives_a_regular_file_and_its_size)
{
    char why[256] = "";
    uint64_t size = 1;
    ck_assert_int_eq(ps_file_open_read(s_path, &size, why, sizeof why), PS_ENOENT);
    ck_assert_msg(strstr(why, s_path) == why && !strchr(why, '\n'), "%s", why);
    ck_assert_int_eq(ps_file_open_read(s_dir, &size, why, sizeof why), PS_EIO);
    ck_assert_ptr_nonnull(strstr(why, "not a regular file"));
    ck_assert_int_eq(s_write(s_path, "12345", NULL, 0), 0);
    int fd = ps_file_open_read(s_path, &size, NULL, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_uint_eq(size, 5);
    close(fd);
}
END_TEST

START_TEST(sync_dir_syncs_the_directory_holding_a_path)
{
    char missing[160];
    ck_assert_int_eq(ps_file_sync_dir(s_path), 0); /* the file need not exist */
    ck_assert_int_eq(ps_file_sync_dir(s_dir), 0);  /* its parent, /tmp */
    ck_assert_int_eq(ps_file_sync_dir("/tmp/"), 0);
    ck_assert_int_eq(ps_file_sync_dir("f.bin"), 0); /* "." */
    snprintf(missing, sizeof missing, "%s/no/f.bin", s_dir);
    ck_assert_int_eq(ps_file_sync_dir(missing), PS_EIO);
}
END_TEST

START_TEST(mkdirs_makes_a_directory_and_its_parents)
{
    char deep[192], file_in_way[192];
    snprintf(deep, sizeof deep, "%s/a/b/c", s_dir);
    ck_assert_int_eq(ps_file_mkdirs(deep), 0);
    ck_assert_int_eq(ps_file_mkdirs(deep), 0); /* there already: fine */
    snprintf(deep, sizeof deep, "%s/a/b/c/", s_dir);
    ck_assert_int_eq(ps_file_mkdirs(deep), 0);
    ck_assert_int_eq(s_write(s_path, "x", NULL, 0), 0);
    snprintf(file_in_way, sizeof file_in_way, "%s/sub", s_path); /* under a file */
    ck_assert_int_eq(ps_file_mkdirs(file_in_way), PS_EIO);
    ck_assert_int_eq(ps_file_mkdirs(s_path), PS_EIO); /* a file, not a directory */
    ck_assert_int_eq(ps_file_mkdirs(""), PS_EINVAL);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("file");
    TCase *tc = tcase_create("file");
    tcase_add_checked_fixture(tc, s_make_dir, s_remove_dir);
    tcase_add_test(tc, atomic_write_puts_the_parts_back_to_back_over_the_old_file);
    tcase_add_test(tc, a_write_cut_short_keeps_the_old_file_whole_and_no_temp);
    tcase_add_test(tc, a_write_where_no_file_can_go_fails_and_leaves_no_temp);
    tcase_add_test(tc, crc32_is_zlibs_and_sees_one_flipped_bit);
    tcase_add_test(tc, check_writable_wants_a_file_name_in_a_writable_directory);
    tcase_add_test(tc, read_all_reads_exactly_n_bytes_or_fails);
    tcase_add_test(tc, open_read_gives_a_regular_file_and_its_size);
    tcase_add_test(tc, sync_dir_syncs_the_directory_holding_a_path);
    tcase_add_test(tc, mkdirs_makes_a_directory_and_its_parents);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
