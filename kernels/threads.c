/* kernels/threads.c - the CPU backend's process-wide settings: BLAS threads
 * (through OpenBLAS's own API) and the sgemm choice. */
#include "kernels/threads.h"

#include <string.h>

#include <cblas.h>

#include "common/error.h"

/* Process-wide like OpenBLAS's thread count: written by main() before any
 * context exists, read by ctx_new (kernels/cpu/table.c). */
static ps_cpu_gemm_t s_cpu_gemm = PS_CPU_GEMM_AUTO;

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

int ps_kernels_parse_cpu_gemm(const char *name, ps_cpu_gemm_t *out)
{
    static const char *const names[] = {"auto", "blas", "avx512"};
    for (int i = 0; name && i < 3; i++) {
        if (!strcmp(name, names[i])) {
            *out = (ps_cpu_gemm_t)i;
            return 0;
        }
    }
    return PS_EINVAL;
}

void ps_kernels_set_cpu_gemm(ps_cpu_gemm_t gemm)
{
    s_cpu_gemm = gemm;
}

ps_cpu_gemm_t ps_kernels_cpu_gemm(void)
{
    return s_cpu_gemm;
}
