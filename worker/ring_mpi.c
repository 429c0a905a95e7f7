/*
 * worker/ring_mpi.c - the gradients' sum through MPI_Allreduce (see
 * ring_mpi.h), built where Meson finds an MPI. MPI errors are returned, not
 * fatal (MPI_ERRORS_RETURN), and translated here once.
 */
#include "worker/ring_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"

/* MPI counts are ints: a longer vector goes in pieces of this many floats. */
enum { MPI_PIECE = 1 << 30 };

struct ps_ring_mpi {
    uint64_t bytes; /* payload handed to MPI_Allreduce so far */
    char err[256];  /* the last failure */
};

/* err = what: MPI's words for code. */
static void s_mpi_err(char *err, size_t errlen, const char *what, int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) {
        snprintf(text, sizeof text, "MPI error %d", code);
    }
    snprintf(err, errlen, "%s: %.200s", what, text);
}

int ps_ring_mpi_built(void)
{
    return 1;
}

int ps_ring_mpi_new(int size, ps_ring_mpi_t **out, char *err, size_t errlen)
{
    int inited = 0, provided = 0, ranks = 0;
    *out = NULL;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init failed: start the workers under mpirun");
        return PS_EIO;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != size) {
        snprintf(err, errlen,
                 "--allreduce-backend mpi: MPI has %d rank%s, the job %d workers: start the "
                 "workers, and only them, under one mpirun -np %d", ranks,
                 ranks == 1 ? "" : "s", size, size);
        MPI_Finalize();
        return PS_ESTATE;
    }
    ps_ring_mpi_t *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        MPI_Finalize();
        return PS_ENOMEM;
    }
    *out = m;
    return 0;
}

int ps_ring_mpi_allreduce(ps_ring_mpi_t *m, float *buf, uint64_t n)
{
    for (uint64_t at = 0; at < n;) {
        const int len = n - at > MPI_PIECE ? MPI_PIECE : (int)(n - at);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + at, len, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            s_mpi_err(m->err, sizeof m->err, "MPI_Allreduce", rc);
            return PS_EIO;
        }
        at += (uint64_t)len;
    }
    m->bytes += n * sizeof(float);
    return 0;
}

void ps_ring_mpi_bytes(const ps_ring_mpi_t *m, uint64_t *sent, uint64_t *received)
{
    *sent = *received = m->bytes;
}

const char *ps_ring_mpi_error(const ps_ring_mpi_t *m)
{
    return m->err;
}

void ps_ring_mpi_destroy(ps_ring_mpi_t **m, int failed)
{
    if (!m || !*m) {
        return;
    }
    free(*m);
    *m = NULL;
    if (failed) {
        MPI_Abort(MPI_COMM_WORLD, 1); /* the others may wait in MPI_Allreduce for us */
    }
    MPI_Finalize();
}
