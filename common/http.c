/* common/http.c - GET /metrics over libmicrohttpd's internal thread. */
#include "common/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>

#include "common/error.h"

/* Most connections served at once. */
#define PS_HTTP_MAX_CONNECTIONS 2048u
/* Seconds a connection may stay silent before it is closed. */
#define PS_HTTP_IDLE_SECONDS 5u
/* Bytes of request buffer per connection: a scrape's request is a few lines. */
#define PS_HTTP_CONN_MEMORY 8192u

struct ps_http {
    struct MHD_Daemon *daemon;
    ps_http_render_fn render;
    void *arg;
    atomic_ulong scrapes; /* counted once the answer is sent, not when it is made */
};

/* A request's context: set for a scrape, so its completion is counted. */
static char s_scrape_marker;

/* libmicrohttpd's end of a request: a scrape whose answer went out counts
 * (a caller waiting for one may then stop the server without cutting it). */
static void s_completed(void *cls, struct MHD_Connection *c, void **state,
                        enum MHD_RequestTerminationCode toe)
{
    (void)c;
    ps_http_t *h = cls;
    if (*state == &s_scrape_marker && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        atomic_fetch_add(&h->scrapes, 1);
    }
    *state = NULL;
}

static enum MHD_Result s_answer(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version,
                                const char *upload_data, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload_data;
    (void)upload_size;
    ps_http_t *h = cls;
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    int found = get && !strcmp(url, "/metrics");
    ps_text_t t = {0};
    if (found) {
        h->render(h->arg, &t);
        *state = &s_scrape_marker;
    } else {
        ps_text_printf(&t, "%s\n", get ? "not found: try /metrics" : "only GET is served");
    }
    if (t.oom) {
        free(t.p);
        return MHD_NO; /* the connection is closed: the scraper sees a failure */
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        t.len, t.p ? t.p : "", t.p ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(t.p);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type",
                            found ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain");
    enum MHD_Result rc = MHD_queue_response(
        c, found ? MHD_HTTP_OK : get ? MHD_HTTP_NOT_FOUND : MHD_HTTP_METHOD_NOT_ALLOWED, r);
    MHD_destroy_response(r);
    return rc;
}

ps_flag_t ps_http_bind_flag(const char **dst)
{
    return (ps_flag_t){"metrics-bind", PS_FLAG_STR, dst, "HOST:PORT",
                       "serve Prometheus metrics at http://HOST:PORT/metrics (no :PORT = "
                       PS_HTTP_DEFAULT_PORT_STR ", port 0 = any free one)"};
}

/* "HOST:PORT" or "HOST" (the default port) into an IPv4 address. */
static int s_parse(const char *bind, struct sockaddr_in *sa)
{
    const char *colon = strrchr(bind, ':');
    char host[64], *end;
    size_t hostlen = colon ? (size_t)(colon - bind) : strlen(bind);
    if (hostlen == 0 || hostlen >= sizeof host) {
        return PS_EINVAL;
    }
    snprintf(host, sizeof host, "%.*s", (int)hostlen, bind);
    long port = colon ? strtol(colon + 1, &end, 10) : PS_HTTP_DEFAULT_PORT;
    if (colon && (!colon[1] || *end || port < 0 || port > 65535)) {
        return PS_EINVAL;
    }
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost")) {
        snprintf(host, sizeof host, "127.0.0.1");
    }
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : PS_EINVAL;
}

int ps_http_check_bind(const char *bind, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    if (bind && s_parse(bind, &sa) != 0) {
        snprintf(err, errlen, "--metrics-bind %s: expected HOST:PORT or HOST with an IPv4 HOST",
                 bind);
        return PS_EINVAL;
    }
    return 0;
}

/* Connections served at once: PS_HTTP_MAX_CONNECTIONS, or a quarter of the
 * descriptors this process may open (raised to its hard limit first, as
 * a server does), whichever is smaller; ZeroMQ needs the rest. */
static unsigned s_connection_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return 64;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            getrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    const rlim_t quarter = rl.rlim_cur / 4;
    return quarter < 64 ? 64 : quarter > PS_HTTP_MAX_CONNECTIONS ? PS_HTTP_MAX_CONNECTIONS
                                                                 : (unsigned)quarter;
}

int ps_http_new(const char *bind, ps_http_render_fn render, void *arg, ps_http_t **out,
                char *bound, size_t boundlen, char *err, size_t errlen)
{
    *out = NULL;
    struct sockaddr_in sa;
    if (ps_http_check_bind(bind, err, errlen) != 0 || s_parse(bind, &sa) != 0) {
        return PS_EINVAL;
    }
    ps_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    h->render = render;
    h->arg = arg;
    atomic_init(&h->scrapes, 0);
    /* Connections that open and then say nothing (half-open, slow) must
     * not crowd out a scrape: many slots (epoll, no FD_SETSIZE bound), each
     * small, each closed after a short silence. */
    const unsigned limit = s_connection_limit();
    h->daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, s_answer, h,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                                 MHD_OPTION_CONNECTION_LIMIT, limit,
                                 MHD_OPTION_CONNECTION_TIMEOUT, PS_HTTP_IDLE_SECONDS,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PS_HTTP_CONN_MEMORY,
                                 MHD_OPTION_NOTIFY_COMPLETED, s_completed, h, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errlen, "--metrics-bind %s: cannot listen there (in use?)", bind);
        free(h);
        return PS_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host);
    snprintf(bound, boundlen, "%s:%u", host, info ? info->port : ntohs(sa.sin_port));
    *out = h;
    return 0;
}

unsigned long ps_http_scrapes(const ps_http_t *h)
{
    return h ? atomic_load(&((ps_http_t *)h)->scrapes) : 0;
}

void ps_http_destroy(ps_http_t **hp)
{
    ps_http_t *h = *hp;
    if (h) {
        MHD_stop_daemon(h->daemon);
        free(h);
        *hp = NULL;
    }
}
