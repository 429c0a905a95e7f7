/*
 * tests/unit/test_failover.c - the failover module without sockets
 * (scheduler/failover.h).
 *
 * Its state: spares register once per connection and are forgotten when
 * silent or closed; a promoted spare leaves the spares and its spare id is
 * remembered; a replaced server's connection is known; the servers' answers
 * to a failover complete it once, with the steps (stepped) or updates
 * (async) lost; the first step after the rollback closes every open
 * replacement's recovery time, once.
 *
 * Its events (ps_failover_events) over a fake core (tests/unit/sched_fake.h),
 * whose rows and view change as the real core's do when asked: a server
 * registering while the job runs waits as a spare; a lost server is
 * replaced from the newest complete checkpoint (a real manifest in a
 * temporary directory), or not taken without checkpoints, a spare or a
 * complete checkpoint; every server's answer of the generation sends the
 * workers the failover, an older generation's is ignored, and a server lost
 * during a recovery starts the answers again; hot replicas are made from
 * spares, take a lost rank over in step, are made again, and go when their
 * primary is replaced from a checkpoint; a restarted scheduler's spares
 * register again once; the summary's fields.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "scheduler/failover.h"
#include "scheduler/manifest.h"
#include "tests/unit/sched_fake.h"
#include "tests/unit/testutil.h"

enum { S_SERVERS = 3, S_WORKERS = 2 };

/* ---- a job: the fake core, the agreement, the checkpoints, the module ---- */

typedef struct {
    ps_fake_t core;
    ps_agree_t *agree;
    ps_ckpt_t *ckpt;
    ps_failover_t *f;
    char dir[64]; /* the checkpoints' (checkpoints on), else "" */
} s_job_t;

enum { S_CKPT = 1, S_RUNNING = 2 };

/* A job of S_SERVERS x S_WORKERS with `replicas` hot replicas per server;
 * flags: S_CKPT (checkpoints in a fresh temporary directory), S_RUNNING
 * (every node registered, phase RUNNING; else WAITING, nobody). */
static s_job_t *s_open(int flags, int replicas)
{
    s_job_t *j = calloc(1, sizeof *j);
    ck_assert_ptr_nonnull(j);
    ps_fake_init(&j->core, S_SERVERS, S_WORKERS);
    j->core.cfg.replicas = replicas;
    if (flags & S_CKPT) {
        snprintf(j->dir, sizeof j->dir, "/tmp/test_failover.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(j->dir));
        j->core.cfg.checkpoint_dir = j->dir;
        j->core.cfg.checkpoint_every = 10;
    }
    if (flags & S_RUNNING) {
        ps_fake_running(&j->core);
    }
    ck_assert_int_eq(ps_agree_new(&j->agree, &j->core.ops), 0);
    ck_assert_int_eq(ps_ckpt_new(&j->ckpt, &j->core.ops, j->agree), 0);
    ck_assert_int_eq(ps_ckpt_view(j->ckpt, &j->core.view), 0);
    ck_assert_int_eq(ps_ckpt_enabled(j->ckpt), (flags & S_CKPT) != 0);
    ck_assert_int_eq(ps_failover_new(&j->f, &j->core.ops, j->agree, j->ckpt), 0);
    return j;
}

static void s_close(s_job_t *j)
{
    ps_failover_destroy(&j->f);
    ck_assert_ptr_null(j->f);
    ps_ckpt_destroy(&j->ckpt);
    ps_agree_destroy(&j->agree);
    if (j->dir[0]) {
        ps_fake_rmtree(j->dir);
    }
    ps_fake_fini(&j->core);
    free(j);
}

/* Checkpoint step: the parts of the first `parts` servers are durable (all
 * of them: its manifest is written). */
static void s_checkpoint(s_job_t *j, int64_t step, int parts)
{
    ps_manifest_t *m;
    static const ps_manifest_job_t job; /* a job that records nothing */
    ck_assert_int_eq(ps_manifest_new(&m, &j->core.view, &job), 0);
    for (int r = 0; r < parts; r++) {
        ps_checkpoint_part_t p = {.step = step, .size = 100, .crc32 = 7, .version = step};
        snprintf(p.file, sizeof p.file, "server-%d.safetensors", r);
        p.begin = j->core.view.servers[r].begin;
        p.end = j->core.view.servers[r].end;
        ck_assert_int_eq(ps_manifest_add(m, r, &p), r == S_SERVERS - 1);
    }
    ps_manifest_destroy(&m);
}

/* The REGISTER of server `name` (pid, fd) with reg's other fields. Returns
 * what on_register said. */
static int s_register(s_job_t *j, const char *name, Shardps__Register *reg, int fd)
{
    ps_msg_t m = {0};
    const ps_route_t route = ps_fake_route(name);
    ps_fake_msg(&m, &route, PS_ROLE_SERVER, reg->rank, PS_MSG_REGISTER, 0, &reg->base);
    m.peer_fd = fd;
    const int took = ps_failover_events.on_register(j->f, &m, reg);
    ps_msg_close(&m);
    return took;
}

/* Spare `name` (pid 77, fd 40 + its id) registers; asserts it was taken and
 * acknowledged. Returns its spare id. */
static int s_spare(s_job_t *j, const char *name)
{
    Shardps__Register reg = SHARDPS__REGISTER__INIT;
    reg.role = PS_ROLE_SERVER;
    reg.rank = -1;
    reg.pid = 77;
    reg.spare = 1;
    const int fd = 40 + ps_failover_next_id(j->f);
    ck_assert_int_eq(s_register(j, name, &reg, fd), 1);
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_REGISTER_ACK, name);
    ck_assert_ptr_nonnull(s);
    Shardps__RegisterAck *ack = ps_fake_unpack(s, &shardps__register_ack__descriptor);
    ck_assert_ptr_nonnull(ack);
    const int id = ack->rank;
    ck_assert_uint_eq(ack->run_id, j->core.facts.run_id);
    protobuf_c_message_free_unpacked(&ack->base, NULL);
    return id;
}

/* A message of type from the connection `name` claiming server `sender`
 * (body: NULL or a message), as the core offers one of no node (n NULL).
 * Returns what on_message said. */
static int s_stranger(s_job_t *j, const char *name, int sender, ps_msg_type_t type,
                      const ProtobufCMessage *body)
{
    ps_msg_t m = {0};
    const ps_route_t route = ps_fake_route(name);
    ps_fake_msg(&m, &route, PS_ROLE_SERVER, sender, type, j->core.view.generation, body);
    const int took = ps_failover_events.on_message(j->f, NULL, &m);
    ps_msg_close(&m);
    return took;
}

/* Server r is lost: silent for `silent` seconds, or its connection closed. */
static int s_lose(s_job_t *j, int r, double silent, int closed)
{
    const ps_loss_t loss = {.silent = silent, .closed = closed, .fd = closed ? 90 + r : -1};
    return ps_failover_events.on_lost(j->f, ps_fake_row(&j->core, PS_ROLE_SERVER, r), &loss);
}

/* Server r answers failover `generation` (stepped: its first step after). */
static int s_ready(s_job_t *j, int r, int64_t generation, int stepped)
{
    Shardps__FailoverReady rd = SHARDPS__FAILOVER_READY__INIT;
    rd.generation = generation;
    rd.step = j->core.view.start_step;
    rd.from_version = j->core.view.start_step + 5;
    rd.stepped = stepped != 0;
    const ps_node_t *n = ps_fake_row(&j->core, PS_ROLE_SERVER, r);
    ps_msg_t m = {0};
    ps_fake_msg_from(&j->core, &m, n, PS_MSG_FAILOVER_READY, &rd.base);
    const int took = ps_failover_events.on_message(j->f, n, &m);
    ps_msg_close(&m);
    return took;
}

/* The view in the last message of type sent to tag (asserted there). Free
 * with protobuf_c_message_free_unpacked. */
static Shardps__ClusterView *s_view_sent(const s_job_t *j, ps_msg_type_t type, const char *tag)
{
    const ps_fake_sent_t *s = ps_fake_last(&j->core, type, tag);
    ck_assert_msg(s != NULL, "no message %d to %s", (int)type, tag);
    Shardps__ClusterView *v = ps_fake_unpack(s, &shardps__cluster_view__descriptor);
    ck_assert_ptr_nonnull(v);
    return v;
}

static int s_same_route(const ps_route_t *a, const char *name)
{
    const ps_route_t b = ps_fake_route(name);
    return a->len == b.len && !memcmp(a->id, b.id, b.len);
}

/* ---- the state, without the core ---------------------------------------- */

static ps_route_t s_route(int k)
{
    ps_route_t r = {.len = 5};
    memcpy(r.id, "\x00rt", 3);
    r.id[3] = (uint8_t)(k >> 8);
    r.id[4] = (uint8_t)k;
    return r;
}

/* Adds spare k (route k, pid 100 + k, fd 10 + k) at now; asserts it took. */
static const ps_node_t *s_add(ps_failover_t *f, int k, double now)
{
    const ps_node_t *n = NULL;
    const char *why = NULL;
    ps_route_t r = s_route(k);
    ck_assert_int_eq(ps_failover_spare_add(f, &r, 100u + (unsigned)k, 10 + k, "key", now, &n,
                                           &why),
                     0);
    ck_assert_ptr_nonnull(n);
    return n;
}

static Shardps__FailoverReady s_rd(int64_t generation, int64_t step, int64_t from, int stepped)
{
    Shardps__FailoverReady rd = SHARDPS__FAILOVER_READY__INIT;
    rd.generation = generation;
    rd.step = step;
    rd.from_version = from;
    rd.stepped = stepped != 0;
    return rd;
}

START_TEST(spares_get_ids_past_the_servers_once_per_connection)
{
    s_job_t *j = s_open(0, 0);
    ps_failover_t *f = j->f;
    const ps_node_t *a = s_add(f, 1, 0);
    ck_assert_int_eq(a->rank, S_SERVERS);
    ck_assert_int_eq(a->role, PS_ROLE_SERVER);
    ck_assert_str_eq(a->curve_key, "key");
    ck_assert_str_eq(a->endpoint, ""); /* it binds once promoted */
    ck_assert_int_eq(s_add(f, 2, 0)->rank, S_SERVERS + 1);
    const ps_node_t *n = NULL;
    const char *why = NULL;
    ps_route_t again = s_route(1);
    ck_assert_int_eq(ps_failover_spare_add(f, &again, 1, 1, "", 0, &n, &why), PS_ESTATE);
    ck_assert_str_eq(why, "this spare is registered already");
    ck_assert_int_eq(ps_failover_spares(f), 2);
    for (int k = 3; ps_failover_spares(f) < PS_FAILOVER_MAX_SPARES; k++) {
        s_add(f, k, 0);
    }
    ps_route_t more = s_route(999);
    ck_assert_int_eq(ps_failover_spare_add(f, &more, 1, 1, "", 0, &n, &why), PS_ESTATE);
    ck_assert_str_eq(why, "too many spares wait already");
    s_close(j);
    ps_failover_t *none = NULL;
    ps_failover_destroy(&none); /* NULL-safe */
}
END_TEST

START_TEST(a_restarted_scheduler_numbers_new_spares_past_its_predecessors)
{
    s_job_t *j = s_open(0, 0);
    ps_failover_t *f = j->f;
    ck_assert_int_eq(ps_failover_next_id(f), S_SERVERS);
    /* the state file said the old scheduler gave ids up to S_SERVERS + 3 */
    ck_assert_int_eq(ps_failover_readmit_below(f, S_SERVERS + 4), 0);
    ck_assert_int_eq(ps_failover_next_id(f), S_SERVERS + 4);
    ck_assert_int_eq(s_add(f, 1, 0)->rank, S_SERVERS + 4);
    ck_assert_int_eq(ps_failover_next_id(f), S_SERVERS + 5);
    /* none saved (or fewer than given here): nothing changes */
    ck_assert_int_eq(ps_failover_readmit_below(f, 0), 0);
    ck_assert_int_eq(ps_failover_next_id(f), S_SERVERS + 5);
    s_close(j);
}
END_TEST

START_TEST(silent_or_closed_spares_are_forgotten_and_heartbeats_keep_them)
{
    s_job_t *j = s_open(0, 0);
    ps_failover_t *f = j->f;
    s_add(f, 1, 0.0);
    const int id2 = s_add(f, 2, 0.0)->rank;
    s_add(f, 3, 0.0);
    ps_route_t r2 = s_route(2), stranger = s_route(7);
    ck_assert_int_eq(ps_failover_spare_seen(f, &r2, id2 + 1, 4.0), 0); /* another's id */
    ck_assert_int_eq(ps_failover_spare_seen(f, &stranger, id2, 4.0), 0);
    ck_assert_int_eq(ps_failover_spare_seen(f, &r2, id2, 4.0), 1);
    ck_assert_int_eq(ps_failover_spares_expire(f, 5.5, 5.0), 2); /* 1 and 3: silent 5.5 s */
    ck_assert_int_eq(ps_failover_spares(f), 1);
    ck_assert_int_eq(ps_failover_spare_seen(f, &r2, id2, 5.5), 1);
    ck_assert_int_eq(ps_failover_spare_closed(f, 11), 0); /* spare 1's fd: gone already */
    ck_assert_int_eq(ps_failover_spare_closed(f, -1), 0);
    ck_assert_int_eq(ps_failover_spare_closed(f, 12), 1);
    ck_assert_int_eq(ps_failover_spares(f), 0);
    s_close(j);
}
END_TEST

START_TEST(a_promoted_spare_leaves_the_spares_and_its_id_is_kept)
{
    s_job_t *j = s_open(0, 0);
    ps_failover_t *f = j->f;
    ps_node_t spare;
    ck_assert_int_eq(ps_failover_promote(f, 1, &spare), PS_ENOENT); /* none waits */
    s_add(f, 1, 0);
    s_add(f, 2, 0);
    ck_assert_int_eq(ps_failover_promoted_id(f, 1), -1);
    ck_assert_int_eq(ps_failover_promote(f, S_SERVERS, &spare), PS_ENOENT); /* no such server */
    ck_assert_int_eq(ps_failover_promote(f, 1, &spare), 0);
    ck_assert_int_eq(ps_failover_spares(f), 1);
    ck_assert_int_eq(ps_failover_promoted_id(f, 1), spare.rank);
    ck_assert_int_eq(ps_failover_promoted_id(f, 0), -1);
    ck_assert_int_eq(ps_failover_promoted_id(f, -1), -1);
    ps_route_t was = spare.route;
    ck_assert_int_eq(ps_failover_spare_seen(f, &was, spare.rank, 1), 0); /* no spare now */
    ck_assert_int_eq(ps_failover_promote(f, 2, &spare), 0);
    ck_assert_int_eq(ps_failover_spares(f), 0);
    ck_assert_int_ne(ps_failover_promoted_id(f, 1), ps_failover_promoted_id(f, 2));
    s_close(j);
}
END_TEST

START_TEST(a_replaced_servers_connection_is_known)
{
    s_job_t *j = s_open(0, 0);
    ps_failover_t *f = j->f;
    ps_route_t old = s_route(40), other = s_route(41);
    ck_assert_int_eq(ps_failover_retired(f, &old), 0);
    ps_failover_retire(f, &old);
    ck_assert_int_eq(ps_failover_retired(f, &old), 1);
    ck_assert_int_eq(ps_failover_retired(f, &other), 0);
    s_close(j);
}
END_TEST

START_TEST(stepped_every_server_answers_once_then_the_workers_roll_back)
{
    s_job_t *j = s_open(0, 0);
    ps_failover_t *f = j->f;
    Shardps__FailoverReady rd = s_rd(1, 50, 57, 0);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 1, 10.0), 0); /* no failover yet */
    ck_assert_int_eq(ps_failover_record(f, 1, 1, 50, 10.0, 5.0, 1), 0);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 1, 10.1), 0);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 1, 10.1), 0); /* answered already */
    ck_assert_int_eq(ps_failover_ready(f, S_SERVERS, &rd, 1, 10.1), 0); /* no such server */
    rd = s_rd(1, 50, 0, 0);
    ck_assert_int_eq(ps_failover_ready(f, 1, &rd, 1, 10.2), 0); /* the spare */
    rd = s_rd(1, 50, 60, 0);
    ck_assert_int_eq(ps_failover_ready(f, 2, &rd, 1, 10.3), 1); /* the last: phase 2 */
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(f, &reps), 1);
    ck_assert_int_eq(reps[0].rank, 1);
    ck_assert_int_eq(reps[0].generation, 1);
    ck_assert_int_eq(reps[0].step, 50);
    ck_assert_int_eq(reps[0].steps_lost, 10); /* the farthest server stood at 60 */
    ck_assert_int_eq(reps[0].updates_lost, 0);
    ck_assert(reps[0].detect_s == 5.0);
    ck_assert(reps[0].recover_s < 0); /* until the first step after the rollback */
    rd = s_rd(1, 51, 0, 1);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 1, 12.5), 0);
    ck_assert(ps_test_close(reps[0].recover_s, 2.5, 1e-9, 0));
    ck_assert_int_eq(ps_failover_ready(f, 2, &rd, 1, 20.0), 0); /* closed once */
    ck_assert(ps_test_close(reps[0].recover_s, 2.5, 1e-9, 0));
    s_close(j);
}
END_TEST

START_TEST(async_counts_the_updates_lost_from_the_others_highest_version)
{
    s_job_t *j = s_open(0, 0);
    ps_failover_t *f = j->f;
    ck_assert_int_eq(ps_failover_record(f, 2, 1, 30, 1.0, 5.0, 0), 0);
    Shardps__FailoverReady rd = s_rd(1, 0, 47, 0);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 0, 1.1), 0);
    rd = s_rd(1, 40, 0, 0); /* the spare: its part's version */
    ck_assert_int_eq(ps_failover_ready(f, 2, &rd, 0, 1.2), 0);
    rd = s_rd(1, 0, 45, 0);
    ck_assert_int_eq(ps_failover_ready(f, 1, &rd, 0, 1.3), 1);
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(f, &reps), 1);
    ck_assert_int_eq(reps[0].base, 40);
    ck_assert_int_eq(reps[0].updates_lost, 7); /* 47 - 40 */
    ck_assert_int_eq(reps[0].steps_lost, 0);
    s_close(j);
}
END_TEST

START_TEST(a_server_lost_during_a_recovery_ends_with_it)
{
    s_job_t *j = s_open(0, 0);
    ps_failover_t *f = j->f;
    ck_assert_int_eq(ps_failover_record(f, 0, 1, 50, 10.0, 5.0, 1), 0);
    ck_assert_int_eq(ps_failover_record(f, 2, 2, 50, 11.0, 4.0, 1), 0);
    Shardps__FailoverReady rd = s_rd(2, 50, 50, 0);
    for (int r = 0; r < S_SERVERS; r++) { /* the second one's answers start afresh */
        ck_assert_int_eq(ps_failover_ready(f, r, &rd, 1, 11.5), r == S_SERVERS - 1);
    }
    rd = s_rd(2, 51, 0, 1);
    ck_assert_int_eq(ps_failover_ready(f, 1, &rd, 1, 13.0), 0);
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(f, &reps), 2);
    ck_assert(ps_test_close(reps[0].recover_s, 3.0, 1e-9, 0));
    ck_assert(ps_test_close(reps[1].recover_s, 2.0, 1e-9, 0));
    for (int k = 0; k < 20; k++) { /* the records grow */
        ck_assert_int_eq(ps_failover_record(f, 1, 3 + k, 50, 20.0, 1.0, 1), 0);
    }
    ck_assert_int_eq(ps_failover_replacements(f, &reps), 22);
    ck_assert_int_eq(reps[21].generation, 22);
    s_close(j);
}
END_TEST

/* ---- the events, over the fake core -------------------------------------- */

START_TEST(a_server_registering_while_the_job_runs_waits_as_a_spare)
{
    s_job_t *j = s_open(S_RUNNING, 0);
    Shardps__Register reg = SHARDPS__REGISTER__INIT;
    reg.role = PS_ROLE_SERVER;
    reg.rank = -1;
    reg.pid = 77;
    ck_assert_int_eq(s_register(j, "spare1", &reg, 41), 1); /* no spare flag: it runs */
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_REGISTER_ACK, "spare1");
    ck_assert_ptr_nonnull(s);
    Shardps__RegisterAck *ack = ps_fake_unpack(s, &shardps__register_ack__descriptor);
    ck_assert_ptr_nonnull(ack);
    ck_assert_int_eq(ack->rank, S_SERVERS); /* its spare id */
    protobuf_c_message_free_unpacked(&ack->base, NULL);
    ck_assert_int_eq(j->core.saves, 1); /* its id, for a restarted scheduler */
    ck_assert_int_eq(ps_failover_spares(j->f), 1);
    ck_assert_int_eq(ps_failover_cold_spares(j->f), 1);
    /* the same connection again: refused, nothing saved */
    ck_assert_int_eq(s_register(j, "spare1", &reg, 41), 1);
    s = ps_fake_last(&j->core, PS_MSG_ERROR, "spare1");
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->status, PS_ESTATE);
    ck_assert_str_eq(s->why, "this spare is registered already");
    ck_assert_int_eq(j->core.saves, 1);
    /* a worker, or a connection that is a node of the job: not the module's */
    reg.role = PS_ROLE_WORKER;
    ck_assert_int_eq(s_register(j, "W9", &reg, 42), 0);
    reg.role = PS_ROLE_SERVER;
    ck_assert_int_eq(s_register(j, "S0", &reg, 42), 0);
    ck_assert_int_eq(ps_failover_spares(j->f), 1);
    /* its heartbeats keep it; under another's id they are no spare's */
    ck_assert_int_eq(s_stranger(j, "spare1", S_SERVERS, PS_MSG_HEARTBEAT, NULL), 1);
    ck_assert_int_eq(s_stranger(j, "spare1", S_SERVERS + 1, PS_MSG_HEARTBEAT, NULL), 0);
    /* the core's heartbeats and SHUTDOWNs reach it, nothing else */
    ps_fake_clear(&j->core);
    ps_failover_send_spares(j->f, PS_MSG_HEARTBEAT, NULL);
    ps_failover_send_spares(j->f, PS_MSG_BARRIER, NULL);
    ps_failover_send_spares(NULL, PS_MSG_HEARTBEAT, NULL);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_HEARTBEAT, "spare1"), 1);
    ck_assert_int_eq(j->core.nsent, 1);
    /* its connection closes: it is forgotten */
    const ps_loss_t closed = {.silent = 0, .closed = 1, .fd = 41};
    ck_assert_int_eq(ps_failover_events.on_lost(j->f, NULL, &closed), 1);
    ck_assert_int_eq(ps_failover_spares(j->f), 0);
    ck_assert_int_eq(ps_failover_events.on_lost(j->f, NULL, &closed), 0);
    s_close(j);
}
END_TEST

START_TEST(before_the_job_only_asked_spares_wait_and_none_once_it_ends)
{
    s_job_t *j = s_open(0, 0); /* WAITING */
    Shardps__Register reg = SHARDPS__REGISTER__INIT;
    reg.role = PS_ROLE_SERVER;
    reg.rank = -1;
    ck_assert_int_eq(s_register(j, "S7", &reg, -1), 0); /* one of the job's servers */
    reg.spare = 1;
    ck_assert_int_eq(s_register(j, "spare1", &reg, -1), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_REGISTER_ACK, "spare1"), 1);
    j->core.facts.phase = PS_PHASE_REPORTING;
    ck_assert_int_eq(s_register(j, "spare2", &reg, -1), 1);
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_ERROR, "spare2");
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->status, PS_ESTATE);
    ck_assert_str_eq(s->why, "the job is ending");
    ck_assert_int_eq(ps_failover_spares(j->f), 1);
    s_close(j);
}
END_TEST

START_TEST(a_lost_server_is_replaced_from_the_newest_complete_checkpoint)
{
    s_job_t *j = s_open(S_CKPT | S_RUNNING, 0);
    const int id = s_spare(j, "spare1");
    s_checkpoint(j, 10, S_SERVERS);
    s_checkpoint(j, 20, S_SERVERS);
    s_checkpoint(j, 30, S_SERVERS - 1); /* not complete: no manifest */
    ck_assert_int_eq(ps_agree_start(j->agree, -1, 0, 1), 0);
    ps_fake_row(&j->core, PS_ROLE_WORKER, 0)->done = 1;
    ps_fake_clear(&j->core);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 1);
    /* the core was asked: S1 is the spare's, the view rolls back to 20 */
    ck_assert_int_eq(j->core.replaced, 2);
    ck_assert_int_eq(j->core.taken_over, 0);
    const ps_node_t *s1 = ps_fake_row(&j->core, PS_ROLE_SERVER, 1);
    ck_assert(s_same_route(&s1->route, "spare1"));
    ck_assert_uint_eq(s1->pid, 77);
    const ps_view_t *v = &j->core.view;
    ck_assert_int_eq(v->generation, 1);
    ck_assert_int_eq(v->start_step, 20);
    ck_assert_int_eq(v->resume_parts, S_SERVERS);
    char want[128];
    snprintf(want, sizeof want, "%s/step-20", j->dir);
    ck_assert_str_eq(v->resume_dir, want);
    ck_assert_str_eq(v->resume_files[1].file, "server-1.safetensors");
    /* the spare gets the VIEW with its rank, the others MSG_FAILOVER */
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_VIEW, "S1"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "S1"), 0);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "S0"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "S2"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W0"), 0); /* not yet */
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_MEMBERS, NULL), 0);  /* every one lives */
    Shardps__ClusterView *cv = s_view_sent(j, PS_MSG_VIEW, "S1");
    ck_assert_int_eq(cv->replaced_rank, 2);
    ck_assert_int_eq(cv->generation, 1);
    ck_assert_int_eq(cv->start_step, 20);
    ck_assert(s_same_route(&ps_fake_last(&j->core, PS_MSG_VIEW, "S1")->to, "spare1"));
    protobuf_c_message_free_unpacked(&cv->base, NULL);
    /* the agreement starts again, the workers finish again */
    ck_assert_int_eq(ps_agree_active(j->agree), 0);
    ck_assert_int_eq(j->core.rollbacks, 1);
    ck_assert_int_eq(ps_fake_row(&j->core, PS_ROLE_WORKER, 0)->done, 0);
    /* the module's figures */
    ck_assert_int_eq(ps_failover_spares(j->f), 0);
    ck_assert_int_eq(ps_failover_promoted_id(j->f, 1), id);
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(j->f, &reps), 1);
    ck_assert_int_eq(reps[0].rank, 1);
    ck_assert_int_eq(reps[0].step, 20);
    ck_assert_int_eq(reps[0].generation, 1);
    ck_assert(reps[0].detect_s == 6.0);
    ck_assert_int_eq(reps[0].takeover, 0);
    s_close(j);
}
END_TEST

START_TEST(a_replaced_servers_connection_is_told_to_go)
{
    s_job_t *j = s_open(S_CKPT | S_RUNNING, 0);
    const int id = s_spare(j, "spare1");
    s_checkpoint(j, 20, S_SERVERS);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 1);
    ps_fake_clear(&j->core);
    /* the old S1, alive after all */
    ck_assert_int_eq(s_stranger(j, "S1", 1, PS_MSG_HEARTBEAT, NULL), 1);
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_SHUTDOWN, NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert(s_same_route(&s->to, "S1"));
    Shardps__Shutdown *sd = ps_fake_unpack(s, &shardps__shutdown__descriptor);
    ck_assert_ptr_nonnull(sd);
    ck_assert_int_eq(sd->status, PS_ECLOSED);
    ck_assert_str_eq(sd->reason, "this server was declared lost and replaced");
    protobuf_c_message_free_unpacked(&sd->base, NULL);
    /* the promoted spare's heartbeats under its spare id are taken, nothing
     * else it says under that id */
    ck_assert_int_eq(s_stranger(j, "spare1", id, PS_MSG_HEARTBEAT, NULL), 1);
    ck_assert_int_eq(s_stranger(j, "spare1", id, PS_MSG_PEER_READY, NULL), 0);
    ck_assert_int_eq(s_stranger(j, "nobody", 1, PS_MSG_HEARTBEAT, NULL), 0);
    ck_assert_int_eq(j->core.nsent, 1);
    s_close(j);
}
END_TEST

START_TEST(a_lost_server_is_not_taken_without_checkpoints_a_spare_or_a_complete_one)
{
    s_job_t *j = s_open(S_RUNNING, 0); /* checkpoints off */
    s_spare(j, "spare1");
    ps_fake_clear(&j->core);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 0);
    ck_assert_int_eq(s_lose(j, 1, 0.5, 1), 0);
    ck_assert_int_eq(j->core.replaced, 0);
    ck_assert_int_eq(j->core.nsent, 0);
    ck_assert_int_eq(ps_failover_spares(j->f), 1);
    s_close(j);

    j = s_open(S_CKPT | S_RUNNING, 0); /* no spare */
    s_checkpoint(j, 20, S_SERVERS);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 0);
    ck_assert_int_eq(s_lose(j, 1, 0.5, 1), 0);
    ck_assert_int_eq(j->core.replaced, 0);
    s_close(j);

    j = s_open(S_CKPT | S_RUNNING, 0); /* no complete checkpoint yet */
    s_spare(j, "spare1");
    s_checkpoint(j, 20, S_SERVERS - 1);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 0);
    ck_assert_int_eq(j->core.replaced, 0);
    ck_assert_int_eq(ps_failover_spares(j->f), 1); /* still waits */
    ck_assert_int_eq(ps_failover_replacements(j->f, &(const ps_failover_rep_t *){NULL}), 0);
    /* before the job runs: not the module's */
    j->core.facts.phase = PS_PHASE_WAITING;
    s_checkpoint(j, 30, S_SERVERS);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 0);
    ck_assert_int_eq(j->core.replaced, 0);
    /* after training: only its report is missing */
    j->core.facts.phase = PS_PHASE_REPORTING;
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 1);
    ck_assert_int_eq(j->core.replaced, 0);
    ck_assert_int_eq(ps_fake_row(&j->core, PS_ROLE_SERVER, 1)->used, 0);
    ck_assert_int_eq(ps_fake_row(&j->core, PS_ROLE_SERVER, 1)->reported, 1);
    /* a worker is never the module's */
    const ps_loss_t loss = {.silent = 6.0, .closed = 0, .fd = -1};
    ck_assert_int_eq(ps_failover_events.on_lost(
                         j->f, ps_fake_row(&j->core, PS_ROLE_WORKER, 0), &loss),
                     0);
    s_close(j);
}
END_TEST

START_TEST(every_servers_answer_of_the_generation_sends_the_workers_the_failover)
{
    s_job_t *j = s_open(S_CKPT | S_RUNNING, 0);
    s_spare(j, "spare1");
    s_checkpoint(j, 20, S_SERVERS);
    ps_fake_row(&j->core, PS_ROLE_WORKER, 1)->lost = 1; /* left out (--min-workers) */
    ck_assert_int_eq(s_lose(j, 2, 6.0, 0), 1);
    /* the spare starts with every worker live: it learns the live set */
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_MEMBERS, "S2");
    ck_assert_ptr_nonnull(s);
    ck_assert(s_same_route(&s->to, "spare1"));
    Shardps__Members *mb = ps_fake_unpack(s, &shardps__members__descriptor);
    ck_assert_ptr_nonnull(mb);
    ck_assert_uint_eq(mb->n_live, 1);
    ck_assert_int_eq(mb->live[0], 0);
    protobuf_c_message_free_unpacked(&mb->base, NULL);
    ps_fake_clear(&j->core);
    ck_assert_int_eq(s_ready(j, 0, 1, 0), 1);
    ck_assert_int_eq(s_ready(j, 2, 1, 0), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, NULL), 0);
    ck_assert_int_eq(s_ready(j, 1, 1, 0), 1); /* the last */
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W0"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W1"), 0); /* left out */
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, NULL), 1);
    Shardps__ClusterView *cv = s_view_sent(j, PS_MSG_FAILOVER, "W0");
    ck_assert_int_eq(cv->generation, 1);
    ck_assert_int_eq(cv->replaced_rank, 3);
    ck_assert_int_eq(cv->start_step, 20);
    protobuf_c_message_free_unpacked(&cv->base, NULL);
    ck_assert_int_eq(s_ready(j, 1, 1, 0), 1); /* answered already: once */
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, NULL), 1);
    /* the first step after it ends the recovery time */
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(j->f, &reps), 1);
    ck_assert(reps[0].recover_s < 0);
    ck_assert_int_eq(s_ready(j, 0, 1, 1), 1);
    ck_assert(reps[0].recover_s >= 0);
    s_close(j);
}
END_TEST

START_TEST(an_older_generations_failover_ready_is_ignored)
{
    s_job_t *j = s_open(S_CKPT | S_RUNNING, 0);
    s_spare(j, "spare1");
    s_checkpoint(j, 20, S_SERVERS);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 1);
    ps_fake_clear(&j->core);
    for (int r = 0; r < S_SERVERS; r++) {
        ck_assert_int_eq(s_ready(j, r, 0, 0), 1); /* taken, and dropped */
    }
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, NULL), 0);
    for (int r = 0; r < S_SERVERS; r++) {
        ck_assert_int_eq(s_ready(j, r, 1, 0), 1);
    }
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W0"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W1"), 1);
    /* other messages of the job's nodes are not the module's */
    ps_msg_t m = {0};
    const ps_node_t *w0 = ps_fake_row(&j->core, PS_ROLE_WORKER, 0);
    ps_fake_msg_from(&j->core, &m, w0, PS_MSG_HEARTBEAT, NULL);
    ck_assert_int_eq(ps_failover_events.on_message(j->f, w0, &m), 0);
    ps_msg_close(&m);
    s_close(j);
}
END_TEST

START_TEST(a_server_lost_during_a_recovery_starts_the_answers_again)
{
    s_job_t *j = s_open(S_CKPT | S_RUNNING, 0);
    s_spare(j, "spare1");
    s_spare(j, "spare2");
    s_checkpoint(j, 20, S_SERVERS);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 1);
    ck_assert_int_eq(s_ready(j, 0, 1, 0), 1);
    ck_assert_int_eq(s_ready(j, 1, 1, 0), 1);
    ps_fake_clear(&j->core);
    ck_assert_int_eq(s_lose(j, 2, 6.0, 1), 1); /* closed, during the recovery */
    ck_assert_int_eq(j->core.view.generation, 2);
    ck_assert_int_eq(j->core.replaced, 3);
    ck_assert(s_same_route(&ps_fake_row(&j->core, PS_ROLE_SERVER, 2)->route, "spare2"));
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_VIEW, "S2"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "S0"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "S1"), 1);
    ck_assert_int_eq(j->core.rollbacks, 2);
    ck_assert_int_eq(s_ready(j, 2, 1, 0), 1); /* the first one's: ignored */
    ck_assert_int_eq(s_ready(j, 0, 2, 0), 1);
    ck_assert_int_eq(s_ready(j, 1, 2, 0), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W0"), 0);
    ck_assert_int_eq(s_ready(j, 2, 2, 0), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W0"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W1"), 1);
    Shardps__ClusterView *cv = s_view_sent(j, PS_MSG_FAILOVER, "W0");
    ck_assert_int_eq(cv->generation, 2);
    protobuf_c_message_free_unpacked(&cv->base, NULL);
    ck_assert_int_eq(s_ready(j, 1, 2, 1), 1); /* the first step after: both recovered */
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(j->f, &reps), 2);
    ck_assert(reps[0].recover_s >= 0);
    ck_assert(reps[1].recover_s >= 0);
    ck_assert_int_eq(ps_failover_counts(j->f).replacements, 2);
    s_close(j);
}
END_TEST

/* Spare `name` (registered) follows a server after a tick: asserts its VIEW
 * says the rank it follows (r) and a token. Returns the token. */
static uint64_t s_follows(s_job_t *j, const char *name, int r)
{
    ps_failover_events.on_tick(j->f, ps_now());
    Shardps__ClusterView *cv = s_view_sent(j, PS_MSG_VIEW, name);
    ck_assert_int_eq(cv->replica_of, r + 1);
    ck_assert_int_eq(cv->replaced_rank, 0);
    ck_assert_int_eq(cv->takeover, 0);
    const uint64_t token = cv->replica_token;
    ck_assert_uint_ne(token, 0);
    protobuf_c_message_free_unpacked(&cv->base, NULL);
    return token;
}

/* Replica `name` (spare id) says where it listens, then that it is in step. */
static void s_replica_ready(s_job_t *j, const char *name, int id, const char *endpoint)
{
    Shardps__PeerReady pr = SHARDPS__PEER_READY__INIT;
    pr.endpoint = (char *)endpoint;
    ck_assert_int_eq(s_stranger(j, name, id, PS_MSG_PEER_READY, &pr.base), 1);
    Shardps__Replica rp = SHARDPS__REPLICA__INIT;
    ck_assert_int_eq(s_stranger(j, name, id, PS_MSG_REPLICA, &rp.base), 1);
}

START_TEST(a_spare_becomes_a_replica_and_its_primary_learns_where_it_listens)
{
    s_job_t *j = s_open(S_RUNNING, 1);
    const int id = s_spare(j, "spare1");
    const uint64_t token = s_follows(j, "spare1", 0);
    ck_assert_int_eq(j->core.view.replica_of, 0); /* the job's view is not the replica's */
    ck_assert_uint_eq(j->core.view.replica_token, 0);
    ck_assert_int_eq(ps_failover_spares(j->f), 1);
    ck_assert_int_eq(ps_failover_cold_spares(j->f), 0); /* a replica waits for no view */
    ps_failover_events.on_tick(j->f, ps_now());
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_VIEW, "spare1"), 1); /* once */
    Shardps__PeerReady pr = SHARDPS__PEER_READY__INIT;
    pr.endpoint = (char *)"tcp://10.0.0.9:7100";
    ck_assert_int_eq(s_stranger(j, "spare1", id, PS_MSG_PEER_READY, &pr.base), 1);
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_REPLICA, "S0");
    ck_assert_ptr_nonnull(s);
    Shardps__Replica *rp = ps_fake_unpack(s, &shardps__replica__descriptor);
    ck_assert_ptr_nonnull(rp);
    ck_assert_str_eq(rp->endpoint, "tcp://10.0.0.9:7100");
    ck_assert_int_eq(rp->rank, id);
    ck_assert_uint_eq(rp->token, token);
    ck_assert_uint_eq(rp->n_keep, 1);
    ck_assert_int_eq(rp->keep[0], id);
    protobuf_c_message_free_unpacked(&rp->base, NULL);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_REPLICA, NULL), 1);
    /* said again: told once */
    ck_assert_int_eq(s_stranger(j, "spare1", id, PS_MSG_PEER_READY, &pr.base), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_REPLICA, NULL), 1);
    Shardps__Replica in = SHARDPS__REPLICA__INIT; /* in step */
    ck_assert_int_eq(s_stranger(j, "spare1", id, PS_MSG_REPLICA, &in.base), 1);
    ck_assert_int_eq(ps_failover_counts(j->f).rebuilds, 0); /* a first replica, no rebuild */
    s_close(j);
}
END_TEST

START_TEST(a_lost_replica_is_made_again_from_a_spare)
{
    s_job_t *j = s_open(S_RUNNING, 1);
    const int id = s_spare(j, "spare1");
    s_follows(j, "spare1", 0);
    s_spare(j, "spare2");
    s_follows(j, "spare2", 1);
    ps_fake_clear(&j->core);
    const ps_loss_t closed = {.silent = 0, .closed = 1, .fd = 40 + id};
    ck_assert_int_eq(ps_failover_events.on_lost(j->f, NULL, &closed), 1);
    ps_failover_events.on_tick(j->f, ps_now());
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_REPLICA, "S0");
    ck_assert_ptr_nonnull(s); /* S0 drops it */
    Shardps__Replica *rp = ps_fake_unpack(s, &shardps__replica__descriptor);
    ck_assert_ptr_nonnull(rp);
    ck_assert_uint_eq(rp->n_keep, 0);
    ck_assert_str_eq(rp->endpoint, "");
    protobuf_c_message_free_unpacked(&rp->base, NULL);
    s_spare(j, "spare3");
    s_follows(j, "spare3", 0);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_VIEW, "spare2"), 0); /* S1's stays */
    s_close(j);
}
END_TEST

START_TEST(a_replica_in_step_takes_the_rank_over_and_nothing_rolls_back)
{
    s_job_t *j = s_open(S_RUNNING, 1); /* no checkpoints: a takeover needs none */
    const int id = s_spare(j, "spare1");
    s_spare(j, "spareB"); /* S1's and S2's replicas */
    s_spare(j, "spareC");
    s_follows(j, "spare1", 0);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_VIEW, "spareB"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_VIEW, "spareC"), 1);
    s_replica_ready(j, "spare1", id, "tcp://10.0.0.9:7100");
    j->core.view.start_step = 7;
    ck_assert_int_eq(ps_agree_start(j->agree, -1, 0, 0), 0);
    ps_fake_clear(&j->core);
    ck_assert_int_eq(s_lose(j, 0, 6.0, 0), 1);
    ck_assert_int_eq(j->core.taken_over, 1);
    ck_assert_int_eq(j->core.replaced, 0);
    const ps_node_t *s0 = ps_fake_row(&j->core, PS_ROLE_SERVER, 0);
    ck_assert(s_same_route(&s0->route, "spare1"));
    ck_assert_str_eq(s0->endpoint, "tcp://10.0.0.9:7100");
    ck_assert_int_eq(s0->ready, 1);
    ck_assert_int_eq(j->core.view.generation, 1);
    ck_assert_int_eq(j->core.view.takeover, 1);
    ck_assert_int_eq(j->core.view.start_step, 7); /* nothing rolls back */
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_VIEW, NULL), 0);
    for (int r = 0; r < S_SERVERS; r++) {
        char tag[8];
        snprintf(tag, sizeof tag, "S%d", r);
        ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, tag), 1);
    }
    Shardps__ClusterView *cv = s_view_sent(j, PS_MSG_FAILOVER, "S1");
    ck_assert_int_eq(cv->takeover, 1);
    ck_assert_int_eq(cv->replaced_rank, 1);
    protobuf_c_message_free_unpacked(&cv->base, NULL);
    ck_assert_int_eq(ps_agree_active(j->agree), 0);
    ck_assert_int_eq(j->core.rollbacks, 1); /* DONEs of the step under way: sent again */
    ps_failover_counts_t c = ps_failover_counts(j->f);
    ck_assert_int_eq(c.takeovers, 1);
    ck_assert_int_eq(c.replacements, 1);
    ck_assert_int_eq(c.steps_rolled_back, 0);
    ck_assert_int_eq(ps_failover_spares(j->f), 2); /* S1's and S2's replicas */
    for (int r = 0; r < S_SERVERS; r++) {
        ck_assert_int_eq(s_ready(j, r, 1, 0), 1);
    }
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W0"), 1);
    /* the rebuild: a new spare follows S0 once the new primary was heard */
    const int id2 = s_spare(j, "spare2");
    ps_failover_events.on_tick(j->f, ps_now());
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_VIEW, "spare2"), 0);
    ck_assert_int_eq(ps_failover_cold_spares(j->f), 1);
    ps_fake_row(&j->core, PS_ROLE_SERVER, 0)->last_seen = ps_now() + 1.0;
    s_follows(j, "spare2", 0);
    s_replica_ready(j, "spare2", id2, "tcp://10.0.0.10:7100");
    c = ps_failover_counts(j->f);
    ck_assert_int_eq(c.rebuilds, 1);
    ck_assert(c.rebuild_max_s >= 0);
    s_close(j);
}
END_TEST

/* Training over (every worker done, reports asked for): the replica takes
 * the rank over, the workers are left alone, and once every server has
 * answered the new primary is asked for the rank's report. Without a
 * replica or checkpoints the report is only missing: the job ends. */
START_TEST(a_replica_takes_the_rank_over_once_training_is_over)
{
    s_job_t *j = s_open(S_RUNNING, 1);
    const int id = s_spare(j, "spare1");
    s_follows(j, "spare1", 0);
    s_replica_ready(j, "spare1", id, "tcp://10.0.0.9:7100");
    j->core.facts.phase = PS_PHASE_REPORTING;
    ps_fake_clear(&j->core);
    ck_assert_int_eq(s_lose(j, 0, 6.0, 0), 1);
    ck_assert_int_eq(j->core.taken_over, 1);
    ck_assert_int_eq(j->core.rollbacks, 0); /* the workers' DONEs stand */
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "S0"), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_REPORT, NULL), 0);
    for (int r = 0; r < S_SERVERS; r++) {
        ck_assert_int_eq(s_ready(j, r, 1, 0), 1);
    }
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_FAILOVER, "W0"), 0);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_REPORT, "S0"), 1);
    ck_assert(s_same_route(&ps_fake_last(&j->core, PS_MSG_REPORT, "S0")->to, "spare1"));
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(j->f, &reps), 1);
    ck_assert(reps[0].takeover && reps[0].recover_s >= 0);
    /* S1 has no replica and the job no checkpoints: its report is missing */
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 1);
    ck_assert_int_eq(ps_fake_row(&j->core, PS_ROLE_SERVER, 1)->reported, 1);
    s_close(j);
}
END_TEST

START_TEST(a_replica_not_in_step_goes_when_its_primary_is_replaced_from_a_checkpoint)
{
    s_job_t *j = s_open(S_CKPT | S_RUNNING, 1);
    s_spare(j, "spare1");
    s_follows(j, "spare1", 0); /* never in step */
    s_spare(j, "spare2");      /* cold: no tick since */
    s_checkpoint(j, 20, S_SERVERS);
    ps_fake_clear(&j->core);
    ck_assert_int_eq(s_lose(j, 0, 6.0, 0), 1);
    ck_assert_int_eq(j->core.taken_over, 0);
    ck_assert_int_eq(j->core.replaced, 1);
    ck_assert(s_same_route(&ps_fake_row(&j->core, PS_ROLE_SERVER, 0)->route, "spare2"));
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_SHUTDOWN, "spare1");
    ck_assert_ptr_nonnull(s);
    Shardps__Shutdown *sd = ps_fake_unpack(s, &shardps__shutdown__descriptor);
    ck_assert_ptr_nonnull(sd);
    ck_assert_str_eq(sd->reason, "the server this replica followed was replaced");
    protobuf_c_message_free_unpacked(&sd->base, NULL);
    ck_assert_int_eq(ps_failover_spares(j->f), 0);
    s_close(j);
}
END_TEST

START_TEST(a_restarted_schedulers_spare_registers_again_once)
{
    s_job_t *j = s_open(S_RUNNING, 1);
    ck_assert_int_eq(ps_failover_readmit_below(j->f, S_SERVERS + 2), 0);
    Shardps__Register reg = SHARDPS__REGISTER__INIT;
    reg.role = PS_ROLE_SERVER;
    reg.rank = S_SERVERS + 1; /* its spare id */
    reg.run_id = j->core.facts.run_id;
    reg.pid = 88;
    ck_assert_int_eq(s_register(j, "spareA", &reg, -1), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_REGISTER_ACK, "spareA"), 1);
    ck_assert_int_eq(s_register(j, "spareA", &reg, -1), 1); /* its answer was lost */
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_REGISTER_ACK, "spareA"), 2);
    ck_assert_int_eq(ps_failover_spares(j->f), 1);
    /* the same id on another connection: it was taken back once already */
    ck_assert_int_eq(s_register(j, "spareB", &reg, -1), 1);
    const ps_fake_sent_t *s = ps_fake_last(&j->core, PS_MSG_SHUTDOWN, "spareB");
    ck_assert_ptr_nonnull(s);
    Shardps__Shutdown *sd = ps_fake_unpack(s, &shardps__shutdown__descriptor);
    ck_assert_ptr_nonnull(sd);
    ck_assert_int_eq(sd->status, PS_ECLOSED);
    ck_assert_str_eq(sd->reason, "this spare was left out of the job");
    protobuf_c_message_free_unpacked(&sd->base, NULL);
    /* a hot replica in step comes back with its rank, token and endpoint: a
     * takeover finds it */
    reg.rank = S_SERVERS;
    reg.follows = 2;
    reg.in_step = 1;
    reg.replica_token = 99;
    reg.endpoint = (char *)"tcp://10.0.0.5:7200";
    ck_assert_int_eq(s_register(j, "spareC", &reg, -1), 1);
    ck_assert_int_eq(ps_fake_count(&j->core, PS_MSG_REGISTER_ACK, "spareC"), 1);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 1);
    ck_assert_int_eq(j->core.taken_over, 2);
    ck_assert_str_eq(ps_fake_row(&j->core, PS_ROLE_SERVER, 1)->endpoint, "tcp://10.0.0.5:7200");
    s_close(j);
}
END_TEST

START_TEST(the_summary_lists_the_replacements_replicas_and_spares_left)
{
    json_t *doc = json_object();
    ck_assert_int_eq(ps_failover_json(doc, NULL), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "server_replacements")), 0);
    ck_assert_int_eq(json_integer_value(ps_json_path(doc, "replicas.per_server")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "spares_left")), 0);
    json_decref(doc);

    s_job_t *j = s_open(S_CKPT | S_RUNNING, 2);
    s_spare(j, "spare1");
    s_spare(j, "spare2");
    s_checkpoint(j, 20, S_SERVERS);
    ck_assert_int_eq(s_lose(j, 1, 6.0, 0), 1);
    doc = json_object();
    ck_assert_int_eq(ps_failover_json(doc, j->f), 0);
    const json_t *reps = json_object_get(doc, "server_replacements");
    ck_assert_uint_eq(json_array_size(reps), 1);
    ck_assert_int_eq(json_integer_value(ps_json_path(doc, "server_replacements.0.rank")), 1);
    ck_assert_int_eq(json_integer_value(ps_json_path(doc, "server_replacements.0.step")), 20);
    ck_assert(json_is_false(ps_json_path(doc, "server_replacements.0.takeover")));
    ck_assert_int_eq(json_integer_value(ps_json_path(doc, "replicas.per_server")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "spares_left")), 1);
    json_decref(doc);
    s_close(j);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("failover");
    TCase *tc = tcase_create("state");
    tcase_add_test(tc, spares_get_ids_past_the_servers_once_per_connection);
    tcase_add_test(tc, a_restarted_scheduler_numbers_new_spares_past_its_predecessors);
    tcase_add_test(tc, silent_or_closed_spares_are_forgotten_and_heartbeats_keep_them);
    tcase_add_test(tc, a_promoted_spare_leaves_the_spares_and_its_id_is_kept);
    tcase_add_test(tc, a_replaced_servers_connection_is_known);
    tcase_add_test(tc, stepped_every_server_answers_once_then_the_workers_roll_back);
    tcase_add_test(tc, async_counts_the_updates_lost_from_the_others_highest_version);
    tcase_add_test(tc, a_server_lost_during_a_recovery_ends_with_it);
    suite_add_tcase(s, tc);
    tc = tcase_create("events");
    tcase_add_test(tc, a_server_registering_while_the_job_runs_waits_as_a_spare);
    tcase_add_test(tc, before_the_job_only_asked_spares_wait_and_none_once_it_ends);
    tcase_add_test(tc, a_lost_server_is_replaced_from_the_newest_complete_checkpoint);
    tcase_add_test(tc, a_replaced_servers_connection_is_told_to_go);
    tcase_add_test(tc, a_lost_server_is_not_taken_without_checkpoints_a_spare_or_a_complete_one);
    tcase_add_test(tc, every_servers_answer_of_the_generation_sends_the_workers_the_failover);
    tcase_add_test(tc, an_older_generations_failover_ready_is_ignored);
    tcase_add_test(tc, a_server_lost_during_a_recovery_starts_the_answers_again);
    tcase_add_test(tc, a_spare_becomes_a_replica_and_its_primary_learns_where_it_listens);
    tcase_add_test(tc, a_lost_replica_is_made_again_from_a_spare);
    tcase_add_test(tc, a_replica_in_step_takes_the_rank_over_and_nothing_rolls_back);
    tcase_add_test(tc, a_replica_takes_the_rank_over_once_training_is_over);
    tcase_add_test(tc, a_replica_not_in_step_goes_when_its_primary_is_replaced_from_a_checkpoint);
    tcase_add_test(tc, a_restarted_schedulers_spare_registers_again_once);
    tcase_add_test(tc, the_summary_lists_the_replacements_replicas_and_spares_left);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
