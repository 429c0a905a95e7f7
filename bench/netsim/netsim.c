/* bench/netsim/netsim.c - a simulated cluster network: namespaces, veth links
 * and tc shaping (see netsim.h). Jobs on it are job.c's. */
#include "bench/netsim/netsim.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/wait.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/error.h"
#include "deploy/proc.h"

enum {
    NET_MAX_ROLES = 1 + 64 + 64, /* scheduler, servers, workers */
    /* Every device's MTU unless the spec says: large, so that a TCP segment
     * is one packet end to end (no segmentation on the way to the TUN device)
     * and the delay line moves few packets per second (about 2,000 per
     * gbit/s). A smaller one (mtu=BYTES, down to NET_MTU_MIN) is what real
     * links carry, and what pipelines of small messages see: every link end
     * forwards a packet once it has the whole of it. */
    NET_MTU = 65000,
    NET_MTU_MIN = 1280,
    /* A link end's queue: NET_QUEUE_MS of its rate unless the spec gives
     * bytes (queue=BYTES). A queue in time holds a tenth of the bytes at a
     * tenth of the rate, so runs that compare rates give it in bytes. */
    NET_QUEUE_MS = 50,
    NET_QUEUE_MIN = 16384,
    NET_QUEUE_MAX = 1 << 30,
};

/* The hub's address, on its side of every link (each role's gateway), and
 * the block of the roles' addresses. */
#define NET_HUB_ADDR "10.99.255.254"
#define NET_ROLES_NET "10.99.0.0/16"
/* The longest DELAY: a job's messages wait on it, and the line holds a
 * link's rate x DELAY in packets. */
#define NET_DELAY_MAX 1.0

volatile sig_atomic_t ps_netsim_stop = 0;

struct ps_netsim {
    char prefix[32];              /* namespace names start with it */
    char hub[48];                 /* the hub's namespace */
    char ip[PATH_MAX];            /* the ip program */
    char tc[PATH_MAX];            /* the tc program ("" when not shaped) */
    char sysctl[PATH_MAX];        /* the sysctl program */
    char log_path[PATH_MAX];      /* set-up commands' output */
    int servers, workers, nroles; /* role i: 0 scheduler, 1..S servers, then workers */
    char name[NET_MAX_ROLES][16]; /* role i's name: c, s0, w1 */
    char ns[NET_MAX_ROLES][48];   /* its namespace: prefix + name */
    char addr[NET_MAX_ROLES][24]; /* its address */
    int made;                     /* namespaces made: the hub, then roles 0..made-2 */
    char rate[32];                /* tc's RATE; "" when not shaped */
    double rate_bits;             /* RATE in bits/s */
    double dilate;                /* time dilation: links shaped to RATE / dilate,
                                     the delay and queues dilate times longer */
    int mtu;                      /* every device's */
    long queue;                   /* bytes a link end queues; 0: NET_QUEUE_MS */
    ps_delay_line_t *line;        /* holds each packet DELAY; NULL without DELAY */
    char note[512];
};

static void s_on_signal(int sig)
{
    ps_netsim_stop = sig;
}

void ps_netsim_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* A number with one of the units, as tc takes it; *scale: the unit's factor. */
static int s_quantity(const char *text, size_t n, const char *const *units,
                      const double *scales, double *value)
{
    char buf[32], unit[16];
    double v;
    int used = 0;
    if (n == 0 || n >= sizeof buf) {
        return PS_EINVAL;
    }
    memcpy(buf, text, n);
    buf[n] = '\0';
    if (sscanf(buf, "%lf%15[a-z]%n", &v, unit, &used) != 2 || buf[used] || !(v > 0) ||
        !isfinite(v)) {
        return PS_EINVAL;
    }
    for (int i = 0; units[i]; i++) {
        if (!strcmp(unit, units[i])) {
            *value = v * scales[i];
            return 0;
        }
    }
    return PS_EINVAL;
}

static const char *const s_rate_units[] = {"bit", "kbit", "mbit", "gbit", NULL};
static const double s_rate_scales[] = {1, 1e3, 1e6, 1e9};
static const char *const s_delay_units[] = {"us", "ms", "s", NULL};
static const double s_delay_scales[] = {1e-6, 1e-3, 1};

/* A spec, split. */
typedef struct {
    double rate;      /* bits/s */
    size_t rate_len;  /* RATE's characters at the spec's start */
    double delay;     /* seconds, 0: none */
    char delay_text[32];
    long mtu;         /* bytes, NET_MTU unless given */
    long queue;       /* bytes a link end queues, 0: NET_QUEUE_MS of its rate */
} net_spec_t;

#define NET_FORM "expected RATE[,DELAY][,mtu=BYTES][,queue=BYTES]"

/* A spec's "NAME=BYTES" settings. */
typedef struct {
    const char *name; /* with its '=' */
    long min, max;
} net_option_t;

static const net_option_t s_options[] = {{"mtu=", NET_MTU_MIN, NET_MTU},
                                         {"queue=", NET_QUEUE_MIN, NET_QUEUE_MAX}};

/* Sets option o of spec from part (len characters, "NAME=BYTES") into *v,
 * once. Returns 0, or PS_EINVAL with why in err. */
static int s_option(const char *spec, const net_option_t *o, const char *part, size_t len,
                    long *v, char *err, size_t errlen)
{
    char *e;
    const size_t at = strlen(o->name);
    const long x = strtol(part + at, &e, 10);
    if (*v) {
        snprintf(err, errlen, "--net %s: '%.*s' given twice", spec, (int)at - 1, o->name);
        return PS_EINVAL;
    }
    if (e != part + len || len == at || x < o->min || x > o->max) {
        snprintf(err, errlen, "--net %s: bad '%.*s': " NET_FORM ", BYTES from %ld to %ld",
                 spec, (int)len, part, o->min, o->max);
        return PS_EINVAL;
    }
    *v = x;
    return 0;
}

/* Splits spec "RATE[,DELAY][,mtu=BYTES][,queue=BYTES]" into *out. Returns
 * 0, or PS_EINVAL with which part is wrong in err. */
static int s_split(const char *spec, net_spec_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t n = strcspn(spec, ",");
    out->rate_len = n;
    if (s_quantity(spec, n, s_rate_units, s_rate_scales, &out->rate) != 0 || out->rate < 1e3) {
        snprintf(err, errlen,
                 "--net %s: bad RATE '%.*s': " NET_FORM ", RATE as 100mbit, 1gbit, 10gbit "
                 "(bit, kbit, mbit, gbit; at least 1kbit)",
                 spec, (int)n, spec);
        return PS_EINVAL;
    }
    long *const values[] = {&out->mtu, &out->queue};
    int got_delay = 0;
    for (const char *p = spec + n; *p == ',';) {
        const char *part = p + 1;
        const size_t len = strcspn(part, ",");
        p = part + len;
        size_t o = 0;
        while (o < 2 && strncmp(part, s_options[o].name, strlen(s_options[o].name))) {
            o++;
        }
        if (o < 2) {
            if (s_option(spec, &s_options[o], part, len, values[o], err, errlen) != 0) {
                return PS_EINVAL;
            }
        } else if (got_delay++ || len >= sizeof out->delay_text ||
                   s_quantity(part, len, s_delay_units, s_delay_scales, &out->delay) != 0 ||
                   out->delay > NET_DELAY_MAX) {
            snprintf(err, errlen,
                     "--net %s: bad DELAY '%.*s': " NET_FORM ", DELAY one way as 200us, "
                     "0.2ms, 20ms (us, ms, s; more than 0, at most 1s)",
                     spec, (int)len, part);
            return PS_EINVAL;
        } else {
            snprintf(out->delay_text, sizeof out->delay_text, "%.*s", (int)len, part);
        }
    }
    out->mtu = out->mtu ? out->mtu : NET_MTU;
    return 0;
}

int ps_netsim_parse(const char *spec, char *err, size_t errlen)
{
    net_spec_t parsed;
    return s_split(spec, &parsed, err, errlen);
}

/* Runs a set-up command, its output appended to the log. Returns 0, or
 * PS_EIO with its last output line (or how it ended) in why. */
static int s_cmd(ps_netsim_t *net, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int s_cmd(ps_netsim_t *net, char *why, size_t whylen, const char *fmt, ...)
{
    char line[1024], *argv[24];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    int argc = 0;
    for (char *p = strtok(line, " "); p && argc < 23; p = strtok(NULL, " ")) {
        argv[argc++] = p;
    }
    argv[argc] = NULL;
    FILE *f = fopen(net->log_path, "a");
    long at = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        at = ftell(f);
        fprintf(f, "+ %s", argv[0]);
        for (int i = 1; i < argc; i++) {
            fprintf(f, " %s", argv[i]);
        }
        fputc('\n', f);
        at = ftell(f);
        fclose(f);
    }
    char err[128];
    ps_proc_spec_t spec = {.argv = argv,
                           .log_path = net->log_path,
                           .prog = "shardps-bench",
                           .flags = PS_PROC_NO_STDIN};
    int rc = ps_proc_run(&spec, err, sizeof err);
    if (rc == 0) {
        return 0;
    }
    /* why: the command and the first line it printed */
    char *out = NULL, first[160] = "";
    if (ps_bench_read_file(net->log_path, &out) == 0 && (long)strlen(out) > at) {
        snprintf(first, sizeof first, "%.*s", (int)strcspn(out + at, "\n"), out + at);
    }
    free(out);
    const char *prog = strrchr(argv[0], '/');
    snprintf(why, whylen, "%s: %s", prog ? prog + 1 : argv[0],
             first[0] ? first
             : rc < 0 ? err
                      : "failed");
    return PS_EIO;
}

/* tc shaping of one link end: tbf at the rate (dilated: RATE / dilate),
 * its queue net->queue bytes or NET_QUEUE_MS of the job's clock. Returns 0,
 * or PS_EIO with why. */
static int s_shape(ps_netsim_t *net, const char *ns, const char *dev, char *why,
                   size_t whylen)
{
    /* The bucket holds 1 ms at the rate, and at least one packet at the MTU
     * (64 KiB); what the queue cannot hold is dropped. */
    const double bits = net->rate_bits / net->dilate;
    long burst = (long)(bits / 8 / 1000);
    burst = burst < 65536 ? 65536 : burst;
    char rate[32], queue[48];
    snprintf(rate, sizeof rate, "%.0fbit", bits);
    if (net->queue) {
        snprintf(queue, sizeof queue, "limit %ld", net->queue);
    } else {
        snprintf(queue, sizeof queue, "latency %.0fms", NET_QUEUE_MS * net->dilate);
    }
    return s_cmd(net, why, whylen,
                 "%s -n %s qdisc add dev %s root handle 1: tbf rate %s burst %ld %s", net->tc,
                 ns, dev, net->dilate > 1 ? rate : net->rate, burst, queue);
}

/* The delay, where the hub routes between the links: every packet that comes
 * in from a role is routed into the TUN device "line" (policy routing: what
 * did not come out of it goes into it), the delay line hands it back `delay`
 * later, and the hub routes it on to its role's link. Each packet passes the
 * hub once, so two roles are `delay` apart each way. */
static int s_add_delay(ps_netsim_t *net, const char *hub, double delay, char *why,
                       size_t whylen)
{
    char path[128];
    snprintf(path, sizeof path, "/run/netns/%s", hub);
    int rc = ps_delay_line_new(path, "line", delay, &net->line, why, whylen);
    FILE *f = rc == 0 ? fopen(net->log_path, "a") : NULL;
    if (f) { /* made here, not by a command: said in the log all the same */
        fprintf(f, "+ (delay line) TUN device line in %s, each packet held %.0f us\n", hub,
                delay * 1e6);
        fclose(f);
    }
    rc = rc ? rc
            : s_cmd(net, why, whylen, "%s -n %s link set line mtu %d txqueuelen %d up", net->ip,
                    hub, net->mtu, PS_DELAY_LINE_SLOTS);
    rc = rc ? rc
            : s_cmd(net, why, whylen, "%s -n %s route add %s dev line table 100", net->ip,
                    hub, NET_ROLES_NET);
    rc = rc ? rc
            : s_cmd(net, why, whylen, "%s -n %s rule add pref 100 iif line lookup main",
                    net->ip, hub);
    rc =
        rc ? rc
           : s_cmd(net, why, whylen, "%s -n %s rule add pref 101 lookup 100", net->ip, hub);
    return rc;
}

/* Names and addresses of every role, from the prefix and the counts. */
static void s_name_roles(ps_netsim_t *net)
{
    for (int i = 0; i < net->nroles; i++) {
        if (i == 0) {
            snprintf(net->name[i], sizeof net->name[i], "c");
        } else if (i <= net->servers) {
            snprintf(net->name[i], sizeof net->name[i], "s%d", i - 1);
        } else {
            snprintf(net->name[i], sizeof net->name[i], "w%d", i - 1 - net->servers);
        }
        snprintf(net->ns[i], sizeof net->ns[i], "%s%s", net->prefix, net->name[i]);
        snprintf(net->addr[i], sizeof net->addr[i], "10.99.%d.%d", (i + 1) / 250,
                 (i + 1) % 250 + 1);
    }
    snprintf(net->hub, sizeof net->hub, "%shub", net->prefix);
}

/* The hub: it routes (no bridge: the delay line needs each packet at the IP
 * layer), with no reverse-path filter, as a packet from a role comes back to
 * it from the line, not from the role's link. */
static int s_make_hub(ps_netsim_t *net, double delay, char *e, size_t ec)
{
    int rc = s_cmd(net, e, ec, "%s netns add %s", net->ip, net->hub);
    net->made = rc == 0;
    rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s link set lo up", net->ip, net->hub);
    rc = rc ? rc
            : s_cmd(net, e, ec,
                    "%s netns exec %s %s -qw net.ipv4.ip_forward=1 "
                    "net.ipv4.conf.all.rp_filter=0 "
                    "net.ipv4.conf.default.rp_filter=0",
                    net->ip, net->hub, net->sysctl);
    if (rc == 0 && delay > 0) {
        rc = s_add_delay(net, net->hub, delay, e, ec);
    }
    return rc;
}

/* Role i's namespace and its link to the hub, shaped when the network is. */
static int s_make_role(ps_netsim_t *net, int i, char *e, size_t ec)
{
    const char *ns = net->ns[i], *hub = net->hub;
    char vdev[24], gso[32] = "";
    snprintf(vdev, sizeof vdev, "v%s", net->name[i]);
    if (net->mtu != NET_MTU) { /* TCP's segments no larger either, at every link end */
        snprintf(gso, sizeof gso, " gso_max_size %d", net->mtu);
    }
    int rc = s_cmd(net, e, ec, "%s netns add %s", net->ip, ns);
    net->made += rc == 0;
    rc = rc ? rc
            : s_cmd(net, e, ec, "%s -n %s link add %s type veth peer name eth0 netns %s",
                    net->ip, hub, vdev, ns);
    /* a link of its own: the role and the hub each end's only neighbour */
    rc = rc ? rc
            : s_cmd(net, e, ec, "%s -n %s addr add %s peer %s dev %s", net->ip, hub,
                    NET_HUB_ADDR, net->addr[i], vdev);
    rc = rc ? rc
            : s_cmd(net, e, ec, "%s -n %s link set %s mtu %d%s up", net->ip, hub, vdev,
                    net->mtu, gso);
    rc = rc ? rc
            : s_cmd(net, e, ec, "%s -n %s addr add %s peer %s dev eth0", net->ip, ns,
                    net->addr[i], NET_HUB_ADDR);
    rc = rc ? rc
            : s_cmd(net, e, ec, "%s -n %s link set eth0 mtu %d%s up", net->ip, ns, net->mtu,
                    gso);
    rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s link set lo up", net->ip, ns);
    rc = rc ? rc
            : s_cmd(net, e, ec, "%s -n %s route add %s via %s", net->ip, ns, NET_ROLES_NET,
                    NET_HUB_ADDR);
    if (net->rate[0]) {
        rc = rc ? rc : s_shape(net, ns, "eth0", e, ec);
        rc = rc ? rc : s_shape(net, hub, vdev, e, ec);
    }
    return rc;
}

/* The programs the network is made with; tc only when it is shaped. */
static int s_find_tools(ps_netsim_t *net, char *why, size_t whylen)
{
    if (ps_proc_find_exe("ip", NULL, net->ip, sizeof net->ip) != 0 ||
        (net->rate[0] && ps_proc_find_exe("tc", NULL, net->tc, sizeof net->tc) != 0) ||
        ps_proc_find_exe("sysctl", NULL, net->sysctl, sizeof net->sysctl) != 0) {
        snprintf(why, whylen,
                 "cannot create network namespaces: no ip or tc (iproute2), or no sysctl");
        return PS_ENOTSUP;
    }
    return 0;
}

/* What net simulates, in words (ps_netsim_note), from its spec sp. */
static void s_write_note(ps_netsim_t *net, const char *spec, const net_spec_t *sp)
{
    const double dilate = net->dilate;
    char packets[128] = "";
    if (net->mtu != NET_MTU) {
        snprintf(packets, sizeof packets, ", packets of at most %d bytes", net->mtu);
    }
    if (net->queue) {
        const size_t n = strlen(packets);
        snprintf(packets + n, sizeof packets - n, ", queues of %ld bytes", net->queue);
    }
    if (!spec) {
        snprintf(net->note, sizeof net->note, "links not shaped, no delay");
    } else if (sp->delay > 0) {
        snprintf(net->note, sizeof net->note,
                 "%s per link, each direction (tc tbf), and %s one way between roles (our "
                 "delay line: a TUN device in the hub)%s",
                 net->rate, sp->delay_text, packets);
    } else {
        snprintf(net->note, sizeof net->note,
                 "%s per link, each direction (tc tbf), no delay%s", net->rate, packets);
    }
    if (dilate > 1) {
        const size_t n = strlen(net->note);
        snprintf(net->note + n, sizeof net->note - n,
                 "; dilated %gx (links shaped to the rate / %g, delays and queues %g times "
                 "longer, the roles' clocks %g times slower and their compute padded to "
                 "match: times and rates in undilated units; the cost of messages is "
                 "not dilated)",
                 dilate, dilate, dilate, dilate);
    }
}

int ps_netsim_new(const char *spec, double dilate, int servers, int workers,
                  const char *log_path, ps_netsim_t **out, char *why, size_t whylen)
{
    *out = NULL;
    net_spec_t sp = {.mtu = NET_MTU};
    char err[256] = "";
    if (!(dilate >= 1 && dilate <= PS_NETSIM_MAX_DILATE)) {
        snprintf(why, whylen, "bad network: --dilate %g: expected 1 to %d", dilate,
                 PS_NETSIM_MAX_DILATE);
        return PS_EINVAL;
    }
    if ((spec && s_split(spec, &sp, err, sizeof err) != 0) ||
        servers < 0 || workers < 1 || 1 + servers + workers > NET_MAX_ROLES) {
        snprintf(why, whylen, "bad network: --net %s, %d servers, %d workers%s%s",
                 spec ? spec : "(none)", servers, workers, err[0] ? ": " : "", err);
        return PS_EINVAL;
    }
    if (geteuid() != 0) {
        snprintf(why, whylen, "cannot create network namespaces: not root");
        return PS_ENOTSUP;
    }
    ps_netsim_t *net = calloc(1, sizeof *net);
    if (!net) {
        snprintf(why, whylen, "out of memory");
        return PS_ENOMEM;
    }
    snprintf(net->rate, sizeof net->rate, "%.*s", (int)sp.rate_len, spec ? spec : "");
    net->rate_bits = sp.rate;
    net->dilate = dilate;
    net->mtu = (int)sp.mtu;
    net->queue = sp.queue;
    if (s_find_tools(net, why, whylen) != 0) {
        free(net);
        return PS_ENOTSUP;
    }
    snprintf(net->prefix, sizeof net->prefix, "spsb%d", (int)getpid());
    snprintf(net->log_path, sizeof net->log_path, "%s", log_path);
    net->servers = servers;
    net->workers = workers;
    net->nroles = 1 + servers + workers;
    s_name_roles(net);
    int rc = s_make_hub(net, sp.delay * dilate, err, sizeof err);
    for (int i = 0; rc == 0 && i < net->nroles; i++) {
        rc = s_make_role(net, i, err, sizeof err);
    }
    if (rc != 0) {
        snprintf(why, whylen, "cannot build the simulated network: %s", err);
        ps_netsim_destroy(&net);
        return PS_ENOTSUP;
    }
    s_write_note(net, spec, &sp);
    *out = net;
    return 0;
}

const char *ps_netsim_note(const ps_netsim_t *net)
{
    return net->note;
}

const char *ps_netsim_prefix(const ps_netsim_t *net)
{
    return net->prefix;
}

int ps_netsim_servers(const ps_netsim_t *net)
{
    return net->servers;
}

int ps_netsim_workers(const ps_netsim_t *net)
{
    return net->workers;
}

const char *ps_netsim_name(const ps_netsim_t *net, int i)
{
    return i >= 0 && i < net->nroles ? net->name[i] : NULL;
}

const char *ps_netsim_ns(const ps_netsim_t *net, int i)
{
    return i >= 0 && i < net->nroles ? net->ns[i] : NULL;
}

const char *ps_netsim_addr(const ps_netsim_t *net, int i)
{
    return i >= 0 && i < net->nroles ? net->addr[i] : NULL;
}

const char *ps_netsim_ip(const ps_netsim_t *net)
{
    return net->ip;
}

int ps_netsim_destroy(ps_netsim_t **netp)
{
    ps_netsim_t *net = netp ? *netp : NULL;
    if (!net) {
        return 0;
    }
    char why[256];
    ps_delay_line_destroy(&net->line);
    for (int i = net->made - 2; i >= 0; i--) {
        s_cmd(net, why, sizeof why, "%s netns del %s", net->ip, net->ns[i]);
    }
    if (net->made > 0) {
        s_cmd(net, why, sizeof why, "%s netns del %s", net->ip, net->hub);
    }
    int left = 0;
    for (int i = -1; i < net->nroles; i++) {
        char path[128];
        snprintf(path, sizeof path, "/run/netns/%s", i < 0 ? net->hub : net->ns[i]);
        left += access(path, F_OK) == 0;
    }
    free(net);
    *netp = NULL;
    return left;
}

double ps_netsim_rate(const ps_netsim_t *net)
{
    return net->rate[0] ? net->rate_bits : 0;
}

double ps_netsim_dilation(const ps_netsim_t *net)
{
    return net->dilate;
}

/* The value under column `name` of the "key" header and value lines of a
 * /proc/net/snmp-style text; 0 when absent. */
static uint64_t s_proc_field(const char *text, const char *key, const char *name)
{
    const char *head = strstr(text, key);
    const char *vals = head ? strstr(head + 1, key) : NULL;
    if (!vals) {
        return 0;
    }
    const size_t klen = strlen(key), nlen = strlen(name);
    int col = -1, k = 0;
    for (const char *p = head + klen; *p && *p != '\n'; k++) {
        while (*p == ' ') {
            p++;
        }
        if (!strncmp(p, name, nlen) && (p[nlen] == ' ' || p[nlen] == '\n')) {
            col = k;
        }
        p += strcspn(p, " \n");
    }
    const char *p = vals + klen;
    for (k = 0; col >= 0 && k < col; k++) {
        p += strspn(p, " ");
        p += strcspn(p, " \n");
    }
    return col >= 0 ? strtoull(p, NULL, 10) : 0;
}

/* Fills c from this thread's network namespace. */
static int s_read_counters(ps_netsim_counters_t *c)
{
    char *dev = NULL, *snmp = NULL, *netstat = NULL;
    int rc = ps_bench_read_file("/proc/thread-self/net/dev", &dev);
    rc = rc ? rc : ps_bench_read_file("/proc/thread-self/net/snmp", &snmp);
    rc = rc ? rc : ps_bench_read_file("/proc/thread-self/net/netstat", &netstat);
    const char *eth = rc ? NULL : strstr(dev, "eth0:");
    unsigned long long f[9];
    if (eth && sscanf(eth + 5, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1],
                      &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8]) == 9) {
        c->rx_bytes = f[0];
        c->tx_bytes = f[8];
        c->retrans = s_proc_field(snmp, "Tcp:", "RetransSegs");
        c->timeouts = s_proc_field(netstat, "TcpExt:", "TCPTimeouts");
    } else {
        rc = PS_EIO;
    }
    free(dev);
    free(snmp);
    free(netstat);
    return rc;
}

/* Runs read(out) in a child that enters namespace ns (we never leave ours)
 * and copies its size bytes of *out back. Returns 0 or PS_EIO. */
static int s_read_in_ns(const char *ns, int (*read_fn)(void *out), void *out, size_t size)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "/var/run/netns/%s", ns);
    int p[2];
    if (pipe(p) != 0) {
        return PS_EIO;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        const int ok = fd >= 0 && setns(fd, CLONE_NEWNET) == 0 && read_fn(out) == 0;
        _exit(ok && write(p[1], out, size) == (ssize_t)size ? 0 : 1);
    }
    close(p[1]);
    int rc = pid > 0 && read(p[0], out, size) == (ssize_t)size ? 0 : PS_EIO;
    close(p[0]);
    int st;
    if (pid > 0 && (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
        rc = PS_EIO;
    }
    return rc;
}

static int s_read_counters_fn(void *out)
{
    return s_read_counters(out);
}

int ps_netsim_counters(const ps_netsim_t *net, int i, ps_netsim_counters_t *c)
{
    if (i < 0 || i >= net->nroles || i + 2 > net->made) {
        return PS_ENOENT;
    }
    memset(c, 0, sizeof *c);
    return s_read_in_ns(net->ns[i], s_read_counters_fn, c, sizeof *c);
}

/* *out (a uint64_t): the packets this namespace's device "line" dropped on
 * the way out (into the delay line: its queue was full). */
static int s_read_line_drops(void *out)
{
    char *dev = NULL;
    int rc = ps_bench_read_file("/proc/thread-self/net/dev", &dev);
    const char *row = rc ? NULL : strstr(dev, "line:");
    unsigned long long f[12];
    if (row && sscanf(row + 5, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                      &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9],
                      &f[10], &f[11]) == 12) {
        *(uint64_t *)out = f[11]; /* TX drop */
    } else {
        rc = PS_EIO;
    }
    free(dev);
    return rc;
}

int ps_netsim_line_stats(const ps_netsim_t *net, ps_delay_line_stats_t *stats)
{
    if (!net->line) {
        return PS_ENOENT;
    }
    ps_delay_line_stats(net->line, stats);
    uint64_t device = 0;
    if (s_read_in_ns(net->hub, s_read_line_drops, &device, sizeof device) == 0) {
        stats->drops += device;
    }
    return 0;
}
