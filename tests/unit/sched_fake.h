/*
 * tests/unit/sched_fake.h - a scheduler core in memory, for the scheduler
 * modules' unit tests: a node table, a view and the facts, and the ops of
 * scheduler/module.h over them, which record what a module sends and asks
 * for instead of using sockets. The rows' changes follow the real core's
 * (scheduler/members.c) in what a module can see.
 */
#ifndef PS_TESTS_SCHED_FAKE_H
#define PS_TESTS_SCHED_FAKE_H

#include <stddef.h>
#include <stdint.h>

#include "scheduler/module.h"

enum { PS_FAKE_MAX_SENT = 512, PS_FAKE_MAX_NODES = 32, PS_FAKE_BODY = 8192 };

/* One message a module sent. */
typedef struct {
    ps_msg_type_t type;
    ps_route_t to;
    char tag[16];         /* "S0", "W1" for a row's route; "?" for any other */
    uint64_t request_id;  /* answers' */
    int status;           /* reply_error's */
    char why[512];        /* reply_error's */
    uint8_t body[PS_FAKE_BODY]; /* the packed body */
    size_t len;           /* 0: none */
} ps_fake_sent_t;

typedef struct {
    ps_scheduler_config_t cfg;
    ps_sched_facts_t facts;
    ps_view_t view;
    ps_node_t nodes[PS_FAKE_MAX_NODES]; /* servers, then workers */
    int nnodes;
    ps_sched_ops_t ops;
    ps_fake_sent_t *sent;   /* PS_FAKE_MAX_SENT */
    int nsent;
    int failed, fail_usage; /* fail was asked for, and with usage */
    char failure[512];
    int saves;              /* save_state */
    int rollbacks;          /* rollback */
    int barrier_checks;     /* barrier_check */
    int servers_started;    /* start_servers */
    int replaced, taken_over; /* replace, take_over: the last rank, + 1; 0: none */
    int saved_jobs;         /* saved_job */
    uint64_t next_token;    /* new_token's next; never 0 */
} ps_fake_t;

/* A job of servers x workers: sync, batch 32, 1 epoch, peer timeout 5 s,
 * wait 10 s; phase WAITING; every row unused (role and rank set). */
void ps_fake_init(ps_fake_t *f, int servers, int workers);
void ps_fake_fini(ps_fake_t *f);

/* The row of (role, rank), writable for a test's setup. */
ps_node_t *ps_fake_row(ps_fake_t *f, ps_role_t role, int rank);

/* The route a test's node of `tag` ("S0", "W1", "spare2") speaks on. */
ps_route_t ps_fake_route(const char *tag);

/* Row (role, rank) registered: used, its route ps_fake_route("S0"), pid
 * 1000 + index, a token, seen now. Returns the row. */
ps_node_t *ps_fake_register(ps_fake_t *f, ps_role_t role, int rank);

/* Every server and worker registered, the view's job set, phase RUNNING. */
void ps_fake_running(ps_fake_t *f);

/* m (closed or zeroed) as if received on route from (role, sender), of
 * generation, with body packed into its one frame (NULL: none). Close with
 * ps_msg_close(). */
void ps_fake_msg(ps_msg_t *m, const ps_route_t *route, ps_role_t role, int sender,
                 ps_msg_type_t type, int64_t generation, const ProtobufCMessage *body);

/* m as if row n sent it at the view's generation. */
void ps_fake_msg_from(ps_fake_t *f, ps_msg_t *m, const ps_node_t *n, ps_msg_type_t type,
                      const ProtobufCMessage *body);

/* Messages sent of type (PS_MSG_ANY: every type); to tag only, unless NULL. */
enum { PS_MSG_ANY = -1 };
int ps_fake_count(const ps_fake_t *f, int type, const char *tag);

/* The last message of type sent (to tag, unless NULL), or NULL. */
const ps_fake_sent_t *ps_fake_last(const ps_fake_t *f, int type, const char *tag);

/* A sent message's body unpacked as d: free with
 * protobuf_c_message_free_unpacked(x, NULL). NULL when it does not decode. */
void *ps_fake_unpack(const ps_fake_sent_t *s, const ProtobufCMessageDescriptor *d);

/* Forgets what was sent. */
void ps_fake_clear(ps_fake_t *f);

/* Removes dir and everything under it (a test's checkpoint directory). */
void ps_fake_rmtree(const char *dir);

#endif
