/*
 * proto/addr.h - which address a node announces to its peers.
 *
 * A node bound to every interface (tcp://0.0.0.0:*) must announce one
 * address its peers can reach. It announces the local end of its route to
 * the scheduler (the address it reaches the scheduler from), or --advertise
 * HOST. The scheduler then makes sure that no loopback address reaches a
 * peer on another host: a node on the scheduler's own host that reached it
 * over loopback (a host name that /etc/hosts maps to 127.0.1.1, as Debian's
 * does) is announced at the scheduler's address toward the other hosts.
 *
 * It does not check reachability (the preflight does) and knows no
 * transport but tcp://.
 *
 * Thread safety: plain functions over their arguments.
 */
#ifndef PS_PROTO_ADDR_H
#define PS_PROTO_ADDR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest numeric address text (IPv6 with a scope), with its NUL. */
#define PS_ADDR_MAX 64

/* 1 when host is a loopback address or name: 127.0.0.0/8, ::1, an IPv4-mapped
 * 127.x, "localhost". */
int ps_addr_is_loopback(const char *host);

/* 1 when host stands for every interface: "0.0.0.0", "*", "::", "". */
int ps_addr_is_wildcard(const char *host);

/*
 * Splits "tcp://HOST:PORT" (HOST may be "[v6]") into host (brackets removed)
 * and port (the text after the last ':'). Returns 0, or PS_EINVAL when ep is
 * no such endpoint or a part does not fit.
 */
int ps_addr_split(const char *ep, char *host, size_t hcap, char *port, size_t pcap);

/*
 * The address this host sends from on its route to host (a name or numeric
 * address; the endpoint "tcp://HOST:PORT" is accepted too), as numeric text
 * into out: a UDP socket connected there, whose local end getsockname()
 * gives; no packet is sent. Returns 0, or PS_EINVAL (no such host) / PS_EIO
 * (no route).
 */
int ps_addr_route_from(const char *host, char *out, size_t cap);

/* 1 when the endpoint "tcp://HOST:PORT" is on this host: HOST is loopback,
 * or a numeric address that this host's route to it starts from (one of its
 * own). 0 otherwise (a name is not looked up), and for what is no endpoint. */
int ps_addr_is_local(const char *ep);

/*
 * The endpoint a node announces for its bound endpoint bound: advertise as
 * given when it is an endpoint; "tcp://ADVERTISE:PORT" (PORT bound's) when it
 * is a bare host; else, when bound's host is a wildcard and local (the local
 * end of its route to the scheduler) is not empty, "tcp://LOCAL:PORT"; else
 * bound. advertise and local may be NULL. Returns 0, or PS_EINVAL when bound
 * is no tcp endpoint or the result does not fit in cap.
 */
int ps_addr_announce(const char *bound, const char *advertise, const char *local, char *out,
                     size_t cap);

/*
 * What a node bound at bound announces: ps_addr_announce() with local the
 * local end of its route to the scheduler (when advertise is NULL and the
 * route is known). Returns 0, or PS_EINVAL with a one-line reason in err.
 */
int ps_addr_announce_route(const char *bound, const char *advertise, const char *scheduler,
                           char *out, size_t cap, char *err, size_t errlen);

/*
 * The scheduler's rewrite of an announced endpoint ep (in place): a wildcard
 * or loopback host becomes the address the scheduler sees the node at, peer,
 * when that is not loopback (the node is on another host); else, when the
 * job has nodes on other hosts, outward (the scheduler's own address toward
 * them: the node is on this host); else a wildcard host becomes peer (one
 * host: loopback is right). peer and outward may be "" (unknown). Returns 1
 * when ep changed, 0 when not.
 */
int ps_addr_fix(char *ep, size_t cap, const char *peer, const char *outward);

/*
 * --advertise's value: a host (name or address; an IPv6 address without
 * brackets), or, where endpoint_ok, a whole "tcp://HOST:PORT". Returns 0
 * (also for NULL), or PS_EINVAL with "--advertise V: ..." in err.
 */
int ps_addr_check_advertise(const char *v, int endpoint_ok, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
