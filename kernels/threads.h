/*
 * kernels/threads.h - process-wide settings of the CPU backend: how many
 * threads its BLAS may use, and which sgemm its contexts pick.
 *
 * OpenBLAS reads OPENBLAS_NUM_THREADS when the library loads, so a flag must
 * set the count through its API instead. Both settings are process-wide; set
 * them from main() (from the program's flags: --threads, --cpu-gemm) before
 * the first context is made. The backend reads no environment variable itself.
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

/* Which sgemm (and im2col, pooling) paths a CPU context takes. */
typedef enum {
    PS_CPU_GEMM_AUTO = 0,   /* our AVX-512 paths where built, the CPU has AVX-512F/VL/BW
                               and BLAS runs one thread; else OpenBLAS + portable loops */
    PS_CPU_GEMM_BLAS = 1,   /* OpenBLAS + portable loops */
    PS_CPU_GEMM_AVX512 = 2, /* the AVX-512 paths wherever the CPU has them */
} ps_cpu_gemm_t;

/* The values of a --cpu-gemm flag, for its --help line. */
#define PS_CPU_GEMM_NAMES "auto, blas or avx512"

/* Parses "auto", "blas" or "avx512". Returns 0, or PS_EINVAL (*out untouched). */
int ps_kernels_parse_cpu_gemm(const char *name, ps_cpu_gemm_t *out);

/* Sets the choice for the CPU contexts made from now on (default auto). */
void ps_kernels_set_cpu_gemm(ps_cpu_gemm_t gemm);

/* The choice in effect. */
ps_cpu_gemm_t ps_kernels_cpu_gemm(void);

#ifdef __cplusplus
}
#endif
#endif
