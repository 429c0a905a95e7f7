/*
 * deploy/mpi.c - shardps-mpi: `mpirun -np N shardps-mpi [shardps-launch flags]`
 * starts a whole job, one role per MPI rank (rank 0 the scheduler, 1..S the
 * servers, the rest the workers).
 *
 * MPI is used once, to agree: rank 0 broadcasts its host name (where the
 * scheduler will listen) and the job id. Then every rank leaves MPI and
 * becomes `shardps-launch --node` (exec), which reads the rank from Open MPI's
 * environment (OMPI_COMM_WORLD_RANK/SIZE) and execs the role. No training
 * traffic goes through MPI.
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/job.h"
#include "common/version.h"
#include "deploy/proc.h"
#include "proto/codec.h"

enum { S_HOST = 256, S_ID = 64 };

#define S_PROG "shardps-mpi"

/* --help and --version, before MPI_Init: a person asking needs no MPI job.
 * Returns 1 when one was answered. */
static int s_asked(int argc, char **argv)
{
    if (ps_version_flag(S_PROG, ps_codec_build_id, argc, argv)) {
        return 1;
    }
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: mpirun -np N " S_PROG " [shardps-launch flags]\n"
                   "Starts a whole shardps job, one role per MPI rank: rank 0 the scheduler,\n"
                   "1..S the servers, the rest the workers. Every rank becomes\n"
                   "`shardps-launch --node` with these flags (`shardps-launch --help` lists\n"
                   "them); MPI is used only to agree on the scheduler's host and the job id.\n"
                   "  --help     show this help\n"
                   "  --version  " PS_VERSION_HELP "\n");
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (s_asked(argc, argv)) {
        return 0;
    }
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char agreed[S_HOST + S_ID] = {0}; /* host, then job id */
    if (rank == 0) {
        const char *host = getenv("SHARDPS_SCHEDULER_HOST"), *id = getenv("SHARDPS_JOB_ID");
        if (host && *host) {
            snprintf(agreed, S_HOST, "%s", host);
        } else if (gethostname(agreed, S_HOST - 1) != 0) {
            snprintf(agreed, S_HOST, "localhost");
        }
        if (id && *id) {
            snprintf(agreed + S_HOST, S_ID, "%s", id);
        } else {
            ps_job_new_id(agreed + S_HOST, S_ID);
        }
    }
    MPI_Bcast(agreed, (int)sizeof agreed, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    setenv("SHARDPS_SCHEDULER_HOST", agreed, 1);
    setenv("SHARDPS_JOB_ID", agreed + S_HOST, 1);

    char launch[4096];
    if (ps_proc_find_exe("shardps-launch", "deploy", launch, sizeof launch) != 0) {
        fprintf(stderr, S_PROG ": error: cannot find shardps-launch (next to shardps-mpi, "
                        "in ../deploy/ or on $PATH)\n");
        return 1;
    }
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        fprintf(stderr, S_PROG ": error: out of memory\n");
        return 1;
    }
    args[0] = launch;
    args[1] = "--node";
    for (int i = 1; i < argc; i++) {
        args[i + 1] = argv[i];
    }
    execv(launch, args);
    fprintf(stderr, S_PROG ": error: cannot run %s: %s\n", launch, strerror(errno));
    return 1;
}
