/* common/ratelog.c - first rejection per (peer, reason) in full, then counts. */
#include "common/ratelog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

typedef struct {
    char what[32];
    char peer[64];
    char reason[160];
    uint64_t count; /* since the last summary */
} ps_ratelog_key_t;

struct ps_ratelog {
    double period;
    double since; /* start of the period being counted */
    int nkeys;    /* the last one, once reached, is "other reasons" */
    uint64_t total;
    ps_ratelog_key_t keys[PS_RATELOG_KEYS];
};

int ps_ratelog_new(ps_ratelog_t **out, double period)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        return PS_ENOMEM;
    }
    (*out)->period = period;
    (*out)->since = ps_now();
    return 0;
}

/* "12345678" -> "12,345,678" */
static void s_thousands(uint64_t v, char *out, size_t cap)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v), at = 0;
    for (int i = 0; i < n && (size_t)at + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) {
            out[at++] = ',';
        }
        out[at++] = digits[i];
    }
    out[at] = '\0';
}

static void s_flush(ps_ratelog_t *r, double now)
{
    for (int i = 0; i < r->nkeys; i++) {
        ps_ratelog_key_t *k = &r->keys[i];
        if (k->count) {
            char n[40];
            s_thousands(k->count, n, sizeof n);
            /* what is a phrase ("a registration", "PUSH"): kept whole */
            ps_log_warn("%s more rejected in %.0f s (%s from %s): %s", n, now - r->since,
                        k->what, k->peer, k->reason);
            k->count = 0;
        }
    }
    r->since = now;
}

void ps_ratelog_destroy(ps_ratelog_t **rp)
{
    if (*rp) {
        s_flush(*rp, ps_now());
        free(*rp);
        *rp = NULL;
    }
}

uint64_t ps_ratelog_reject(ps_ratelog_t *r, const char *what, const char *peer,
                           const char *reason)
{
    r->total++;
    for (int i = 0; i < r->nkeys; i++) {
        ps_ratelog_key_t *k = &r->keys[i];
        if (i == PS_RATELOG_KEYS - 1 ||
            (!strncmp(k->what, what, sizeof k->what - 1) &&
             !strncmp(k->peer, peer, sizeof k->peer - 1) &&
             !strncmp(k->reason, reason, sizeof k->reason - 1))) {
            k->count++;
            return r->total;
        }
    }
    ps_ratelog_key_t *k = &r->keys[r->nkeys++];
    if (r->nkeys == PS_RATELOG_KEYS) { /* full: the last entry takes the rest */
        snprintf(k->what, sizeof k->what, "more");
        snprintf(k->peer, sizeof k->peer, "any peer");
        snprintf(k->reason, sizeof k->reason, "other reasons (more than %d kinds)",
                 PS_RATELOG_KEYS - 1);
    } else {
        snprintf(k->what, sizeof k->what, "%s", what);
        snprintf(k->peer, sizeof k->peer, "%s", peer);
        snprintf(k->reason, sizeof k->reason, "%s", reason);
    }
    ps_log_warn("rejected %s from %s: %s", what, peer, reason);
    return r->total;
}

void ps_ratelog_tick(ps_ratelog_t *r)
{
    double now = ps_now();
    if (now - r->since >= r->period) {
        s_flush(r, now);
    }
}
