/* bench/netsim/delay_line.c - a TUN device and threads that hand each packet back
 * after a fixed delay (see delay_line.h). */
#include "bench/netsim/delay_line.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <math.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"

enum {
    LINE_PACKET_MAX = 65536, /* the largest IP packet (the device's MTU is below it) */
    LINE_READ_BATCH = 64,    /* packets read before looking at the clock again */
};

/* One packet in a FIFO. */
typedef struct {
    double release;     /* ps_now() at which it goes back */
    size_t len;         /* bytes in buf */
    unsigned char *buf; /* LINE_PACKET_MAX bytes, allocated on first use and kept */
} line_slot_t;

/* One queue of the device and the thread that serves it. */
typedef struct {
    const ps_delay_line_t *line; /* its delay and wake pipe */
    int fd;                      /* the queue, non-blocking */
    pthread_t thread;
    int started;                   /* the thread runs (join it) */
    clockid_t cpu_clock;           /* the thread's CPU clock */
    line_slot_t slots[PS_DELAY_LINE_SLOTS]; /* a ring: count packets from head, oldest first */
    size_t head, count;
    unsigned char *scratch; /* where a packet read while the ring is full goes */
    _Atomic uint64_t packets, bytes, drops;
} line_queue_t;

struct ps_delay_line {
    double delay; /* seconds */
    int wake[2];  /* a pipe: a byte in it stops every thread */
    int nq;       /* queues in use */
    line_queue_t q[PS_DELAY_LINE_QUEUES];
};

/* Writes back every packet whose time has come. */
static void s_release(line_queue_t *q, double now)
{
    while (q->count > 0 && q->slots[q->head].release <= now) {
        line_slot_t *s = &q->slots[q->head];
        if (write(q->fd, s->buf, s->len) == (ssize_t)s->len) {
            atomic_fetch_add_explicit(&q->packets, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&q->bytes, s->len, memory_order_relaxed);
        } else {
            atomic_fetch_add_explicit(&q->drops, 1, memory_order_relaxed);
        }
        q->head = (q->head + 1) % PS_DELAY_LINE_SLOTS;
        q->count--;
    }
}

/* Reads up to a batch of packets into the ring. Returns 0, or -1 when the
 * device failed (not merely empty). */
static int s_take(line_queue_t *q)
{
    for (int i = 0; i < LINE_READ_BATCH; i++) {
        line_slot_t *s = NULL;
        if (q->count < PS_DELAY_LINE_SLOTS) {
            s = &q->slots[(q->head + q->count) % PS_DELAY_LINE_SLOTS];
            if (!s->buf && !(s->buf = malloc(LINE_PACKET_MAX))) {
                s = NULL;
            }
        }
        ssize_t n = read(q->fd, s ? s->buf : q->scratch, LINE_PACKET_MAX);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        }
        if (!s) {
            atomic_fetch_add_explicit(&q->drops, 1, memory_order_relaxed);
            continue;
        }
        s->len = (size_t)n;
        s->release = ps_now() + q->line->delay;
        q->count++;
    }
    return 0;
}

static void *s_thread(void *arg)
{
    line_queue_t *q = arg;
    /* Wake when asked, not up to 50 us later (the default slack), and ahead
     * of the roles' threads: a late wake-up is extra delay on the link. */
    prctl(PR_SET_TIMERSLACK, 1UL);
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -10);
    struct pollfd pf[2] = {{.fd = q->fd, .events = POLLIN},
                           {.fd = q->line->wake[0], .events = POLLIN}};
    for (;;) {
        s_release(q, ps_now());
        if (s_take(q) != 0) {
            fprintf(stderr, "shardps-bench: delay line: read: %s; it stops\n",
                    strerror(errno));
            break;
        }
        struct timespec ts, *timeout = NULL;
        if (q->count > 0) {
            double wait = q->slots[q->head].release - ps_now();
            wait = wait > 0 ? wait : 0;
            ts.tv_sec = (time_t)wait;
            ts.tv_nsec = (long)((wait - (double)ts.tv_sec) * 1e9);
            timeout = &ts;
        }
        if (ppoll(pf, 2, timeout, NULL) < 0 && errno != EINTR) {
            fprintf(stderr, "shardps-bench: delay line: poll: %s; it stops\n",
                    strerror(errno));
            break;
        }
        if (pf[1].revents) {
            break; /* destroy: nobody reads the byte, so every thread sees it */
        }
    }
    return NULL;
}

/* Opens the queues of the TUN device `dev` in the namespace at ns_path into
 * line's queues, returning to ours. Returns 0, or -1 with why. */
static int s_open_tun(ps_delay_line_t *line, const char *ns_path, const char *dev, char *why,
                      size_t whylen)
{
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int there = open(ns_path, O_RDONLY | O_CLOEXEC);
    int rc = -1;
    if (self < 0 || there < 0 || setns(there, CLONE_NEWNET) != 0) {
        snprintf(why, whylen, "cannot enter %s: %s", ns_path, strerror(errno));
        goto out;
    }
    rc = 0;
    for (int i = 0; i < line->nq && rc == 0; i++) {
        int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (line->nq > 1 ? IFF_MULTI_QUEUE : 0);
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", dev);
        if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) != 0) {
            snprintf(why, whylen, "no TUN device: %s: %s",
                     fd < 0 ? "/dev/net/tun" : "TUNSETIFF", strerror(errno));
            if (fd >= 0) {
                close(fd);
            }
            rc = -1;
        }
        line->q[i].fd = rc == 0 ? fd : -1;
    }
    if (setns(self, CLONE_NEWNET) != 0) { /* cannot happen: it is where we were */
        fprintf(stderr, "shardps-bench: cannot return to our network namespace: %s\n",
                strerror(errno));
        abort();
    }
out:
    if (self >= 0) {
        close(self);
    }
    if (there >= 0) {
        close(there);
    }
    return rc;
}

int ps_delay_line_new(const char *ns_path, const char *dev, double delay,
                      ps_delay_line_t **out, char *why, size_t whylen)
{
    *out = NULL;
    if (!(delay > 0) || !isfinite(delay)) {
        snprintf(why, whylen, "bad delay %g s", delay);
        return PS_EINVAL;
    }
    ps_delay_line_t *line = calloc(1, sizeof *line);
    if (!line) {
        snprintf(why, whylen, "out of memory");
        return PS_ENOMEM;
    }
    line->wake[0] = line->wake[1] = -1;
    line->delay = delay;
    const long per4 = sysconf(_SC_NPROCESSORS_ONLN) / 4;
    line->nq = per4 < 1 ? 1 : per4 > PS_DELAY_LINE_QUEUES ? PS_DELAY_LINE_QUEUES : (int)per4;
    for (int i = 0; i < line->nq; i++) {
        line->q[i].line = line;
        line->q[i].fd = -1;
        if (!(line->q[i].scratch = malloc(LINE_PACKET_MAX))) {
            ps_delay_line_destroy(&line);
            snprintf(why, whylen, "out of memory");
            return PS_ENOMEM;
        }
    }
    if (s_open_tun(line, ns_path, dev, why, whylen) != 0) {
        ps_delay_line_destroy(&line);
        return PS_ENOTSUP;
    }
    if (pipe2(line->wake, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        ps_delay_line_destroy(&line);
        return PS_ENOTSUP;
    }
    /* Signals stay with the main thread, which stops the bench on them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    for (int i = 0; i < line->nq && rc == 0; i++) {
        line_queue_t *q = &line->q[i];
        rc = pthread_create(&q->thread, NULL, s_thread, q);
        q->started = rc == 0;
        rc = rc ? rc : pthread_getcpuclockid(q->thread, &q->cpu_clock);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(why, whylen, "cannot start the delay line's threads: %s", strerror(rc));
        ps_delay_line_destroy(&line);
        return PS_ENOTSUP;
    }
    *out = line;
    return 0;
}

void ps_delay_line_stats(const ps_delay_line_t *line, ps_delay_line_stats_t *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->queues = line->nq;
    for (int i = 0; i < line->nq; i++) {
        const line_queue_t *q = &line->q[i];
        struct timespec ts;
        stats->packets += atomic_load_explicit(&q->packets, memory_order_relaxed);
        stats->bytes += atomic_load_explicit(&q->bytes, memory_order_relaxed);
        stats->drops += atomic_load_explicit(&q->drops, memory_order_relaxed);
        stats->cpu_s[i] = clock_gettime(q->cpu_clock, &ts) == 0
                              ? (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9
                              : 0;
    }
}

void ps_delay_line_destroy(ps_delay_line_t **linep)
{
    ps_delay_line_t *line = linep ? *linep : NULL;
    if (!line) {
        return;
    }
    char b = 1;
    while (line->wake[1] >= 0 && write(line->wake[1], &b, 1) < 0 && errno == EINTR) {
    }
    for (int i = 0; i < line->nq; i++) {
        line_queue_t *q = &line->q[i];
        if (q->started) {
            pthread_join(q->thread, NULL);
        }
        if (q->fd >= 0) {
            close(q->fd); /* the device goes with its last queue */
        }
        for (size_t k = 0; k < PS_DELAY_LINE_SLOTS; k++) {
            free(q->slots[k].buf);
        }
        free(q->scratch);
    }
    for (int i = 0; i < 2; i++) {
        if (line->wake[i] >= 0) {
            close(line->wake[i]);
        }
    }
    free(line);
    *linep = NULL;
}
