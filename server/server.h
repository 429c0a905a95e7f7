/*
 * server/server.h - a parameter server: one key range, its optimizer state, and
 * the consistency rule that decides when pushes are applied and pulls answered.
 *
 * The pieces, each testable alone: server/store.h (parameters, optimizer
 * state, initialisation), server/consistency.h (sync, ssp, sync:k/n, async:
 * when to apply and answer), server/intake.h (the checks of requests, held
 * push frames), server/reply.h and server/reply_pool.h (replies and their
 * buffers), server/control.h (the scheduler's failovers, joins and
 * checkpoints); the event loop in server.c receives and dispatches. Every
 * message is validated before use; a bad one gets an error reply and a log
 * line and changes nothing.
 */
#ifndef PS_SERVER_H
#define PS_SERVER_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *scheduler;  /* scheduler endpoint, tcp://HOST:PORT */
    const char *bind;       /* where workers connect (port * = any free port) */
    const char *advertise;  /* host (or endpoint) announced to workers; NULL: proto/addr.h */
    int rank;               /* wanted rank, -1 = assigned by the scheduler */
    double connect_timeout; /* seconds to wait for the scheduler's answer */
    double peer_timeout;    /* seconds of scheduler silence that mean it is lost */
    const char *job_id;      /* the job it belongs to (--job-id); NULL = any */
    const char *secret_file; /* the job's secret (--secret-file); NULL = none */
    const char *job_hash;    /* that job's configuration hash (--job-hash); NULL = unchecked */
    double scheduler_grace; /* then go on this long for it to come back (0: give up) */
    double report_missing;  /* a step waiting this long logs which workers it waits for */
    int secure;             /* CurveZMQ on every socket, only the job's keys admitted */
    const char *keys;       /* --secure: the job's key directory (shardps-keygen) */
    const char *metrics_bind; /* serve Prometheus metrics on HOST:PORT; NULL = not served */
    const char *trace;       /* write a Chrome trace here at the end; NULL = no trace */
    const char *trace_steps; /* "A:B": trace steps A <= s < B; NULL = every step */
    int trace_kib;           /* the trace's budget in KiB (memory and file) */
    int spare;              /* register as a spare: wait to replace a lost server */
    const char *checkpoint_dir; /* this server's copy of the job's checkpoint directory;
                                   NULL = the scheduler's path (the same on this host) */
} ps_server_config_t;

/* Joins the job and serves until it ends. Returns the process exit status:
 * 0 after a clean shutdown, 1 on any failure (logged as one line). */
int ps_server_run(const ps_server_config_t *cfg);

#ifdef __cplusplus
}
#endif
#endif
