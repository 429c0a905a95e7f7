/*
 * proto/msg.c - multipart messages and socket options over libzmq.
 * zmq_errno() is translated into PS_E* here and nowhere else.
 */
#include "proto/msg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"

/* Blocking sends give up after this long: a peer that stops reading must not
 * hang us; liveness is decided by heartbeats, not here. */
#define PS_SEND_TIMEOUT_MS 10000
#define PS_LINGER_MS 2000

static int s_zmq_err(void)
{
    switch (zmq_errno()) {
    case EAGAIN: return PS_ETIMEDOUT;
    case ETERM: return PS_ECLOSED;
    case EINTR: return PS_ETIMEDOUT;
    case EINVAL: return PS_EINVAL;
    default: return PS_EIO;
    }
}

void ps_msg_header(ps_header_t *h, ps_msg_type_t type, ps_role_t role, int sender)
{
    memset(h, 0, sizeof *h);
    h->protocol = PS_PROTOCOL_VERSION;
    h->type = type;
    h->role = role;
    h->sender = sender;
}

/* The one sender: route, header, then the frames copied (PS_SEND_COPY),
 * zero-copy with no release (the caller knows by a reply), or zero-copy with
 * release called once per frame (see ps_msg_send_zc). */
static int s_send(void *sock, const ps_route_t *route, ps_header_t h,
                  const ps_frame_t *frames, int nframes, int flags,
                  ps_msg_release_fn *release, void *hint)
{
    uint8_t buf[PS_HEADER_MAX];
    int i = 0, rc = 0;
    h.payload_len = 0;
    for (int k = 0; k < nframes; k++) {
        h.payload_len += frames[k].len;
    }
    if (h.payload_len && !h.dtype) {
        h.dtype = PS_DTYPE_F32;
    }
    int hlen = ps_codec_pack_header(&h, buf, sizeof buf);
    if (hlen < 0) {
        rc = hlen;
        goto unsent;
    }
    if (route && route->len) {
        if (zmq_send(sock, route->id, route->len, ZMQ_SNDMORE) < 0) {
            rc = s_zmq_err();
            goto unsent;
        }
    }
    /* After the first frame is accepted ZeroMQ accepts the rest atomically. */
    if (zmq_send(sock, buf, (size_t)hlen, nframes ? ZMQ_SNDMORE : 0) < 0) {
        rc = s_zmq_err();
        goto unsent;
    }
    for (; i < nframes; i++) {
        zmq_msg_t msg;
        int more = i + 1 < nframes ? ZMQ_SNDMORE : 0;
        if (flags & PS_SEND_COPY) {
            if (zmq_msg_init_size(&msg, frames[i].len) != 0) {
                rc = PS_ENOMEM;
                goto unsent;
            }
            if (frames[i].len) {
                memcpy(zmq_msg_data(&msg), frames[i].data, frames[i].len);
            }
        } else if (release) {
            /* ZeroMQ calls release when it is done with the data; if it cannot
             * even take the frame, it is ours to release. */
            if (zmq_msg_init_data(&msg, (void *)frames[i].data, frames[i].len, release,
                                  hint) != 0) {
                rc = PS_ENOMEM;
                goto unsent;
            }
        } else {
            /* No free function: the buffer is the caller's (see header). */
            zmq_msg_init_data(&msg, (void *)frames[i].data, frames[i].len, NULL, NULL);
        }
        if (zmq_msg_send(&msg, sock, more) < 0) {
            rc = s_zmq_err();
            zmq_msg_close(&msg); /* a failed send leaves the message ours to close */
            i++;                 /* ... and closing it released this frame */
            goto unsent;
        }
    }
    return 0;
unsent:
    for (; release && !(flags & PS_SEND_COPY) && i < nframes; i++) {
        release((void *)frames[i].data, hint);
    }
    return rc;
}

int ps_msg_send(void *sock, const ps_route_t *route, ps_header_t h, const ps_frame_t *frames,
                int nframes, int flags)
{
    return s_send(sock, route, h, frames, nframes, flags, NULL, NULL);
}

int ps_msg_send_zc(void *sock, const ps_route_t *route, ps_header_t h,
                   const ps_frame_t *frames, int nframes, ps_msg_release_fn *release,
                   void *hint)
{
    return s_send(sock, route, h, frames, nframes, 0, release, hint);
}

void ps_msg_close(ps_msg_t *m)
{
    for (int i = 0; i < m->nframes; i++) {
        zmq_msg_close(&m->frames[i]);
    }
    m->nframes = 0;
}

const void *ps_msg_frame(const ps_msg_t *m, int i, size_t *len)
{
    *len = zmq_msg_size((zmq_msg_t *)&m->frames[i]);
    return zmq_msg_data((zmq_msg_t *)&m->frames[i]);
}

/* Reads and discards the remaining parts of a multipart message. */
static void s_drain(void *sock, int more)
{
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, sock, 0) < 0) {
            zmq_msg_close(&part);
            return;
        }
        more = zmq_msg_more(&part);
        zmq_msg_close(&part);
    }
}

int ps_msg_recv(void *sock, int flags, ps_msg_t *m)
{
    memset(&m->route, 0, sizeof m->route);
    m->peer_addr[0] = '\0';
    memset(&m->hdr, 0, sizeof m->hdr);
    m->nframes = 0;
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, sock, 0) < 0) {
        zmq_msg_close(&part);
        return s_zmq_err();
    }
    int more = zmq_msg_more(&part);
    if (flags & PS_RECV_ROUTER) {
        size_t n = zmq_msg_size(&part);
        if (n > PS_ROUTE_MAX) {
            n = PS_ROUTE_MAX;
        }
        memcpy(m->route.id, zmq_msg_data(&part), n);
        m->route.len = n;
        zmq_msg_close(&part);
        if (!more) {
            snprintf(m->hdr.error, sizeof m->hdr.error, "empty message (no header frame)");
            return PS_EPROTO;
        }
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, sock, 0) < 0) {
            zmq_msg_close(&part);
            return s_zmq_err();
        }
        more = zmq_msg_more(&part);
    }
    if (flags & PS_RECV_PEER) {
        const char *addr = zmq_msg_gets(&part, "Peer-Address");
        snprintf(m->peer_addr, sizeof m->peer_addr, "%s", addr ? addr : "");
    }
    int rc = ps_codec_unpack_header(zmq_msg_data(&part), zmq_msg_size(&part), &m->hdr);
    zmq_msg_close(&part);
    if (rc != 0) {
        s_drain(sock, more);
        return rc;
    }
    uint64_t total = 0;
    while (more) {
        if (m->nframes == PS_MSG_MAX_FRAMES) {
            s_drain(sock, more);
            ps_msg_close(m);
            snprintf(m->hdr.error, sizeof m->hdr.error, "more than %d payload frames",
                     PS_MSG_MAX_FRAMES);
            return PS_EPROTO;
        }
        zmq_msg_t *f = &m->frames[m->nframes];
        zmq_msg_init(f);
        if (zmq_msg_recv(f, sock, 0) < 0) {
            zmq_msg_close(f);
            ps_msg_close(m);
            return s_zmq_err();
        }
        m->nframes++;
        total += zmq_msg_size(f);
        more = zmq_msg_more(f);
    }
    if (total != m->hdr.payload_len) {
        snprintf(m->hdr.error, sizeof m->hdr.error,
                 "payload is %llu bytes but the header says %llu", (unsigned long long)total,
                 (unsigned long long)m->hdr.payload_len);
        ps_msg_close(m);
        return PS_EPROTO;
    }
    return 0;
}

int ps_msg_send_ctrl(void *sock, const ps_route_t *route, ps_msg_type_t type, ps_role_t role,
                     int sender, const void *body, size_t len)
{
    ps_header_t h;
    ps_msg_header(&h, type, role, sender);
    ps_frame_t f = {body, len};
    return ps_msg_send(sock, route, h, &f, body ? 1 : 0, PS_SEND_COPY);
}

int ps_msg_reply_error(void *sock, const ps_msg_t *req, ps_role_t role, int sender,
                       int status, const char *fmt, ...)
{
    ps_header_t h;
    ps_msg_header(&h, PS_MSG_ERROR, role, sender);
    h.request_id = req->hdr.request_id;
    /* Echo the range only when it is well-formed: a reversed one (the reason
     * the request may have been refused) would make the reply undecodable. */
    if (req->hdr.begin <= req->hdr.end) {
        h.begin = req->hdr.begin;
        h.end = req->hdr.end;
    }
    h.step = req->hdr.step;
    h.status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h.error, sizeof h.error, fmt, ap);
    va_end(ap);
    return ps_msg_send(sock, &req->route, h, NULL, 0, 0);
}

void *ps_transport_open(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    if (!s) {
        return NULL;
    }
    int linger = PS_LINGER_MS, sndtimeo = PS_SEND_TIMEOUT_MS, hwm = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo);
    /* Queues are bounded by the protocol (a worker has few requests in flight),
     * not by ZeroMQ's message count, which would drop or block silently. */
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    return s;
}

int ps_transport_bind(void *sock, const char *endpoint, char *actual, size_t cap)
{
    if (zmq_bind(sock, endpoint) != 0) {
        int e = zmq_errno();
        return (e == EINVAL || e == EPROTONOSUPPORT || e == ENODEV) ? PS_EINVAL : PS_EIO;
    }
    size_t len = cap;
    if (actual && zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, actual, &len) != 0) {
        snprintf(actual, cap, "%s", endpoint);
    }
    return 0;
}

int ps_transport_connect(void *sock, const char *endpoint)
{
    return zmq_connect(sock, endpoint) == 0 ? 0 : PS_EINVAL;
}

void ps_transport_set_linger(void *sock, int ms)
{
    if (sock) {
        zmq_setsockopt(sock, ZMQ_LINGER, &ms, sizeof ms);
    }
}

void ps_transport_close(void **sock)
{
    if (*sock) {
        zmq_close(*sock);
        *sock = NULL;
    }
}
