/*
 * scheduler/phase.h - the job's phase as the scheduler sees it, and the one
 * table of the events that move it.
 *
 *   WAITING --servers_viewed--> STARTING --workers_viewed--> RUNNING
 *   WAITING --workers_viewed--> RUNNING (allreduce: no servers to bind)
 *   WAITING --saved_job_back--> RECOVERING --all_back--> RUNNING
 *   RUNNING --workers_done--> REPORTING --reports_in--> FINISHED
 *   any but FINISHED --abort--> FAILED
 *
 * A pure table: no state, no sockets. The scheduler keeps its phase and
 * changes it only through ps_scheduler_phase_event() (scheduler.c),
 * which asks ps_phase_next(); tests/unit/test_phase.c walks the table.
 * The order of the phases is the job's: a phase before STARTING has no view
 * sent to the workers yet.
 */
#ifndef PS_SCHEDULER_PHASE_H
#define PS_SCHEDULER_PHASE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PS_PHASE_WAITING,    /* for every node to register and report its model */
    PS_PHASE_RECOVERING, /* a restarted scheduler: the saved job's nodes register again */
    PS_PHASE_STARTING,   /* servers have the view and bind for their shard */
    PS_PHASE_RUNNING,    /* workers have the view: the job trains */
    PS_PHASE_REPORTING,  /* every worker is done; servers are asked for their report */
    PS_PHASE_FINISHED,   /* every report is in: the job ended well */
    PS_PHASE_FAILED,     /* the job was aborted */
    PS_PHASE_COUNT
} ps_phase_t;

typedef enum {
    PS_PHASE_EV_SERVERS_VIEWED, /* the servers got the view (and bind) */
    PS_PHASE_EV_WORKERS_VIEWED, /* the workers got the view: the job runs */
    PS_PHASE_EV_SAVED_JOB_BACK, /* a node of the saved job registered again */
    PS_PHASE_EV_ALL_BACK,       /* every node of the saved job is back */
    PS_PHASE_EV_WORKERS_DONE,   /* every live worker sent DONE */
    PS_PHASE_EV_REPORTS_IN,     /* every server sent its report */
    PS_PHASE_EV_ABORT,          /* the job fails */
    PS_PHASE_EV_COUNT
} ps_phase_event_t;

/* The phase that event ev leads to from phase `from`, in *to. Returns 0, or
 * PS_ESTATE when the table has no such transition (*to unchanged), or
 * PS_EINVAL for a phase or an event out of range. Thread-safe. */
int ps_phase_next(ps_phase_t from, ps_phase_event_t ev, ps_phase_t *to);

/* "waiting", "running", ... (the status view's words); "?" out of range. */
const char *ps_phase_name(ps_phase_t p);

/* "servers_viewed", "abort", ...; "?" out of range. */
const char *ps_phase_event_name(ps_phase_event_t ev);

#ifdef __cplusplus
}
#endif
#endif
