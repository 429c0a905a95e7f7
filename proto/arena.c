/*
 * proto/arena.c - the bump allocator protobuf-c unpacks into. Pieces that do
 * not fit are malloc'd with a small link in front, kept on a doubly linked
 * list so that protobuf-c's own frees (on a failed unpack) and the reset
 * both find them.
 */
#include "proto/arena.h"

#include <stdint.h>
#include <stdlib.h>

/* In front of each malloc'd allocation; its size keeps the data aligned. */
struct ps_arena_big {
    _Alignas(PS_ARENA_ALIGN) ps_arena_big_t *prev;
    ps_arena_big_t *next;
};

static void *s_alloc(void *data, size_t size)
{
    ps_arena_t *a = data;
    size_t n = (size + PS_ARENA_ALIGN - 1) & ~(size_t)(PS_ARENA_ALIGN - 1);
    if (n >= size && n <= a->cap - a->used) {
        void *p = a->buf + a->used;
        a->used += n;
        return p;
    }
    if (size > SIZE_MAX - sizeof(ps_arena_big_t)) {
        return NULL;
    }
    ps_arena_big_t *b = malloc(sizeof *b + size);
    if (!b) {
        return NULL;
    }
    b->prev = NULL;
    b->next = a->big;
    if (a->big) {
        a->big->prev = b;
    }
    a->big = b;
    return b + 1;
}

/* Pieces of the buffer come back with the reset; a malloc'd one now. */
static void s_free(void *data, void *p)
{
    ps_arena_t *a = data;
    unsigned char *c = p;
    if (!p || (a->buf && c >= a->buf && c < a->buf + a->cap)) {
        return;
    }
    ps_arena_big_t *b = (ps_arena_big_t *)p - 1;
    if (b->prev) {
        b->prev->next = b->next;
    } else {
        a->big = b->next;
    }
    if (b->next) {
        b->next->prev = b->prev;
    }
    free(b);
}

void ps_arena_init(ps_arena_t *a, void *buf, size_t cap)
{
    a->pc.alloc = s_alloc;
    a->pc.free = s_free;
    a->pc.allocator_data = a;
    a->buf = buf;
    a->cap = buf ? cap : 0;
    a->used = 0;
    a->big = NULL;
}

void ps_arena_reset(ps_arena_t *a)
{
    while (a->big) {
        ps_arena_big_t *next = a->big->next;
        free(a->big);
        a->big = next;
    }
    a->used = 0;
}

int ps_arena_spills(const ps_arena_t *a)
{
    int n = 0;
    for (const ps_arena_big_t *b = a->big; b; b = b->next) {
        n++;
    }
    return n;
}

void ps_arena_fini(ps_arena_t *a)
{
    ps_arena_reset(a);
}
