/*
 * worker/ctr_data.c - the Criteo-layout reader: zlib's gzgets for lines
 * (plain and gzip files alike, through one large buffer), a hand-written
 * scanner for the fields (no sscanf, no strtol: one pass over each byte),
 * and arrays grown by doubling and trimmed at the end. Everything read is
 * validated; a bad line costs a count, never the process. Start-up only.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "common/error.h"
#include "worker/ctr_data.h"

/* zlib's buffer: large enough that gzgets copies whole runs of lines. */
#define S_GZ_BUFFER (1u << 20)
/* Rows allocated first, before doubling. */
#define S_FIRST_ROWS ((size_t)1 << 16)
/* Digits of a numeric field: 18 fit an int64 without overflow checks. */
#define S_MAX_DIGITS 18
/* Small numeric values come from a table: log1p is the scanner's cost. */
#define S_TABLE 1024

/* The reader's state over one file: the set it fills and its capacity. */
typedef struct {
    ps_ctr_set_t *set;
    size_t cap;              /* rows allocated */
    float log1p_of[S_TABLE]; /* log1p(v) for small v */
} s_reader_t;

/* The column's name in a reason: label, I1..I13, C1..C26. */
static void s_col_name(int col, char *buf, size_t cap)
{
    if (col == 0) {
        snprintf(buf, cap, "label");
    } else if (col <= PS_CTR_NUM) {
        snprintf(buf, cap, "I%d", col);
    } else {
        snprintf(buf, cap, "C%d", col - PS_CTR_NUM);
    }
}

/* A column's text for a reason, cut short (it is untrusted and may be long). */
static void s_bad_col(char *what, size_t cap, int col, const char *p, const char *end,
                      const char *expected)
{
    char name[16], text[25];
    s_col_name(col, name, sizeof name);
    const size_t len = (size_t)(end - p), shown = len < 24 ? len : 24;
    for (size_t i = 0; i < shown; i++) { /* one printable line, whatever the bytes */
        text[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
    }
    text[shown] = '\0';
    snprintf(what, cap, "field %d (%s) '%s%s' is not %s", col + 1, name, text,
             len > shown ? "..." : "", expected);
}

/* A byte's hexadecimal digit plus one; 0: not a digit. */
static const uint8_t s_hex1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
    ['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
    ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16, ['A'] = 11, ['B'] = 12,
    ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* Does a column end at q (a tab, or the end of the line)? */
static int s_ends(const char *q, const char *stop)
{
    return q == stop || *q == '\t';
}

/*
 * One numeric column from p: empty (missing, 0) or -?[0-9]{1,18}. Returns
 * where it ends (a tab or stop), or NULL when it is not such a column.
 */
static const char *s_numeric(const s_reader_t *r, const char *p, const char *stop, float *x)
{
    const char *q = p;
    const int neg = q < stop && *q == '-';
    q += neg;
    const char *digits = q;
    int64_t v = 0;
    unsigned d;
    while (q < stop && (d = (unsigned)(unsigned char)*q - '0') <= 9) {
        v = v * 10 + (int64_t)d;
        q++;
        if (q - digits > S_MAX_DIGITS) {
            return NULL;
        }
    }
    if (!s_ends(q, stop) || (neg && q == digits)) {
        return NULL;
    }
    const float m = q == digits   ? 0.0f
                    : v < S_TABLE ? r->log1p_of[v]
                                  : (float)log1p((double)v);
    *x = neg ? -m : m;
    return q;
}

/* One categorical column from p: empty (missing) or 8 hexadecimal digits.
 * Returns where it ends, or NULL. */
static const char *s_category(int field, const char *p, const char *stop, uint64_t *key)
{
    if (s_ends(p, stop)) {
        *key = ps_ctr_key(field, 0, 1);
        return p;
    }
    if (stop - p < 8 || !s_ends(p + 8, stop)) {
        return NULL;
    }
    uint32_t v = 0;
    unsigned ok = 1;
    for (int i = 0; i < 8; i++) {
        const unsigned h = s_hex1[(unsigned char)p[i]];
        ok &= h != 0;
        v = v << 4 | ((h - 1) & 15);
    }
    if (!ok) {
        return NULL;
    }
    *key = ps_ctr_key(field, v, 0);
    return p + 8;
}

/* The end of the column that starts at p: the next tab or stop. */
static const char *s_col_end(const char *p, const char *stop)
{
    const char *tab = memchr(p, '\t', (size_t)(stop - p));
    return tab ? tab : stop;
}

/*
 * Parses line[0..len) (no newline) into row `row` of the set, in one pass.
 * Returns 0, or -1 with what is wrong in what[cap]; the row is then garbage,
 * and not counted.
 */
static int s_parse(const s_reader_t *r, const char *line, size_t len, size_t row,
                   char *what, size_t cap)
{
    ps_ctr_set_t *s = r->set;
    float *num = s->num + row * PS_CTR_NUM;
    uint64_t *keys = s->keys + row * PS_CTR_CAT;
    const char *p = line, *const stop = line + len;
    for (int col = 0; col < PS_CTR_FIELDS; col++) {
        const char *end;
        if (col == 0) {
            end = p + 1 <= stop && (*p == '0' || *p == '1') && s_ends(p + 1, stop) ? p + 1
                                                                                   : NULL;
            if (end) {
                s->label[row] = (float)(*p - '0');
            }
        } else if (col <= PS_CTR_NUM) {
            end = s_numeric(r, p, stop, &num[col - 1]);
        } else {
            end = s_category(col - 1 - PS_CTR_NUM, p, stop, &keys[col - 1 - PS_CTR_NUM]);
        }
        if (!end) {
            s_bad_col(what, cap, col, p, s_col_end(p, stop),
                      col == 0            ? "0 or 1"
                      : col <= PS_CTR_NUM ? "an integer of at most 18 digits"
                                          : "8 hexadecimal digits");
            return -1;
        }
        if (end == stop && col < PS_CTR_FIELDS - 1) {
            snprintf(what, cap, "%d fields, expected %d", col + 1, PS_CTR_FIELDS);
            return -1;
        }
        p = end + 1;
    }
    if (p <= stop) { /* a tab after the last column */
        int extra = 1;
        for (const char *q = p; q < stop; q++) {
            extra += *q == '\t';
        }
        snprintf(what, cap, "%d fields, expected %d", PS_CTR_FIELDS + extra, PS_CTR_FIELDS);
        return -1;
    }
    return 0;
}

/* The first used bytes of p moved into a new block of `bytes` (p freed):
 * realloc would copy under the allocator's lock, which every thread of the
 * process shares (one arena, common/alloc.h), and a copy of hundreds of
 * megabytes held the heartbeat thread back past the scheduler's patience.
 * Returns the new block, or NULL with p as it was. */
static void *s_move(void *p, size_t used, size_t bytes)
{
    void *q = malloc(bytes);
    if (q && used) {
        memcpy(q, p, used);
    }
    if (q) {
        free(p);
    }
    return q;
}

/* Room for one more row: doubles the arrays (at most to max_rows). */
static int s_grow(s_reader_t *r, size_t max_rows)
{
    ps_ctr_set_t *s = r->set;
    if (s->n < r->cap) {
        return 0;
    }
    size_t cap = r->cap ? r->cap * 2 : S_FIRST_ROWS;
    if (max_rows && cap > max_rows) {
        cap = max_rows;
    }
    float *num =
        s_move(s->num, s->n * PS_CTR_NUM * sizeof *num, cap * PS_CTR_NUM * sizeof *num);
    if (!num) {
        return PS_ENOMEM;
    }
    s->num = num;
    uint64_t *keys =
        s_move(s->keys, s->n * PS_CTR_CAT * sizeof *keys, cap * PS_CTR_CAT * sizeof *keys);
    if (!keys) {
        return PS_ENOMEM;
    }
    s->keys = keys;
    float *label = s_move(s->label, s->n * sizeof *label, cap * sizeof *label);
    if (!label) {
        return PS_ENOMEM;
    }
    s->label = label;
    r->cap = cap;
    return 0;
}

/* Gives back the unused tail of the arrays (a failed shrink keeps them). */
static void s_trim(ps_ctr_set_t *s)
{
    if (s->n == 0) {
        free(s->num);
        free(s->keys);
        free(s->label);
        s->num = NULL;
        s->keys = NULL;
        s->label = NULL;
        return;
    }
    void *p = realloc(s->num, s->n * PS_CTR_NUM * sizeof *s->num);
    s->num = p ? p : s->num;
    p = realloc(s->keys, s->n * PS_CTR_CAT * sizeof *s->keys);
    s->keys = p ? p : s->keys;
    p = realloc(s->label, s->n * sizeof *s->label);
    s->label = p ? p : s->label;
}

/* Opens path for gzgets, after checking it is there and not a directory. */
static int s_open(const char *path, gzFile *f, char *why, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            ps_error_format(why, cap, "no such file %s", path);
            return PS_ENOENT;
        }
        ps_error_format(why, cap, "cannot read %s: %s", path, strerror(errno));
        return PS_EIO;
    }
    if (S_ISDIR(st.st_mode)) {
        ps_error_format(why, cap, "cannot read %s: it is a directory", path);
        return PS_EIO;
    }
    errno = 0;
    *f = gzopen(path, "rb");
    if (!*f) {
        const int e = errno;
        ps_error_format(why, cap, "cannot open %s: %s", path,
                        e ? strerror(e) : "out of memory");
        return e ? PS_EIO : PS_ENOMEM;
    }
    gzbuffer(*f, S_GZ_BUFFER);
    return 0;
}

/* The line buffer: the longest line, "\r\n" and the NUL. */
#define S_LINE_BUF (PS_CTR_MAX_LINE + 3)

/*
 * Reads the next line into buf (S_LINE_BUF bytes) without its newline
 * ("\n" or "\r\n"). Returns its length, -1 at the end of the file or of
 * what a corrupt stream gave (gzerror says which), or -2 for a line too long
 * (or holding a NUL byte), whose rest is skipped.
 */
static long s_next_line(gzFile f, char *buf)
{
    if (!gzgets(f, buf, S_LINE_BUF)) {
        return -1;
    }
    size_t len = strlen(buf);
    if (len > 0 && buf[len - 1] == '\n') {
        len--;
        len -= len > 0 && buf[len - 1] == '\r';
        return len > PS_CTR_MAX_LINE ? -2 : (long)len;
    }
    int zerr = Z_OK;
    gzerror(f, &zerr);
    if (zerr != Z_OK) {
        return -1; /* cut short by a bad stream: the caller reports it */
    }
    if (gzeof(f)) { /* the last line, without a newline */
        return len > PS_CTR_MAX_LINE ? -2 : (long)len;
    }
    for (;;) { /* the rest of an overlong line */
        if (!gzgets(f, buf, S_LINE_BUF)) {
            gzerror(f, &zerr);
            return zerr != Z_OK ? -1 : -2;
        }
        len = strlen(buf);
        if ((len > 0 && buf[len - 1] == '\n') || gzeof(f)) {
            return -2;
        }
    }
}

/* The loop over lines of an open file. Returns 0 or a PS_E* with why set. */
static int s_read_lines(s_reader_t *r, gzFile f, const char *path, size_t max_rows,
                        uint64_t max_bad, char *why, size_t cap)
{
    ps_ctr_set_t *s = r->set;
    char *buf = malloc(S_LINE_BUF);
    if (!buf) {
        ps_error_format(why, cap, "%s: out of memory", path);
        return PS_ENOMEM;
    }
    int rc = 0;
    char what[160];
    uint64_t line = 0;
    while (!max_rows || s->n < max_rows) {
        const long len = s_next_line(f, buf);
        if (len == -1) {
            break;
        }
        line++;
        if ((rc = s_grow(r, max_rows)) != 0) {
            ps_error_format(why, cap, "%s: out of memory after %zu samples", path, s->n);
            break;
        }
        if (len == -2) {
            snprintf(what, sizeof what, "line longer than %d bytes or holding a NUL byte",
                     PS_CTR_MAX_LINE);
        } else if (len == 0) {
            snprintf(what, sizeof what, "empty line");
        } else if (s_parse(r, buf, (size_t)len, s->n, what, sizeof what) == 0) {
            s->n++;
            continue;
        }
        if (++s->bad > max_bad) {
            ps_error_format(why, cap,
                            "%s:%llu: %s (malformed line %llu; at most %llu are skipped)",
                            path, (unsigned long long)line, what,
                            (unsigned long long)s->bad, (unsigned long long)max_bad);
            rc = PS_EINVAL;
            break;
        }
        if (s->bad == 1) {
            ps_error_format(why, cap, "%s:%llu: %s", path, (unsigned long long)line, what);
        }
    }
    int zerr = Z_OK;
    const char *msg = gzerror(f, &zerr);
    if (rc == 0 && zerr != Z_OK) {
        ps_error_format(why, cap, "%s: corrupt or truncated data after line %llu (%s)",
                        path, (unsigned long long)line, msg);
        rc = zerr == Z_MEM_ERROR ? PS_ENOMEM : PS_EIO;
    }
    free(buf);
    return rc;
}

int ps_ctr_read(const char *path, size_t max_rows, uint64_t max_bad, ps_ctr_set_t *out,
                char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (why && cap) {
        why[0] = '\0';
    }
    gzFile f = NULL;
    int rc = s_open(path, &f, why, cap);
    if (rc != 0) {
        return rc;
    }
    s_reader_t *r = malloc(sizeof *r);
    if (!r) {
        gzclose(f);
        ps_error_format(why, cap, "%s: out of memory", path);
        return PS_ENOMEM;
    }
    r->set = out;
    r->cap = 0;
    for (int v = 0; v < S_TABLE; v++) {
        r->log1p_of[v] = (float)log1p((double)v);
    }
    rc = s_read_lines(r, f, path, max_rows, max_bad, why, cap);
    gzclose(f);
    free(r);
    if (rc != 0) {
        ps_ctr_set_fini(out);
        return rc;
    }
    s_trim(out);
    return 0;
}

void ps_ctr_set_fini(ps_ctr_set_t *s)
{
    if (!s) {
        return;
    }
    free(s->num);
    free(s->keys);
    free(s->label);
    memset(s, 0, sizeof *s);
}

void ps_ctr_split(const ps_ctr_set_t *s, double test_frac, ps_ctr_view_t *train,
                  ps_ctr_view_t *test)
{
    if (!(test_frac > 0)) { /* NaN too */
        test_frac = 0;
    } else if (test_frac > 1) {
        test_frac = 1;
    }
    size_t nt = (size_t)llround((double)s->n * test_frac);
    if (nt > s->n) {
        nt = s->n;
    }
    const size_t ntr = s->n - nt;
    train->n = ntr;
    train->num = s->num;
    train->keys = s->keys;
    train->label = s->label;
    test->n = nt;
    test->num = s->num ? s->num + ntr * PS_CTR_NUM : NULL;
    test->keys = s->keys ? s->keys + ntr * PS_CTR_CAT : NULL;
    test->label = s->label ? s->label + ntr : NULL;
}
