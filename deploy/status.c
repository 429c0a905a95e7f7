/* deploy/status.c - the MSG_STATUS client and the text view of its answer. */
#include "deploy/status.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/json.h"
#include "proto/msg.h"
#include "proto/curve.h"
#include "proto/sock.h"

struct ps_status_client {
    ps_ctx_t *ctx;
    ps_sock_t *sock;
    ps_sock_t *watch;       /* sock's connection attempts, for the reason of no answer */
    ps_connect_seen_t seen; /* what watch saw so far */
    int secure;             /* given --keys */
    char endpoint[256];
    uint64_t next_id; /* request ids: a late answer to an earlier question is skipped */
};

int ps_status_client_new(const char *endpoint, const char *keys, ps_status_client_t **out,
                         char *err, size_t errlen)
{
    *out = NULL;
    ps_status_client_t *c = calloc(1, sizeof *c);
    if (!c || ps_ctx_new(&c->ctx) != 0) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
    if (ps_curve_secure_ctx(c->ctx, keys != NULL, keys, PS_ROLE_WORKER, err, errlen) != 0) {
        ps_status_client_destroy(&c);
        return PS_EINVAL;
    }
    c->secure = keys != NULL;
    int bad = ps_sock_new(c->ctx, PS_SOCK_DEALER, &c->sock, err, errlen);
    if (bad == 0) {
        (void)ps_sock_watch_connect(c->ctx, c->sock, &c->watch); /* none: errors say less */
        bad = ps_sock_connect(c->sock, endpoint);
    }
    if (bad != 0) {
        snprintf(err, errlen, "bad scheduler endpoint '%s' (expected tcp://HOST:PORT)",
                 endpoint);
        ps_status_client_destroy(&c);
        return PS_EINVAL;
    }
    ps_sock_set_linger(c->sock, 0);
    *out = c;
    return 0;
}

void ps_status_client_destroy(ps_status_client_t **cp)
{
    ps_status_client_t *c = *cp;
    if (c) {
        if (c->sock) {
            ps_sock_watch_end(c->sock, &c->watch);
        }
        ps_sock_destroy(&c->sock);
        ps_ctx_destroy(&c->ctx);
        free(c);
        *cp = NULL;
    }
}

/* Why the scheduler cannot answer, when handshakes with it fail (as in
 * link.c: the side that sees a mismatch first breaks it off); "" else. */
static const char *s_handshake_hint(const ps_status_client_t *c)
{
    if (!c->seen.mismatch && !c->seen.auth && c->seen.refused < 3) {
        return "";
    }
    if (!c->secure) {
        return "it is --secure: give the job's --keys DIR (shardps-launch --secure "
               "logs where it made them)";
    }
    return c->seen.mismatch
               ? "it is not --secure: ask without --keys"
               : "it refused the handshake: is it --secure, with the job's keys "
                 "in --keys DIR?";
}

int ps_status_client_query(ps_status_client_t *c, double timeout, Shardps__StatusReply **st,
                           char *err, size_t errlen)
{
    Shardps__Header h;
    *st = NULL;
    /* a worker's role with no rank: the scheduler answers status to anyone */
    ps_msg_header(&h, PS_MSG_STATUS, PS_ROLE_WORKER, -1);
    h.request_id = ++c->next_id;
    int rc = ps_msg_send(c->sock, NULL, h, NULL, 0, 0);
    if (rc != 0) {
        snprintf(err, errlen, "cannot ask the scheduler at %s: %s", c->endpoint,
                 ps_strerror(rc));
        return rc;
    }
    const double deadline = ps_now() + timeout;
    for (;;) {
        double left = deadline - ps_now();
        ps_sock_connect_seen(c->watch, &c->seen);
        const char *hint = s_handshake_hint(c);
        char how[128];
        if (hint[0]) {
            snprintf(err, errlen, "the scheduler at %s cannot answer: %s (%s)", c->endpoint,
                     hint, ps_connect_seen_str(&c->seen, how, sizeof how));
            return PS_EPROTO;
        }
        ps_pollitem_t it = {.sock = c->sock};
        /* short turns: a failed handshake is told within a fraction of a second */
        long ms = left > 0.2 ? 200 : (long)(left * 1000) + 1;
        if (left <= 0 || ps_poll(&it, 1, ms) <= 0 || !it.ready) {
            if (ps_now() < deadline) {
                continue;
            }
            snprintf(err, errlen, "no answer from the scheduler at %s in %g s (%s)",
                     c->endpoint, timeout, ps_connect_seen_str(&c->seen, how, sizeof how));
            return PS_ETIMEDOUT;
        }
        ps_msg_t m = {0};
        if (ps_msg_recv(c->sock, 0, &m) != 0) {
            continue;
        }
        size_t n = 0;
        const void *p = m.nframes == 1 ? ps_msg_frame(&m, 0, &n) : NULL;
        /* request id 0: the final view, sent unasked when the job ended */
        if (m.hdr.request_id != h.request_id && m.hdr.request_id != 0) {
            ps_msg_close(&m);
            continue;
        }
        char why[PS_ERROR_MAX] = "not a status reply";
        if (m.hdr.type == PS_MSG_ERROR) {
            snprintf(err, errlen, "the scheduler says: %s", m.hdr.error);
            rc = PS_EPROTO;
        } else if (m.hdr.type != PS_MSG_STATUS_REPLY || !p ||
                   !(*st = ps_codec_unpack(&shardps__status_reply__descriptor, p, n, NULL, why,
                                           sizeof why))) {
            snprintf(err, errlen, "the scheduler's answer does not decode: %s", why);
            rc = PS_EPROTO;
        } else {
            rc = 0;
        }
        ps_msg_close(&m);
        return rc;
    }
}

static void s_tag(const Shardps__StatusNode *n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%d", ps_codec_role_tag(n->role), n->rank);
}

/* A node's last report; an empty one when it has sent none. */
static const Shardps__MetricsReport *s_report(const Shardps__StatusNode *n)
{
    static const Shardps__MetricsReport none = SHARDPS__METRICS_REPORT__INIT;
    return n->report ? n->report : &none;
}

void ps_status_print(FILE *f, const Shardps__StatusReply *st)
{
    int64_t step = -1;
    for (size_t i = 0; i < st->n_nodes; i++) {
        if (st->nodes[i]->role == PS_ROLE_WORKER && st->nodes[i]->rank == 0) {
            step = s_report(st->nodes[i])->step;
        }
    }
    fprintf(f, "job: %s %s, %s, step %lld of %lld, %llu parameters, %.1f s since the scheduler started\n",
            st->model, st->mode, st->phase, (long long)(step > 0 ? step : 0),
            (long long)st->total_steps, (unsigned long long)st->num_params, st->elapsed_seconds);
    fprintf(f, "%-5s %-8s %-22s %-7s %-18s %-30s %s\n", "NODE", "STATE", "ENDPOINT", "PID",
            "KEYS / STEP", "RATE", "NOTE");
    char waited[PS_MAX_WORKERS] = {0};
    char on[PS_MAX_WORKERS][64];
    memset(on, 0, sizeof on);
    int64_t waiting_step = -1;
    for (size_t i = 0; i < st->n_nodes; i++) {
        const Shardps__StatusNode *n = st->nodes[i];
        const Shardps__MetricsReport *r = s_report(n);
        char tag[16], what[48] = "", rate[48] = "", note[160] = "";
        s_tag(n, tag, sizeof tag);
        if (n->role == PS_ROLE_SERVER) {
            snprintf(what, sizeof what, "[%llu, %llu)", (unsigned long long)n->key_begin,
                     (unsigned long long)n->key_end);
            snprintf(rate, sizeof rate, "version %lld", (long long)r->step);
            if (r->n_waiting_for > 0) {
                size_t at = (size_t)snprintf(note, sizeof note, "step %lld waits %.1f s for",
                                             (long long)r->step, r->waited_seconds);
                for (size_t k = 0; k < r->n_waiting_for; k++) {
                    int w = r->waiting_for[k];
                    if (at < sizeof note) {
                        at += (size_t)snprintf(note + at, sizeof note - at, " W%d", w);
                    }
                    if (w >= 0 && w < PS_MAX_WORKERS) {
                        waited[w] = 1;
                        size_t l = strlen(on[w]);
                        snprintf(on[w] + l, sizeof on[w] - l, " %s", tag);
                    }
                }
                waiting_step = r->step;
            }
        } else {
            snprintf(what, sizeof what, "step %lld", (long long)r->step);
            snprintf(rate, sizeof rate, "%.1f steps/s %.0f samples/s", n->steps_per_second,
                     n->samples_per_second);
            if (n->rank == 0 && r->test_accuracy >= 0) {
                snprintf(note, sizeof note, "loss %.4f test_accuracy %.4f", r->loss,
                         r->test_accuracy);
            } else if (r->step > 0) {
                snprintf(note, sizeof note, "loss %.4f", r->loss);
            }
        }
        if (n->silent_seconds > 2.0) {
            size_t l = strlen(note);
            snprintf(note + l, sizeof note - l, "%ssilent %.1f s", l ? "; " : "",
                     n->silent_seconds);
        }
        fprintf(f, "%-5s %-8s %-22s %-7u %-18s %-30s %s\n", tag, n->state,
                n->endpoint[0] ? n->endpoint : "-", n->pid, what, rate, note);
    }
    if (waiting_step >= 0) {
        fprintf(f, "step %lld waits for:", (long long)waiting_step);
        for (int w = 0; w < PS_MAX_WORKERS; w++) {
            if (waited[w]) {
                fprintf(f, " W%d (on%s)", w, on[w]);
            }
        }
        fprintf(f, "\n");
    }
}

/* One node as a JSON object. */
static json_t *s_node_json(const Shardps__StatusNode *n)
{
    const Shardps__MetricsReport *r = s_report(n);
    char tag[16];
    s_tag(n, tag, sizeof tag);
    json_t *o = json_object(), *waiting = json_array();
    for (size_t k = 0; k < r->n_waiting_for; k++) {
        json_array_append_new(waiting, json_integer(r->waiting_for[k]));
    }
    json_object_set_new(o, "node", json_string(tag));
    json_object_set_new(o, "role", json_string(n->role == PS_ROLE_SERVER ? "server" : "worker"));
    json_object_set_new(o, "rank", json_integer(n->rank));
    json_object_set_new(o, "state", ps_json_text(n->state));
    json_object_set_new(o, "endpoint", ps_json_text(n->endpoint));
    json_object_set_new(o, "pid", json_integer(n->pid));
    if (n->role == PS_ROLE_SERVER) {
        json_object_set_new(o, "key_begin", json_integer((json_int_t)n->key_begin));
        json_object_set_new(o, "key_end", json_integer((json_int_t)n->key_end));
        json_object_set_new(o, "version", json_integer(r->step));
        json_object_set_new(o, "waiting_for", waiting);
        json_object_set_new(o, "waited_seconds", ps_json_real(r->waited_seconds, 3));
    } else {
        json_decref(waiting);
        json_object_set_new(o, "step", json_integer(r->step));
        json_object_set_new(o, "steps_per_second", ps_json_real(n->steps_per_second, 2));
        json_object_set_new(o, "samples_per_second", ps_json_real(n->samples_per_second, 1));
        json_object_set_new(o, "loss", ps_json_real(r->loss, 6));
        json_object_set_new(o, "test_accuracy", ps_json_real(r->test_accuracy, 6));
    }
    json_object_set_new(o, "silent_seconds", ps_json_real(n->silent_seconds, 1));
    return o;
}

int ps_status_print_json(FILE *f, const Shardps__StatusReply *st)
{
    int64_t step = 0;
    json_t *doc = json_object(), *nodes = json_array();
    for (size_t i = 0; i < st->n_nodes; i++) {
        const Shardps__StatusNode *n = st->nodes[i];
        if (n->role == PS_ROLE_WORKER && n->rank == 0 && s_report(n)->step > 0) {
            step = s_report(n)->step;
        }
        json_array_append_new(nodes, s_node_json(n));
    }
    json_object_set_new(doc, "phase", ps_json_text(st->phase));
    json_object_set_new(doc, "model", ps_json_text(st->model));
    json_object_set_new(doc, "mode", ps_json_text(st->mode));
    json_object_set_new(doc, "step", json_integer(step));
    json_object_set_new(doc, "total_steps", json_integer(st->total_steps));
    json_object_set_new(doc, "num_params", json_integer((json_int_t)st->num_params));
    json_object_set_new(doc, "elapsed_seconds", ps_json_real(st->elapsed_seconds, 3));
    json_object_set_new(doc, "nodes", nodes);
    ps_text_t out = {0};
    int rc = ps_json_dump(doc, PS_JSON_COMPACT, &out);
    json_decref(doc);
    if (rc == 0) {
        fprintf(f, "%s\n", out.p);
    }
    free(out.p);
    return rc;
}
