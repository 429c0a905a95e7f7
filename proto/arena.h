/*
 * proto/arena.h - a bump allocator over a fixed buffer, handed to protobuf-c
 * as its ProtobufCAllocator.
 *
 * A message unpacks into an arena without calling malloc, and everything it
 * took is given back at once by ps_arena_reset(): there is no per-piece free.
 * An allocation that does not fit the buffer falls back to malloc, so an
 * oversized message (a cluster view of many servers, a status reply) still
 * decodes; the reset frees those too. The header frame of every message
 * decodes into the arena inside its ps_msg_t (proto/msg.h), so the data path
 * mallocs nothing per message.
 *
 * It does not grow its buffer and does not know messages: the caller owns the
 * buffer and decides when a decoded message is no longer read.
 *
 * Thread safety: none; one arena per message being decoded.
 */
#ifndef PS_PROTO_ARENA_H
#define PS_PROTO_ARENA_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Alignment of every allocation: enough for any field protobuf-c stores. */
enum { PS_ARENA_ALIGN = 16 };

typedef struct ps_arena_big ps_arena_big_t;

typedef struct {
    ProtobufCAllocator pc; /* hand &a->pc to protobuf-c's unpack */
    unsigned char *buf;    /* borrowed: the caller's buffer, PS_ARENA_ALIGN-aligned */
    size_t cap;            /* its bytes */
    size_t used;           /* bytes handed out since the last reset */
    ps_arena_big_t *big;   /* allocations that did not fit, from malloc; NULL if none */
} ps_arena_t;

/* Makes an empty arena over buf (cap bytes, borrowed: it must outlive the
 * arena and every message unpacked into it). buf may be NULL with cap 0:
 * every allocation then comes from malloc. */
void ps_arena_init(ps_arena_t *a, void *buf, size_t cap);

/* Gives back everything handed out (frees the malloc'd allocations); what was
 * unpacked into the arena must not be read afterwards. Safe on a zeroed
 * arena. */
void ps_arena_reset(ps_arena_t *a);

/* How many allocations that did not fit the buffer it holds (from malloc). */
int ps_arena_spills(const ps_arena_t *a);

/* Resets the arena for the last time. */
void ps_arena_fini(ps_arena_t *a);

/* An arena over its own buffer of n bytes, for a message decoded in one
 * function: `PS_ARENA_ON_STACK(a, 4096);` declares ps_arena_t *a. Release
 * with ps_arena_fini(a). */
#define PS_ARENA_ON_STACK(name, n)                                                        \
    _Alignas(PS_ARENA_ALIGN) unsigned char name##_buf[n];                                 \
    ps_arena_t name##_arena;                                                              \
    ps_arena_t *name = &name##_arena;                                                     \
    ps_arena_init(name, name##_buf, sizeof name##_buf)

#ifdef __cplusplus
}
#endif
#endif
