/* common/secret.c - SHA-256, HMAC-SHA256 and the job's secret file (secret.h). */
#include "common/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------ */

typedef struct {
    uint32_t h[8];     /* the chaining state */
    uint8_t buf[64];   /* the block being filled */
    size_t nbuf;       /* bytes in buf */
    uint64_t total;    /* bytes hashed so far */
} s_sha_t;

static const uint32_t s_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t s_ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void s_block(s_sha_t *c, const uint8_t *p)
{
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = s_ror(w[i - 15], 7) ^ s_ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = s_ror(w[i - 2], 17) ^ s_ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, c->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = s_ror(v[4], 6) ^ s_ror(v[4], 11) ^ s_ror(v[4], 25);
        uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
        uint32_t t1 = v[7] + s1 + ch + s_k[i] + w[i];
        uint32_t s0 = s_ror(v[0], 2) ^ s_ror(v[0], 13) ^ s_ror(v[0], 22);
        uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + s0 + maj;
    }
    for (int i = 0; i < 8; i++) {
        c->h[i] += v[i];
    }
}

static void s_init(s_sha_t *c)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->nbuf = 0;
    c->total = 0;
}

static void s_update(s_sha_t *c, const void *msg, size_t len)
{
    const uint8_t *p = msg;
    c->total += len;
    while (len > 0) {
        size_t take = 64 - c->nbuf < len ? 64 - c->nbuf : len;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        len -= take;
        if (c->nbuf == 64) {
            s_block(c, c->buf);
            c->nbuf = 0;
        }
    }
}

static void s_final(s_sha_t *c, uint8_t out[PS_HMAC_LEN])
{
    const uint64_t bits = c->total * 8;
    const uint8_t one = 0x80, zero = 0;
    s_update(c, &one, 1);
    while (c->nbuf != 56) {
        s_update(c, &zero, 1);
    }
    uint8_t len[8];
    for (int i = 0; i < 8; i++) {
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    }
    s_update(c, len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void ps_sha256(const void *msg, size_t len, uint8_t out[PS_HMAC_LEN])
{
    s_sha_t c;
    s_init(&c);
    s_update(&c, msg, len);
    s_final(&c, out);
}

/* ---- HMAC (RFC 2104) ---------------------------------------------------- */

void ps_hmac_sha256(const void *key, size_t klen, const void *const *parts, const size_t *lens,
                    int n, uint8_t out[PS_HMAC_LEN])
{
    uint8_t k[64] = {0}, pad[64], inner[PS_HMAC_LEN];
    if (klen > sizeof k) {
        ps_sha256(key, klen, k); /* a long key is hashed first */
    } else if (klen) {
        memcpy(k, key, klen);
    }
    s_sha_t c;
    for (int i = 0; i < 64; i++) {
        pad[i] = k[i] ^ 0x36;
    }
    s_init(&c);
    s_update(&c, pad, sizeof pad);
    for (int i = 0; i < n; i++) {
        s_update(&c, parts[i], lens[i]);
    }
    s_final(&c, inner);
    for (int i = 0; i < 64; i++) {
        pad[i] = k[i] ^ 0x5c;
    }
    s_init(&c);
    s_update(&c, pad, sizeof pad);
    s_update(&c, inner, sizeof inner);
    s_final(&c, out);
    explicit_bzero(k, sizeof k);
    explicit_bzero(pad, sizeof pad);
}

int ps_secret_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= x[i] ^ y[i];
    }
    return d == 0;
}

void ps_secret_proof(const ps_secret_t *s, const void *nonce, size_t nlen, int role,
                     const char *job_id, uint8_t out[PS_HMAC_LEN])
{
    const uint8_t r = (uint8_t)role;
    const void *parts[3] = {nonce, &r, job_id ? job_id : ""};
    const size_t lens[3] = {nlen, 1, job_id ? strlen(job_id) : 0};
    ps_hmac_sha256(s->key, sizeof s->key, parts, lens, 3, out);
}

/* ---- the secret file ------------------------------------------------------ */

int ps_secret_new(ps_secret_t *s)
{
    s->set = getrandom(s->key, sizeof s->key, 0) == (ssize_t)sizeof s->key;
    return s->set ? 0 : PS_EIO;
}

int ps_secret_write(const char *path, char *err, size_t errlen)
{
    ps_secret_t s;
    if (ps_secret_new(&s) != 0) {
        snprintf(err, errlen, "cannot draw a secret for %s: no randomness", path);
        return PS_EIO;
    }
    char text[128];
    int len = snprintf(text, sizeof text, "# shardps job secret: keep it private\n");
    for (int i = 0; i < PS_SECRET_LEN; i++) {
        len += snprintf(text + len, sizeof text - (size_t)len, "%02x", s.key[i]);
    }
    text[len++] = '\n';
    explicit_bzero(&s, sizeof s);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int rc = fd < 0 ? (errno == EEXIST ? PS_EINVAL : PS_EIO) : 0;
    if (fd < 0) {
        snprintf(err, errlen, "cannot create secret file %s: %s", path, strerror(errno));
    } else if (write(fd, text, (size_t)len) != len || fsync(fd) != 0) {
        snprintf(err, errlen, "cannot write secret file %s: %s", path, strerror(errno));
        rc = PS_EIO;
    }
    if (fd >= 0 && close(fd) != 0 && rc == 0) {
        snprintf(err, errlen, "cannot write secret file %s: %s", path, strerror(errno));
        rc = PS_EIO;
    }
    explicit_bzero(text, sizeof text);
    return rc;
}

static int s_hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The first line of text that is not a comment, as the secret. */
static int s_parse(char *text, ps_secret_t *s)
{
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        size_t n = strcspn(line, " \t\r");
        if (line[0] == '#' || n == 0) {
            continue;
        }
        if (n != 2 * PS_SECRET_LEN) {
            return PS_EINVAL;
        }
        for (int i = 0; i < PS_SECRET_LEN; i++) {
            int hi = s_hex(line[2 * i]), lo = s_hex(line[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                return PS_EINVAL;
            }
            s->key[i] = (uint8_t)(hi << 4 | lo);
        }
        s->set = 1;
        return 0;
    }
    return PS_EINVAL;
}

int ps_secret_read(const char *path, ps_secret_t *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    char text[1024];
    if (ps_file_read_private(path, "secret file", " (make one with shardps-keygen --secret FILE)",
                             text, sizeof text, err, errlen) != 0) {
        return PS_EINVAL;
    }
    int rc = s_parse(text, s);
    explicit_bzero(text, sizeof text);
    if (rc != 0) {
        memset(s, 0, sizeof *s);
        snprintf(err, errlen, "secret file %s holds no secret (expected a line of %d hex "
                 "digits)", path, 2 * PS_SECRET_LEN);
    }
    return rc;
}
