/*
 * kernels/threads.h - how many threads the CPU backend's BLAS may use.
 *
 * OpenBLAS reads OPENBLAS_NUM_THREADS when the library loads, so a flag must
 * set the count through its API instead. Process-wide; call from main()
 * before the first op.
 */
#ifndef PS_KERNELS_THREADS_H
#define PS_KERNELS_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the BLAS thread count (n >= 1); n <= 0 keeps the library default. */
void ps_kernels_set_threads(int n);

/* The BLAS thread count in effect. */
int ps_kernels_threads(void);

#ifdef __cplusplus
}
#endif
#endif
