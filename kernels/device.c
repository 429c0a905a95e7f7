/*
 * kernels/device.c - one GPU per local rank (kernels/device.h): the pure
 * choice, the environment it reads, and the backend call that applies it.
 */
#include "kernels/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

int ps_device_pick(const ps_device_in_t *in, char *why, size_t whylen)
{
    const char *vis = in->visible;
    if (in->count < 1) {
        snprintf(why, whylen, "no GPU is visible%s%s", vis ? ": CUDA_VISIBLE_DEVICES=" : "",
                 vis ? vis : "");
        return PS_ENODEV;
    }
    if (in->gpu >= in->count) {
        snprintf(why, whylen, "--gpu %d: %d GPU%s visible here (0 to %d)%s%s", in->gpu,
                 in->count, in->count == 1 ? " is" : "s are", in->count - 1,
                 vis ? ", CUDA_VISIBLE_DEVICES=" : "", vis ? vis : "");
        return PS_EINVAL;
    }
    if (in->gpu >= 0) {
        return in->gpu;
    }
    return in->local_rank > 0 ? in->local_rank % in->count : 0;
}

int ps_device_local_rank(const char **from)
{
    static const char *const vars[] = {"LOCAL_RANK", "SLURM_LOCALID",
                                       "OMPI_COMM_WORLD_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long n = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && n >= 0 && n <= 1000000) {
            if (from) {
                *from = vars[i];
            }
            return (int)n;
        }
    }
    if (from) {
        *from = "";
    }
    return -1;
}

int ps_device_use(const ps_kernels_t *k, int gpu, char *what, size_t whatlen)
{
    what[0] = '\0';
    if (!k->devices || !k->use_device) {
        return 0;
    }
    const char *from;
    ps_device_in_t in = {.gpu = gpu, .local_rank = ps_device_local_rank(&from),
                         .count = k->devices(), .visible = getenv("CUDA_VISIBLE_DEVICES")};
    int idx = ps_device_pick(&in, what, whatlen);
    if (idx < 0) {
        return idx;
    }
    char name[256];
    int rc = k->use_device(idx, name, sizeof name);
    if (rc != 0) {
        snprintf(what, whatlen, "GPU %d: %s", idx, name);
        return rc;
    }
    char how[96];
    if (gpu >= 0) {
        snprintf(how, sizeof how, "--gpu %d", gpu);
    } else if (in.local_rank >= 0) {
        snprintf(how, sizeof how, "local rank %d from %s", in.local_rank, from);
    } else {
        snprintf(how, sizeof how, "no local rank");
    }
    snprintf(what, whatlen, "GPU %d %s (%s, %d visible)", idx, name, how, in.count);
    return 0;
}
