/* common/alloc.c - glibc's mallopt for frames that come and go (alloc.h). */
#include "common/alloc.h"

#include <stdlib.h> /* defines __GLIBC__ on glibc */
#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* Heap top kept on free before any is returned: far above what a process
 * of ours holds at its peak, so it is never trimmed. */
#define PS_ALLOC_TRIM_BYTES (1 << 30)

/* Rounds of frames whose memory ps_alloc_warm_heap touches: as many as are
 * in flight at once (4 in shardps-bench comm's async rows), twice, for
 * the holes between frames freed out of order. */
#define PS_ALLOC_WARM_ROUNDS 8

/* The smallest page size of the machines we run on. */
#define PS_ALLOC_PAGE_BYTES 4096

/* Most heap ps_alloc_warm_heap touches. */
#define PS_ALLOC_WARM_MAX_BYTES ((size_t)128 << 20)

void ps_alloc_warm_heap(size_t round_bytes)
{
    /* Touched once, then free: the heap's top (never trimmed, see above)
     * keeps the pages for the frames that come later. */
    size_t bytes = round_bytes > PS_ALLOC_WARM_MAX_BYTES / PS_ALLOC_WARM_ROUNDS
                       ? PS_ALLOC_WARM_MAX_BYTES
                       : round_bytes * PS_ALLOC_WARM_ROUNDS;
    volatile unsigned char *p = bytes ? malloc(bytes) : NULL;
    /* A write per page through a volatile pointer: the compiler turned a
     * memset of memory freed unread into nothing, and calloc would skip
     * fresh heap pages as already zero. */
    for (size_t i = 0; p && i < bytes; i += PS_ALLOC_PAGE_BYTES) {
        p[i] = 0;
    }
    free((void *)p);
}

void ps_alloc_keep_large_blocks(void)
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_TRIM_THRESHOLD, PS_ALLOC_TRIM_BYTES);
#endif
}

size_t ps_alloc_peak_resident(void)
{
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? (size_t)u.ru_maxrss * 1024 : 0; /* in KiB */
}
