/* common/alloc.c - glibc's mallopt for frames that come and go (alloc.h). */
#include "common/alloc.h"

#include <stdlib.h> /* defines __GLIBC__ on glibc */
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* Heap top kept on free before any is returned: far above what a process
 * of ours holds at its peak, so it is never trimmed. */
#define PS_ALLOC_TRIM_BYTES (1 << 30)

void ps_alloc_keep_large_blocks(void)
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_TRIM_THRESHOLD, PS_ALLOC_TRIM_BYTES);
#endif
}
