/* scheduler/phase.c - the phase transition table (scheduler/phase.h). */
#include "scheduler/phase.h"

#include "common/error.h"

/* s_next[phase][event] + 1: 0 is "no transition", so the table lists only
 * the legal ones. A second abort keeps FAILED (its reason is the newest). */
#define S_TO(p) ((p) + 1)
static const unsigned char s_next[PS_PHASE_COUNT][PS_PHASE_EV_COUNT] = {
    [PS_PHASE_WAITING] = {[PS_PHASE_EV_SERVERS_VIEWED] = S_TO(PS_PHASE_STARTING),
                          [PS_PHASE_EV_WORKERS_VIEWED] = S_TO(PS_PHASE_RUNNING),
                          [PS_PHASE_EV_SAVED_JOB_BACK] = S_TO(PS_PHASE_RECOVERING),
                          [PS_PHASE_EV_ABORT] = S_TO(PS_PHASE_FAILED)},
    [PS_PHASE_RECOVERING] = {[PS_PHASE_EV_ALL_BACK] = S_TO(PS_PHASE_RUNNING),
                             [PS_PHASE_EV_ABORT] = S_TO(PS_PHASE_FAILED)},
    [PS_PHASE_STARTING] = {[PS_PHASE_EV_WORKERS_VIEWED] = S_TO(PS_PHASE_RUNNING),
                           [PS_PHASE_EV_ABORT] = S_TO(PS_PHASE_FAILED)},
    [PS_PHASE_RUNNING] = {[PS_PHASE_EV_WORKERS_DONE] = S_TO(PS_PHASE_REPORTING),
                          [PS_PHASE_EV_ABORT] = S_TO(PS_PHASE_FAILED)},
    [PS_PHASE_REPORTING] = {[PS_PHASE_EV_REPORTS_IN] = S_TO(PS_PHASE_FINISHED),
                            [PS_PHASE_EV_ABORT] = S_TO(PS_PHASE_FAILED)},
    [PS_PHASE_FAILED] = {[PS_PHASE_EV_ABORT] = S_TO(PS_PHASE_FAILED)},
};

int ps_phase_next(ps_phase_t from, ps_phase_event_t ev, ps_phase_t *to)
{
    if ((unsigned)from >= PS_PHASE_COUNT || (unsigned)ev >= PS_PHASE_EV_COUNT) {
        return PS_EINVAL;
    }
    if (!s_next[from][ev]) {
        return PS_ESTATE;
    }
    *to = (ps_phase_t)(s_next[from][ev] - 1);
    return 0;
}

const char *ps_phase_name(ps_phase_t p)
{
    static const char *const names[PS_PHASE_COUNT] = {
        [PS_PHASE_WAITING] = "waiting",     [PS_PHASE_RECOVERING] = "recovering",
        [PS_PHASE_STARTING] = "starting",   [PS_PHASE_RUNNING] = "running",
        [PS_PHASE_REPORTING] = "reporting", [PS_PHASE_FINISHED] = "finished",
        [PS_PHASE_FAILED] = "failed"};
    return (unsigned)p < PS_PHASE_COUNT ? names[p] : "?";
}

const char *ps_phase_event_name(ps_phase_event_t ev)
{
    static const char *const names[PS_PHASE_EV_COUNT] = {
        [PS_PHASE_EV_SERVERS_VIEWED] = "servers_viewed",
        [PS_PHASE_EV_WORKERS_VIEWED] = "workers_viewed",
        [PS_PHASE_EV_SAVED_JOB_BACK] = "saved_job_back",
        [PS_PHASE_EV_ALL_BACK] = "all_back",
        [PS_PHASE_EV_WORKERS_DONE] = "workers_done",
        [PS_PHASE_EV_REPORTS_IN] = "reports_in",
        [PS_PHASE_EV_ABORT] = "abort"};
    return (unsigned)ev < PS_PHASE_EV_COUNT ? names[ev] : "?";
}
