/*
 * kernels/select.c - choosing a backend by name ("auto", "cpu", "cuda").
 *
 * The only place that knows whether CUDA was built (PS_HAVE_CUDA, set by
 * kernels/meson.build), and with cuDNN (PS_HAVE_CUDNN); everything else
 * goes through the chosen table.
 */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "kernels/kernels.h"

#ifdef PS_HAVE_CUDA
extern const ps_kernels_t ps_kernels_cuda;
#endif

const ps_kernels_t *ps_kernels_cuda_table(void)
{
#ifdef PS_HAVE_CUDA
    return &ps_kernels_cuda;
#else
    return NULL;
#endif
}

int ps_kernels_has_cudnn(void)
{
#ifdef PS_HAVE_CUDNN
    return 1;
#else
    return 0;
#endif
}

int ps_kernels_parse_conv(const char *name, int *cudnn, char *err, size_t errlen)
{
    if (strcmp(name, "cudnn") && strcmp(name, "gemm")) {
        snprintf(err, errlen, "--conv %s: expected cudnn or gemm", name);
        return PS_EINVAL;
    }
    if (!strcmp(name, "cudnn") && !ps_kernels_has_cudnn()) {
        snprintf(err, errlen,
                 "--conv cudnn: this build has no cuDNN (install it, then meson setup "
                 "--reconfigure -Dcudnn=enabled)");
        return PS_ENOTSUP;
    }
    *cudnn = !strcmp(name, "cudnn");
    return 0;
}

/* Probes CUDA; returns 0 or a PS_E* code with the reason in why. */
static int s_try_cuda(const ps_kernels_t **out, char *why, size_t whylen)
{
    const ps_kernels_t *cuda = ps_kernels_cuda_table();
    if (!cuda) {
        snprintf(why, whylen, "this build has no CUDA backend");
        return PS_ENOTSUP;
    }
    int rc = cuda->probe(why, whylen);
    if (rc == 0) {
        *out = cuda;
    }
    return rc;
}

int ps_kernels_select(const char *device, const ps_kernels_t **out, char *why,
                      size_t whylen)
{
    char local[256], reason[200];
    if (!why || whylen == 0) {
        why = local;
        whylen = sizeof(local);
    }
    why[0] = '\0';
    if (!device || !out) {
        snprintf(why, whylen, "no device name given");
        return PS_EINVAL;
    }
    if (strcmp(device, "cpu") == 0) {
        *out = &ps_kernels_cpu;
        snprintf(why, whylen, "cpu (requested)");
        return 0;
    }
    if (strcmp(device, "cuda") == 0) {
        int rc = s_try_cuda(out, why, whylen);
        if (rc == 0) {
            snprintf(why, whylen, "cuda (requested)");
        }
        return rc;
    }
    if (strcmp(device, "auto") == 0) {
        if (s_try_cuda(out, reason, sizeof reason) == 0) {
            snprintf(why, whylen, "cuda (auto: a GPU answered)");
            return 0;
        }
        snprintf(why, whylen, "cpu (auto: %s)", reason);
        *out = &ps_kernels_cpu;
        return 0;
    }
    snprintf(why, whylen, "unknown device '%s' (expected auto, cpu or cuda)", device);
    return PS_EINVAL;
}
