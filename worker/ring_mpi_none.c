/*
 * worker/ring_mpi_none.c - ring_mpi.h where Meson found no MPI: the backend
 * cannot be made, and says why (the flags check refuses it before that).
 */
#include "worker/ring_mpi.h"

#include <stdio.h>

#include "common/error.h"

int ps_ring_mpi_built(void)
{
    return 0;
}

int ps_ring_mpi_new(int size, ps_ring_mpi_t **out, char *err, size_t errlen)
{
    (void)size;
    *out = NULL;
    snprintf(err, errlen, "--allreduce-backend mpi: this build has no MPI (install "
                          "libopenmpi-dev, then meson setup --reconfigure)");
    return PS_ENOTSUP;
}

int ps_ring_mpi_allreduce(ps_ring_mpi_t *m, float *buf, uint64_t n)
{
    (void)m, (void)buf, (void)n;
    return PS_ENOTSUP;
}

void ps_ring_mpi_bytes(const ps_ring_mpi_t *m, uint64_t *sent, uint64_t *received)
{
    (void)m;
    *sent = *received = 0;
}

const char *ps_ring_mpi_error(const ps_ring_mpi_t *m)
{
    (void)m;
    return "this build has no MPI";
}

void ps_ring_mpi_destroy(ps_ring_mpi_t **m, int failed)
{
    (void)failed;
    if (m) {
        *m = NULL;
    }
}
