/*
 * tests/unit/test_data.c - the IDX reader on tiny fixture files the test
 * writes into a fresh temporary directory (good, bad magic, truncated,
 * trailing bytes, missing), dataset loading and normalisation, the real
 * Fashion-MNIST when it is installed, and the seeded global sample order.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "common/error.h"
#include "tests/unit/testutil.h"
#include "worker/data.h"

static char s_dir[256];

static void s_setup(void)
{
    snprintf(s_dir, sizeof(s_dir), "%s/ps-test-data-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(s_dir));
}

static void s_teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s_dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void s_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/*
 * Writes s_dir/name: an IDX header (magic, ndim sizes) and `len` payload
 * bytes, gzip-compressed when gz. Returns the path (static buffer).
 */
static const char *s_write(const char *name, int gz, uint32_t magic, const uint32_t *dims,
                           int ndim, const uint8_t *payload, size_t len)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", s_dir, name);
    unsigned char hdr[16];
    s_be32(hdr, magic);
    for (int i = 0; i < ndim; i++) {
        s_be32(hdr + 4 + 4 * i, dims[i]);
    }
    size_t hlen = 4 + 4 * (size_t)ndim;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(gzwrite(f, hdr, (unsigned)hlen), (int)hlen);
        if (len) {
            ck_assert_int_eq(gzwrite(f, payload, (unsigned)len), (int)len);
        }
        ck_assert_int_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(hdr, 1, hlen, f), hlen);
        if (len) {
            ck_assert_uint_eq(fwrite(payload, 1, len, f), len);
        }
        fclose(f);
    }
    return path;
}

/* Writes a fake split (train or t10k) of n 28x28 images with labels. */
static void s_write_split(const char *split, int n, int label_bad)
{
    char name[64];
    uint8_t *pix = malloc((size_t)n * 784);
    uint8_t lab[64];
    for (int i = 0; i < n * 784; i++) {
        pix[i] = (uint8_t)(i * 7);
    }
    for (int i = 0; i < n; i++) {
        lab[i] = (uint8_t)(i % 10);
    }
    if (label_bad) {
        lab[n - 1] = 10;
    }
    uint32_t idims[3] = {(uint32_t)n, 28, 28}, ldims[1] = {(uint32_t)n};
    snprintf(name, sizeof(name), "%s-images-idx3-ubyte.gz", split);
    s_write(name, 1, 0x803, idims, 3, pix, (size_t)n * 784);
    snprintf(name, sizeof(name), "%s-labels-idx1-ubyte.gz", split);
    s_write(name, 1, 0x801, ldims, 1, lab, (size_t)n);
    free(pix);
}

START_TEST(idx_reads_good_gzip_and_plain_files)
{
    uint8_t payload[2 * 3 * 4];
    for (int i = 0; i < 24; i++) {
        payload[i] = (uint8_t)(i * 10);
    }
    const uint32_t dims[3] = {2, 3, 4};
    for (int gz = 0; gz < 2; gz++) {
        const char *path = s_write(gz ? "a.gz" : "a", gz, 0x803, dims, 3, payload, 24);
        uint8_t *data = NULL;
        int d[3] = {0, 0, 0};
        char err[256] = "";
        ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), 0);
        ck_assert_int_eq(d[0], 2);
        ck_assert_int_eq(d[1], 3);
        ck_assert_int_eq(d[2], 4);
        ck_assert_mem_eq(data, payload, 24);
        free(data);
    }
    /* a 1-D label file reports [count, 1, 1] */
    const uint32_t ldims[1] = {5};
    const char *path = s_write("l.gz", 1, 0x801, ldims, 1, payload, 5);
    uint8_t *data = NULL;
    int d[3];
    ck_assert_int_eq(ps_idx_read(path, 0x801, &data, d, NULL, 0), 0);
    ck_assert_int_eq(d[0], 5);
    ck_assert_int_eq(d[1], 1);
    ck_assert_int_eq(d[2], 1);
    free(data);
}
END_TEST

START_TEST(idx_missing_file_is_enoent_with_path_in_message)
{
    char path[512], err[600] = "";
    snprintf(path, sizeof(path), "%s/nope.gz", s_dir);
    uint8_t *data = (uint8_t *)1;
    int d[3];
    ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), PS_ENOENT);
    ck_assert_ptr_null(data);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

START_TEST(idx_bad_magic_is_eproto)
{
    const uint32_t dims[1] = {3};
    uint8_t payload[3] = {1, 2, 3};
    char err[600] = "";
    uint8_t *data = NULL;
    int d[3];
    /* a label file where an image file is expected */
    const char *path = s_write("m.gz", 1, 0x801, dims, 1, payload, 3);
    ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "magic"));
    ck_assert_ptr_null(data);
    /* garbage magic */
    path = s_write("g", 0, 0x12345678, dims, 1, payload, 3);
    ck_assert_int_eq(ps_idx_read(path, 0x801, &data, d, err, sizeof(err)), PS_EPROTO);
}
END_TEST

START_TEST(idx_truncated_payload_or_header_is_eproto)
{
    const uint32_t dims[3] = {10, 28, 28};
    uint8_t payload[100] = {0};
    char err[600] = "";
    uint8_t *data = NULL;
    int d[3];
    for (int gz = 0; gz < 2; gz++) {
        const char *path = s_write(gz ? "t.gz" : "t", gz, 0x803, dims, 3, payload, 100);
        ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), PS_EPROTO);
        ck_assert_ptr_nonnull(strstr(err, "truncated"));
        ck_assert_ptr_null(data);
    }
    /* header cut in the middle of the sizes */
    const char *path = s_write("h", 0, 0x803, dims, 1, NULL, 0);
    ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), PS_EPROTO);
    /* empty file */
    path = s_write("e", 0, 0, dims, 0, NULL, 0);
    FILE *f = fopen(path, "wb");
    fclose(f);
    ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), PS_EPROTO);
}
END_TEST

START_TEST(idx_trailing_bytes_and_zero_sizes_are_eproto)
{
    uint8_t payload[10] = {0};
    char err[600] = "";
    uint8_t *data = NULL;
    int d[3];
    const uint32_t dims[1] = {5};
    const char *path = s_write("x.gz", 1, 0x801, dims, 1, payload, 10);
    ck_assert_int_eq(ps_idx_read(path, 0x801, &data, d, err, sizeof(err)), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "trailing"));
    const uint32_t zero[3] = {0, 28, 28};
    path = s_write("z.gz", 1, 0x803, zero, 3, NULL, 0);
    ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), PS_EPROTO);
    /* sizes whose product overflows the limit */
    const uint32_t huge[3] = {0xffffffffu, 0xffffffffu, 2};
    path = s_write("o.gz", 1, 0x803, huge, 3, NULL, 0);
    ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), PS_EPROTO);
}
END_TEST

START_TEST(idx_corrupt_gzip_stream_is_eproto)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/c.gz", s_dir);
    /* a gzip magic followed by junk */
    const unsigned char junk[] = {0x1f, 0x8b, 8,    0,    0,    0,    0,
                                  0,    0,    3,    0xde, 0xad, 0xbe, 0xef,
                                  0x00, 0x11, 0x22, 0x33, 0x44, 0x55};
    FILE *f = fopen(path, "wb");
    fwrite(junk, 1, sizeof(junk), f);
    fclose(f);
    uint8_t *data = NULL;
    int d[3];
    char err[600];
    ck_assert_int_eq(ps_idx_read(path, 0x803, &data, d, err, sizeof(err)), PS_EPROTO);
}
END_TEST

START_TEST(dataset_loads_and_normalises_fixture)
{
    s_write_split("train", 3, 0);
    ps_dataset_t ds;
    char err[600] = "";
    ck_assert_int_eq(ps_dataset_load(s_dir, 1, &ds, err, sizeof(err)), 0);
    ck_assert_int_eq(ds.n, 3);
    ck_assert_int_eq(ds.rows, 28);
    ck_assert_int_eq(ds.cols, 28);
    float x[3 * 784];
    ps_data_images(&ds, 0, 3, x);
    for (int i = 0; i < 3 * 784; i++) {
        ck_assert_uint_eq(ds.pixels[i], (uint8_t)(i * 7));
        double want = ((double)(uint8_t)(i * 7) / 255.0 - 0.2860) / 0.3530;
        ck_assert_msg(ps_test_close(x[i], want, 1e-5, 1e-5), "pixel %d", i);
    }
    ps_data_images(&ds, 2, 1, x); /* from a later sample */
    for (int i = 0; i < 784; i++) {
        double want = ((double)(uint8_t)((2 * 784 + i) * 7) / 255.0 - 0.2860) / 0.3530;
        ck_assert_msg(ps_test_close(x[i], want, 1e-5, 1e-5), "sample 2 pixel %d", i);
    }
    ck_assert_int_eq(ds.labels[2], 2);
    ps_dataset_fini(&ds);
    ck_assert_ptr_null(ds.pixels);
    ps_dataset_fini(&ds); /* twice is fine */
}
END_TEST

START_TEST(dataset_missing_names_file_and_package)
{
    ps_dataset_t ds;
    char err[600] = "";
    ck_assert_int_eq(ps_dataset_load(s_dir, 0, &ds, err, sizeof(err)), PS_ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "t10k-images-idx3-ubyte.gz"));
    ck_assert_ptr_nonnull(strstr(err, "dataset-fashion-mnist"));
    ck_assert_ptr_nonnull(strstr(err, "--data DIR"));
    ck_assert_ptr_null(ds.pixels);
}
END_TEST

START_TEST(dataset_bad_label_or_count_mismatch_is_eproto)
{
    ps_dataset_t ds;
    char err[600] = "";
    s_write_split("t10k", 4, 1);
    ck_assert_int_eq(ps_dataset_load(s_dir, 0, &ds, err, sizeof(err)), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "label"));
    /* labels for 3 samples, images for 4 */
    uint8_t lab[3] = {0, 1, 2};
    const uint32_t ldims[1] = {3};
    s_write("t10k-labels-idx1-ubyte.gz", 1, 0x801, ldims, 1, lab, 3);
    ck_assert_int_eq(ps_dataset_load(s_dir, 0, &ds, err, sizeof(err)), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "labels"));
}
END_TEST

START_TEST(dataset_real_fashion_mnist_when_installed)
{
    char probe[512];
    snprintf(probe, sizeof(probe), "%s/train-images-idx3-ubyte.gz", PS_DATA_DEFAULT_DIR);
    if (access(probe, R_OK) != 0) {
        fprintf(stderr, "skipped: %s not installed\n", probe);
        return;
    }
    ps_dataset_t tr, te;
    char err[600] = "";
    ck_assert_msg(ps_dataset_load(NULL, 1, &tr, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(ps_dataset_load(PS_DATA_DEFAULT_DIR, 0, &te, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(tr.n, 60000);
    ck_assert_int_eq(te.n, 10000);
    /* normalised pixels: mean ~0, std ~1 over the training set */
    double s = 0, s2 = 0;
    const size_t cnt = (size_t)tr.n * 784;
    float *x = malloc(cnt * sizeof *x);
    ck_assert_ptr_nonnull(x);
    ps_data_images(&tr, 0, tr.n, x);
    for (size_t i = 0; i < cnt; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    free(x);
    const double mean = s / cnt, sd = sqrt(s2 / cnt - mean * mean);
    ck_assert_msg(fabs(mean) < 0.01 && fabs(sd - 1.0) < 0.01, "mean %g sd %g", mean, sd);
    int hist[10] = {0};
    for (int i = 0; i < tr.n; i++) {
        hist[tr.labels[i]]++;
    }
    for (int c = 0; c < 10; c++) {
        ck_assert_int_eq(hist[c], 6000);
    }
    ps_dataset_fini(&tr);
    ps_dataset_fini(&te);
}
END_TEST

START_TEST(order_is_a_deterministic_permutation_per_seed_and_epoch)
{
    enum { N = 10007 };
    uint32_t *a = malloc(N * sizeof(uint32_t)), *b = malloc(N * sizeof(uint32_t));
    uint8_t *seen = calloc(N, 1);
    ps_data_order(42, 3, a, N);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_lt(a[i], N);
        ck_assert_int_eq(seen[a[i]], 0);
        seen[a[i]] = 1;
    }
    ps_data_order(42, 3, b, N);
    ck_assert_mem_eq(a, b, N * sizeof(uint32_t));
    ps_data_order(42, 4, b, N);
    ck_assert(memcmp(a, b, N * sizeof(uint32_t)) != 0);
    ps_data_order(43, 3, b, N);
    ck_assert(memcmp(a, b, N * sizeof(uint32_t)) != 0);
    /* shuffled, not the identity; fixed points ~1 on average */
    int fixed = 0;
    for (int i = 0; i < N; i++) {
        fixed += a[i] == (uint32_t)i;
    }
    ck_assert_int_lt(fixed, 10);
    /* a known value pins the generator across platforms and refactors */
    uint32_t small[10];
    const uint32_t pinned[10] = {7, 0, 4, 9, 1, 5, 6, 8, 2, 3};
    ps_data_order(1, 0, small, 10);
    ck_assert_mem_eq(small, pinned, sizeof(pinned));
    ps_data_order(7, 0, small, 0); /* n == 0 is fine */
    ps_data_order(7, 0, small, 1);
    ck_assert_uint_eq(small[0], 0);
    free(a);
    free(b);
    free(seen);
}
END_TEST

START_TEST(gather_copies_samples_in_order)
{
    s_write_split("train", 5, 0);
    ps_dataset_t ds;
    ck_assert_int_eq(ps_dataset_load(s_dir, 1, &ds, NULL, 0), 0);
    const uint32_t order[5] = {4, 0, 3, 1, 2};
    float x[2 * 784];
    uint8_t y[2];
    ps_data_gather(&ds, order, 2, 2, x, y);
    float want[784];
    ps_data_images(&ds, 3, 1, want);
    ck_assert_mem_eq(x, want, sizeof want);
    ps_data_images(&ds, 1, 1, want);
    ck_assert_mem_eq(x + 784, want, sizeof want);
    ck_assert_int_eq(y[0], 3);
    ck_assert_int_eq(y[1], 1);
    ps_dataset_fini(&ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("idx");
    tcase_add_checked_fixture(tc, s_setup, s_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, idx_reads_good_gzip_and_plain_files);
    tcase_add_test(tc, idx_missing_file_is_enoent_with_path_in_message);
    tcase_add_test(tc, idx_bad_magic_is_eproto);
    tcase_add_test(tc, idx_truncated_payload_or_header_is_eproto);
    tcase_add_test(tc, idx_trailing_bytes_and_zero_sizes_are_eproto);
    tcase_add_test(tc, idx_corrupt_gzip_stream_is_eproto);
    tcase_add_test(tc, dataset_loads_and_normalises_fixture);
    tcase_add_test(tc, dataset_missing_names_file_and_package);
    tcase_add_test(tc, dataset_bad_label_or_count_mismatch_is_eproto);
    tcase_add_test(tc, dataset_real_fashion_mnist_when_installed);
    tcase_add_test(tc, order_is_a_deterministic_permutation_per_seed_and_epoch);
    tcase_add_test(tc, gather_copies_samples_in_order);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
