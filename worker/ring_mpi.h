/*
 * worker/ring_mpi.h - the allreduce mode's other way to sum the gradients:
 * MPI_Allreduce over MPI_COMM_WORLD (--allreduce-backend mpi), so that the
 * simulated cluster can set MPI's allreduce beside our ring (worker/ring.h)
 * on the same links.
 *
 * The workers are the ranks of one mpirun (one rank per worker, nothing
 * else in it); they still register with the scheduler as in allreduce mode,
 * which gives each its data shard, steps and summary. Only the sum goes
 * through MPI: MPI_Allreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM). MPI's sum
 * order is its own (with more than 2 ranks, not even fixed from run to run),
 * so the parameters are not bitwise the ring's, though every rank gets the
 * same sums.
 *
 * What it does not do: wait with an eye on the job. A blocked MPI_Allreduce
 * cannot be asked whether the scheduler gave up, so a failing worker takes
 * the other ranks down with it (ps_ring_mpi_destroy with failed set calls
 * MPI_Abort). Built from ring_mpi.c where Meson finds MPI, else from
 * ring_mpi_none.c, whose ps_ring_mpi_new says so.
 *
 * Thread safety: MPI is initialised MPI_THREAD_FUNNELED; call everything from
 * the thread that called ps_ring_mpi_new().
 */
#ifndef PS_WORKER_RING_MPI_H
#define PS_WORKER_RING_MPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_ring_mpi ps_ring_mpi_t;

/* 1 when this build has MPI (ring_mpi.c), 0 when not (ring_mpi_none.c). */
int ps_ring_mpi_built(void);

/*
 * Initialises MPI and checks that MPI_COMM_WORLD has size ranks (the job's
 * workers). Returns 0 and the handle in *out (caller owns the result; destroy
 * with ps_ring_mpi_destroy()), or PS_ENOTSUP (this build has no MPI),
 * PS_ESTATE (another number of ranks: not started as one mpirun -np size),
 * PS_EIO (MPI_Init failed) / PS_ENOMEM, with a one-line reason in err.
 */
int ps_ring_mpi_new(int size, ps_ring_mpi_t **out, char *err, size_t errlen);

/* Replaces buf[0..n) with the sum over the ranks of every rank's buf. Every
 * rank must call it with the same n, in the same order. Returns 0, or PS_EIO
 * with ps_ring_mpi_error() saying why. */
int ps_ring_mpi_allreduce(ps_ring_mpi_t *m, float *buf, uint64_t n);

/* Payload bytes handed to MPI_Allreduce and received back so far (the
 * vector's bytes per call each way; what MPI itself sent is not known). */
void ps_ring_mpi_bytes(const ps_ring_mpi_t *m, uint64_t *sent, uint64_t *received);

/* The reason of the last failure; borrowed, valid until the next call. */
const char *ps_ring_mpi_error(const ps_ring_mpi_t *m);

/* Finalises MPI and frees the handle; NULL-safe; sets *m to NULL. failed:
 * this worker is failing, so MPI_Abort instead (the other ranks, maybe
 * blocked in MPI_Allreduce, are ended with it; the process exits 1). */
void ps_ring_mpi_destroy(ps_ring_mpi_t **m, int failed);

#ifdef __cplusplus
}
#endif
#endif
