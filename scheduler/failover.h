/*
 * scheduler/failover.h - spare servers and the replacement of a lost one.
 *
 * A server that registers as a spare (Register.spare, or any server that
 * registers once the job runs) waits, heartbeating, outside the job. When a
 * server is lost and checkpoints are on, the scheduler promotes a spare to
 * the lost rank and rolls the whole job back to the newest complete
 * checkpoint N, in two phases under a new generation:
 *   1. the spare gets the VIEW (replaced = its rank + 1, resume from N) and
 *      loads its keys; every other server gets MSG_FAILOVER and reloads its
 *      own keys of N (a consistent cut needs every server at one step); each
 *      answers MSG_FAILOVER_READY;
 *   2. once all have, every live worker gets MSG_FAILOVER: it reconnects to
 *      the new endpoint and starts again at step N (data order of step N).
 * Data and DONEs of an older generation are dropped, so nothing sent before a
 * node rolled back counts after. The first step a server applies after the
 * rollback ends the recovery time (MSG_FAILOVER_READY, stepped).
 *
 * Private to scheduler/ (it works on scheduler_impl.h's state). One thread.
 */
#ifndef PS_SCHEDULER_FAILOVER_H
#define PS_SCHEDULER_FAILOVER_H


#include "common/json.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "scheduler/scheduler_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Spares waiting at once, at most. */
enum { PS_FAILOVER_MAX_SPARES = 64 };

/* The failover state of a job with `servers` servers. Returns 0 or PS_ENOMEM.
 * Caller owns *out; destroy with ps_failover_destroy(). */
int ps_failover_new(ps_failover_t **out, int servers);

/* NULL-safe; sets *f to NULL. */
void ps_failover_destroy(ps_failover_t **f);

/* A server's registration that makes a spare: it asked to be one, or the job
 * already runs. */
int ps_failover_is_spare(const ps_scheduler_t *s, const ps_register_t *reg);

/* Registers m's sender as a spare (answers REGISTER_ACK with its spare id,
 * servers + k) or refuses it. */
void ps_failover_add_spare(ps_scheduler_t *s, const ps_msg_t *m, const ps_register_t *reg);

/* A message from a connection that is no node of the job: a spare's (its
 * heartbeats keep it alive; a promoted spare's last ones under its spare
 * id). Returns 1 when handled, 0 when it is no spare's. */
int ps_failover_on_spare_message(ps_scheduler_t *s, const ps_msg_t *m);

/* Server n is lost (silent for `silent` seconds). Returns 1 when the job goes
 * on (a spare takes its place and the job rolls back; or training is over and
 * only its report is missing), 0 when it cannot (one line says why) and the
 * caller fails the job as without failover. */
int ps_failover_replace(ps_scheduler_t *s, ps_node_t *n, double silent);

/* A connection of the scheduler's socket closed (fd: its descriptor): a
 * server on it is lost at once, without waiting for its silence, when it can
 * be replaced (else its silence decides, as before); a spare on it is
 * forgotten. */
void ps_failover_on_disconnect(ps_scheduler_t *s, int fd);

/* MSG_FAILOVER_READY from server n. */
void ps_failover_on_ready(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m);

/* Sends a heartbeat or a SHUTDOWN to every waiting spare too (s_send_all). */
void ps_failover_send_spares(ps_scheduler_t *s, ps_msg_type_t type, const void *body,
                             size_t len);

/* Every tick: spares silent for the peer timeout are forgotten. */
void ps_failover_tick(ps_scheduler_t *s);

/* Adds the summary's "server_replacements": [...] and "spares_left" fields
 * to doc. Returns 0 or PS_ENOMEM. */
int ps_failover_json(json_t *doc, const ps_scheduler_t *s);

#ifdef __cplusplus
}
#endif
#endif
