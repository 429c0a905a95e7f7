/*
 * tests/unit/test_alloc.c - the allocator settings (common/alloc.h): after
 * ps_alloc_warm_heap, a round's worth of large blocks (ZeroMQ's received
 * frames) allocated, written and freed takes no page faults, the first
 * round as every later one.
 */
#include <check.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "tests/unit/testutil.h"

/* A round: 4 requests in flight, a 1 MiB frame per store chunk of 16 MiB. */
enum { FRAME_BYTES = 1 << 20, FRAMES = 4 * 16 };

/* Allocates FRAMES frames (a little over FRAME_BYTES, as ZeroMQ's header
 * adds), writes each whole, frees them; returns the page faults taken. */
static long s_round_faults(void)
{
    static unsigned char *frames[FRAMES];
    const long before = ps_test_minflt();
    for (int i = 0; i < FRAMES; i++) {
        frames[i] = malloc(FRAME_BYTES + 64);
        ck_assert_ptr_nonnull(frames[i]);
        memset(frames[i], i, FRAME_BYTES + 64);
    }
    for (int i = 0; i < FRAMES; i++) {
        free(frames[i]);
    }
    return ps_test_minflt() - before;
}

START_TEST(a_warm_heap_takes_rounds_of_frames_without_page_faults)
{
    ps_alloc_keep_large_blocks();
    mallopt(M_PERTURB, 0); /* meson test sets MALLOC_PERTURB_: malloc would touch them */
    const long warm_before = ps_test_minflt();
    ps_alloc_warm_heap((size_t)FRAMES * FRAME_BYTES / 4); /* 8 rounds of 16 MiB */
    const long warming = ps_test_minflt() - warm_before;
    const long first = s_round_faults(), second = s_round_faults();
    /* 64 MiB of frames is 16384 pages: a cold heap faults each (fewer where
     * the kernel maps larger folios at once), a warm one none. */
    ck_assert_msg(warming >= 1000, "warming the heap took only %ld page faults", warming);
#if defined(__SANITIZE_ADDRESS__) /* its allocator quarantines freed blocks */
    (void)first;
    (void)second;
#else
    ck_assert_msg(first <= 16 && second <= 16,
                  "rounds of frames after warming took %ld and %ld page faults", first,
                  second);
#endif
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("alloc");
    tcase_add_test(tc, a_warm_heap_takes_rounds_of_frames_without_page_faults);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
