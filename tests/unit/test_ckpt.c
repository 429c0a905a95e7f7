/*
 * tests/unit/test_ckpt.c - the scheduler's checkpoint module (scheduler/ckpt.h)
 * driven through its events with a fake core (tests/unit/sched_fake.h), no
 * sockets: every server's report completes a checkpoint's manifest and the
 * restart state is saved once; bad reports are dropped; --resume asks every
 * server about the newest checkpoint, moves to the next one on a refusal,
 * fails the job (exit 2) with none left, and puts the whole one into the
 * view the core sends (mapped to another worker count); --checkpoint-every
 * Ns agrees a step with every server once due. Checkpoints go to a temporary
 * directory, manifests are written with scheduler/manifest.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "scheduler/agree.h"
#include "scheduler/ckpt.h"
#include "scheduler/join.h"
#include "scheduler/manifest.h"
#include "tests/unit/sched_fake.h"
/* after module.h: Check's fail() macro would rename its ops->fail */
#include <check.h>

#include "tests/unit/testutil.h"

enum { S_SERVERS = 3, S_WORKERS = 2 };

/* A job's fake core, its agreement and the module under test, and a
 * temporary checkpoint directory. */
typedef struct {
    ps_fake_t f;
    ps_agree_t *agree;
    ps_ckpt_t *c;
    char dir[64];
} s_env_t;

/* A running job of servers x workers (its view's job part set), writing
 * checkpoints to a new temporary directory every `every` steps. */
static void s_open(s_env_t *e, int servers, int workers, int every)
{
    ps_fake_init(&e->f, servers, workers);
    snprintf(e->dir, sizeof e->dir, "/tmp/shardps-test-ckpt-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(e->dir));
    e->f.cfg.checkpoint_dir = e->dir;
    e->f.cfg.checkpoint_every = every;
    ps_fake_running(&e->f);
    ck_assert_int_eq(ps_agree_new(&e->agree, &e->f.ops), 0);
    ck_assert_int_eq(ps_ckpt_new(&e->c, &e->f.ops, e->agree), 0);
}

static void s_close(s_env_t *e)
{
    ps_ckpt_destroy(&e->c);
    ck_assert_ptr_null(e->c);
    ps_ckpt_destroy(&e->c); /* NULL-safe */
    ps_agree_destroy(&e->agree);
    ps_fake_fini(&e->f);
    ps_fake_rmtree(e->dir);
}

/* Server `rank`'s part of checkpoint step, as it would write it. */
static ps_checkpoint_part_t s_part(const ps_view_t *v, int rank, int64_t step)
{
    ps_checkpoint_part_t p = {.step = step,
                              .size = 4096 + (uint64_t)rank,
                              .crc32 = 0xc0de0000u + (uint32_t)rank,
                              .begin = v->servers[rank].begin,
                              .end = v->servers[rank].end,
                              .version = step};
    snprintf(p.file, sizeof p.file, "server-%d.safetensors", rank);
    return p;
}

/* Writes the manifest of checkpoint step of a job like v's but of `workers`
 * workers into dir, as the scheduler that ran it did. */
static void s_write_checkpoint(const char *dir, const ps_view_t *v, int workers, int64_t step)
{
    ps_view_t *old = malloc(sizeof *old);
    ps_manifest_t *m;
    ck_assert_ptr_nonnull(old);
    *old = *v;
    old->num_workers = workers;
    snprintf(old->checkpoint_dir, sizeof old->checkpoint_dir, "%s", dir);
    static const ps_manifest_job_t job; /* a job that records nothing */
    ck_assert_int_eq(ps_manifest_new(&m, old, &job), 0);
    for (int r = 0; r < v->num_servers; r++) {
        const ps_checkpoint_part_t p = s_part(v, r, step);
        ck_assert_int_eq(ps_manifest_add(m, r, &p), r == v->num_servers - 1);
    }
    ps_manifest_destroy(&m);
    free(old);
}

/* The module's on_message for a message of type from row n (body: NULL for
 * none). Returns what the handler did. */
static int s_deliver(s_env_t *e, const ps_node_t *n, ps_msg_type_t type,
                     const ProtobufCMessage *body)
{
    static ps_msg_t m;
    ps_fake_msg_from(&e->f, &m, n, type, body);
    const int took = ps_ckpt_events.on_message(e->c, n, &m);
    ps_msg_close(&m);
    return took;
}

/* Server rank reports its part of step durable. */
static int s_report(s_env_t *e, int rank, int64_t step)
{
    const ps_checkpoint_part_t p = s_part(&e->f.view, rank, step);
    Shardps__Checkpoint pb;
    ps_codec_part_to_pb(&p, &pb);
    return s_deliver(e, ps_fake_row(&e->f, PS_ROLE_SERVER, rank), PS_MSG_CHECKPOINT, &pb.base);
}

/* Server rank's answer to the resume check of step: its part as it found
 * it, or none (found = 0: no part in it); crc_off spoils its CRC-32. */
static int s_answer(s_env_t *e, int rank, int64_t step, int found, uint32_t crc_off)
{
    ps_checkpoint_part_t p = s_part(&e->f.view, rank, step);
    Shardps__Checkpoint pb, *ptr = &pb;
    Shardps__ResumeCheck a = SHARDPS__RESUME_CHECK__INIT;
    p.crc32 += crc_off;
    ps_codec_part_to_pb(&p, &pb);
    a.dir = e->dir;
    if (found) {
        a.n_parts = 1;
        a.parts = &ptr;
    }
    return s_deliver(e, ps_fake_row(&e->f, PS_ROLE_SERVER, rank), PS_MSG_RESUME_CHECK,
                     &a.base);
}

/* A job resuming from e->dir, before any server got the view: checkpoints
 * of the given steps written there first, by a job of `old_workers`. */
static void s_open_resume(s_env_t *e, int workers, int old_workers, const int64_t *steps,
                          int nsteps)
{
    s_open(e, S_SERVERS, workers, 0);
    for (int i = 0; i < nsteps; i++) {
        s_write_checkpoint(e->dir, &e->f.view, old_workers, steps[i]);
    }
    e->f.cfg.resume = e->dir;
    e->f.facts.phase = PS_PHASE_WAITING;
}

/* The resume check sent to server tag last: the step it asks about. */
static int64_t s_asked(const s_env_t *e, const char *tag)
{
    const ps_fake_sent_t *s = ps_fake_last(&e->f, PS_MSG_RESUME_CHECK, tag);
    ck_assert_ptr_nonnull(s);
    Shardps__ResumeCheck *q = ps_fake_unpack(s, &shardps__resume_check__descriptor);
    ck_assert_ptr_nonnull(q);
    ck_assert_str_eq(q->dir, e->dir);
    ck_assert_uint_eq(q->n_parts, 1);
    const int64_t step = q->parts[0]->step;
    protobuf_c_message_free_unpacked(&q->base, NULL);
    return step;
}

START_TEST(a_checkpoint_is_complete_once_every_server_reported_its_part)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS, 10);
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 0);
    ck_assert_int_eq(ps_ckpt_enabled(e.c), 0); /* the view is not the servers' yet */
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_str_eq(e.f.view.checkpoint_dir, e.dir);
    ck_assert_int_eq(e.f.view.checkpoint_every, 10);
    ck_assert_int_eq(e.f.view.start_step, 0);
    ck_assert_int_eq(ps_ckpt_enabled(e.c), 1);
    ck_assert_int_eq(ps_ckpt_newest(e.c), -1);
    ck_assert_int_eq(s_report(&e, 0, 10), 1);
    ck_assert_int_eq(s_report(&e, 2, 10), 1);
    ck_assert_int_eq(e.f.saves, 0);
    ck_assert_int_eq(ps_ckpt_newest(e.c), -1);
    ck_assert_int_eq(s_report(&e, 1, 10), 1);
    ck_assert_int_eq(e.f.saves, 1);
    ck_assert_int_eq(ps_ckpt_newest(e.c), 10);
    char stepdir[128];
    ps_checkpoint_part_t parts[PS_MAX_SERVERS];
    snprintf(stepdir, sizeof stepdir, "%s/step-10", e.dir);
    ck_assert_int_eq(ps_manifest_check(stepdir, 10, e.f.view.num_params, parts, NULL, 0),
                     S_SERVERS);
    ck_assert_str_eq(parts[1].file, "server-1.safetensors");
    ck_assert_int_eq(ps_manifest_workers(stepdir), S_WORKERS);
    /* the next one: not complete until its last part */
    ck_assert_int_eq(s_report(&e, 0, 20), 1);
    ck_assert_int_eq(s_report(&e, 1, 20), 1);
    ck_assert_int_eq(e.f.saves, 1);
    ck_assert_int_eq(ps_ckpt_newest(e.c), 10);
    ck_assert_int_eq(s_report(&e, 2, 20), 1);
    ck_assert_int_eq(e.f.saves, 2);
    ck_assert_int_eq(ps_ckpt_newest(e.c), 20);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_ANY, NULL), 0); /* nothing sent */
    s_close(&e);
}
END_TEST

START_TEST(a_bad_checkpoint_report_is_dropped)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS, 10);
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 0);
    /* before the servers' view: no tracker yet */
    ck_assert_int_eq(s_report(&e, 0, 10), 1);
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_int_eq(s_report(&e, 1, 10), 1);
    ck_assert_int_eq(s_report(&e, 2, 10), 1);
    ck_assert_int_eq(e.f.saves, 0); /* S0's part was not kept */
    /* from a worker; with no body; with a path for a file name */
    ps_checkpoint_part_t p = s_part(&e.f.view, 0, 10);
    Shardps__Checkpoint pb;
    ps_codec_part_to_pb(&p, &pb);
    ck_assert_int_eq(s_deliver(&e, ps_fake_row(&e.f, PS_ROLE_WORKER, 0), PS_MSG_CHECKPOINT,
                               &pb.base),
                     1);
    ck_assert_int_eq(s_deliver(&e, ps_fake_row(&e.f, PS_ROLE_SERVER, 0), PS_MSG_CHECKPOINT,
                               NULL),
                     1);
    pb.file = "../server-0.safetensors";
    ck_assert_int_eq(s_deliver(&e, ps_fake_row(&e.f, PS_ROLE_SERVER, 0), PS_MSG_CHECKPOINT,
                               &pb.base),
                     1);
    ck_assert_int_eq(e.f.saves, 0);
    ck_assert_int_eq(ps_ckpt_newest(e.c), -1);
    char path[128];
    snprintf(path, sizeof path, "%s/step-10/manifest.json", e.dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    /* a good one completes it */
    ck_assert_int_eq(s_report(&e, 0, 10), 1);
    ck_assert_int_eq(e.f.saves, 1);
    ck_assert_int_eq(access(path, F_OK), 0);
    s_close(&e);
}
END_TEST

START_TEST(other_messages_are_not_the_modules)
{
    s_env_t e;
    static ps_msg_t m;
    s_open(&e, S_SERVERS, S_WORKERS, 10);
    ck_assert_int_eq(s_deliver(&e, ps_fake_row(&e.f, PS_ROLE_WORKER, 0), PS_MSG_DONE, NULL), 0);
    ps_route_t r = ps_fake_route("stranger");
    ps_fake_msg(&m, &r, PS_ROLE_SERVER, 0, PS_MSG_CHECKPOINT, 0, NULL);
    ck_assert_int_eq(ps_ckpt_events.on_message(e.c, NULL, &m), 0); /* no node */
    ps_msg_close(&m);
    s_close(&e);
}
END_TEST

START_TEST(without_checkpoint_flags_the_view_has_no_checkpoint_part)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS, 0);
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 0);
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_str_eq(e.f.view.checkpoint_dir, "");
    ck_assert_int_eq(e.f.view.checkpoint_every, 0);
    ck_assert_int_eq(ps_ckpt_enabled(e.c), 0);
    ck_assert_int_eq(s_report(&e, 0, 10), 1); /* dropped: nothing tracks parts */
    ck_assert_int_eq(e.f.saves, 0);
    s_close(&e);
}
END_TEST

START_TEST(resume_asks_every_server_and_takes_the_newest_whole_checkpoint)
{
    s_env_t e;
    const int64_t steps[] = {10, 20};
    s_open_resume(&e, S_WORKERS, S_WORKERS, steps, 2);
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 1);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_RESUME_CHECK, NULL), S_SERVERS);
    for (int r = 0; r < S_SERVERS; r++) {
        char tag[8];
        snprintf(tag, sizeof tag, "S%d", r);
        ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_RESUME_CHECK, tag), 1);
        ck_assert_int_eq(s_asked(&e, tag), 20);
    }
    Shardps__ResumeCheck *q = ps_fake_unpack(ps_fake_last(&e.f, PS_MSG_RESUME_CHECK, "S1"),
                                             &shardps__resume_check__descriptor);
    ck_assert_ptr_nonnull(q);
    ck_assert_str_eq(q->parts[0]->file, "server-1.safetensors");
    ck_assert_uint_eq(q->parts[0]->size, 4097);
    protobuf_c_message_free_unpacked(&q->base, NULL);
    ck_assert_int_eq(s_answer(&e, 0, 20, 1, 0), 1);
    ck_assert_int_eq(s_answer(&e, 2, 20, 1, 0), 1);
    ck_assert_int_eq(e.f.servers_started, 0);
    ck_assert_int_eq(s_answer(&e, 1, 20, 1, 0), 1);
    ck_assert_int_eq(e.f.servers_started, 1);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_RESUME_CHECK, NULL), S_SERVERS);
    ck_assert_int_eq(ps_ckpt_newest(e.c), 20);
    ck_assert_int_eq(e.f.failed, 0);
    /* the core sends the servers the view: the choice goes into it */
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    char want[128];
    snprintf(want, sizeof want, "%s/step-20", e.dir);
    ck_assert_str_eq(e.f.view.resume_dir, want);
    ck_assert_int_eq(e.f.view.start_step, 20);
    ck_assert_int_eq(e.f.view.resume_step, 0);
    ck_assert_int_eq(e.f.view.resume_parts, S_SERVERS);
    ck_assert_str_eq(e.f.view.resume_files[2].file, "server-2.safetensors");
    ck_assert_uint_eq(e.f.view.resume_files[2].crc32, 0xc0de0002u);
    ck_assert_str_eq(e.f.view.checkpoint_dir, ""); /* no --checkpoint-every */
    /* once taken, a failover's rollback may change it: a later call keeps that */
    e.f.view.start_step = 10;
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_int_eq(e.f.view.start_step, 10);
    /* a late answer is no resume's */
    ck_assert_int_eq(s_answer(&e, 0, 20, 1, 0), 1);
    ck_assert_int_eq(e.f.servers_started, 1);
    s_close(&e);
}
END_TEST

START_TEST(a_refused_candidate_moves_to_the_next)
{
    s_env_t e;
    const int64_t steps[] = {10, 20};
    s_open_resume(&e, S_WORKERS, S_WORKERS, steps, 2);
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 1);
    ck_assert_int_eq(s_answer(&e, 0, 20, 1, 0), 1);
    ck_assert_int_eq(s_answer(&e, 0, 20, 1, 0), 1); /* twice: dropped */
    ck_assert_int_eq(s_answer(&e, 1, 20, 1, 7), 1);  /* corrupt */
    /* not every server answered yet: nothing decided */
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_RESUME_CHECK, NULL), S_SERVERS);
    ck_assert_int_eq(s_deliver(&e, ps_fake_row(&e.f, PS_ROLE_WORKER, 0), PS_MSG_RESUME_CHECK,
                               NULL),
                     1); /* no server's: dropped */
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_RESUME_CHECK, NULL), S_SERVERS);
    ck_assert_int_eq(s_answer(&e, 2, 20, 1, 0), 1);
    ck_assert_int_eq(e.f.servers_started, 0);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_RESUME_CHECK, NULL), 2 * S_SERVERS);
    ck_assert_int_eq(s_asked(&e, "S0"), 10);
    ck_assert_int_eq(s_asked(&e, "S2"), 10);
    for (int r = 0; r < S_SERVERS; r++) {
        ck_assert_int_eq(s_answer(&e, r, 10, 1, 0), 1);
    }
    ck_assert_int_eq(e.f.servers_started, 1);
    ck_assert_int_eq(e.f.failed, 0);
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_int_eq(e.f.view.start_step, 10);
    ck_assert_int_eq(ps_ckpt_newest(e.c), 10);
    s_close(&e);
}
END_TEST

START_TEST(the_last_refusal_fails_the_job_as_the_flags)
{
    s_env_t e;
    const int64_t steps[] = {10};
    s_open_resume(&e, S_WORKERS, S_WORKERS, steps, 1);
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 1);
    ck_assert_int_eq(s_answer(&e, 0, 10, 1, 0), 1);
    ck_assert_int_eq(s_answer(&e, 1, 10, 0, 0), 1); /* missing */
    ck_assert_int_eq(e.f.failed, 0);
    ck_assert_int_eq(s_answer(&e, 2, 10, 1, 0), 1);
    ck_assert_int_eq(e.f.failed, 1);
    ck_assert_int_eq(e.f.fail_usage, 1);
    char want[256];
    snprintf(want, sizeof want, "resume: no checkpoint of %s is whole on the servers (each "
             "one's reason is logged above)", e.dir);
    ck_assert_str_eq(e.f.failure, want);
    ck_assert_int_eq(e.f.servers_started, 0);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_RESUME_CHECK, NULL), S_SERVERS);
    s_close(&e);
}
END_TEST

START_TEST(resume_with_no_checkpoint_fails_unless_resume_or_start)
{
    s_env_t e;
    s_open_resume(&e, S_WORKERS, S_WORKERS, NULL, 0);
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), PS_ENOENT);
    ck_assert_int_eq(e.f.failed, 1);
    ck_assert_int_eq(e.f.fail_usage, 1);
    char want[256];
    snprintf(want, sizeof want, "resume: %s holds no checkpoint (no step-N/manifest.json)",
             e.dir);
    ck_assert_str_eq(e.f.failure, want);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_ANY, NULL), 0);
    s_close(&e);

    s_open_resume(&e, S_WORKERS, S_WORKERS, NULL, 0);
    e.f.cfg.resume_or_start = 1;
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 0);
    ck_assert_int_eq(e.f.failed, 0);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_ANY, NULL), 0);
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_int_eq(e.f.view.start_step, 0);
    ck_assert_str_eq(e.f.view.resume_dir, "");
    ck_assert_int_eq(ps_ckpt_newest(e.c), -1);
    s_close(&e);
}
END_TEST

START_TEST(a_resume_with_another_worker_count_maps_the_step)
{
    s_env_t e;
    const int64_t steps[] = {20};
    const uint64_t samples = 100000;
    s_open_resume(&e, S_WORKERS, 4, steps, 1);
    ck_assert_int_eq(ps_ckpt_setup(e.c, samples), 1);
    for (int r = 0; r < S_SERVERS; r++) {
        ck_assert_int_eq(s_answer(&e, r, 20, 1, 0), 1);
    }
    ck_assert_int_eq(e.f.servers_started, 1);
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    const int64_t mapped = ps_join_map_step(20, 4, S_WORKERS, e.f.cfg.job.batch, samples);
    ck_assert_int_ne(mapped, 20);
    ck_assert_int_eq(e.f.view.start_step, mapped);
    ck_assert_int_eq(e.f.view.resume_step, 20); /* the parts are of step 20 */
    ck_assert_int_eq(ps_ckpt_newest(e.c), 20);
    s_close(&e);
}
END_TEST

START_TEST(resuming_with_checkpoints_on_gives_the_view_both_parts)
{
    s_env_t e;
    const int64_t steps[] = {10};
    s_open_resume(&e, S_WORKERS, S_WORKERS, steps, 1);
    e.f.cfg.checkpoint_every = 5;
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 1);
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 1); /* asked once */
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_RESUME_CHECK, NULL), S_SERVERS);
    for (int r = 0; r < S_SERVERS; r++) {
        s_answer(&e, r, 10, 1, 0);
    }
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_str_eq(e.f.view.checkpoint_dir, e.dir);
    ck_assert_int_eq(e.f.view.checkpoint_every, 5);
    ck_assert_int_eq(e.f.view.start_step, 10);
    ck_assert_int_eq(ps_ckpt_enabled(e.c), 1);
    /* the resumed job's next checkpoint completes as ever */
    e.f.facts.phase = PS_PHASE_RUNNING;
    for (int r = 0; r < S_SERVERS; r++) {
        s_report(&e, r, 15);
    }
    ck_assert_int_eq(ps_ckpt_newest(e.c), 15);
    ck_assert_int_eq(e.f.saves, 1);
    s_close(&e);
}
END_TEST

START_TEST(a_saved_jobs_checkpoints_go_on_in_its_directory)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS, 10);
    ps_view_t *saved = &e.f.view; /* the core took the saved job's view */
    snprintf(saved->checkpoint_dir, sizeof saved->checkpoint_dir, "%s", e.dir);
    saved->checkpoint_every = 7;
    e.f.cfg.checkpoint_dir = "/nonexistent/flags-dir";
    ck_assert_int_eq(ps_ckpt_saved_job(e.c, saved, 14), 0);
    ck_assert_int_eq(ps_ckpt_enabled(e.c), 1);
    ck_assert_int_eq(ps_ckpt_newest(e.c), 14);
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_str_eq(e.f.view.checkpoint_dir, e.dir); /* the saved job's stands */
    ck_assert_int_eq(e.f.view.checkpoint_every, 7);
    for (int r = 0; r < S_SERVERS; r++) {
        s_report(&e, r, 21);
    }
    ck_assert_int_eq(ps_ckpt_newest(e.c), 21);
    ck_assert_int_eq(e.f.saves, 1);
    s_close(&e);
}
END_TEST

/* Every server answers the agreement under way with version 7 + rank. */
static void s_agree_answers(s_env_t *e)
{
    for (int r = 0; r < S_SERVERS; r++) {
        ck_assert_int_eq(ps_agree_answer(e->agree, r, 7 + r), 0);
    }
}

START_TEST(a_timed_checkpoint_is_agreed_with_every_server_once_due)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS, 0);
    e.f.cfg.checkpoint_seconds = 30;
    e.f.facts.phase = PS_PHASE_STARTING;
    ck_assert_int_eq(ps_ckpt_setup(e.c, 3200), 0);
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ck_assert_str_eq(e.f.view.checkpoint_dir, e.dir);
    ck_assert_int_eq(e.f.view.checkpoint_every, 0);
    ck_assert_int_eq(ps_ckpt_enabled(e.c), 1);
    ps_ckpt_events.on_tick(e.c, 1000); /* not running: no clock yet */
    e.f.facts.phase = PS_PHASE_RUNNING;
    ps_ckpt_events.on_tick(e.c, 1001); /* the clock starts */
    ps_ckpt_events.on_tick(e.c, 1030.5);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_ANY, NULL), 0);
    ck_assert_int_eq(ps_agree_active(e.agree), 0);
    ps_ckpt_events.on_tick(e.c, 1031);
    ck_assert_int_eq(ps_agree_active(e.agree), 1);
    ck_assert_int_eq(ps_agree_checkpoint(e.agree), 1);
    ck_assert_int_eq(ps_agree_worker(e.agree), -1);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_PREPARE, NULL), S_SERVERS);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_PREPARE, "S0"), 1);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_PREPARE, "S2"), 1);
    ps_ckpt_events.on_tick(e.c, 1032); /* no answers yet */
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_STEP, NULL), 0);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_PREPARE, NULL), S_SERVERS);
    s_agree_answers(&e);
    ps_ckpt_events.on_tick(e.c, 1033);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_STEP, NULL), S_SERVERS);
    Shardps__JoinStep *js = ps_fake_unpack(ps_fake_last(&e.f, PS_MSG_JOIN_STEP, "S1"),
                                           &shardps__join_step__descriptor);
    ck_assert_ptr_nonnull(js);
    ck_assert_int_eq(js->step, 7 + S_SERVERS); /* max(V) + 1 */
    ck_assert_int_eq(js->worker, -1);
    ck_assert(js->checkpoint);
    protobuf_c_message_free_unpacked(&js->base, NULL);
    ck_assert_int_eq(ps_agree_active(e.agree), 0);
    /* the next one is due 30 s after the last one started */
    ps_ckpt_events.on_tick(e.c, 1060);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_PREPARE, NULL), S_SERVERS);
    ps_ckpt_events.on_tick(e.c, 1061);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_PREPARE, NULL), 2 * S_SERVERS);
    s_close(&e);
}
END_TEST

START_TEST(a_timed_checkpoint_waits_for_another_agreement)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS, 0);
    e.f.cfg.checkpoint_seconds = 30;
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ps_ckpt_events.on_tick(e.c, 0);
    ck_assert_int_eq(ps_agree_start(e.agree, 1, 77, 0), 0); /* a joiner's */
    ps_ckpt_events.on_tick(e.c, 100);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_PREPARE, NULL), S_SERVERS);
    s_agree_answers(&e);
    ps_ckpt_events.on_tick(e.c, 101); /* not ours to commit */
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_JOIN_STEP, NULL), 0);
    ck_assert_int_eq(ps_agree_worker(e.agree), 1);
    s_close(&e);
}
END_TEST

START_TEST(without_checkpoint_seconds_no_checkpoint_is_timed)
{
    s_env_t e;
    s_open(&e, S_SERVERS, S_WORKERS, 10);
    ck_assert_int_eq(ps_ckpt_view(e.c, &e.f.view), 0);
    ps_ckpt_events.on_tick(e.c, 0);
    ps_ckpt_events.on_tick(e.c, 1e6);
    ck_assert_int_eq(ps_agree_active(e.agree), 0);
    ck_assert_int_eq(ps_fake_count(&e.f, PS_MSG_ANY, NULL), 0);
    s_close(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ckpt");
    TCase *tc = tcase_create("ckpt");
    tcase_add_test(tc, a_checkpoint_is_complete_once_every_server_reported_its_part);
    tcase_add_test(tc, a_bad_checkpoint_report_is_dropped);
    tcase_add_test(tc, other_messages_are_not_the_modules);
    tcase_add_test(tc, without_checkpoint_flags_the_view_has_no_checkpoint_part);
    tcase_add_test(tc, resume_asks_every_server_and_takes_the_newest_whole_checkpoint);
    tcase_add_test(tc, a_refused_candidate_moves_to_the_next);
    tcase_add_test(tc, the_last_refusal_fails_the_job_as_the_flags);
    tcase_add_test(tc, resume_with_no_checkpoint_fails_unless_resume_or_start);
    tcase_add_test(tc, a_resume_with_another_worker_count_maps_the_step);
    tcase_add_test(tc, resuming_with_checkpoints_on_gives_the_view_both_parts);
    tcase_add_test(tc, a_saved_jobs_checkpoints_go_on_in_its_directory);
    tcase_add_test(tc, a_timed_checkpoint_is_agreed_with_every_server_once_due);
    tcase_add_test(tc, a_timed_checkpoint_waits_for_another_agreement);
    tcase_add_test(tc, without_checkpoint_seconds_no_checkpoint_is_timed);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
