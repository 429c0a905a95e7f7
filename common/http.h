/*
 * common/http.h - the metrics endpoint: a small HTTP server (Debian's
 * libmicrohttpd, in its own thread) answering GET /metrics with a role's
 * Prometheus text.
 *
 * The text is made by the caller's render function in the server's thread,
 * once per request; it must only read what is safe to read from another
 * thread (common/metrics.h's atomics, or state behind the caller's lock).
 */
#ifndef PS_COMMON_HTTP_H
#define PS_COMMON_HTTP_H

#include <stddef.h>

#include "common/config.h"
#include "common/metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_http ps_http_t;

/* The metrics port when --metrics-bind gives a HOST alone: in Prometheus's
 * exporter range, clear of node_exporter's 9100 (on every host) and the
 * Prometheus server's own 909x. The Kubernetes recipe and the docs use it. */
#define PS_HTTP_DEFAULT_PORT 9470
#define PS_HTTP_DEFAULT_PORT_STR "9470"

/* The --metrics-bind HOST:PORT entry of a role's flag table; borrowed dst. */
ps_flag_t ps_http_bind_flag(const char **dst);

/* Appends the exposition of one scrape to out. Runs in the server's thread. */
typedef void (*ps_http_render_fn)(void *arg, ps_text_t *out);

/*
 * Serves GET /metrics on bind ("HOST:PORT", an IPv4 address or "localhost";
 * port 0 = any free one; "HOST" alone: PS_HTTP_DEFAULT_PORT). The bound "HOST:PORT" goes to bound. Returns 0 with
 * the server in *out (caller owns the result; destroy with ps_http_destroy()),
 * or PS_EINVAL / PS_EIO with a one-line reason in err.
 */
int ps_http_new(const char *bind, ps_http_render_fn render, void *arg, ps_http_t **out,
                char *bound, size_t boundlen, char *err, size_t errlen);

/* Checks a --metrics-bind value (NULL: none) without binding. Returns 0 or
 * PS_EINVAL with a one-line reason in err. */
int ps_http_check_bind(const char *bind, char *err, size_t errlen);

/* Scrapes of /metrics whose answer was sent in full so far. Thread-safe. */
unsigned long ps_http_scrapes(const ps_http_t *h);

/* Stops the server (waits for a request being answered) and frees it. NULL-safe. */
void ps_http_destroy(ps_http_t **h);

#ifdef __cplusplus
}
#endif
#endif
