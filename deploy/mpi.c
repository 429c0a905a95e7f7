/*
 * deploy/mpi.c - shardps-mpi: `mpirun -np N shardps-mpi [shardps-launch flags]`
 * starts a whole job, one role per MPI rank (rank 0 the scheduler, 1..S the
 * servers, the rest the workers).
 *
 * MPI is used once, to agree: rank 0 broadcasts the address the scheduler
 * will listen at (s_scheduler_host) and the job id. Then every rank leaves MPI and
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
#include "proto/addr.h"
#include "proto/codec.h"

enum { S_HOST = 256, S_ID = 64 };

/*
 * Rank 0's address for the other ranks (every rank calls this; rank 0's out
 * is the answer): SHARDPS_SCHEDULER_HOST or SHARDPS_ADVERTISE when set; else
 * the local end of rank 0's route to the first rank on another host (by
 * processor name), the rule a node's own address follows (proto/addr.h); a
 * host name, resolved by every rank on its own, could name loopback there.
 * All ranks on one host: 127.0.0.1. No route: the host name, with a warning.
 */
static void s_scheduler_host(int rank, char *out, size_t cap)
{
    int size = 1, len = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    MPI_Get_processor_name(name, &len);
    char *all = rank == 0 ? calloc((size_t)size, sizeof name) : NULL;
    MPI_Gather(name, (int)sizeof name, MPI_CHAR, all, (int)sizeof name, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    if (rank != 0) {
        return;
    }
    const char *given = getenv("SHARDPS_SCHEDULER_HOST");
    given = given && *given ? given : getenv("SHARDPS_ADVERTISE");
    const char *other = NULL;
    for (int r = 1; all && r < size && !other; r++) {
        const char *n = all + (size_t)r * sizeof name;
        other = strcmp(n, name) ? n : NULL;
    }
    if (given && *given) {
        snprintf(out, cap, "%s", given);
    } else if (!other) {
        snprintf(out, cap, "127.0.0.1");
    } else if (ps_addr_route_from(other, out, cap) != 0 || ps_addr_is_loopback(out)) {
        if (gethostname(out, cap - 1) != 0) {
            snprintf(out, cap, "localhost");
        }
        fprintf(stderr, "shardps-mpi: warning: no route from here to %s: the other ranks "
                        "get the host name %s (set SHARDPS_ADVERTISE to say which address)\n",
                other, out);
    }
    free(all);
}

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
    s_scheduler_host(rank, agreed, S_HOST);
    if (rank == 0) {
        const char *id = getenv("SHARDPS_JOB_ID");
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
