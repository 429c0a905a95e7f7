/*
 * deploy/status.h - asking a running job's scheduler for its cluster view
 * (MSG_STATUS), and printing it: shardps-status uses both, the launcher the
 * first (its per-run plots are made from the answers).
 */
#ifndef PS_DEPLOY_STATUS_H
#define PS_DEPLOY_STATUS_H

#include <stddef.h>
#include <stdio.h>

#include "proto/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_status_client ps_status_client_t;

/* A client of the scheduler at endpoint; keys: a --secure job's key directory
 * (the client proves the worker key), or NULL. Caller owns the result;
 * destroy with ps_status_client_destroy(). Returns 0 or PS_EINVAL /
 * PS_ENOMEM with a reason. */
int ps_status_client_new(const char *endpoint, const char *keys, ps_status_client_t **out,
                         char *err, size_t errlen);
void ps_status_client_destroy(ps_status_client_t **c);

/* Asks once and waits up to timeout seconds. Returns 0 with the view in *st
 * (caller owns the result; free with shardps__status_reply__free_unpacked(*st,
 * NULL)), PS_ETIMEDOUT, or PS_EPROTO with a reason. */
int ps_status_client_query(ps_status_client_t *c, double timeout, Shardps__StatusReply **st,
                           char *err, size_t errlen);

/* Prints the view: the job line, one line per node (state, keys or step,
 * rate, what it waits for) and, when a step waits, which workers it waits
 * for ("step 12 waits for: W1 (on S0 S1)"). */
void ps_status_print(FILE *f, const Shardps__StatusReply *st);

/* The view as one line of compact JSON: {"phase", "model", "mode", "step"
 * (worker 0's), "total_steps", "num_params", "elapsed_seconds", "nodes": [{
 * "node" ("S0"), "role", "rank", "state", "endpoint", "pid", then a server's
 * "key_begin", "key_end", "version", "waiting_for", "waited_seconds" or a
 * worker's "step", "steps_per_second", "samples_per_second", "loss",
 * "test_accuracy" (-1: none yet), and "silent_seconds"}]}. Returns 0 or
 * PS_ENOMEM (nothing printed). */
int ps_status_print_json(FILE *f, const Shardps__StatusReply *st);

#ifdef __cplusplus
}
#endif
#endif
