/* common/trace.c - the process's bounded trace ring and its Chrome JSON. */
#include "common/trace.h"

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
    "receive", "validate", "apply", "reply",
};
static const char *const s_arg_names[PS_TRACE_NNAMES] = {
    NULL, NULL, NULL, "key", NULL, NULL, "ring_step", "type", NULL, NULL, "worker",
};
static const char *const s_cats[PS_TRACE_NNAMES] = {
    "worker", "worker", "worker", "worker", "worker", "worker", "ring",
    "server", "server", "server", "server",
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

/* Microseconds with three decimals from nanoseconds, in integers: printf's
 * "%.3f" would cost most of the time writing a trace. buf: 32 bytes. */
static const char *s_us(char *buf, int64_t ns)
{
    const char *sign = ns < 0 ? "-" : "";
    uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
    snprintf(buf, 32, "%s%llu.%03u", sign, (unsigned long long)(a / 1000), (unsigned)(a % 1000));
    return buf;
}

/* One event line, at most PS_TRACE_EVENT_BYTES: names are short, numbers bounded. */
static void s_event_line(ps_text_t *t, const s_event_t *e, int pid)
{
    unsigned name = e->name < PS_TRACE_NNAMES ? e->name : PS_TRACE_STEP;
    char arg[48] = "", ts[32], dur[32];
    if (s_arg_names[name]) {
        snprintf(arg, sizeof arg, ",\"%s\":%lld", s_arg_names[name], (long long)e->arg);
    }
    double d = e->t1 > e->t0 ? e->t1 - e->t0 : 0;
    ps_text_printf(t,
                   ",{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%s,\"dur\":%s,"
                   "\"pid\":%d,\"tid\":%u,\"args\":{\"step\":%lld%s}}\n",
                   s_names[name], s_cats[name], s_us(ts, llround(e->t0 * 1e9)),
                   s_us(dur, llround((d < 1e6 ? d : 1e6) * 1e9)), pid, e->tid,
                   (long long)e->step, arg);
}

static int s_write(void)
{
    size_t n = atomic_load(&g.next), kept = n < g.cap ? n : g.cap;
    ps_text_t t = {0};
    int pid = (int)getpid();
    ps_text_printf(&t,
                   "{\"otherData\":{\"process\":\"%s\",\"clock_offset_us\":%.3f,"
                   "\"events\":%zu,\"dropped\":%zu},\"traceEvents\":[\n",
                   g.process, g.offset * 1e6, kept, n - kept);
    ps_text_printf(&t,
                   "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"name\":\"%s\"}}\n",
                   pid, g.process);
    for (size_t k = n - kept; k < n; k++) { /* oldest first */
        s_event_line(&t, &g.ring[k % g.cap], pid);
    }
    ps_text_printf(&t, "]}\n");
    int rc = t.oom ? PS_ENOMEM
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

/* Reads a whole file into a NUL-terminated buffer (caller frees). */
static char *s_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    ps_text_t t = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        ps_text_printf(&t, "%.*s", (int)n, buf);
    }
    int bad = ferror(f) || t.oom;
    fclose(f);
    if (bad) {
        free(t.p);
        return NULL;
    }
    return t.p ? t.p : strdup("");
}

/* The nanoseconds of a timestamp written by s_us ("-U.FFF" microseconds);
 * *end: after it. Integers, like s_us: strtod would cost most of a merge's time. */
static int64_t s_parse_us(const char *p, char **end)
{
    const int neg = *p == '-';
    char *q;
    int64_t ns = (int64_t)strtoull(p + neg, &q, 10) * 1000;
    if (*q == '.') {
        int64_t scale = 100;
        for (q++; *q >= '0' && *q <= '9'; q++) {
            ns += scale * (*q - '0'); /* digits beyond the third: scale 0 */
            scale /= 10;
        }
    }
    *end = q;
    return neg ? -ns : ns;
}

int ps_trace_merge(const char *const *in, int n, const char *out, char *err, size_t errlen)
{
    ps_text_t t = {0};
    int first = 1, rc = 0;
    ps_text_printf(&t, "{\"traceEvents\":[\n");
    for (int i = 0; i < n && rc == 0; i++) {
        char *text = s_slurp(in[i]);
        const char *off = text ? strstr(text, "\"clock_offset_us\":") : NULL;
        if (!text || strncmp(text, "{\"otherData\":", 13) || !off) {
            snprintf(err, errlen, "%s: %s", in[i],
                     text ? "not a shardps trace (no otherData.clock_offset_us)"
                          : "cannot be read");
            free(text);
            rc = PS_EINVAL;
            break;
        }
        const int64_t offset_ns = llround(strtod(off + 18, NULL) * 1e3);
        for (char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
            const char *ev = line + 1;
            ev += *ev == ',';
            if (*ev != '{') {
                continue;
            }
            size_t len = strcspn(ev, "\n");
            const char *ts = strstr(ev, "\"ts\":");
            if (!ts || ts > ev + len) { /* metadata: as it is */
                ps_text_printf(&t, "%s%.*s\n", first ? "" : ",", (int)len, ev);
            } else {
                char *end, us[32];
                int64_t ns = s_parse_us(ts + 5, &end) + offset_ns;
                ps_text_printf(&t, "%s%.*s%s%.*s\n", first ? "" : ",", (int)(ts + 5 - ev), ev,
                               s_us(us, ns), (int)(ev + len - end), end);
            }
            first = 0;
        }
        free(text);
    }
    ps_text_printf(&t, "]}\n");
    if (rc == 0 && (t.oom || ps_file_write_atomic(out, (const void *[]){t.p}, (size_t[]){t.len},
                                                  1, NULL, 0) != 0)) {
        snprintf(err, errlen, "cannot write %s", out);
        rc = PS_EIO;
    }
    free(t.p);
    return rc;
}
