/*
 * tests/unit/test_fuzz_files.c - the readers of files from outside,
 * safetensors (common/safetensors.h), checkpoint manifests
 * (scheduler/manifest.h) and a checkpoint part with embedding rows as a
 * server loads it (server/checkpoint.h), fed mutated files: truncations,
 * huge or wrong header lengths, random byte and bit flips, inserted JSON
 * tokens, deleted and duplicated spans (so duplicated keys), and changes
 * made on the parsed document (wrong dtypes and shapes, offsets past the
 * end or overlapping, wrong steps, sizes, checksums and file names, values
 * of the wrong type). A part is loaded with the manifest's size and CRC-32
 * made its own, so that what lies behind that check is what is fuzzed:
 * flipped key, count and value bytes (unsorted or foreign keys, counts
 * outside the filter, NaNs) as well as the header's mutations.
 *
 * Seeded and deterministic: SHARDPS_FUZZ_SEED and SHARDPS_FUZZ_FILES (per
 * reader, default 10000) change the run. Every file is read; a refused one
 * must come with exactly one non-empty, printable line naming what is
 * wrong, an accepted one must hold together (tensors inside the data, found
 * by name). The counts are printed for the log.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "common/json.h"
#include "common/log.h"
#include "common/safetensors.h"
#include "kernels/optim.h"
#include "scheduler/manifest.h"
#include "server/checkpoint.h"
#include "server/rows.h"
#include "tests/unit/testutil.h"

static char s_dir[64];

/* An assertion for the loops over thousands of files: Check records every
 * ck_assert it passes (a write to its log each), this one only a failure. */
#define S_CHECK(cond, ...)                                                                   \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            ck_abort_msg(__VA_ARGS__);                                                       \
        }                                                                                    \
    } while (0)

static void s_setup(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/ps_fuzz_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s_dir));
}

static void s_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- a seeded generator (splitmix64) ---- */

static uint64_t s_state;

static uint64_t s_next(void)
{
    uint64_t z = (s_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. */
static size_t s_below(size_t n)
{
    return (size_t)(s_next() % n);
}

static long s_env(const char *name, long def)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 0) : def;
}

/* ---- a byte buffer and the mutations that know nothing of JSON ---- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
} s_buf_t;

static void s_reserve(s_buf_t *b, size_t n)
{
    if (n > b->cap) {
        b->cap = n * 2;
        b->p = realloc(b->p, b->cap);
        S_CHECK(b->p, "out of memory");
    }
}

static void s_set(s_buf_t *b, const void *p, size_t n)
{
    s_reserve(b, n + 1);
    memcpy(b->p, p, n);
    b->n = n;
}

/* Inserts n bytes of p at offset at (<= b->n). */
static void s_insert(s_buf_t *b, size_t at, const void *p, size_t n)
{
    s_reserve(b, b->n + n + 1);
    memmove(b->p + at + n, b->p + at, b->n - at);
    memcpy(b->p + at, p, n);
    b->n += n;
}

/* Tokens that break JSON, or this format, in interesting ways. */
static const char *const s_tokens[] = {
    "\"", "\\", "\\u0000", "\\ud800", "\\uDC00\\uD800", "{", "}", "[", "]", ",", ":", "{}", "[]",
    "null", "true", "-1", "-0", "1e400", "0.5", "01", "99999999999999999999",
    "4611686018427387904", "9223372036854775807", "\"dtype\":\"F32\",", "\"shape\":[1],",
    "\"data_offsets\":[0,4],", "\"__metadata__\":{},", "\"a\":{},", "\xff", "\xc3", "\x01", "\n",
    " ", "\"step\": 1, ", "\"parts\": [], ", "\"servers\": 2, ", "\"file\": \"x\", ",
};

static const unsigned char s_bytes[] = {0,   '"', '\\', '{', '}', '[', ']', ',', ':',
                                        0xff, 0x80, '\n', '0', '9', '-', 'e', '.', ' '};

/* One mutation of b that knows nothing of its format. */
static void s_mutate_bytes(s_buf_t *b)
{
    size_t at = b->n ? s_below(b->n) : 0;
    switch (s_below(7)) {
    case 0: /* truncation */
        b->n = b->n ? s_below(b->n) : 0;
        break;
    case 1: /* bit flips */
        for (size_t k = 1 + s_below(4); b->n && k > 0; k--) {
            b->p[s_below(b->n)] ^= (unsigned char)(1u << s_below(8));
        }
        break;
    case 2: /* bytes set to what JSON gives meaning to */
        for (size_t k = 1 + s_below(3); b->n && k > 0; k--) {
            b->p[s_below(b->n)] = s_bytes[s_below(sizeof s_bytes)];
        }
        break;
    case 3: { /* a token inserted */
        const char *t = s_tokens[s_below(sizeof s_tokens / sizeof *s_tokens)];
        s_insert(b, at, t, strlen(t));
        break;
    }
    case 4: { /* a span deleted */
        size_t len = s_below(b->n - at + 1);
        memmove(b->p + at, b->p + at + len, b->n - at - len);
        b->n -= len;
        break;
    }
    default: { /* a span copied elsewhere: duplicated keys, entries, brackets */
        size_t len = s_below(b->n - at + 1), to = s_below(b->n + 1);
        unsigned char *copy = malloc(len + 1);
        S_CHECK(copy, "out of memory");
        memcpy(copy, b->p + at, len);
        s_insert(b, to, copy, len);
        free(copy);
        break;
    }
    }
}

/* ---- mutations of a parsed document ---- */

/* A value of a random kind, often one a reader must refuse. */
static json_t *s_odd_value(void)
{
    static const json_int_t ints[] = {-1, 0, 1, 3, 4, 7, 8, 12, 1000, (json_int_t)1 << 31,
                                      (json_int_t)1 << 32, (json_int_t)1 << 62,
                                      INT64_MAX, INT64_MIN};
    static const char *const strs[] = {"F32", "F16", "BF16", "f32", "U64", "U32", "", "../x",
                                       "a/b", "x\n", "server-0.safetensors", "step-1",
                                       "\xc3\xa9"};
    switch (s_below(7)) {
    case 0:
        return json_integer(ints[s_below(sizeof ints / sizeof *ints)]);
    case 1:
        return json_string(strs[s_below(sizeof strs / sizeof *strs)]);
    case 2:
        return json_real(0.5);
    case 3:
        return json_null();
    case 4:
        return json_pack("[i, i]", (int)s_below(20), (int)s_below(20));
    case 5:
        return json_pack("[i, i, i]", 4, 4, 4);
    default:
        return json_object();
    }
}

/* Some container inside v (v itself included), walked at random. */
static json_t *s_pick(json_t *v)
{
    for (int depth = 0; depth < 4 && s_below(3) != 0; depth++) {
        size_t n = json_is_object(v) ? json_object_size(v) : json_array_size(v);
        json_t *child = NULL;
        if (n && json_is_object(v)) {
            size_t k = s_below(n);
            const char *key;
            json_t *val;
            json_object_foreach(v, key, val) {
                if (k-- == 0) {
                    child = val;
                    break;
                }
            }
        } else if (n) {
            child = json_array_get(v, s_below(n));
        }
        if (!json_is_object(child) && !json_is_array(child)) {
            break;
        }
        v = child;
    }
    return v;
}

/* One change to the document: a member or element replaced, removed, added
 * or copied, an integer nudged. */
static void s_mutate_doc(json_t *doc)
{
    json_t *c = s_pick(doc);
    const size_t n = json_is_object(c) ? json_object_size(c) : json_array_size(c);
    const char *key = NULL;
    json_t *val = NULL;
    size_t k = n ? s_below(n) : 0;
    if (json_is_object(c)) {
        json_object_foreach(c, key, val) {
            if (k-- == 0) {
                break;
            }
        }
    } else if (n) {
        val = json_array_get(c, k);
    }
    switch (s_below(5)) {
    case 0: /* replaced */
        if (key) {
            json_object_set_new(c, key, s_odd_value());
        } else if (val) {
            json_array_set_new(c, k, s_odd_value());
        }
        break;
    case 1: /* removed */
        if (key) {
            json_object_del(c, key);
        } else if (val) {
            json_array_remove(c, k);
        }
        break;
    case 2: /* added */
        if (json_is_object(c)) {
            json_object_set_new(c, s_below(2) ? "x" : "fc1.weight", s_odd_value());
        } else {
            json_array_append_new(c, s_odd_value());
        }
        break;
    case 3: /* copied: an entry or part twice, overlapping its original */
        if (json_is_object(c) && key) {
            char name[64];
            snprintf(name, sizeof name, "%.40s%d", key, (int)s_below(3));
            json_object_set(c, name, val);
        } else if (val) {
            json_array_append(c, val);
        }
        break;
    default: /* an integer nudged: offsets, sizes, steps, checksums */
        if (json_is_integer(val)) {
            static const json_int_t by[] = {1, -1, 4, -4, 8, 1 << 20};
            json_integer_set(val, (json_int_t)((uint64_t)json_integer_value(val) +
                                               (uint64_t)by[s_below(6)])); /* wraps */
        }
        break;
    }
}

/* doc's text into out in a random style, with its first key sometimes
 * written twice (jansson cannot hold that, a file can). */
static void s_doc_text(const json_t *doc, s_buf_t *out)
{
    ps_text_t t = {0};
    ps_json_dump(doc, (ps_json_style_t)s_below(3), &t);
    S_CHECK(!t.oom, "out of memory");
    s_set(out, t.p, t.len);
    free(t.p);
    if (s_below(4) == 0 && json_object_size(doc) > 0) {
        /* a member again, right after the opening brace */
        const char *key = json_object_iter_key(json_object_iter((json_t *)doc));
        json_t *one = json_pack("{s:O}", key, json_object_get(doc, key));
        char *text = json_dumps(one, JSON_COMPACT);
        S_CHECK(text, "out of memory");
        text[strlen(text) - 1] = ',';
        s_insert(out, 1, text + 1, strlen(text + 1));
        free(text);
        json_decref(one);
    }
}

/* A mutated file into out: in tenths of the cases base_doc changed and
 * written out (then sometimes its bytes too), else base's bytes changed.
 * With data, a byte mutation hits it one time in five instead. */
static void s_mutated(const json_t *base_doc, const s_buf_t *base, size_t tenths, s_buf_t *out,
                      s_buf_t *data)
{
    const size_t how = s_below(10);
    if (how < tenths) {
        json_t *doc = json_deep_copy(base_doc);
        for (size_t k = 1 + s_below(2); k > 0; k--) {
            s_mutate_doc(doc);
        }
        s_doc_text(doc, out);
        json_decref(doc);
    } else {
        s_set(out, base->p, base->n);
    }
    for (size_t k = how < tenths ? s_below(2) : 1 + s_below(3); k > 0; k--) {
        s_mutate_bytes(data && s_below(5) == 0 ? data : out);
    }
}

/* ---- checking what a reader said ---- */

typedef struct {
    int files, refused, accepted;
    int kinds;         /* distinct reasons, told apart by their words (s_refusal) */
    char kind[96][64]; /* those words */
    int kind_n[96];
} s_tally_t;

/* Asserts that why is one non-empty printable line and counts its kind: the
 * words after the file's name, a word with a digit as '#' (numbers, hex), a
 * quoted name as "N", up to the input jansson quotes (" near '...'"). */
static void s_refusal(s_tally_t *t, const char *why)
{
    S_CHECK(why[0] != '\0', "a refused file without a reason");
    for (const char *c = why; *c; c++) {
        S_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "reason not one line: %s", why);
    }
    const char *at = strncmp(why, s_dir, strlen(s_dir)) ? why : why + strcspn(why, ": ");
    at += strspn(at, ": ");
    static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ_";
    char kind[sizeof t->kind[0]];
    size_t n = 0;
    while (*at && strncmp(at, " near", 5) && n + 4 < sizeof kind) {
        const size_t word = strspn(at, alnum);
        if (*at == '"') {
            for (at++; *at && *at != '"'; at += at[0] == '\\' && at[1] ? 2 : 1) {
            }
            at += *at == '"';
            memcpy(kind + n, "\"N\"", 3);
            n += 3;
        } else if (word && strcspn(at, "0123456789") < word) {
            at += word;
            kind[n++] = '#';
        } else if (word) {
            const size_t w = word < sizeof kind - 1 - n ? word : sizeof kind - 1 - n;
            memcpy(kind + n, at, w);
            n += w;
            at += word;
        } else {
            kind[n++] = *at++;
        }
    }
    kind[n] = '\0';
    t->refused++;
    for (int i = 0; i < t->kinds; i++) {
        if (!strcmp(t->kind[i], kind)) {
            t->kind_n[i]++;
            return;
        }
    }
    if (t->kinds < (int)(sizeof t->kind / sizeof t->kind[0])) {
        snprintf(t->kind[t->kinds], sizeof t->kind[0], "%s", kind);
        t->kind_n[t->kinds++] = 1;
    }
}

/* Prints the tally for the log and asserts that every file was read and
 * most were refused (the mutations are meant to break things). */
static void s_report(const char *what, const s_tally_t *t, long files)
{
    printf("%s: %d files, %d refused with one line each, %d read; %d kinds of reason:\n", what,
           t->files, t->refused, t->accepted, t->kinds);
    for (int i = 0; i < t->kinds; i++) {
        printf("  %6d  %s\n", t->kind_n[i], t->kind[i]);
    }
    fflush(stdout);
    ck_assert_int_eq(t->files, files);
    ck_assert_int_gt(t->refused, files / 2);
}

/* ---- safetensors ---- */

static float s_w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

/* The file at path: an 8-byte length hlen, the header, the data. */
static void s_put_st(const char *path, uint64_t hlen, const s_buf_t *hdr, const s_buf_t *data)
{
    unlink(path); /* a new file: ext4 flushes one truncated to be rewritten at its close */
    FILE *f = fopen(path, "wb");
    S_CHECK(f, "cannot write %s", path);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) {
        len8[i] = (unsigned char)(hlen >> (8 * i));
    }
    S_CHECK(fwrite(len8, 1, 8, f) == 8, "short write");
    S_CHECK(fwrite(hdr->p, 1, hdr->n, f) == hdr->n, "short write");
    S_CHECK(fwrite(data->p, 1, data->n, f) == data->n, "short write");
    fclose(f);
}

/* What an accepted file must hold: tensors within the data, in offset
 * order without gaps, each found by its name. */
static void s_check_st(const ps_safetensors_t *st, size_t data_bytes)
{
    size_t bytes = 0;
    const unsigned char *base =
        ps_safetensors_count(st) ? (const void *)ps_safetensors_at(st, 0)->data : NULL;
    for (int i = 0; i < ps_safetensors_count(st); i++) {
        const ps_safetensors_tensor_t *t = ps_safetensors_at(st, i);
        const size_t esize = t->dtype == PS_SAFETENSORS_U64 ? 8 : 4;
        S_CHECK(ps_safetensors_find_dtype(st, t->name, t->dtype) == t,
                "tensor %d out of place", i);
        S_CHECK((ps_safetensors_find(st, t->name) == t) == (t->dtype == PS_SAFETENSORS_F32),
                "tensor %d of dtype %d found as F32", i, (int)t->dtype);
        S_CHECK((const unsigned char *)(const void *)t->data == base + bytes &&
                    bytes % esize == 0,
                "tensor %d out of place", i);
        bytes += t->numel * esize;
    }
    S_CHECK(bytes == data_bytes, "tensors cover %zu of %zu data bytes", bytes, data_bytes);
}

/* A header and data that read back: two tensors, a scalar, an empty one
 * and metadata, as ps_safetensors_write writes them. */
static void s_base_st(const char *path, s_buf_t *hdr, s_buf_t *data)
{
    ps_safetensors_tensor_t t[4] = {
        {.name = "fc1.weight", .ndim = 2, .shape = {2, 3}, .data = s_w},
        {.name = "fc1.bias", .ndim = 1, .shape = {3}, .data = s_w + 6},
        {.name = "scale", .ndim = 0, .data = s_w + 9},
        {.name = "empty", .ndim = 2, .shape = {0, 5}, .data = NULL},
    };
    const char *meta[] = {"step", "7", "optimizer", "adam"};
    ck_assert_int_eq(ps_safetensors_write(path, t, 4, meta, 2, NULL, 0), 0);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) {
        h = h << 8 | buf[i];
    }
    ck_assert(h <= sizeof buf - 8 && 8 + h <= n);
    s_set(hdr, buf + 8, h);
    s_set(data, buf + 8 + h, n - 8 - h);
}

START_TEST(safetensors_reader_gives_each_refused_mutation_one_line)
{
    s_state = (uint64_t)s_env("SHARDPS_FUZZ_SEED", 25);
    const long files = s_env("SHARDPS_FUZZ_FILES", 10000);
    char path[128];
    snprintf(path, sizeof path, "%s/m.safetensors", s_dir);
    s_buf_t base_hdr = {0}, base_data = {0}, hdr = {0}, data = {0};
    s_base_st(path, &base_hdr, &base_data);
    json_t *base_doc = NULL;
    ck_assert_int_eq(ps_json_parse((char *)base_hdr.p, base_hdr.n, 8, &base_doc, NULL, 0), 0);
    s_tally_t tally = {0};
    for (long i = 0; i < files; i++) {
        s_set(&data, base_data.p, base_data.n);
        s_mutated(base_doc, &base_hdr, 4, &hdr, &data);
        uint64_t hlen = hdr.n;
        if (s_below(8) == 0) { /* a length that lies */
            static const uint64_t lens[] = {0, 1, 2, 7, PS_SAFETENSORS_MAX_HEADER + 1,
                                            (uint64_t)1 << 40, UINT64_MAX, (uint64_t)1 << 63};
            hlen = s_below(2) ? lens[s_below(8)] : hlen + s_below(17) - 8;
        }
        s_put_st(path, hlen, &hdr, &data);
        ps_safetensors_t *st = NULL;
        char why[512] = "";
        int rc = ps_safetensors_read(path, &st, why, sizeof why);
        tally.files++;
        if (rc != 0) {
            S_CHECK(rc == PS_EPROTO, "rc %d: %s", rc, why);
            S_CHECK(st == NULL, "a refused file left its handle");
            S_CHECK(strstr(why, path) == why, "reason does not name the file: %s", why);
            s_refusal(&tally, why);
        } else {
            s_check_st(st, (size_t)(hdr.n + data.n - hlen));
            ps_safetensors_destroy(&st);
            tally.accepted++;
        }
    }
    s_report("safetensors", &tally, files);
    json_decref(base_doc);
    free(base_hdr.p);
    free(base_data.p);
    free(hdr.p);
    free(data.p);
}
END_TEST

/* ---- manifests ---- */

enum { S_STEP = 20, S_PARAMS = 12 };

/* dir/step-20 with two parts and the manifest ps_manifest_add writes. */
static void s_base_manifest(const char *stepdir, s_buf_t *text)
{
    ps_view_t *v = calloc(1, sizeof *v);
    ck_assert_ptr_nonnull(v);
    v->num_params = S_PARAMS;
    v->num_servers = 2;
    v->num_workers = 3;
    snprintf(v->checkpoint_dir, sizeof v->checkpoint_dir, "%s", s_dir);
    ck_assert_int_eq(mkdir(stepdir, 0777), 0);
    ps_manifest_t *m = NULL;
    static const ps_manifest_job_t job; /* a job that records nothing */
    ck_assert_int_eq(ps_manifest_new(&m, v, &job), 0);
    for (int r = 0; r < 2; r++) {
        ps_checkpoint_part_t p = {.step = S_STEP, .begin = 6 * (uint64_t)r,
                                  .end = 6 * (uint64_t)r + 6, .version = S_STEP};
        char path[256];
        snprintf(p.file, sizeof p.file, "server-%d.safetensors", r);
        snprintf(path, sizeof path, "%s/%s", stepdir, p.file);
        ps_safetensors_tensor_t t = {.name = "params", .ndim = 1, .shape = {6},
                                     .data = s_w + 6 * r};
        ck_assert_int_eq(ps_safetensors_write(path, &t, 1, NULL, 0, NULL, 0), 0);
        struct stat sb;
        ck_assert_int_eq(stat(path, &sb), 0);
        p.size = (uint64_t)sb.st_size;
        ck_assert_int_eq(ps_file_crc32(path, &p.crc32), 0);
        ck_assert_int_eq(ps_manifest_add(m, r, &p), r == 1);
    }
    ps_manifest_destroy(&m);
    free(v);
    char path[256];
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    s_set(text, buf, n);
    char why[256] = "";
    ps_checkpoint_part_t *parts = calloc(PS_MAX_SERVERS, sizeof *parts);
    ck_assert_ptr_nonnull(parts);
    ck_assert_msg(ps_manifest_check(stepdir, S_STEP, S_PARAMS, parts, why, sizeof why) == 2,
                  "%s", why);
    free(parts);
}

START_TEST(manifest_reader_gives_each_refused_mutation_one_line)
{
    s_state = (uint64_t)s_env("SHARDPS_FUZZ_SEED", 25) ^ 0x6d616e6966657374ull;
    const long files = s_env("SHARDPS_FUZZ_FILES", 10000);
    char stepdir[128], path[160];
    snprintf(stepdir, sizeof stepdir, "%s/step-%d", s_dir, S_STEP);
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    s_buf_t base = {0}, text = {0};
    s_base_manifest(stepdir, &base);
    json_t *base_doc = NULL;
    ck_assert_int_eq(ps_json_parse((char *)base.p, base.n, 0, &base_doc, NULL, 0), 0);
    s_tally_t tally = {0};
    ps_checkpoint_part_t *got = calloc(PS_MAX_SERVERS, sizeof *got);
    ck_assert_ptr_nonnull(got);
    for (long i = 0; i < files; i++) {
        s_mutated(base_doc, &base, 5, &text, NULL);
        unlink(path); /* as in s_put_st */
        FILE *f = fopen(path, "wb");
        S_CHECK(f, "cannot write %s", path);
        S_CHECK(fwrite(text.p, 1, text.n, f) == text.n, "short write");
        fclose(f);
        char why[512] = "";
        int parts = ps_manifest_check(stepdir, S_STEP, S_PARAMS, got, why, sizeof why);
        tally.files++;
        if (parts == 0) {
            s_refusal(&tally, why);
        } else {
            /* what checks out lists part file names (no path) with sizes,
             * CRCs and keys; loading them checks those against the files */
            S_CHECK(parts >= 1 && parts <= PS_MAX_SERVERS, "%d parts", parts);
            tally.accepted++;
        }
    }
    s_report("manifest", &tally, files);
    free(got);
    json_decref(base_doc);
    free(base.p);
    free(text.p);
}
END_TEST

/* ---- a checkpoint part with embedding rows ---- */

enum { S_ROW_DIM = 2, S_ROW_KEYS = 24 };

/* The job of the part: ctr, adagrad (a state array per row), a filter of 2. */
static ps_job_t s_rows_job(void)
{
    ps_job_t j;
    ps_job_defaults(&j);
    snprintf(j.model, sizeof j.model, "ctr");
    snprintf(j.optimizer, sizeof j.optimizer, "adagrad");
    j.embed_dim = S_ROW_DIM;
    j.min_count = 2;
    return j;
}

static ps_rows_t *s_rows_table(const ps_job_t *job)
{
    ps_rows_config_t c = {.dim = S_ROW_DIM, .seed = job->seed, .init_bound = 0.5f,
                          .min_count = (uint32_t)job->min_count};
    ck_assert_int_eq(ps_optim_from_job(job, &c.optim), 0);
    ps_rows_t *t = NULL;
    ck_assert_int_eq(ps_rows_new(&t, &c), 0);
    return t;
}

/* stepdir/server-0.safetensors: a 1-server job's part of S_PARAMS keys and
 * of rows (key i sighted 1 + i % 3 times: rows and pending keys), its
 * header and data into hdr and data, its manifest entry into *part. */
static void s_base_part(const ps_job_t *job, const char *stepdir, s_buf_t *hdr, s_buf_t *data,
                        ps_checkpoint_part_t *part)
{
    const ps_range_t keys = {0, S_PARAMS};
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, keys, job), 0);
    ck_assert_int_eq(ps_store_init(s, keys, s_w), 1);
    ps_rows_t *t = s_rows_table(job);
    float g[S_ROW_DIM] = {0.5f, -0.25f};
    for (int r = 0; r < 3; r++) {
        for (uint64_t k = 0; k < S_ROW_KEYS; k++) {
            if ((int)(k % 3) >= r) {
                ck_assert_int_eq(ps_rows_update(t, &k, 1, g, 0.1f, 1.0f), 0);
            }
        }
    }
    ck_assert_uint_gt(ps_rows_count(t), 0);
    ck_assert_uint_gt(ps_rows_pending_count(t), 0);
    ps_checkpoint_info_t info = {.dir = s_dir, .step = S_STEP, .version = S_STEP, .rank = 0,
                                 .servers = 1, .workers = 1, .num_params = S_PARAMS,
                                 .job = job, .rows = {t, {0, UINT64_MAX}}};
    char why[256] = "", path[256];
    ck_assert_msg(ps_checkpoint_write(&info, s, part, why, sizeof why) == 0, "%s", why);
    ps_store_destroy(&s);
    ps_rows_destroy(&t);
    snprintf(path, sizeof path, "%s/%s", stepdir, part->file);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) {
        h = h << 8 | buf[i];
    }
    ck_assert(n < sizeof buf && h <= n - 8);
    s_set(hdr, buf + 8, h);
    s_set(data, buf + 8 + h, n - 8 - h);
}

START_TEST(checkpoint_part_with_rows_gives_each_refused_mutation_one_line)
{
    s_state = (uint64_t)s_env("SHARDPS_FUZZ_SEED", 25) ^ 0x726f7773ull;
    const long files = s_env("SHARDPS_FUZZ_FILES", 10000);
    const ps_job_t job = s_rows_job();
    char stepdir[128], path[192];
    snprintf(stepdir, sizeof stepdir, "%s/step-%d", s_dir, S_STEP);
    ps_checkpoint_part_t base_part, part;
    s_buf_t base_hdr = {0}, base_data = {0}, hdr = {0}, data = {0};
    s_base_part(&job, stepdir, &base_hdr, &base_data, &base_part);
    snprintf(path, sizeof path, "%s/%s", stepdir, base_part.file);
    json_t *base_doc = NULL;
    ck_assert_int_eq(ps_json_parse((char *)base_hdr.p, base_hdr.n, 8, &base_doc, NULL, 0), 0);
    s_tally_t tally = {0};
    ps_rows_t *t = s_rows_table(&job);
    for (long i = 0; i < files; i++) {
        s_set(&data, base_data.p, base_data.n);
        s_mutated(base_doc, &base_hdr, 4, &hdr, &data);
        s_put_st(path, hdr.n, &hdr, &data);
        /* the manifest's entry made the file's: the loader's own checks */
        part = base_part;
        struct stat sb;
        S_CHECK(stat(path, &sb) == 0 && ps_file_crc32(path, &part.crc32) == 0, "no %s", path);
        part.size = (uint64_t)sb.st_size;
        ps_store_t *s = NULL;
        S_CHECK(ps_store_new(&s, (ps_range_t){0, S_PARAMS}, &job) == 0, "out of memory");
        const ps_checkpoint_rows_t rows = {t, {0, UINT64_MAX}};
        char why[512] = "";
        int rc = ps_checkpoint_load(stepdir, &part, 1, S_STEP, s, &rows, &job, NULL, why,
                                    sizeof why);
        ps_store_destroy(&s);
        tally.files++;
        if (rc != 0) {
            S_CHECK(rc == PS_EPROTO, "rc %d: %s", rc, why);
            S_CHECK(ps_rows_count(t) == 0 && ps_rows_pending_count(t) == 0,
                    "a refused part left rows: %s", why);
            S_CHECK(strstr(why, stepdir) == why, "reason names no file: %s", why);
            s_refusal(&tally, why);
        } else {
            /* what loaded is a table of the job's rows: at most every key */
            S_CHECK(ps_rows_count(t) + ps_rows_pending_count(t) <= S_ROW_KEYS,
                    "%zu rows and %zu pending keys from %d keys", ps_rows_count(t),
                    ps_rows_pending_count(t), S_ROW_KEYS);
            tally.accepted++;
        }
        ps_rows_clear(t);
    }
    s_report("checkpoint part with rows", &tally, files);
    ps_rows_destroy(&t);
    json_decref(base_doc);
    free(base_hdr.p);
    free(base_data.p);
    free(hdr.p);
    free(data.p);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("fuzz_files");
    TCase *tc = tcase_create("fuzz_files");
    tcase_add_checked_fixture(tc, s_setup, s_teardown);
    tcase_set_timeout(tc, 240); /* a bound for a loaded machine under sanitizers */
    tcase_add_test(tc, safetensors_reader_gives_each_refused_mutation_one_line);
    tcase_add_test(tc, manifest_reader_gives_each_refused_mutation_one_line);
    tcase_add_test(tc, checkpoint_part_with_rows_gives_each_refused_mutation_one_line);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    ps_log_set_level("err");
    return ps_test_run(s_suite());
}
