/*
 * common/ratelog.h - rejections logged without flooding the log.
 *
 * A node under attack (or a broken peer) may send thousands of bad messages
 * a second; one log line each buries everything else. Here the first
 * rejection of each (what, peer, reason) is logged in full; the later ones are
 * counted and summarised once per period: "12,345 more rejected in 10 s
 * (PULL from tcp://127.0.0.1): unknown sender". At most PS_RATELOG_KEYS keys are
 * told apart; the rest share one "other reasons" entry, so the number of
 * lines per period is bounded whatever arrives. Not thread-safe: one thread
 * (a role's event loop) makes every call.
 */
#ifndef PS_COMMON_RATELOG_H
#define PS_COMMON_RATELOG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pairs told apart; seconds between summaries (the roles' default). */
enum { PS_RATELOG_KEYS = 64, PS_RATELOG_PERIOD = 10 };

typedef struct ps_ratelog ps_ratelog_t;

/* A logger summarising every period seconds. Returns 0 or PS_ENOMEM. Caller
 * owns *out; destroy with ps_ratelog_destroy(). */
int ps_ratelog_new(ps_ratelog_t **out, double period);

/* Logs what is still counted, then frees; NULL-safe; sets *r to NULL. */
void ps_ratelog_destroy(ps_ratelog_t **r);

/*
 * One rejection of a message of kind what (its type) from peer (any text
 * naming the sender) for reason. The first of a (what, peer, reason) logs a
 * warning "rejected what from peer: reason"; later ones are counted for the
 * next summary. Returns the
 * number of rejections counted so far in total.
 */
uint64_t ps_ratelog_reject(ps_ratelog_t *r, const char *what, const char *peer,
                           const char *reason);

/* Call now and then: logs one summary line per (peer, reason) counted since
 * the last one, at most once per period. */
void ps_ratelog_tick(ps_ratelog_t *r);

#ifdef __cplusplus
}
#endif
#endif
