/*
 * server/server.h - a parameter server: one key range, its optimizer state, and
 * the consistency rule that decides when pushes are applied and pulls answered.
 *
 * sync:  pushes for step t are kept per worker; when every worker has pushed
 *        all of the range for t, they are summed in worker-rank order (so runs
 *        are bitwise reproducible), the mean is applied once, the version
 *        becomes t+1, and pulls waiting for version >= t+1 are answered.
 * async: each push is applied on arrival (version += 1); pulls get the current
 *        values. The staleness (version applied at - version computed on) is
 *        recorded.
 * Every message is validated before use; a bad one gets an error reply and a
 * log line and changes nothing.
 */
#ifndef PS_SERVER_H
#define PS_SERVER_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *scheduler;  /* scheduler endpoint, tcp://HOST:PORT */
    const char *bind;       /* where workers connect (port * = any free port) */
    const char *advertise;  /* endpoint announced to workers; default: the bound one */
    int rank;               /* wanted rank, -1 = assigned by the scheduler */
    double connect_timeout; /* seconds to wait for the scheduler's answer */
    double peer_timeout;    /* seconds of scheduler silence that mean it is lost */
    double report_missing;  /* a step waiting this long logs which workers it waits for */
} ps_server_config_t;

/* Joins the job and serves until it ends. Returns the process exit status:
 * 0 after a clean shutdown, 1 on any failure (logged as one line). */
int ps_server_run(const ps_server_config_t *cfg);

#ifdef __cplusplus
}
#endif
#endif
