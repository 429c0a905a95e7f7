/*
 * proto/addr.c - the address a node announces (proto/addr.h): pure text
 * rules, and one routing-table question asked through a connected UDP
 * socket.
 */
#include "proto/addr.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"

int ps_addr_is_loopback(const char *host)
{
    if (!strncmp(host, "::ffff:", 7)) {
        host += 7;
    }
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        return (ntohl(a4.s_addr) >> 24) == 127;
    }
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        return IN6_IS_ADDR_LOOPBACK(&a6);
    }
    return !strcmp(host, "localhost");
}

int ps_addr_is_wildcard(const char *host)
{
    return !*host || !strcmp(host, "*") || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
}

int ps_addr_split(const char *ep, char *host, size_t hcap, char *port, size_t pcap)
{
    if (strncmp(ep, "tcp://", 6)) {
        return PS_EINVAL;
    }
    const char *h = ep + 6, *colon = strrchr(h, ':');
    if (!colon || colon == h || !colon[1]) {
        return PS_EINVAL;
    }
    size_t n = (size_t)(colon - h);
    if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n >= hcap || strlen(colon + 1) >= pcap) {
        return PS_EINVAL;
    }
    memcpy(host, h, n);
    host[n] = '\0';
    snprintf(port, pcap, "%s", colon + 1);
    return 0;
}

/* "tcp://HOST:PORT", an IPv6 host in brackets. Returns 0 or PS_EINVAL. */
static int s_join(char *out, size_t cap, const char *host, const char *port)
{
    const int v6 = strchr(host, ':') != NULL;
    int n = snprintf(out, cap, "tcp://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    return n > 0 && (size_t)n < cap ? 0 : PS_EINVAL;
}

int ps_addr_route_from(const char *host, char *out, size_t cap)
{
    char h[256], port[16];
    if (ps_addr_split(host, h, sizeof h, port, sizeof port) != 0) {
        snprintf(h, sizeof h, "%s", host);
    }
    const struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(h, "9", &hints, &ai) != 0 || !ai) {
        return PS_EINVAL;
    }
    int rc = PS_EIO;
    for (struct addrinfo *a = ai; a && rc != 0; a = a->ai_next) {
        struct sockaddr_storage local;
        socklen_t len = sizeof local;
        int fd = socket(a->ai_family, SOCK_DGRAM, 0);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&local, &len) == 0 &&
            getnameinfo((struct sockaddr *)&local, len, out, (socklen_t)cap, NULL, 0,
                        NI_NUMERICHOST) == 0) {
            rc = 0;
        }
        if (fd >= 0) {
            close(fd);
        }
    }
    freeaddrinfo(ai);
    return rc;
}

int ps_addr_is_local(const char *ep)
{
    char host[256], port[16], from[PS_ADDR_MAX];
    unsigned char bin[sizeof(struct in6_addr)];
    if (ps_addr_split(ep, host, sizeof host, port, sizeof port) != 0) {
        return 0;
    }
    if (ps_addr_is_loopback(host)) {
        return 1;
    }
    /* numeric only: no name lookup while a worker connects */
    const int numeric = inet_pton(AF_INET, host, bin) == 1 || inet_pton(AF_INET6, host, bin) == 1;
    return numeric && ps_addr_route_from(host, from, sizeof from) == 0 && strcmp(from, host) == 0;
}

int ps_addr_announce(const char *bound, const char *advertise, const char *local, char *out,
                     size_t cap)
{
    char host[256], port[16];
    if (ps_addr_split(bound, host, sizeof host, port, sizeof port) != 0) {
        return PS_EINVAL;
    }
    if (advertise && *advertise) {
        if (!strncmp(advertise, "tcp://", 6)) {
            int n = snprintf(out, cap, "%s", advertise);
            return n > 0 && (size_t)n < cap ? 0 : PS_EINVAL;
        }
        return s_join(out, cap, advertise, port);
    }
    if (ps_addr_is_wildcard(host) && local && *local) {
        return s_join(out, cap, local, port);
    }
    int n = snprintf(out, cap, "%s", bound);
    return n > 0 && (size_t)n < cap ? 0 : PS_EINVAL;
}

int ps_addr_announce_route(const char *bound, const char *advertise, const char *scheduler,
                           char *out, size_t cap, char *err, size_t errlen)
{
    char local[PS_ADDR_MAX] = "";
    if (!advertise && ps_addr_route_from(scheduler, local, sizeof local) != 0) {
        local[0] = '\0';
    }
    if (ps_addr_announce(bound, advertise, local, out, cap) != 0) {
        snprintf(err, errlen, "--advertise %s with %s: not an endpoint that fits",
                 advertise ? advertise : "(none)", bound);
        return PS_EINVAL;
    }
    return 0;
}

int ps_addr_fix(char *ep, size_t cap, const char *peer, const char *outward)
{
    char host[256], port[16], fixed[256];
    if (ps_addr_split(ep, host, sizeof host, port, sizeof port) != 0 ||
        !(ps_addr_is_wildcard(host) || ps_addr_is_loopback(host))) {
        return 0;
    }
    const char *to = peer[0] && !ps_addr_is_loopback(peer) ? peer
                     : outward[0]                          ? outward
                     : ps_addr_is_wildcard(host)           ? peer
                                                           : "";
    if (!to[0] || s_join(fixed, sizeof fixed, to, port) != 0 || strlen(fixed) >= cap ||
        !strcmp(fixed, ep)) {
        return 0;
    }
    memcpy(ep, fixed, strlen(fixed) + 1);
    return 1;
}

int ps_addr_check_advertise(const char *v, int endpoint_ok, char *err, size_t errlen)
{
    char host[256], port[16];
    if (!v) {
        return 0;
    }
    if (!strncmp(v, "tcp://", 6)) {
        char *end;
        long n = 0;
        if (endpoint_ok && ps_addr_split(v, host, sizeof host, port, sizeof port) == 0) {
            n = strtol(port, &end, 10);
            n = *end ? 0 : n;
        }
        if (n >= 1 && n <= 65535 && host[0] && !strpbrk(host, " *")) {
            return 0;
        }
    } else if (v[0] && strlen(v) < sizeof host && !strpbrk(v, " /[]*") &&
               !ps_addr_is_wildcard(v)) {
        return 0;
    }
    snprintf(err, errlen, "--advertise %s: expected the HOST its peers reach it at%s", v,
             endpoint_ok ? " (or tcp://HOST:PORT)" : "");
    return PS_EINVAL;
}
