/*
 * tests/unit/test_restart.c - a restarted scheduler (scheduler/restart.h)
 * driven through its events with a fake core (tests/unit/sched_fake.h), no
 * sockets: the state file written by ps_restart_save loads back, and a
 * corrupt, ended or other job's one does not, nor a hostile one, whose
 * reading costs a small multiple of its size; a REGISTER of another run is
 * refused; the first node of the saved job brings it back (RECOVERING), the
 * same node again is answered again, a node left out or taken is refused;
 * once every node is back the servers' holds are released and the job runs
 * on; after --wait a missing server fails the job and a missing worker is
 * left out when --min-workers allows. Ticks get their time explicitly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "scheduler/agree.h"
#include "scheduler/restart.h"
#include "tests/unit/sched_fake.h"
/* after module.h: Check's fail() macro would rename its ops->fail */
#include <check.h>

#include "tests/unit/testutil.h"

enum { S_SERVERS = 2, S_WORKERS = 3 };
#define S_RUN 0xabcdef0123456789ull

/* A restarted scheduler's fake core, its agreement, the module under test,
 * and the checkpoint directory it was started with (--resume DIR). */
typedef struct {
    ps_fake_t f;
    ps_agree_t *agree;
    ps_restart_t *r;
    char dir[64];
} s_env_t;

/* A scheduler of servers x workers just started with --checkpoint-dir and
 * --resume of a new temporary directory: WAITING, no node registered. */
static void s_open(s_env_t *e, int servers, int workers)
{
    ps_fake_init(&e->f, servers, workers);
    snprintf(e->dir, sizeof e->dir, "/tmp/shardps-test-restart-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(e->dir));
    e->f.cfg.checkpoint_dir = e->dir;
    e->f.cfg.resume = e->dir;
    ck_assert_int_eq(ps_agree_new(&e->agree, &e->f.ops), 0);
    ck_assert_int_eq(ps_restart_new(&e->r, &e->f.ops, e->agree), 0);
}

static void s_close(s_env_t *e)
{
    ps_restart_destroy(&e->r);
    ck_assert_ptr_null(e->r);
    ps_restart_destroy(&e->r); /* NULL-safe */
    ps_agree_destroy(&e->agree);
    ps_fake_fini(&e->f);
    ps_fake_rmtree(e->dir);
}

/* The state a scheduler of servers x workers running job S_RUN saves into
 * dir (workers lost[0..nlost) left out; finished: it ended), packed by the
 * core and written by ps_restart_save. */
static void s_write_state(const char *dir, int servers, int workers, const int32_t *lost,
                          size_t nlost, int finished)
{
    ps_fake_t *old = malloc(sizeof *old);
    ps_view_pb_t *pb = malloc(sizeof *pb);
    ps_restart_t *r;
    uint8_t *view, *body;
    size_t vlen, len;
    ck_assert_ptr_nonnull(old);
    ck_assert_ptr_nonnull(pb);
    ps_fake_init(old, servers, workers);
    old->cfg.checkpoint_dir = dir;
    ps_fake_running(old);
    ck_assert_int_eq(ps_codec_view_to_pb(&old->view, pb), 0);
    ck_assert_int_eq(ps_codec_pack(&pb->pb.base, &view, &vlen), 0);
    Shardps__JoinSchedulerState st = SHARDPS__JOIN_SCHEDULER_STATE__INIT;
    st.run_id = S_RUN;
    st.view.data = view;
    st.view.len = vlen;
    st.lost = (int32_t *)lost;
    st.n_lost = nlost;
    st.membership_changes = (int32_t)nlost;
    st.restarts = 2;
    st.checkpoint = 20;
    st.seconds = 50;
    st.finished = finished != 0;
    st.next_spare_id = 7;
    ck_assert_int_eq(ps_codec_pack(&st.base, &body, &len), 0);
    ck_assert_int_eq(ps_restart_new(&r, &old->ops, NULL), 0);
    ps_restart_save(r, body, len);
    ps_restart_destroy(&r);
    free(body);
    free(view);
    free(pb);
    ps_fake_fini(old);
    free(old);
}

/* Loads e's state, as the core does at start: 1 when it holds a saved job
 * (the job's run id is then the core's). */
static int s_load(s_env_t *e)
{
    uint64_t run_id = 1;
    int spare_id = -1;
    const int got = ps_restart_load(e->r, &run_id, &spare_id);
    if (got) {
        ck_assert_uint_eq(run_id, S_RUN);
        ck_assert_int_eq(spare_id, 7);
        e->f.facts.run_id = run_id;
    } else {
        ck_assert_uint_eq(run_id, 1);
        ck_assert_int_eq(spare_id, -1);
    }
    return got;
}

/* A REGISTER of (role, rank) with run_id and pid on the connection named
 * route, offered to the module. Returns what on_register did. */
static int s_register(s_env_t *e, ps_role_t role, int rank, const char *route, uint32_t pid,
                      uint64_t run_id)
{
    static ps_msg_t m;
    Shardps__Register reg = SHARDPS__REGISTER__INIT;
    ps_route_t rt = ps_fake_route(route);
    reg.role = role;
    reg.rank = rank;
    reg.pid = pid;
    reg.run_id = run_id;
    ps_fake_msg(&m, &rt, role, rank, PS_MSG_REGISTER, 0, &reg.base);
    const int took = ps_restart_events.on_register(e->r, &m, &reg);
    ps_msg_close(&m);
    return took;
}

/* The last error sent to route: its status and reason. */
static void s_refused(const s_env_t *e, const char *route, int status, const char *why)
{
    const ps_fake_sent_t *s = ps_fake_last(&e->f, PS_MSG_ERROR, route);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->status, status);
    ck_assert_str_eq(s->why, why);
}

/* The node of (role, rank) registers again, as it was (route its tag, pid
 * 100 + rank), and is answered. */
static void s_back(s_env_t *e, ps_role_t role, int rank)
{
    char tag[16];
    snprintf(tag, sizeof tag, "%s%d", role == PS_ROLE_SERVER ? "S" : "W", rank);
    const int acks = ps_fake_count(&e->f, PS_MSG_REGISTER_ACK, tag);
    ck_assert_int_eq(s_register(e, role, rank, tag, 100u + (uint32_t)rank, S_RUN), 1);
    ck_assert_int_eq(ps_fake_count(&e->f, PS_MSG_REGISTER_ACK, tag), acks + 1);
    ck_assert_int_eq(ps_fake_row(&e->f, role, rank)->used, 1);
}

START_TEST(a_saved_state_loads_back)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    const int32_t lost[] = {2};
    char sub[96], path[128], head[32] = "";
    snprintf(sub, sizeof sub, "%s/ckpt", e.dir); /* made by the first save */
    e.f.cfg.resume = sub;
    s_write_state(sub, S_SERVERS, S_WORKERS, lost, 1, 0);
    snprintf(path, sizeof path, "%s/scheduler.state", sub);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(head, 1, 26, f), 26);
    fclose(f);
    ck_assert_str_eq(head, "shardps-scheduler-state-1\n");
    ck_assert_int_eq(s_load(&e), 1);
    ck_assert_int_eq(ps_restart_count(e.r), 0); /* until its first node is back */
    s_close(&e);
}
END_TEST

START_TEST(without_a_checkpoint_dir_no_state_is_written)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    e.f.cfg.checkpoint_dir = NULL;
    const uint8_t body[] = {8, 1};
    ps_restart_save(e.r, body, sizeof body);
    char path[128];
    snprintf(path, sizeof path, "%s/scheduler.state", e.dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(s_load(&e), 0);
    s_close(&e);
}
END_TEST

/* Flips bits of the last byte of dir's state file. */
static void s_damage_state(const char *dir)
{
    char path[128];
    snprintf(path, sizeof path, "%s/scheduler.state", dir);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
    const int c = fgetc(f);
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
    fputc(c ^ 0x55, f);
    fclose(f);
}

START_TEST(a_corrupt_ended_or_other_jobs_state_is_not_taken)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    ck_assert_int_eq(s_load(&e), 0); /* none */
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 0);
    s_damage_state(e.dir);
    ck_assert_int_eq(s_load(&e), 0); /* its CRC-32 no longer checks out */
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 1);
    ck_assert_int_eq(s_load(&e), 0); /* it ended */
    s_write_state(e.dir, S_SERVERS, S_WORKERS + 1, NULL, 0, 0);
    ck_assert_int_eq(s_load(&e), 0); /* another job's */
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 0);
    e.f.cfg.resume = NULL;
    ck_assert_int_eq(s_load(&e), 0); /* not asked to resume */
    e.f.cfg.resume = e.dir;
    ck_assert_int_eq(s_load(&e), 1);
    s_close(&e);
}
END_TEST

static s_env_t *s_child_env; /* the scheduler a child loads the state of */

static int s_load_in_child(const void *arg)
{
    (void)arg;
    return s_load(s_child_env) ? PS_EINVAL : 0; /* PS_EINVAL: it was taken */
}

/* Writes e's state with a view of n empty servers (2 bytes each, a whole
 * struct each once decoded), its CRC-32 right. Returns the file's size. */
static long s_write_hostile(s_env_t *e, size_t n)
{
    uint8_t *view = malloc(2 * n), *body;
    size_t len;
    ck_assert_ptr_nonnull(view);
    for (size_t i = 0; i < n; i++) {
        view[2 * i] = 3 << 3 | 2; /* ClusterView.servers, length-delimited */
        view[2 * i + 1] = 0;
    }
    Shardps__JoinSchedulerState st = SHARDPS__JOIN_SCHEDULER_STATE__INIT;
    st.run_id = S_RUN;
    st.view.data = view;
    st.view.len = 2 * n;
    ck_assert_int_eq(ps_codec_pack(&st.base, &body, &len), 0);
    ps_restart_save(e->r, body, len);
    free(body);
    free(view);
    return (long)(len + 30); /* the magic line and the CRC-32 */
}

/* The state of as many nodes as the fake core holds loads; a hostile one
 * of 1 MiB is refused, the reader's peak (in a child, less that of one
 * reading nothing) within 9 times its size and 512 KiB; a longer one is
 * not read. */
START_TEST(a_real_state_loads_a_hostile_one_costs_a_small_multiple)
{
    s_env_t e;
    s_open(&e, PS_FAKE_MAX_NODES / 2, PS_FAKE_MAX_NODES / 2);
    s_write_state(e.dir, PS_FAKE_MAX_NODES / 2, PS_FAKE_MAX_NODES / 2, NULL, 0, 0);
    ck_assert_int_eq(s_load(&e), 1);
    s_close(&e);
#if defined(__SANITIZE_ADDRESS__)
    return; /* AddressSanitizer's shadow and quarantine are not the reader's */
#endif
    s_open(&e, S_SERVERS, S_WORKERS);
    s_child_env = &e;
    const long h = s_write_hostile(&e, (1 << 20) / 2 - 64);
    int rc;
    const long base = ps_test_child_peak(NULL, NULL, &rc);
    const long grew = ps_test_child_peak(s_load_in_child, NULL, &rc) - base;
    printf("a state of %ld bytes, %s, the peak grew by %ld bytes (%.1fx)\n", h,
           rc ? "taken" : "refused", grew, (double)grew / (double)h);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(grew <= 9 * h + (512 << 10), "%ld bytes took %ld", h, grew);
    s_write_hostile(&e, (1 << 20) / 2 + 64);
    ck_assert_int_eq(s_load(&e), 0);
    s_close(&e);
}
END_TEST

START_TEST(a_node_of_a_job_whose_state_is_corrupt_ends_the_job_at_once)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 0);
    s_damage_state(e.dir);
    ck_assert_int_eq(s_load(&e), 0);
    /* the job's node registers again: waiting would only spend its grace */
    ck_assert_int_eq(s_register(&e, PS_ROLE_WORKER, 1, "W1", 101, S_RUN), 1);
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_FAILED);
    ck_assert_ptr_nonnull(strstr(e.f.facts.failure, "W1's job cannot be taken back"));
    ck_assert_ptr_nonnull(strstr(e.f.facts.failure, "scheduler.state: it is corrupt"));
    ck_assert_ptr_nonnull(strstr(e.f.facts.failure, "holds no checkpoint"));
    const ps_fake_sent_t *sd = ps_fake_last(&e.f, PS_MSG_SHUTDOWN, "W1"); /* told to go */
    ck_assert_ptr_nonnull(sd);
    Shardps__Shutdown *body = ps_fake_unpack(sd, &shardps__shutdown__descriptor);
    ck_assert_ptr_nonnull(body);
    ck_assert_int_eq(body->status, 1);
    ck_assert_str_eq(body->reason, e.f.facts.failure);
    shardps__shutdown__free_unpacked(body, NULL);
    ck_assert_int_eq(e.f.saved_jobs, 0);
    s_close(&e);
}
END_TEST

START_TEST(a_register_of_another_run_is_refused)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 0);
    ck_assert_int_eq(s_load(&e), 1);
    ck_assert_int_eq(s_register(&e, PS_ROLE_WORKER, 0, "W0", 100, S_RUN + 1), 1);
    s_refused(&e, "W0", PS_ESTATE, "this scheduler runs another job");
    ck_assert_int_eq(e.f.saved_jobs, 0);
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_WAITING);
    /* no run id: a fresh node, not this module's */
    ck_assert_int_eq(s_register(&e, PS_ROLE_WORKER, 0, "W0", 100, 0), 0);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_ANY, NULL), 1);
    s_close(&e);
}
END_TEST

START_TEST(the_first_node_back_brings_the_saved_job_back)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    const int32_t lost[] = {2};
    s_write_state(e.dir, S_SERVERS, S_WORKERS, lost, 1, 0);
    ck_assert_int_eq(s_load(&e), 1);
    s_back(&e, PS_ROLE_SERVER, 1);
    ck_assert_int_eq(e.f.saved_jobs, 1);
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_RECOVERING);
    ck_assert_int_eq(ps_restart_count(e.r), 3); /* the saved job's 2, and this one */
    ck_assert_uint_eq(e.f.view.num_params, 1000); /* the saved view */
    ck_assert_int_eq(ps_fake_row(&e.f, PS_ROLE_WORKER, 2)->lost, 1);
    Shardps__RegisterAck *ack = ps_fake_unpack(ps_fake_last(&e.f, PS_MSG_REGISTER_ACK, "S1"),
                                               &shardps__register_ack__descriptor);
    ck_assert_ptr_nonnull(ack);
    ck_assert_int_eq(ack->rank, 1);
    ck_assert_uint_eq(ack->run_id, S_RUN);
    protobuf_c_message_free_unpacked(&ack->base, NULL);
    /* the same node again (its answer was lost): answered again */
    s_back(&e, PS_ROLE_SERVER, 1);
    ck_assert_int_eq(e.f.saved_jobs, 1);
    /* another process claiming S1 */
    ck_assert_int_eq(s_register(&e, PS_ROLE_SERVER, 1, "S1-other", 999, S_RUN), 1);
    s_refused(&e, "S1-other", PS_ESTATE, "S1 cannot register again: that node is registered");
    /* S1 itself on a new connection */
    ck_assert_int_eq(s_register(&e, PS_ROLE_SERVER, 1, "S1-new", 101, S_RUN), 1);
    const ps_route_t now_on = ps_fake_route("S1-new");
    const ps_node_t *s1 = ps_fake_row(&e.f, PS_ROLE_SERVER, 1);
    ck_assert_uint_eq(s1->route.len, now_on.len);
    ck_assert_mem_eq(s1->route.id, now_on.id, now_on.len);
    const ps_fake_sent_t *last = ps_fake_last(&e.f, PS_MSG_ANY, NULL);
    ck_assert_int_eq(last->type, PS_MSG_REGISTER_ACK);
    ck_assert_mem_eq(last->to.id, now_on.id, now_on.len);
    /* left out of the job before the restart */
    ck_assert_int_eq(s_register(&e, PS_ROLE_WORKER, 2, "W2", 102, S_RUN), 1);
    s_refused(&e, "W2", PS_ESTATE, "W2 cannot register again: it was left out of the job");
    ck_assert_int_eq(ps_fake_row(&e.f, PS_ROLE_WORKER, 2)->used, 0);
    /* no node of this job; a spare's id (failover.c's) */
    ck_assert_int_eq(s_register(&e, PS_ROLE_WORKER, S_WORKERS, "W3", 103, S_RUN), 1);
    s_refused(&e, "W3", PS_EINVAL, "W3 is not a node of this job");
    ck_assert_int_eq(s_register(&e, PS_ROLE_SERVER, S_SERVERS, "spare2", 200, S_RUN), 0);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_ANY, "spare2"), 0);
    ck_assert_int_eq(e.f.failed, 0);
    s_close(&e);
}
END_TEST

START_TEST(a_node_back_is_refused_unless_the_saved_job_comes_back)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    ck_assert_int_eq(s_load(&e), 0);
    e.f.facts.run_id = S_RUN; /* as if this run's id */
    ck_assert_int_eq(s_register(&e, PS_ROLE_WORKER, 0, "W0", 100, S_RUN), 1);
    s_refused(&e, "W0", PS_ESTATE,
              "W0 cannot register again: the scheduler is not bringing its job back");
    s_close(&e);

    /* a saved job, but fresh nodes registered first */
    s_open(&e, S_SERVERS, S_WORKERS);
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 0);
    ck_assert_int_eq(s_load(&e), 1);
    ps_fake_register(&e.f, PS_ROLE_SERVER, 0);
    ck_assert_int_eq(s_register(&e, PS_ROLE_WORKER, 0, "W0", 100, S_RUN), 1);
    s_refused(&e, "W0", PS_ESTATE,
              "W0 cannot register again: the scheduler is not bringing its job back");
    ck_assert_int_eq(e.f.saved_jobs, 0);
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_WAITING);
    s_close(&e);
}
END_TEST

START_TEST(the_job_runs_on_once_every_node_is_back)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    const int32_t lost[] = {1};
    s_write_state(e.dir, S_SERVERS, S_WORKERS, lost, 1, 0);
    ck_assert_int_eq(s_load(&e), 1);
    ps_restart_events.on_tick(e.r, 0); /* WAITING: nothing to do */
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_WAITING);
    s_back(&e, PS_ROLE_WORKER, 0);
    s_back(&e, PS_ROLE_SERVER, 0);
    s_back(&e, PS_ROLE_SERVER, 1);
    ps_restart_events.on_tick(e.r, 0); /* W2 is missing, --wait not over */
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_RECOVERING);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_STEP, NULL), 0);
    ck_assert_int_eq(e.f.saves, 0);
    s_back(&e, PS_ROLE_WORKER, 2);
    ps_restart_events.on_tick(e.r, ps_now());
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_RUNNING);
    ck_assert_int_eq(e.f.saves, 1);
    ck_assert_int_eq(e.f.failed, 0);
    /* every server's hold of an agreement the old scheduler left open ends */
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_STEP, NULL), S_SERVERS);
    for (int r = 0; r < S_SERVERS; r++) {
        char tag[8];
        snprintf(tag, sizeof tag, "S%d", r);
        Shardps__JoinStep *js = ps_fake_unpack(ps_fake_last(&e.f, PS_MSG_JOIN_STEP, tag),
                                               &shardps__join_step__descriptor);
        ck_assert_ptr_nonnull(js);
        ck_assert_int_eq(js->step, 0);
        ck_assert_int_eq(js->worker, -1);
        protobuf_c_message_free_unpacked(&js->base, NULL);
    }
    ps_restart_events.on_tick(e.r, ps_now()); /* once */
    ck_assert_int_eq(e.f.saves, 1);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_STEP, NULL), S_SERVERS);
    /* the job runs: a node of it registering again is refused */
    ck_assert_int_eq(s_register(&e, PS_ROLE_WORKER, 1, "W1", 101, S_RUN), 1);
    s_refused(&e, "W1", PS_ESTATE,
              "W1 cannot register again: the scheduler is not bringing its job back");
    s_close(&e);
}
END_TEST

START_TEST(after_wait_a_missing_server_fails_the_job)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 0);
    ck_assert_int_eq(s_load(&e), 1);
    s_back(&e, PS_ROLE_SERVER, 0);
    for (int w = 0; w < S_WORKERS; w++) {
        s_back(&e, PS_ROLE_WORKER, w);
    }
    ps_restart_events.on_tick(e.r, 0);
    ck_assert_int_eq(e.f.failed, 0);
    ps_restart_events.on_tick(e.r, ps_now() + e.f.cfg.wait + 1);
    ck_assert_int_eq(e.f.failed, 1);
    ck_assert_int_eq(e.f.fail_usage, 0);
    ck_assert_str_eq(e.f.failure, "S1 did not register again within 10 s (--wait)");
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_STEP, NULL), 0);
    ck_assert_int_eq(e.f.saves, 0);
    s_close(&e);
}
END_TEST

START_TEST(after_wait_a_missing_worker_is_left_out_as_min_workers_allows)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS);
    e.f.cfg.min_workers = S_WORKERS - 1;
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 0);
    ck_assert_int_eq(s_load(&e), 1);
    s_back(&e, PS_ROLE_SERVER, 0);
    s_back(&e, PS_ROLE_SERVER, 1);
    s_back(&e, PS_ROLE_WORKER, 0);
    s_back(&e, PS_ROLE_WORKER, 1);
    ps_restart_events.on_tick(e.r, ps_now() + e.f.cfg.wait + 1);
    ck_assert_int_eq(e.f.failed, 0);
    ck_assert_int_eq(ps_fake_row(&e.f, PS_ROLE_WORKER, 2)->lost, 1);
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_RUNNING);
    ck_assert_int_eq(e.f.saves, 1);
    s_close(&e);

    /* every worker is needed */
    s_open(&e, S_SERVERS, S_WORKERS);
    s_write_state(e.dir, S_SERVERS, S_WORKERS, NULL, 0, 0);
    ck_assert_int_eq(s_load(&e), 1);
    s_back(&e, PS_ROLE_SERVER, 0);
    s_back(&e, PS_ROLE_SERVER, 1);
    s_back(&e, PS_ROLE_WORKER, 0);
    s_back(&e, PS_ROLE_WORKER, 2);
    ps_restart_events.on_tick(e.r, ps_now() + e.f.cfg.wait + 1);
    ck_assert_int_eq(e.f.failed, 1);
    ck_assert_str_eq(e.f.failure, "W1 did not register again within 10 s (--wait)");
    ck_assert_int_eq(e.f.facts.phase, PS_PHASE_FAILED);
    s_close(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("restart");
    TCase *tc = tcase_create("restart");
    tcase_add_test(tc, a_saved_state_loads_back);
    tcase_add_test(tc, without_a_checkpoint_dir_no_state_is_written);
    tcase_add_test(tc, a_corrupt_ended_or_other_jobs_state_is_not_taken);
    tcase_add_test(tc, a_node_of_a_job_whose_state_is_corrupt_ends_the_job_at_once);
    tcase_add_test(tc, a_real_state_loads_a_hostile_one_costs_a_small_multiple);
    tcase_add_test(tc, a_register_of_another_run_is_refused);
    tcase_add_test(tc, the_first_node_back_brings_the_saved_job_back);
    tcase_add_test(tc, a_node_back_is_refused_unless_the_saved_job_comes_back);
    tcase_add_test(tc, the_job_runs_on_once_every_node_is_back);
    tcase_add_test(tc, after_wait_a_missing_server_fails_the_job);
    tcase_add_test(tc, after_wait_a_missing_worker_is_left_out_as_min_workers_allows);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
