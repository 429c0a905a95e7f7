/*
 * common/trace.c - the process's bounded trace ring and its Chrome JSON,
 * written and merged through common/json (jansson), one event per line.
 */
#include "common/trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/json.h"
#include "common/log.h"
#include "common/text.h"

typedef struct {
    double t0, t1;
    int64_t step;
    int64_t arg;
    uint32_t tid;
    uint8_t name; /* ps_trace_name_t; an index, so a torn read never dereferences junk */
} s_event_t;

/* The one trace of this process (see trace.h: process-wide, like the log). */
static struct {
    s_event_t *ring;
    size_t cap;
    atomic_size_t next; /* events recorded so far; slot = next % cap */
    int64_t from, to;
    char path[4096];
    char process[32];
    double offset;
    atomic_llong step;
    volatile sig_atomic_t dump; /* SIGUSR1 asked for the file */
} g;

static const char *const s_names[PS_TRACE_NNAMES] = {
    "step", "forward", "backward", "push", "pull", "wait", "ring",
    "receive", "validate", "apply", "reply", "push_msg", "pull_msg", "ack", "pull_part",
};
static const char *const s_arg_names[PS_TRACE_NNAMES] = {
    NULL, NULL, NULL, "key", NULL, NULL, "ring_step", "type", NULL, NULL, "worker",
    "key", "key", "key", "key",
};
static const char *const s_cats[PS_TRACE_NNAMES] = {
    "worker", "worker", "worker", "worker", "worker", "worker", "ring",
    "server", "server", "server", "server", "wire", "wire", "wire", "wire",
};

ps_flag_t ps_trace_file_flag(const char **dst)
{
    return (ps_flag_t){"trace", PS_FLAG_STR, dst, "FILE",
                       "write a Chrome trace-event JSON of this process here at the end "
                       "(and on SIGUSR1)"};
}

ps_flag_t ps_trace_steps_flag(const char **dst)
{
    return (ps_flag_t){"trace-steps", PS_FLAG_STR, dst, "A:B",
                       "trace only steps A <= step < B (default: every step)"};
}

ps_flag_t ps_trace_kib_flag(int *dst)
{
    return (ps_flag_t){"trace-kib", PS_FLAG_INT, dst, "KIB",
                       "the trace's memory and file budget in KiB, 16 to 1048576: the "
                       "newest events that fit are kept"};
}

void ps_trace_part_path(const char *path, const char *tag, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash)) {
        dot = path + strlen(path);
    }
    snprintf(out, cap, "%.*s.%s%s", (int)(dot - path), path, tag, dot);
}

const char *ps_trace_name(ps_trace_name_t name)
{
    return (unsigned)name < PS_TRACE_NNAMES ? s_names[name] : "?";
}

static void s_on_usr1(int sig)
{
    (void)sig;
    g.dump = 1;
}

/* --trace-steps into [*a, *b). */
static int s_parse_steps(const char *steps, long long *a, long long *b)
{
    char tail;
    *a = 0;
    *b = INT64_MAX;
    return steps && (sscanf(steps, "%lld:%lld%c", a, b, &tail) != 2 || *a < 0 || *b <= *a)
               ? PS_EINVAL
               : 0;
}

int ps_trace_check_flags(const char *steps, int kib, char *err, size_t errlen)
{
    long long a, b;
    if (s_parse_steps(steps, &a, &b) != 0) {
        snprintf(err, errlen, "--trace-steps %s: expected A:B with 0 <= A < B", steps);
        return PS_EINVAL;
    }
    if (kib < 16 || kib > (1 << 20)) {
        snprintf(err, errlen, "--trace-kib %d: out of range [16, 1048576]", kib);
        return PS_EINVAL;
    }
    return 0;
}

int ps_trace_open(const char *path, const char *steps, int kib, char *err, size_t errlen)
{
    long long a, b;
    if (!path) {
        return 0;
    }
    if (ps_trace_check_flags(steps, kib, err, errlen) != 0 ||
        s_parse_steps(steps, &a, &b) != 0) {
        return PS_EINVAL;
    }
    if (ps_file_check_writable(path, err, errlen) != 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "--trace %s", why);
        return PS_EINVAL;
    }
    /* the header and the metadata event take two event lines of the budget */
    g.cap = (size_t)kib * 1024 / PS_TRACE_EVENT_BYTES - 2;
    g.ring = calloc(g.cap, sizeof *g.ring);
    if (!g.ring) {
        snprintf(err, errlen, "out of memory for a trace of %d KiB", kib);
        return PS_ENOMEM;
    }
    g.from = a;
    g.to = b;
    snprintf(g.path, sizeof g.path, "%s", path);
    snprintf(g.process, sizeof g.process, "pid %d", (int)getpid());
    atomic_init(&g.next, 0);
    atomic_init(&g.step, 0);
    struct sigaction sa = {.sa_handler = s_on_usr1};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    return 0;
}

void ps_trace_set_process(const char *tag, double clock_offset)
{
    snprintf(g.process, sizeof g.process, "%s", tag);
    g.offset = clock_offset;
}

int ps_trace_enabled(void)
{
    return g.ring != NULL;
}

void ps_trace_step(int64_t step)
{
    if (g.ring) {
        atomic_store_explicit(&g.step, step, memory_order_relaxed);
    }
}

void ps_trace_span(ps_trace_name_t name, int64_t step, double t0, double t1, int64_t arg)
{
    if (!g.ring) {
        return;
    }
    if (step == PS_TRACE_CURRENT_STEP) {
        step = atomic_load_explicit(&g.step, memory_order_relaxed);
    }
    if (step < g.from || step >= g.to) {
        return;
    }
    static _Thread_local uint32_t tid;
    if (!tid) {
        tid = (uint32_t)syscall(SYS_gettid);
    }
    size_t i = atomic_fetch_add_explicit(&g.next, 1, memory_order_relaxed) % g.cap;
    g.ring[i] = (s_event_t){t0, t1, step, arg, tid, (uint8_t)name};
}

ps_trace_span_t ps_trace_span_begin(ps_trace_name_t name, int64_t step, int64_t arg)
{
    const int on = g.ring != NULL;
    return (ps_trace_span_t){name, step, arg, on ? ps_now() : 0, on};
}

void ps_trace_span_end(const ps_trace_span_t *sp)
{
    if (sp->on) {
        ps_trace_span(sp->name, sp->step, sp->t0, ps_now(), sp->arg);
    }
}

/* A JSON number of microseconds from nanoseconds: three decimals, exact
 * while it has at most 15 digits (common/json.h). */
static double s_us(int64_t ns)
{
    return (double)ns / 1000;
}

/* The events of one name as jansson values built once and refilled for each
 * event, so that writing a ring of events allocates nothing per event. */
typedef struct {
    json_t *ev[PS_TRACE_NNAMES];
    json_t *ts[PS_TRACE_NNAMES], *dur[PS_TRACE_NNAMES], *tid[PS_TRACE_NNAMES];
    json_t *step[PS_TRACE_NNAMES], *arg[PS_TRACE_NNAMES];
} s_events_t;

static void s_events_fini(s_events_t *t)
{
    for (int i = 0; i < PS_TRACE_NNAMES; i++) {
        json_decref(t->ev[i]); /* it owns its members */
    }
}

/* Returns 0 or PS_ENOMEM. */
static int s_events_init(s_events_t *t, int pid)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < PS_TRACE_NNAMES; i++) {
        json_t *args = json_pack("{s:i}", "step", 0);
        t->ev[i] = json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i, s:o}", "name", s_names[i],
                             "cat", s_cats[i], "ph", "X", "ts", 0.0, "dur", 0.0, "pid", pid,
                             "tid", 0, "args", args);
        if (!t->ev[i] || (s_arg_names[i] && json_object_set_new(args, s_arg_names[i],
                                                                json_integer(0)) != 0)) {
            s_events_fini(t);
            return PS_ENOMEM;
        }
        t->ts[i] = json_object_get(t->ev[i], "ts");
        t->dur[i] = json_object_get(t->ev[i], "dur");
        t->tid[i] = json_object_get(t->ev[i], "tid");
        t->step[i] = json_object_get(args, "step");
        t->arg[i] = s_arg_names[i] ? json_object_get(args, s_arg_names[i]) : NULL;
    }
    return 0;
}

/* One event line, at most PS_TRACE_EVENT_BYTES: names are short, numbers bounded. */
static void s_event_line(ps_text_t *out, s_events_t *t, const s_event_t *e)
{
    unsigned name = e->name < PS_TRACE_NNAMES ? e->name : PS_TRACE_STEP;
    double d = e->t1 > e->t0 ? e->t1 - e->t0 : 0;
    json_real_set(t->ts[name], s_us(llround(e->t0 * 1e9)));
    json_real_set(t->dur[name], s_us(llround((d < 1e6 ? d : 1e6) * 1e9)));
    json_integer_set(t->tid[name], e->tid);
    json_integer_set(t->step[name], e->step);
    json_integer_set(t->arg[name], e->arg); /* NULL-safe: no arg */
    ps_text_append(out, ",", 1);
    ps_json_dump(t->ev[name], PS_JSON_COMPACT, out);
    ps_text_append(out, "\n", 1);
}

/* The first line, {"otherData":{...},"traceEvents":[, and the process's
 * name as a metadata event on the second. */
static void s_head(ps_text_t *out, size_t kept, size_t dropped, int pid)
{
    json_t *other = json_pack("{s:s, s:o, s:I, s:I}", "process", g.process, "clock_offset_us",
                              ps_json_real(g.offset * 1e6, 3), "events", (json_int_t)kept,
                              "dropped", (json_int_t)dropped);
    json_t *meta = json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "process_name", "ph", "M",
                             "pid", pid, "tid", 0, "args", "name", g.process);
    if (!other || !meta) {
        out->oom = 1;
    }
    ps_text_append(out, "{\"otherData\":", 13);
    ps_json_dump(other, PS_JSON_COMPACT, out);
    ps_text_append(out, ",\"traceEvents\":[\n", 17);
    ps_json_dump(meta, PS_JSON_COMPACT, out);
    ps_text_append(out, "\n", 1);
    json_decref(other);
    json_decref(meta);
}

static int s_write(void)
{
    size_t n = atomic_load(&g.next), kept = n < g.cap ? n : g.cap;
    ps_text_t t = {0};
    s_events_t ev;
    const int pid = (int)getpid();
    int rc = s_events_init(&ev, pid);
    if (rc == 0) {
        s_head(&t, kept, n - kept, pid);
        for (size_t k = n - kept; k < n && !t.oom; k++) { /* oldest first */
            s_event_line(&t, &ev, &g.ring[k % g.cap]);
        }
        s_events_fini(&ev);
        ps_text_append(&t, "]}\n", 3);
    }
    rc = rc || t.oom ? PS_ENOMEM
                     : ps_file_write_atomic(g.path, (const void *[]){t.p}, (size_t[]){t.len}, 1,
                                            NULL, 0);
    if (rc != 0) {
        ps_log_warn("trace not written to %s: %s", g.path, ps_strerror(rc));
    } else {
        ps_log_info("trace: %zu events (%zu older ones dropped) written to %s", kept, n - kept,
                    g.path);
    }
    free(t.p);
    return rc == 0 ? 0 : PS_EIO;
}

void ps_trace_poll(void)
{
    if (g.ring && g.dump) {
        g.dump = 0;
        s_write();
    }
}

int ps_trace_close(void)
{
    if (!g.ring) {
        return 0;
    }
    int rc = s_write();
    free(g.ring);
    g.ring = NULL;
    return rc;
}

/* Appends the events of one trace file (path, open as f) to out, each
 * moved by the file's clock offset. The file is read as ps_trace_close
 * writes it: the document's opening with otherData on the first line, one
 * event per line, its close on the last. Returns 0, or PS_EINVAL with a
 * one-line reason naming the file and line in err. */
static int s_merge_file(const char *path, FILE *f, ps_text_t *out, int *first, char *err,
                        size_t errlen)
{
    char *line = NULL, why[256] = "not a shardps trace (no otherData.clock_offset_us)";
    size_t cap = 0, lineno = 1;
    ssize_t len = getline(&line, &cap, f);
    json_t *doc = NULL;
    double offset_us = 0;
    /* the first line closed is a whole document: {"otherData":{...},"traceEvents":[]} */
    int rc = len > 0 && !strncmp(line, "{\"otherData\":", 13) ? 0 : PS_EINVAL;
    if (rc == 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            len--;
        }
        char *whole = malloc((size_t)len + 3);
        if (whole) {
            memcpy(whole, line, (size_t)len);
            memcpy(whole + len, "]}", 3);
        }
        rc = whole ? ps_json_parse(whole, (size_t)len + 2, 0, &doc, why, sizeof why) : PS_ENOMEM;
        rc = rc ? rc : ps_json_get_num(doc, "otherData.clock_offset_us", &offset_us, why,
                                       sizeof why);
        free(whole);
        json_decref(doc);
    }
    const int64_t offset_ns = llround(offset_us * 1e3);
    while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        const char *ev = line + (line[0] == ',');
        if (*ev != '{') {
            continue; /* the document's close */
        }
        json_t *e = NULL;
        rc = ps_json_parse(ev, (size_t)(line + len - ev), 0, &e, why, sizeof why);
        json_t *ts = rc == 0 ? json_object_get(e, "ts") : NULL; /* metadata has none */
        if (ts && !json_is_number(ts)) {
            snprintf(why, sizeof why, "its ts is not a number");
            rc = PS_EINVAL;
        } else if (ts) {
            const int64_t ns = llround(json_number_value(ts) * 1e3) + offset_ns;
            rc = json_object_set_new(e, "ts", json_real(s_us(ns))) ? PS_ENOMEM : 0;
        }
        if (rc == 0) {
            ps_text_append(out, ",", *first ? 0 : 1);
            ps_json_dump(e, PS_JSON_COMPACT, out);
            ps_text_append(out, "\n", 1);
            *first = 0;
        }
        json_decref(e);
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s:%zu: %s", path, lineno, why);
    }
    free(line);
    return rc ? PS_EINVAL : 0;
}

int ps_trace_merge(const char *const *in, int n, const char *out, char *err, size_t errlen)
{
    ps_text_t t = {0};
    int first = 1, rc = 0;
    ps_text_append(&t, "{\"traceEvents\":[\n", 17);
    for (int i = 0; i < n && rc == 0; i++) {
        FILE *f = fopen(in[i], "rb");
        if (!f) {
            snprintf(err, errlen, "%s: cannot be read: %s", in[i], strerror(errno));
            rc = PS_EINVAL;
            break;
        }
        rc = s_merge_file(in[i], f, &t, &first, err, errlen);
        fclose(f);
    }
    ps_text_append(&t, "]}\n", 3);
    if (rc == 0 && (t.oom || ps_file_write_atomic(out, (const void *[]){t.p}, (size_t[]){t.len},
                                                  1, NULL, 0) != 0)) {
        snprintf(err, errlen, "cannot write %s", out);
        rc = PS_EIO;
    }
    free(t.p);
    return rc;
}

int ps_trace_merge_parts(const char *path, const char *const *tags, int n, int *merged,
                         char *err, size_t errlen)
{
    *merged = 0;
    char(*parts)[PATH_MAX] = calloc(n > 0 ? (size_t)n : 1, sizeof *parts);
    const char **in = calloc(n > 0 ? (size_t)n : 1, sizeof *in);
    int found = 0, rc = 0;
    for (int i = 0; parts && in && i < n; i++) {
        ps_trace_part_path(path, tags[i], parts[found], sizeof parts[found]);
        if (access(parts[found], F_OK) == 0) {
            in[found] = parts[found];
            found++;
        }
    }
    if (!parts || !in) {
        snprintf(err, errlen, "out of memory");
        rc = PS_ENOMEM;
    } else if (found > 0) {
        rc = ps_trace_merge(in, found, path, err, errlen);
        *merged = rc == 0 ? found : 0;
    }
    free(parts);
    free(in);
    return rc;
}
