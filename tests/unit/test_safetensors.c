/*
 * tests/unit/test_safetensors.c - safetensors files (common/safetensors.h):
 * round trip of tensors and metadata, files other writers produce (key
 * order, escapes, padding), atomic writes, a header of 100,000 tensors read
 * in linear time, and every kind of corruption (flipped header bytes,
 * truncation at every length, bad, overlapping or gapped offsets, wrong
 * dtype, huge header length) refused with PS_EPROTO and a one-line reason
 * naming the file, never a crash; U64 and U32 tensors round trip, found
 * only by their own dtype, and must start at a multiple of their size.
 * Reading a hostile header of 16 MB, valid or not, or a big header
 * mutated at random, costs at most S_MEMORY_FACTOR times its size in
 * memory (each read in a child, its peak RSS from wait4).
 * tests/unit/test_fuzz_files.c mutates files at random on top of these.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/error.h"
#include "common/safetensors.h"
#include "tests/unit/testutil.h"

static char s_dir[64];
static char s_path[128];

static void s_setup(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/ps_st_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s_dir));
    snprintf(s_path, sizeof s_path, "%s/m.safetensors", s_dir);
}

static void s_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    ck_assert_int_eq(system(cmd), 0);
}

static float s_w[6] = {1, 2, 3, 4, 5, 6};
static float s_b[3] = {-1, 0.5f, 1e-30f};

/* Writes the two-tensor file fc1.weight [3,2], fc1.bias [3] with metadata. */
static void s_write_model(void)
{
    ps_safetensors_tensor_t t[2] = {
        {.name = "fc1.weight", .ndim = 2, .shape = {3, 2}, .data = s_w},
        {.name = "fc1.bias", .ndim = 1, .shape = {3}, .data = s_b},
    };
    const char *meta[] = {"step", "120", "note", "quote\" back\\ nl\n tab\t"};
    char why[256] = "";
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 2, meta, 2, why, sizeof why), 0);
}

static void s_put_file(const void *p, size_t n)
{
    FILE *f = fopen(s_path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Writes header json (length prefix added) then n data bytes of zeros. */
static void s_put_raw(const char *json, size_t data_bytes)
{
    size_t h = strlen(json), n = 8 + h + data_bytes;
    unsigned char *buf = calloc(1, n);
    for (int i = 0; i < 8; i++) {
        buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
    }
    memcpy(buf + 8, json, h);
    s_put_file(buf, n);
    free(buf);
}

static unsigned char *s_slurp(size_t *n)
{
    FILE *f = fopen(s_path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(*n);
    ck_assert_uint_eq(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

/* Asserts that reading the file fails with PS_EPROTO and a one-line reason
 * naming the file and containing want (NULL: any). */
static void s_refused(const char *want)
{
    ps_safetensors_t *st = (ps_safetensors_t *)1;
    char why[512] = "";
    ck_assert_int_eq(ps_safetensors_read(s_path, &st, why, sizeof why), PS_EPROTO);
    ck_assert_ptr_null(st);
    ck_assert_msg(strstr(why, s_path) == why, "reason '%s' does not name the file", why);
    ck_assert_ptr_null(strchr(why, '\n'));
    if (want) {
        ck_assert_msg(strstr(why, want), "reason '%s' lacks '%s'", why, want);
    }
}

START_TEST(round_trip_keeps_names_shapes_data_and_metadata)
{
    s_write_model();
    ps_safetensors_t *st = NULL;
    char why[256] = "";
    ck_assert_int_eq(ps_safetensors_read(s_path, &st, why, sizeof why), 0);
    ck_assert_int_eq(ps_safetensors_count(st), 2);
    const ps_safetensors_tensor_t *w = ps_safetensors_find(st, "fc1.weight");
    const ps_safetensors_tensor_t *b = ps_safetensors_find(st, "fc1.bias");
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_eq(ps_safetensors_at(st, 0), w); /* file-data order */
    ck_assert_int_eq(w->ndim, 2);
    ck_assert_int_eq(w->shape[0], 3);
    ck_assert_int_eq(w->shape[1], 2);
    ck_assert_uint_eq(w->numel, 6);
    ck_assert_int_eq(b->ndim, 1);
    ck_assert_uint_eq(b->numel, 3);
    ck_assert_int_eq(memcmp(w->data, s_w, sizeof s_w), 0);
    ck_assert_int_eq(memcmp(b->data, s_b, sizeof s_b), 0);
    ck_assert_ptr_null(ps_safetensors_find(st, "fc2.weight"));
    ck_assert_ptr_null(ps_safetensors_at(st, 2));
    ck_assert_str_eq(ps_safetensors_meta(st, "step"), "120");
    ck_assert_str_eq(ps_safetensors_meta(st, "note"), "quote\" back\\ nl\n tab\t");
    ck_assert_ptr_null(ps_safetensors_meta(st, "missing"));
    ps_safetensors_destroy(&st);
    ck_assert_ptr_null(st);
    ps_safetensors_destroy(&st);
}
END_TEST

START_TEST(header_is_padded_to_eight_bytes_and_data_follows)
{
    s_write_model();
    size_t n;
    unsigned char *p = s_slurp(&n);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) {
        h = h << 8 | p[i];
    }
    ck_assert_uint_eq(h % 8, 0);
    ck_assert_uint_eq(n, 8 + h + sizeof s_w + sizeof s_b);
    ck_assert_int_eq(p[8], '{');
    ck_assert_int_eq(memcmp(p + 8 + h, s_w, sizeof s_w), 0);
    free(p);
}
END_TEST

START_TEST(empty_file_scalar_and_zero_size_tensors_round_trip)
{
    float one = 7;
    ps_safetensors_tensor_t t[3] = {
        {.name = "empty", .ndim = 2, .shape = {0, 4}, .data = NULL},
        {.name = "scalar", .ndim = 0, .data = &one},
        {.name = "z", .ndim = 1, .shape = {0}, .data = NULL},
    };
    ps_safetensors_t *st = NULL;
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 0, NULL, 0, NULL, 0), 0);
    ck_assert_int_eq(ps_safetensors_read(s_path, &st, NULL, 0), 0);
    ck_assert_int_eq(ps_safetensors_count(st), 0);
    ps_safetensors_destroy(&st);
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 3, NULL, 0, NULL, 0), 0);
    ck_assert_int_eq(ps_safetensors_read(s_path, &st, NULL, 0), 0);
    ck_assert_int_eq(ps_safetensors_count(st), 3);
    ck_assert_uint_eq(ps_safetensors_find(st, "empty")->numel, 0);
    ck_assert_uint_eq(ps_safetensors_find(st, "scalar")->numel, 1);
    ck_assert_int_eq(ps_safetensors_find(st, "scalar")->ndim, 0);
    ck_assert_float_eq(ps_safetensors_find(st, "scalar")->data[0], 7);
    ps_safetensors_destroy(&st);
}
END_TEST

START_TEST(reads_what_other_writers_produce)
{
    /* key order, whitespace, \u escapes, padding as huggingface writes it */
    s_put_raw(" {\n \"b\" : {\"shape\": [2], \"data_offsets\": [8, 16], \"dtype\": \"F32\"},"
              "\"__metadata__\":{\"format\":\"pt\",\"k\\u00e9\":\"\\ud83d\\ude00\"},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]}}   ",
              16);
    ps_safetensors_t *st = NULL;
    char why[256] = "";
    ck_assert_msg(ps_safetensors_read(s_path, &st, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(ps_safetensors_at(st, 0)->name, "a");
    ck_assert_str_eq(ps_safetensors_at(st, 1)->name, "b");
    ck_assert_str_eq(ps_safetensors_meta(st, "format"), "pt");
    ck_assert_str_eq(ps_safetensors_meta(st, "k\xc3\xa9"), "\xf0\x9f\x98\x80");
    ps_safetensors_destroy(&st);
}
END_TEST

/* CPU seconds of this process so far. */
static double s_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
}

START_TEST(many_tensors_write_and_read_in_linear_time)
{
    /* A check on CPU time, not on the clock: any quadratic step (a duplicate
     * check or a sort by pairs) takes orders of magnitude more than this. */
    enum { N = 100000 };
    ps_safetensors_tensor_t *t = calloc(N, sizeof *t);
    char(*names)[16] = calloc(N, sizeof *names);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(names);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "t%d", (i * 7919) % N); /* not in name order */
        t[i] = (ps_safetensors_tensor_t){.name = names[i], .ndim = 1, .shape = {1},
                                         .data = &s_b[i % 3]};
    }
    const double t0 = s_cpu();
    ck_assert_int_eq(ps_safetensors_write(s_path, t, N, NULL, 0, NULL, 0), 0);
    ps_safetensors_t *st = NULL;
    char why[256] = "";
    ck_assert_msg(ps_safetensors_read(s_path, &st, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(ps_safetensors_count(st), N);
    for (int i = 0; i < N; i += 997) {
        const ps_safetensors_tensor_t *f = ps_safetensors_find(st, names[i]);
        ck_assert_ptr_eq(f, ps_safetensors_at(st, i));
        ck_assert(f->data[0] == s_b[i % 3]);
    }
    ps_safetensors_destroy(&st);
    const double cpu = s_cpu() - t0;
    ck_assert_msg(cpu < 20, "100,000 tensors took %.1f CPU seconds", cpu);
    free(names);
    free(t);
}
END_TEST

START_TEST(write_is_atomic_and_leaves_no_temp_file)
{
    s_write_model();
    /* an unwritable target: the old file stays whole and no temp is left */
    ps_safetensors_tensor_t t = {.name = "x", .ndim = 1, .shape = {1}, .data = s_b};
    char why[512] = "", bad[160];
    snprintf(bad, sizeof bad, "%s/no/such/dir/m.safetensors", s_dir);
    ck_assert_int_eq(ps_safetensors_write(bad, &t, 1, NULL, 0, why, sizeof why), PS_EIO);
    ck_assert_msg(strstr(why, bad) == why, "%s", why);
    ck_assert_ptr_null(strchr(why, '\n'));
    /* over a directory: the rename fails, the temp is removed */
    ck_assert_int_eq(ps_safetensors_write(s_dir, &t, 1, NULL, 0, why, sizeof why), PS_EIO);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) = 1", s_dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(ps_safetensors_write(s_path, &t, 1, NULL, 0, why, sizeof why), 0);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(write_refuses_bad_tensor_lists)
{
    ps_safetensors_tensor_t t[2] = {
        {.name = "x", .ndim = 1, .shape = {1}, .data = s_b},
        {.name = "x", .ndim = 1, .shape = {1}, .data = s_b},
    };
    char why[256] = "";
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 2, NULL, 0, why, sizeof why), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "twice"));
    t[1].name = "__metadata__";
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 2, NULL, 0, why, sizeof why), PS_EINVAL);
    t[1].name = "y";
    t[1].ndim = PS_SAFETENSORS_MAX_DIMS + 1;
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 2, NULL, 0, why, sizeof why), PS_EINVAL);
    t[1].ndim = 1;
    t[1].shape[0] = -1;
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 2, NULL, 0, why, sizeof why), PS_EINVAL);
    t[1].shape[0] = 2;
    t[1].data = NULL;
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 2, NULL, 0, why, sizeof why), PS_EINVAL);
    ck_assert_int_eq(access(s_path, F_OK), -1);
}
END_TEST

START_TEST(missing_file_is_enoent)
{
    ps_safetensors_t *st = NULL;
    char why[256] = "";
    ck_assert_int_eq(ps_safetensors_read(s_path, &st, why, sizeof why), PS_ENOENT);
    ck_assert_ptr_nonnull(strstr(why, s_path));
}
END_TEST

START_TEST(every_truncation_is_refused)
{
    s_write_model();
    size_t n;
    unsigned char *p = s_slurp(&n);
    for (size_t len = 0; len < n; len++) {
        s_put_file(p, len);
        s_refused(NULL);
    }
    free(p);
}
END_TEST

START_TEST(flipped_header_bytes_are_refused_or_harmless)
{
    /* Every byte of the length and of the JSON (outside padding) flipped in
     * turn: the file is refused, or (a flip inside a name or metadata value)
     * read with the same tensors' data intact - never a crash. */
    s_write_model();
    size_t n;
    unsigned char *p = s_slurp(&n);
    size_t h = p[0] | (size_t)p[1] << 8;
    int refused = 0;
    for (size_t i = 0; i < 8 + h; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            p[i] ^= (unsigned char)(1 << bit);
            s_put_file(p, n);
            p[i] ^= (unsigned char)(1 << bit);
            ps_safetensors_t *st = NULL;
            char why[512] = "";
            int rc = ps_safetensors_read(s_path, &st, why, sizeof why);
            if (rc < 0) {
                ck_assert_int_eq(rc, PS_EPROTO);
                ck_assert_ptr_null(strchr(why, '\n'));
                refused++;
                continue;
            }
            ck_assert_int_eq(ps_safetensors_count(st), 2);
            ck_assert_int_eq(memcmp(ps_safetensors_at(st, 0)->data, s_w, sizeof s_w), 0);
            ps_safetensors_destroy(&st);
        }
    }
    ck_assert_int_gt(refused, (int)h); /* most flips break the header */
    free(p);
}
END_TEST

START_TEST(huge_or_tiny_header_length_is_refused)
{
    unsigned char p[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    s_put_file(p, sizeof p);
    s_refused("header length");
    memset(p, 0, 8);
    p[0] = 9; /* one byte beyond the file */
    s_put_file(p, 16);
    s_refused("header length");
    p[0] = 0;
    s_put_file(p, 16);
    s_refused("header length");
    p[0] = 0;
    p[3] = 0x10; /* 256 MiB: over the limit, whatever the file */
    s_put_file(p, 16);
    s_refused("header length");
}
END_TEST

START_TEST(bad_offsets_are_refused)
{
    /* past the end */
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 8);
    s_refused("tensor \"a\"");
    /* not starting at 0 (a gap) */
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    s_refused("contiguous");
    /* end before begin */
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8);
    s_refused(NULL);
    /* data left over after the last tensor */
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8);
    s_refused("cover");
    /* shape not matching the byte size */
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    s_refused("shape");
    /* a shape whose product overflows */
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387903,4611686018427387903,"
              "16],\"data_offsets\":[0,8]}}",
              8);
    s_refused("shape");
    /* numbers that are not plain non-negative integers */
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8);
    s_refused(NULL);
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8);
    s_refused(NULL);
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}",
              8);
    s_refused("data_offsets");
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,16]}}", 8);
    s_refused(NULL);
}
END_TEST

START_TEST(overlapping_tensors_are_refused)
{
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
              12);
    s_refused("contiguous");
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
              8);
    s_refused("contiguous");
}
END_TEST

START_TEST(wrong_dtype_and_bad_entries_are_refused)
{
    s_put_raw("{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8);
    s_refused("F32");
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8);
    s_refused("lacks");
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
              8);
    s_refused("duplicate object key");
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8);
    s_refused("unknown");
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
              8);
    s_refused("duplicate object key");
    s_put_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4);
    s_refused("dimensions");
    s_put_raw("{\"__metadata__\":{\"k\":1}}", 0);
    s_refused("string");
    s_put_raw("{\"__metadata__\":{\"k\":\"v\"},\"__metadata__\":{}}", 0);
    s_refused("metadata");
    s_put_raw("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0);
    s_refused("duplicate object key \"k\"");
    s_put_raw("{\"a\":[1]}", 0);
    s_refused("object");
    s_put_raw("[]", 0);
    s_refused("object");
    s_put_raw("{} x", 0);
    s_refused("end of file expected");
    s_put_raw("{\"a\\x\":{}}", 0);
    s_refused("escape");
    s_put_raw("{\"a\\u0000\":{}}", 0);
    s_refused("NUL");
    s_put_raw("{\"a\\ud800\":{}}", 0);
    s_refused("invalid Unicode");
    s_put_raw("{\"a\\u12", 0);
    s_refused(NULL);
    s_put_raw("{\"a\\", 0);
    s_refused("invalid escape");
    char ctl[] = "{\"a\tb\":{}}";
    s_put_raw(ctl, 0);
    s_refused("control");
    unsigned char nul[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', 0};
    s_put_file(nul, sizeof nul);
    s_refused(NULL);
}
END_TEST

/* ---- memory ---- */

/* The most a header may cost in memory while it is read, as a multiple of
 * its size: its text (unescaped in place) and, per tensor, one entry and
 * two pointers, some 140 bytes for the shortest entry text of 50. */
enum { S_MEMORY_FACTOR = 4, S_BIG_HEADER = 16 << 20 };

/* Writes s_path with a header of at least bytes: head, copies of member (a
 * printf format of one long, the copy's index) between commas, tail; no
 * data. Returns the header's length. */
static size_t s_put_header(const char *head, const char *member, const char *tail, size_t bytes)
{
    FILE *f = fopen(s_path, "wb");
    ck_assert_ptr_nonnull(f);
    long n = fprintf(f, "%8s%s", "", head) - 8;
    for (long i = 0; n < (long)bytes; i++) {
        n += fprintf(f, i ? "," : "");
        n += fprintf(f, member, i);
    }
    n += fprintf(f, "%s", tail);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) {
        len8[i] = (unsigned char)((uint64_t)n >> (8 * i));
    }
    rewind(f);
    ck_assert_uint_eq(fwrite(len8, 1, 8, f), 8);
    ck_assert_int_eq(fclose(f), 0);
    return (size_t)n;
}

static int s_read(const void *path)
{
    ps_safetensors_t *st = NULL;
    const int rc = ps_safetensors_read(path, &st, NULL, 0);
    ps_safetensors_destroy(&st);
    return rc;
}

/* Reads path (NULL: nothing) in a child process: the child's peak resident
 * bytes; *rc its read's result. */
static long s_child_peak(const char *path, int *rc)
{
    return ps_test_child_peak(path ? s_read : NULL, path, rc);
}

/* Hostile headers: head, copies of member (a printf format of the copy's
 * index) between commas, tail; whether the file is valid. */
static const struct {
    const char *head, *member, *tail;
    int valid;
} s_hostile[] = {
    /* the most tensors a header can name: each of zero bytes */
    {"{", "\"t%ld\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", "}", 1},
    {"{\"__metadata__\":{", "\"k%ld\":\"\"", "}}", 1},
    /* values a tree of the whole header would hold before any check */
    {"{", "\"t%ld\":{}", "}", 0},
    {"{\"__metadata__\":{\"k\":[", "{}", "]}}", 0},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[", "%ld", "]}}", 0},
};

/* Asserts that reading s_path (a header of h bytes) grows a child's peak
 * by at most S_MEMORY_FACTOR * h over base; returns the read's result. */
static int s_within_bound(size_t h, long base, const char *what)
{
    int rc;
    const long grew = s_child_peak(s_path, &rc) - base;
    printf("%s: %zu bytes, the reader's peak grew by %ld bytes (%.2fx)\n", what, h, grew,
           (double)grew / (double)h);
    ck_assert_msg(grew <= S_MEMORY_FACTOR * (long)h, "%s: a header of %zu bytes took %ld bytes",
                  what, h, grew);
    return rc;
}

START_TEST(hostile_headers_cost_a_small_multiple_of_their_size)
{
#if defined(__SANITIZE_ADDRESS__)
    return; /* AddressSanitizer's shadow and quarantine are not the reader's */
#endif
    int rc;
    const long base = s_child_peak(NULL, &rc);
    for (size_t i = 0; i < sizeof s_hostile / sizeof s_hostile[0]; i++) {
        const size_t h = s_put_header(s_hostile[i].head, s_hostile[i].member, s_hostile[i].tail,
                                      S_BIG_HEADER);
        char what[160];
        snprintf(what, sizeof what, "%s%s...", s_hostile[i].head, s_hostile[i].member);
        ck_assert_int_eq(s_within_bound(h, base, what), s_hostile[i].valid ? 0 : PS_EPROTO);
    }
}
END_TEST

START_TEST(mutated_big_headers_stay_within_the_bound)
{
#if defined(__SANITIZE_ADDRESS__)
    return;
#endif
    /* Seeded: the header of the most tensors, overwritten at 1 to 4 random
     * places with JSON's structure, numbers, escapes and bytes that are no
     * UTF-8: refused or read, never over the bound. */
    static const char *tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "\\", "0", "-1",
                                   "1e9", "\\u0000", "\\ud800", "\xff", " ", "{}", "[[",
                                   "\"a\":", "\"__metadata__\":{"};
    const size_t ntok = sizeof tokens / sizeof tokens[0];
    uint64_t r = 25;
    int rc;
    const long base = s_child_peak(NULL, &rc);
    for (int i = 0; i < 12; i++) {
        const size_t h = s_put_header(s_hostile[0].head, s_hostile[0].member, s_hostile[0].tail,
                                      S_BIG_HEADER / 4);
        const int fd = open(s_path, O_WRONLY);
        ck_assert_int_ge(fd, 0);
        for (int k = 0; k <= i % 4; k++) {
            r = r * 6364136223846793005u + 1442695040888963407u; /* Knuth's MMIX LCG */
            const char *tok = tokens[(r >> 33) % ntok];
            const off_t at = 8 + (off_t)((r >> 11) % (h - strlen(tok)));
            ck_assert_int_eq(pwrite(fd, tok, strlen(tok), at), (ssize_t)strlen(tok));
        }
        close(fd);
        char what[32];
        snprintf(what, sizeof what, "mutated header %d", i);
        rc = s_within_bound(h, base, what);
        ck_assert(rc == 0 || rc == PS_EPROTO);
    }
}
END_TEST

/* U64 and U32 tensors (row keys and counts) beside F32 ones: written and
 * read back in place; find gives F32 only, find_dtype the asked dtype; a
 * tensor that would not start at a multiple of its element size is refused
 * on writing and on reading. */
START_TEST(integer_tensors_round_trip_and_must_be_aligned)
{
    const uint64_t keys[3] = {1, UINT64_MAX, (uint64_t)1 << 63};
    const uint32_t counts[3] = {7, 0, UINT32_MAX};
    ps_safetensors_tensor_t t[3] = {
        {.name = "k", .ndim = 1, .shape = {3}, .u64 = keys, .dtype = PS_SAFETENSORS_U64},
        {.name = "w", .ndim = 2, .shape = {1, 3}, .data = s_b},
        {.name = "c", .ndim = 1, .shape = {3}, .u32 = counts, .dtype = PS_SAFETENSORS_U32},
    };
    char why[256] = "";
    ck_assert_msg(ps_safetensors_write(s_path, t, 3, NULL, 0, why, sizeof why) == 0, "%s", why);
    ps_safetensors_t *st = NULL;
    ck_assert_msg(ps_safetensors_read(s_path, &st, why, sizeof why) == 0, "%s", why);
    const ps_safetensors_tensor_t *k = ps_safetensors_find_dtype(st, "k", PS_SAFETENSORS_U64);
    const ps_safetensors_tensor_t *c = ps_safetensors_find_dtype(st, "c", PS_SAFETENSORS_U32);
    ck_assert_ptr_nonnull(k);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(k->numel, 3);
    ck_assert_mem_eq(k->u64, keys, sizeof keys);
    ck_assert_mem_eq(c->u32, counts, sizeof counts);
    ck_assert_mem_eq(ps_safetensors_find(st, "w")->data, s_b, sizeof s_b);
    /* a reader of floats never gets another dtype, nor the other way round */
    ck_assert_ptr_null(ps_safetensors_find(st, "k"));
    ck_assert_ptr_null(ps_safetensors_find(st, "c"));
    ck_assert_ptr_null(ps_safetensors_find_dtype(st, "k", PS_SAFETENSORS_U32));
    ck_assert_ptr_null(ps_safetensors_find_dtype(st, "w", PS_SAFETENSORS_U64));
    ck_assert_int_eq(ps_safetensors_at(st, 0)->dtype, PS_SAFETENSORS_U64);
    ps_safetensors_destroy(&st);
    /* the header names the dtypes as the format does */
    size_t n;
    unsigned char *p = s_slurp(&n);
    ck_assert_ptr_nonnull(memmem(p, n, "\"U64\"", 5));
    ck_assert_ptr_nonnull(memmem(p, n, "\"U32\"", 5));
    free(p);
    /* 8-byte elements after 3 floats: refused both ways */
    ps_safetensors_tensor_t bad[2] = {t[1], t[0]};
    ck_assert_int_eq(ps_safetensors_write(s_path, bad, 2, NULL, 0, why, sizeof why), PS_EINVAL);
    ck_assert_msg(strstr(why, "multiple of its element size"), "%s", why);
    s_put_raw("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"k\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[4,12]}}",
              12);
    s_refused("not a multiple of its 8-byte elements");
    s_put_raw("{\"k\":{\"dtype\":\"U64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    s_refused("shape does not match");
    t[0].dtype = (ps_safetensors_dtype_t)7;
    ck_assert_int_eq(ps_safetensors_write(s_path, t, 1, NULL, 0, why, sizeof why), PS_EINVAL);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, s_setup, s_teardown);
    tcase_set_timeout(tc, 120); /* 100,000 tensors under sanitizers, on a loaded machine */
    tcase_add_test(tc, round_trip_keeps_names_shapes_data_and_metadata);
    tcase_add_test(tc, header_is_padded_to_eight_bytes_and_data_follows);
    tcase_add_test(tc, empty_file_scalar_and_zero_size_tensors_round_trip);
    tcase_add_test(tc, reads_what_other_writers_produce);
    tcase_add_test(tc, many_tensors_write_and_read_in_linear_time);
    tcase_add_test(tc, write_is_atomic_and_leaves_no_temp_file);
    tcase_add_test(tc, write_refuses_bad_tensor_lists);
    tcase_add_test(tc, missing_file_is_enoent);
    tcase_add_test(tc, every_truncation_is_refused);
    tcase_add_test(tc, flipped_header_bytes_are_refused_or_harmless);
    tcase_add_test(tc, huge_or_tiny_header_length_is_refused);
    tcase_add_test(tc, bad_offsets_are_refused);
    tcase_add_test(tc, overlapping_tensors_are_refused);
    tcase_add_test(tc, wrong_dtype_and_bad_entries_are_refused);
    tcase_add_test(tc, integer_tensors_round_trip_and_must_be_aligned);
    tcase_add_test(tc, hostile_headers_cost_a_small_multiple_of_their_size);
    tcase_add_test(tc, mutated_big_headers_stay_within_the_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
