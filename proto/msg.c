/*
 * proto/msg.c - multipart messages over libzmq (sockets are sock.c), and a
 * control body packed into, or unpacked from, a message's one payload frame.
 * zmq_errno() is translated into PS_E* by ps_zmq_error(), nowhere else.
 */
#include "proto/msg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "proto/sock_zmq.h"

_Static_assert((int)PS_BYTE_TYPES == (int)PS_CTX_BYTE_TYPES, "one count per message type");
_Static_assert(sizeof(zmq_msg_t) <= sizeof(((ps_payload_t *)0)->opaque) &&
                   _Alignof(zmq_msg_t) <= 8,
               "ps_payload_t must hold a zmq_msg_t");

/* The ZeroMQ message inside a payload. */
static zmq_msg_t *s_zmsg(const ps_payload_t *p)
{
    return (zmq_msg_t *)p->opaque;
}

void ps_msg_header(Shardps__Header *h, ps_msg_type_t type, ps_role_t role, int sender)
{
    shardps__header__init(h);
    h->protocol = PS_PROTOCOL_VERSION;
    h->type = type;
    h->role = role;
    h->sender = sender;
}

/* The one sender: route, header, then the frames copied (PS_SEND_COPY),
 * zero-copy with no release (the caller knows by a reply), or zero-copy with
 * release called once per frame (see ps_msg_send_zc). */
static int s_send(ps_sock_t *sock, const ps_route_t *route, Shardps__Header h,
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
        if (zmq_send(ps_zs(sock), route->id, route->len, ZMQ_SNDMORE) < 0) {
            rc = ps_zmq_error();
            goto unsent;
        }
    }
    /* After the first frame is accepted ZeroMQ accepts the rest atomically. */
    if (zmq_send(ps_zs(sock), buf, (size_t)hlen, nframes ? ZMQ_SNDMORE : 0) < 0) {
        rc = ps_zmq_error();
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
        if (zmq_msg_send(&msg, ps_zs(sock), more) < 0) {
            rc = ps_zmq_error();
            zmq_msg_close(&msg); /* a failed send leaves the message ours to close */
            i++;                 /* ... and closing it released this frame */
            goto unsent;
        }
    }
    ps_sock_count(sock, 0, (int)h.type, (uint64_t)hlen + h.payload_len);
    return 0;
unsent:
    for (; release && !(flags & PS_SEND_COPY) && i < nframes; i++) {
        release((void *)frames[i].data, hint);
    }
    return rc;
}

int ps_msg_send(ps_sock_t *sock, const ps_route_t *route, Shardps__Header h,
                const ps_frame_t *frames, int nframes, int flags)
{
    return s_send(sock, route, h, frames, nframes, flags, NULL, NULL);
}

int ps_msg_send_zc(ps_sock_t *sock, const ps_route_t *route, Shardps__Header h,
                   const ps_frame_t *frames, int nframes, ps_msg_release_fn *release,
                   void *hint)
{
    return s_send(sock, route, h, frames, nframes, 0, release, hint);
}

void ps_payload_close(ps_payload_t *p)
{
    if (p->held) {
        zmq_msg_close(s_zmsg(p));
        p->held = 0;
    }
}

const void *ps_payload_data(const ps_payload_t *p, size_t *len)
{
    *len = zmq_msg_size(s_zmsg(p));
    return zmq_msg_data(s_zmsg(p));
}

void ps_msg_take_payload(ps_msg_t *m, int i, ps_payload_t *out)
{
    zmq_msg_init(s_zmsg(out));
    zmq_msg_move(s_zmsg(out), s_zmsg(&m->frames[i]));
    out->held = 1;
}

void ps_msg_close(ps_msg_t *m)
{
    for (int i = 0; i < m->nframes; i++) {
        ps_payload_close(&m->frames[i]);
    }
    m->nframes = 0;
    ps_arena_reset(&m->arena);
}

const void *ps_msg_frame(const ps_msg_t *m, int i, size_t *len)
{
    return ps_payload_data(&m->frames[i], len);
}

/* An empty message with its arena ready, as ps_msg_recv() starts one. */
static void s_msg_reset(ps_msg_t *m)
{
    memset(&m->route, 0, sizeof m->route);
    m->peer_addr[0] = '\0';
    m->peer_fd = -1;
    shardps__header__init(&m->hdr);
    m->why[0] = '\0';
    m->nframes = 0;
    if (m->arena.buf == m->arena_buf) {
        ps_arena_reset(&m->arena);
    } else {
        ps_arena_init(&m->arena, m->arena_buf, sizeof m->arena_buf);
    }
}

int ps_msg_make(ps_msg_t *m, const ps_route_t *route, const Shardps__Header *h,
                const ProtobufCMessage *body)
{
    s_msg_reset(m);
    m->route = *route;
    m->hdr = *h;
    if (!body) {
        return 0;
    }
    zmq_msg_t *f = s_zmsg(&m->frames[0]);
    const size_t len = protobuf_c_message_get_packed_size(body);
    if (zmq_msg_init_size(f, len) != 0) {
        return PS_ENOMEM;
    }
    protobuf_c_message_pack(body, zmq_msg_data(f));
    m->frames[0].held = 1;
    m->nframes = 1;
    return 0;
}

/* Reads and discards the remaining parts of a multipart message. */
static void s_discard(ps_sock_t *sock, int more)
{
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, ps_zs(sock), 0) < 0) {
            zmq_msg_close(&part);
            return;
        }
        more = zmq_msg_more(&part);
        zmq_msg_close(&part);
    }
}

int ps_msg_recv(ps_sock_t *sock, int flags, ps_msg_t *m)
{
    s_msg_reset(m);
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, ps_zs(sock), 0) < 0) {
        zmq_msg_close(&part);
        return ps_zmq_error();
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
            snprintf(m->why, sizeof m->why, "empty message (no header frame)");
            return PS_EPROTO;
        }
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, ps_zs(sock), 0) < 0) {
            zmq_msg_close(&part);
            return ps_zmq_error();
        }
        more = zmq_msg_more(&part);
    }
    if (flags & PS_RECV_PEER) {
        const char *addr = zmq_msg_gets(&part, "Peer-Address");
        snprintf(m->peer_addr, sizeof m->peer_addr, "%s", addr ? addr : "");
        m->peer_fd = zmq_msg_get(&part, ZMQ_SRCFD);
    }
    const size_t hlen = zmq_msg_size(&part);
    int rc = ps_codec_unpack_header(zmq_msg_data(&part), hlen, &m->arena, &m->hdr, m->why,
                                    sizeof m->why);
    zmq_msg_close(&part);
    if (rc != 0) {
        s_discard(sock, more);
        return rc;
    }
    uint64_t total = 0;
    while (more) {
        if (m->nframes == PS_MSG_MAX_FRAMES) {
            s_discard(sock, more);
            ps_msg_close(m);
            snprintf(m->why, sizeof m->why, "more than %d payload frames",
                     PS_MSG_MAX_FRAMES);
            return PS_EPROTO;
        }
        zmq_msg_t *f = s_zmsg(&m->frames[m->nframes]);
        zmq_msg_init(f);
        if (zmq_msg_recv(f, ps_zs(sock), 0) < 0) {
            zmq_msg_close(f);
            ps_msg_close(m);
            return ps_zmq_error();
        }
        m->frames[m->nframes++].held = 1;
        total += zmq_msg_size(f);
        more = zmq_msg_more(f);
    }
    ps_sock_count(sock, 1, (int)m->hdr.type, hlen + total);
    if (total != m->hdr.payload_len) {
        snprintf(m->why, sizeof m->why, "payload is %llu bytes but the header says %llu", (unsigned long long)total,
                 (unsigned long long)m->hdr.payload_len);
        ps_msg_close(m);
        return PS_EPROTO;
    }
    return 0;
}

/* Bodies up to this size are packed on the stack. */
enum { S_BODY_ON_STACK = 2048 };

int ps_msg_send_body(ps_sock_t *sock, const ps_route_t *route, Shardps__Header h,
                     const ProtobufCMessage *body)
{
    if (!body) {
        return ps_msg_send(sock, route, h, NULL, 0, PS_SEND_COPY);
    }
    uint8_t small[S_BODY_ON_STACK];
    size_t n = protobuf_c_message_get_packed_size(body);
    uint8_t *buf = n <= sizeof small ? small : malloc(n);
    if (!buf) {
        return PS_ENOMEM;
    }
    ps_frame_t f = {buf, protobuf_c_message_pack(body, buf)};
    int rc = ps_msg_send(sock, route, h, &f, 1, PS_SEND_COPY);
    if (buf != small) {
        free(buf);
    }
    return rc;
}

/* A control message's header: the node's clock rides on registration (its
 * offset to the scheduler's, link.c). */
static Shardps__Header s_ctrl_header(ps_msg_type_t type, ps_role_t role, int sender)
{
    Shardps__Header h;
    ps_msg_header(&h, type, role, sender);
    if (type == PS_MSG_REGISTER || type == PS_MSG_REGISTER_ACK) {
        h.clock = ps_now();
    }
    return h;
}

int ps_msg_send_ctrl(ps_sock_t *sock, const ps_route_t *route, ps_msg_type_t type,
                     ps_role_t role, int sender, const ProtobufCMessage *body)
{
    return ps_msg_send_body(sock, route, s_ctrl_header(type, role, sender), body);
}

void *ps_msg_unpack_body(ps_msg_t *m, const ProtobufCMessageDescriptor *d)
{
    if (m->nframes != 1) {
        snprintf(m->why, sizeof m->why, "%s: %d payload frames, expected 1", d->short_name,
                 m->nframes);
        return NULL;
    }
    size_t len;
    const void *p = ps_msg_frame(m, 0, &len);
    return ps_codec_unpack(d, p, len, &m->arena, m->why, sizeof m->why);
}

int ps_msg_reply_error(ps_sock_t *sock, const ps_msg_t *req, ps_role_t role, int sender,
                       int status, const char *fmt, ...)
{
    Shardps__Header h;
    char error[PS_ERROR_MAX];
    ps_msg_header(&h, PS_MSG_ERROR, role, sender);
    h.request_id = req->hdr.request_id;
    /* Echo the range only when it is well-formed: a reversed one (the reason
     * the request may have been refused) would make the reply undecodable. */
    if (req->hdr.key_begin <= req->hdr.key_end) {
        h.key_begin = req->hdr.key_begin;
        h.key_end = req->hdr.key_end;
    }
    h.step = req->hdr.step;
    h.status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, sizeof error, fmt, ap);
    va_end(ap);
    h.error = error;
    return ps_msg_send(sock, &req->route, h, NULL, 0, 0);
}

int ps_msg_drain(ps_sock_t *sock, int flags, int max, ps_msg_handler_fn *fn, void *arg)
{
    int k = 0;
    ps_msg_t m = {0}; /* one for the whole drain: each is closed before the next */
    while (k < max && ps_sock_has_input(sock)) {
        int rc = ps_msg_recv(sock, flags, &m);
        if (rc != 0 && rc != PS_EPROTO) {
            ps_msg_close(&m);
            return rc;
        }
        k++;
        int stop = fn(arg, &m, rc);
        ps_msg_close(&m);
        if (stop) {
            break;
        }
    }
    return k;
}

/* The data types ps_msg_bytes_metrics shows apart; [PS_MSG_BYTES_SERIES - 1]
 * is every other type. */
static const int s_bytes_types[PS_MSG_BYTES_SERIES - 1] = {
    PS_MSG_PUSH, PS_MSG_PUSH_ACK, PS_MSG_PULL, PS_MSG_PULL_REPLY, PS_MSG_INIT, PS_MSG_RING_DATA,
    PS_MSG_PUSH_PULL};

void ps_msg_bytes_metrics_init(ps_msg_bytes_metrics_t *b, ps_metrics_t *reg, const char *role,
                               const ps_ctx_t *ctx)
{
    char name[64], labels[64];
    snprintf(name, sizeof name, "shardps_%s_wire_bytes_total", role);
    for (int dir = 0; dir < 2; dir++) {
        for (int i = 0; i < PS_MSG_BYTES_SERIES; i++) {
            const char *type =
                i < PS_MSG_BYTES_SERIES - 1 ? ps_codec_type_name(s_bytes_types[i]) : "other";
            int at = snprintf(labels, sizeof labels, "dir=\"%s\",type=\"",
                              dir ? "received" : "sent");
            for (const char *c = type; *c && at < (int)sizeof labels - 2; c++) {
                labels[at++] = *c == '-' ? '_' : *c; /* as the summary's names */
            }
            snprintf(labels + at, sizeof labels - (size_t)at, "\"");
            b->series[dir][i] = ps_metrics_counter(
                reg, name, labels, "bytes on the wire (header + payload frames) by message type");
        }
    }
    b->ctx = ctx;
}

void ps_msg_bytes_metrics_update(const ps_msg_bytes_metrics_t *b)
{
    if (!b->ctx) {
        return;
    }
    uint64_t n[2][PS_CTX_BYTE_TYPES];
    ps_ctx_bytes(b->ctx, n[0], n[1]);
    for (int dir = 0; dir < 2; dir++) {
        double other = 0;
        for (int t = 0; t < PS_CTX_BYTE_TYPES; t++) {
            other += (double)n[dir][t];
        }
        for (int i = 0; i < PS_MSG_BYTES_SERIES - 1; i++) {
            ps_metric_set(b->series[dir][i], (double)n[dir][s_bytes_types[i]]);
            other -= (double)n[dir][s_bytes_types[i]];
        }
        ps_metric_set(b->series[dir][PS_MSG_BYTES_SERIES - 1], other);
    }
}
