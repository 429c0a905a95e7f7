/* kernels/threads.c - BLAS thread count, through OpenBLAS's own API. */
#include "kernels/threads.h"

#include <cblas.h>

void ps_kernels_set_threads(int n)
{
    if (n > 0) {
        openblas_set_num_threads(n);
    }
}

int ps_kernels_threads(void)
{
    return openblas_get_num_threads();
}
