/*
 * bench/comm/allreduce_mpi.c - the MPI_Allreduce reference of `shardps-bench comm`:
 * n ranks of shardps-bench-mpi (mpi_helper.c) under one mpirun over TCP
 * loopback, driven through FIFOs, so that their chunks of calls alternate with
 * the ring's while the other side waits without using a CPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/comm/comm.h"
#include "common/clock.h"
#include "common/error.h"
#include "deploy/proc.h"

int ps_bench_mpi_find(char *mpirun, char *helper, size_t cap, char *why, size_t whylen)
{
    if (ps_proc_find_exe("mpirun", NULL, mpirun, cap) != 0) {
        snprintf(why, whylen, "mpirun not found (Debian: openmpi-bin libopenmpi-dev)");
        return PS_ENOENT;
    }
    if (ps_proc_find_exe("shardps-bench-mpi", "bench", helper, cap) != 0) {
        snprintf(why, whylen,
                 "shardps-bench-mpi was not built (install libopenmpi-dev, then "
                 "meson setup --reconfigure)");
        return PS_ENOENT;
    }
    return 0;
}

/* Is mpirun still there? Says why not in err. */
static int s_mpi_alive(ps_bench_mpi_t *m, char *err, size_t errlen)
{
    int status;
    if (m->pid > 0 && ps_proc_wait(m->pid, 0, &status) == m->pid) {
        m->pid = 0;
        snprintf(err, errlen, "mpirun exited (%s %d)",
                 WIFSIGNALED(status) ? "signal" : "status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return PS_ECLOSED;
    }
    return m->pid > 0 ? 0 : PS_ECLOSED;
}

/* Waits for rank 0's next reply (a double) within `seconds`, watching mpirun. */
static int s_mpi_reply(ps_bench_mpi_t *m, double seconds, char *err, size_t errlen,
                       double *v)
{
    double until = ps_now() + seconds;
    for (;;) {
        struct pollfd pf = {m->reply, POLLIN, 0};
        int n = poll(&pf, 1, 100);
        if (n > 0) {
            return ps_proc_read_all(m->reply, v, sizeof *v, COMM_POLL_LIMIT_S);
        }
        if (n < 0 && errno != EINTR) {
            snprintf(err, errlen, "poll: %s", strerror(errno));
            return PS_EIO;
        }
        int rc = s_mpi_alive(m, err, errlen);
        if (rc != 0) {
            return rc;
        }
        if (ps_now() > until) {
            snprintf(err, errlen, "no answer from the MPI ranks for %.0f s", seconds);
            return PS_ETIMEDOUT;
        }
    }
}

/* End of file on every command FIFO, then mpirun is given a while to finish
 * before it is killed. */
void ps_bench_mpi_stop(ps_bench_mpi_t *m)
{
    for (int i = 0; i < m->n; i++) {
        if (m->cmd[i] >= 0) {
            close(m->cmd[i]);
            m->cmd[i] = -1;
        }
    }
    if (m->pid > 0) {
        int status;
        if (ps_proc_wait(m->pid, 10.0, &status) == 0) {
            kill(m->pid, SIGTERM); /* mpirun takes its ranks down with it */
            ps_proc_reap(m->pid, 5.0);
        }
        m->pid = 0;
    }
    if (m->reply >= 0) {
        close(m->reply);
        m->reply = -1;
    }
    if (m->dir[0]) {
        char path[PATH_MAX + 32];
        for (int i = 0; i < m->n; i++) {
            snprintf(path, sizeof path, "%s/cmd-%d", m->dir, i);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/reply", m->dir);
        unlink(path);
        rmdir(m->dir);
        m->dir[0] = '\0';
    }
}

/* Starts mpirun -np n shardps-bench-mpi DIR (output in log) and waits until
 * MPI is up. */
int ps_bench_mpi_start(ps_bench_mpi_t *m, const char *mpirun, const char *helper, int n,
                       const char *log, char *err, size_t errlen)
{
    *m = (ps_bench_mpi_t){.n = n, .reply = -1};
    for (int i = 0; i < n; i++) {
        m->cmd[i] = -1;
    }
    snprintf(m->dir, sizeof m->dir, "%s/sps-mpi.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(m->dir)) {
        snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
        m->dir[0] = '\0';
        return PS_EIO;
    }
    char path[PATH_MAX + 32];
    /* Read-write opens never block and never see end of file: the ranks open
     * their ends whenever they get there. */
    for (int i = 0; i <= n; i++) {
        if (i < n) {
            snprintf(path, sizeof path, "%s/cmd-%d", m->dir, i);
        } else {
            snprintf(path, sizeof path, "%s/reply", m->dir);
        }
        int fd = mkfifo(path, 0600) == 0 ? open(path, O_RDWR | O_CLOEXEC) : -1;
        if (fd < 0) {
            snprintf(err, errlen, "FIFO %.200s: %s", path, strerror(errno));
            return PS_EIO;
        }
        *(i < n ? &m->cmd[i] : &m->reply) = fd;
    }
    char np[16];
    snprintf(np, sizeof np, "%d", n);
    char *argv[32];
    int a = 0;
    argv[a++] = (char *)mpirun;
    argv[a++] = "--allow-run-as-root";
    argv[a++] = "--oversubscribe";
    argv[a++] = "--timeout"; /* seconds: a wedged reference must not hang the bench */
    argv[a++] = "1800";
    argv[a++] = "--mca";
    argv[a++] = "btl";
    argv[a++] = "self,tcp"; /* TCP even between local ranks, as our ring uses */
    argv[a++] = "--mca";
    argv[a++] = "btl_tcp_if_include";
    argv[a++] = "lo";
    argv[a++] = "--mca";
    argv[a++] = "pml";
    argv[a++] = "ob1";
#ifdef __SANITIZE_ADDRESS__
    argv[a++] = "-x";
    argv[a++] = "ASAN_OPTIONS=detect_leaks=0"; /* OpenMPI's own allocations */
#endif
    argv[a++] = "-np";
    argv[a++] = np;
    argv[a++] = (char *)helper;
    argv[a++] = m->dir;
    argv[a] = NULL;
    unlink(log);
    ps_proc_spec_t spec = {.argv = argv, .log_path = log, .prog = "shardps-bench"};
    ps_proc_t p;
    char why[256];
    if (ps_proc_spawn(&spec, &p, why, sizeof why) != 0) {
        fprintf(stderr, "shardps-bench: cannot run %s: %s\n", mpirun, why);
        snprintf(err, errlen, "cannot run %.200s", mpirun);
        return PS_EIO;
    }
    m->pid = p.pid;
    double up;
    return s_mpi_reply(m, COMM_POLL_LIMIT_S, err, errlen, &up);
}

/* The reference's chunk (an ar_chunk_fn). */
int ps_bench_mpi_chunk(void *side, uint64_t floats, long iters, char *err, size_t errlen,
                       double *seconds)
{
    ps_bench_mpi_t *m = side;
    int64_t cmd[2] = {(int64_t)(floats * sizeof(float)), iters};
    int rc = s_mpi_alive(m, err, errlen);
    for (int i = 0; i < m->n && rc == 0; i++) {
        rc = ps_proc_write_all(m->cmd[i], cmd, sizeof cmd);
    }
    return rc ? rc : s_mpi_reply(m, COMM_POLL_LIMIT_S * 5, err, errlen, seconds);
}
