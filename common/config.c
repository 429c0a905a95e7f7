/* common/config.c - table-driven flag and environment parsing. */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "common/version.h"

static void s_env_name(const ps_flag_t *f, char *out, size_t cap)
{
    if (f->env) {
        snprintf(out, cap, "%s", f->env);
        return;
    }
    size_t n = (size_t)snprintf(out, cap, "SHARDPS_");
    for (const char *p = f->name; *p && n + 1 < cap; p++) {
        out[n++] = (*p == '-') ? '_' : (char)toupper((unsigned char)*p);
    }
    out[n] = '\0';
}

/* Stores text into the flag's destination. Returns 0 or PS_EINVAL. */
static int s_set(const ps_flag_t *f, const char *text)
{
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case PS_FLAG_INT: {
        long v = strtol(text, &end, 10);
        if (errno || end == text || *end || v < -2147483647L || v > 2147483647L) {
            return PS_EINVAL;
        }
        *(int *)f->dst = (int)v;
        return 0;
    }
    case PS_FLAG_DOUBLE: {
        double v = strtod(text, &end);
        /* ERANGE on a tiny value (1e-320) is a number: the range check refuses it */
        if ((errno && fabs(v) >= 1.0) || end == text || *end || !isfinite(v)) {
            return PS_EINVAL;
        }
        *(double *)f->dst = v;
        return 0;
    }
    case PS_FLAG_STR:
        *(const char **)f->dst = text;
        return 0;
    case PS_FLAG_BOOL:
        if (!strcmp(text, "1") || !strcasecmp(text, "true") || !strcasecmp(text, "yes")) {
            *(int *)f->dst = 1;
        } else if (!strcmp(text, "0") || !strcasecmp(text, "false") ||
                   !strcasecmp(text, "no")) {
            *(int *)f->dst = 0;
        } else {
            return PS_EINVAL;
        }
        return 0;
    }
    return PS_EINVAL;
}

int ps_config_check_range(const char *name, double v, double min, double max, int open,
                          char *err, size_t errlen)
{
    const int lo = open & PS_RANGE_OPEN_MIN, hi = open & PS_RANGE_OPEN_MAX;
    const int tiny = v != 0.0 && fabs(v) < FLT_MIN;
    if (!(v >= min && v <= max) || (lo && v == min) || (hi && v == max) || tiny) {
        snprintf(err, errlen, "--%s %.15g: out of range %c%g, %g%c%s", name, v, lo ? '(' : '[', min,
                 max, hi ? ')' : ']', tiny ? " (too small for a float32)" : "");
        return PS_EINVAL;
    }
    return 0;
}

static const char *s_type_word(ps_flag_type_t t)
{
    switch (t) {
    case PS_FLAG_INT: return "an integer in [-2147483647, 2147483647]";
    case PS_FLAG_DOUBLE: return "a number";
    case PS_FLAG_BOOL: return "0 or 1";
    default: return "a value";
    }
}

void ps_config_default(const ps_flag_t *f, char *out, size_t cap)
{
    out[0] = '\0';
    switch (f->type) {
    case PS_FLAG_INT:
        snprintf(out, cap, "%d", *(int *)f->dst);
        break;
    case PS_FLAG_DOUBLE:
        snprintf(out, cap, "%g", *(double *)f->dst);
        break;
    case PS_FLAG_STR:
        snprintf(out, cap, "%s", *(const char **)f->dst ? *(const char **)f->dst : "");
        break;
    case PS_FLAG_BOOL: /* -1: a caller's "not given" */
        if (*(int *)f->dst >= 0) {
            snprintf(out, cap, "%d", *(int *)f->dst);
        }
        break;
    }
}

/* --help; use_env: each flag's variable is named */
static void s_usage(const char *prog, const char *about, const ps_flag_t *flags, size_t nflags,
                    int use_env)
{
    printf("usage: %s [flags]\n%s\n\n%s:\n", prog, about,
           use_env ? "flags (each also read from the environment variable named last)"
                   : "flags");
    for (size_t i = 0; i < nflags; i++) {
        const ps_flag_t *f = &flags[i];
        char left[64], env[64], def[64] = "";
        snprintf(left, sizeof left, "--%s%s%s", f->name, f->metavar ? " " : "",
                 f->metavar ? f->metavar : "");
        s_env_name(f, env, sizeof env);
        ps_config_default(f, def, sizeof def);
        printf("  %-24s %s", left, f->help);
        if (def[0]) {
            printf(" [default: %s]", def);
        }
        if (use_env) {
            printf(" (%s)", env);
        }
        putchar('\n');
    }
    printf("  %-24s show this help\n", "--help");
    printf("  %-24s %s\n", "--version", PS_VERSION_HELP);
}

void ps_config_usage(const char *prog, const char *about, const ps_flag_t *flags,
                     size_t nflags)
{
    s_usage(prog, about, flags, nflags, 1);
}

/* One "PROG: error: ..." line on stderr; nothing when prog is NULL. */
static void s_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_error(const char *prog, const char *fmt, ...)
{
    if (!prog) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Edit distance between a and b[0..blen), both short (flag names). */
static size_t s_distance(const char *a, const char *b, size_t blen)
{
    size_t alen = strlen(a), row[64];
    if (alen >= 64 || blen >= 64) {
        return (size_t)-1;
    }
    for (size_t j = 0; j <= blen; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= alen; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= blen; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[blen];
}

/* The flag nearest to name[0..len) that a typo could have made (at most a
 * third of its letters wrong, and at least one), or NULL. */
static const char *s_nearest(const ps_flag_t *flags, size_t nflags, const char *name, size_t len)
{
    const char *best = NULL;
    size_t best_d = len / 3 > 1 ? len / 3 : 1;
    for (size_t k = 0; k < nflags; k++) {
        size_t d = s_distance(flags[k].name, name, len);
        if (d <= best_d && (!best || d < best_d)) {
            best = flags[k].name;
            best_d = d;
        }
    }
    return best;
}

/* The environment's values of the table's flags. Returns 0 or PS_EINVAL. */
static int s_parse_env(const char *prog, const ps_flag_t *flags, size_t nflags)
{
    for (size_t i = 0; i < nflags; i++) {
        char env[64];
        s_env_name(&flags[i], env, sizeof env);
        const char *v = getenv(env);
        if (v && s_set(&flags[i], v) != 0) {
            s_error(prog, "environment %s=%s is not %s", env, v,
                    s_type_word(flags[i].type));
            return PS_EINVAL;
        }
    }
    return 0;
}

/* The table's flag named name[0..len), or NULL after the error line (with
 * the nearest name a typo could have made). */
static const ps_flag_t *s_find(const char *prog, const ps_flag_t *flags, size_t nflags,
                               const char *name, size_t len)
{
    for (size_t k = 0; k < nflags; k++) {
        if (strlen(flags[k].name) == len && !strncmp(flags[k].name, name, len)) {
            return &flags[k];
        }
    }
    const char *near = s_nearest(flags, nflags, name, len);
    s_error(prog, "unknown flag --%.*s%s%s%s (see --help)", (int)len, name,
            near ? "; did you mean --" : "", near ? near : "", near ? "?" : "");
    return NULL;
}

/* The value of flag f given at argv[*i] (after its '=', or the next
 * argument, which *i then passes), or NULL after the error line. */
static const char *s_value(const char *prog, const ps_flag_t *f, const char *eq, int argc,
                           char **argv, int *i)
{
    if (eq) {
        return eq + 1;
    }
    if (f->type == PS_FLAG_BOOL) {
        /* "--x" alone, or "--x 0|1|true|..." as a forwarding launcher writes it */
        int dummy;
        double num;
        ps_flag_t probe = {f->name, PS_FLAG_BOOL, &dummy, NULL, NULL};
        ps_flag_t as_num = {f->name, PS_FLAG_DOUBLE, &num, NULL, NULL};
        const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
        /* "--secure 2" meant a value, not a stray argument */
        return next && (s_set(&probe, next) == 0 ||
                        (strncmp(next, "--", 2) != 0 && s_set(&as_num, next) == 0))
                   ? argv[++*i]
                   : "1";
    }
    if (*i + 1 >= argc) {
        s_error(prog, "flag --%s needs a value", f->name);
        return NULL;
    }
    return argv[++*i];
}

static int s_parse(const char *prog, const char *about, const ps_flag_t *flags,
                   size_t nflags, int argc, char **argv, int *rest, int use_env)
{
    if (use_env && s_parse_env(prog, flags, nflags) != 0) {
        return PS_EINVAL;
    }
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            s_usage(prog, about, flags, nflags, use_env);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (rest) {
                break;
            }
            s_error(prog, "unexpected argument '%s' (see --help)", a);
            return PS_EINVAL;
        }
        const char *eq = strchr(a + 2, '=');
        const ps_flag_t *f =
            s_find(prog, flags, nflags, a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
        const char *val = f ? s_value(prog, f, eq, argc, argv, &i) : NULL;
        if (!val) {
            return PS_EINVAL;
        }
        if (s_set(f, val) != 0) {
            s_error(prog, "--%s %s: not %s", f->name, val, s_type_word(f->type));
            return PS_EINVAL;
        }
    }
    if (rest) {
        *rest = i;
    } else if (i < argc) {
        s_error(prog, "unexpected argument '%s' (see --help)", argv[i]);
        return PS_EINVAL;
    }
    return 0;
}

int ps_config_parse(const char *prog, const char *about, const ps_flag_t *flags,
                    size_t nflags, int argc, char **argv, int *rest)
{
    return s_parse(prog, about, flags, nflags, argc, argv, rest, 1);
}

int ps_config_parse_argv(const char *prog, const char *about, const ps_flag_t *flags,
                         size_t nflags, int argc, char **argv, int *rest)
{
    return s_parse(prog, about, flags, nflags, argc, argv, rest, 0);
}

/* Does argv[1..argc) give --name (as "--name" or "--name=...") before "--"? */
static int s_in_argv(const char *name, int argc, char **argv)
{
    size_t len = strlen(name);
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--", 2) && !strncmp(a + 2, name, len) &&
            (a[2 + len] == '\0' || a[2 + len] == '=')) {
            return 1;
        }
    }
    return 0;
}

void ps_config_blame_env(const ps_flag_t *flags, size_t nflags, int argc, char **argv,
                         char *err, size_t cap)
{
    if (strncmp(err, "--", 2) != 0) {
        return;
    }
    size_t len = strcspn(err + 2, " =:");
    for (size_t i = 0; i < nflags; i++) {
        const ps_flag_t *f = &flags[i];
        if (strlen(f->name) != len || strncmp(f->name, err + 2, len) != 0) {
            continue;
        }
        char env[64];
        s_env_name(f, env, sizeof env);
        if (!getenv(env) || s_in_argv(f->name, argc, argv)) {
            return;
        }
        /* "--name V: why" -> "VARIABLE=V: why"; "--name: why" -> "VARIABLE: why" */
        const char *tail = err + 2 + len;
        char out[1024];
        snprintf(out, sizeof out, "%s%s%s", env, *tail == ' ' ? "=" : "",
                 *tail == ' ' ? tail + 1 : tail);
        snprintf(err, cap, "%s", out);
        return;
    }
}

int ps_config_check_endpoint(const char *name, const char *v, int any_port, char *err,
                             size_t errlen)
{
    if (!v) {
        return 0;
    }
    int ok = 0;
    if (!strncmp(v, "ipc://", 6) || !strncmp(v, "inproc://", 9)) {
        ok = strchr(v, '/')[2] != '\0';
    } else if (!strncmp(v, "tcp://", 6)) {
        const char *host = v + 6, *colon = strrchr(host, ':');
        if (colon && colon > host) {
            const char *port = colon + 1;
            char *end;
            long n = strtol(port, &end, 10);
            ok = (any_port && !strcmp(port, "*")) ||
                 (port[0] >= '0' && port[0] <= '9' && !*end && n >= 1 && n <= 65535);
            ok = ok && !memchr(host, ' ', (size_t)(colon - host));
        }
    }
    if (ok) {
        return 0;
    }
    snprintf(err, errlen, "--%s %s: not an endpoint (expected tcp://HOST:PORT%s)", name, v,
             any_port ? ", PORT * = any free port" : "");
    return PS_EINVAL;
}
