/*
 * common/alloc.h - how the process's allocator treats large blocks.
 *
 * ZeroMQ (4.3) allocates every received frame larger than its 8 KiB batch
 * buffer with malloc, in its I/O thread, and frees it when the message is
 * closed; it has no allocator hook. glibc serves such blocks with mmap (or
 * from a per-thread arena that it trims) and gives them back on free, so each
 * large frame costs fresh pages: page faults and the kernel zeroing them,
 * every message, and how often depended on MALLOC_* variables. Does not
 * allocate anything itself.
 */
#ifndef PS_COMMON_ALLOC_H
#define PS_COMMON_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Keeps freed large blocks in the process for the next one of their size:
 * no mmap for large blocks, one arena (so the I/O thread's frames come from
 * the main heap, which can hold frames bigger than a thread arena's 64 MiB),
 * and no trimming of the heap's top. Memory then stays at the process's peak
 * (bounded by the frames and queues the wire allows) instead of being
 * returned and faulted in again per message. Overrides MALLOC_* variables,
 * so rates do not depend on them. Call first thing in main(), before any
 * thread starts; without glibc it does nothing. Not thread-safe.
 */
void ps_alloc_keep_large_blocks(void);

/*
 * Touches the heap for a few rounds of round_bytes of received frames (at
 * most 128 MiB) once and frees it: the frames that arrive later (that much
 * alive at once, after ps_alloc_keep_large_blocks()) land in pages already
 * there instead of growing the heap into fresh ones, page fault by page
 * fault, in the first rounds under load. Call after the long-lived
 * allocations, so the warm pages are at the heap's top. The process keeps
 * that memory (its peak anyway under load).
 */
void ps_alloc_warm_heap(size_t round_bytes);

/* The process's peak resident memory so far, in bytes (getrusage). */
size_t ps_alloc_peak_resident(void);

#ifdef __cplusplus
}
#endif
#endif
