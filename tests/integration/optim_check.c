/*
 * tests/integration/optim_check.c - the server-side optimizer equals the same
 * optimizer applied locally.
 *
 * usage: sps-optim-check SCHEDULER_ENDPOINT STEPS
 * Joins a real job as its only worker with a vector of P parameters,
 * initialises the servers, then for each step pushes a fixed pseudo-random
 * gradient, pulls the parameters back, and applies the same gradient locally
 * with ps_optim_step() and the job's schedule. Exits 0 when after every step
 * max|server - local| / max|local| <= 1e-6, 1 (with a line saying where) if not.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/optim.h"
#include "proto/link.h"
#include "worker/kv.h"
#include "worker/rng.h"

enum { S_P = 10007, S_SAMPLES = 6400 };

static void s_fill(float *p, size_t n, uint64_t seed)
{
    ps_rng_t r;
    ps_rng_init(&r, seed, 5);
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)(ps_rng_double(&r) * 2.0 - 1.0);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SCHEDULER_ENDPOINT STEPS\n", argv[0]);
        return 2;
    }
    int steps = atoi(argv[2]);
    char err[256];
    ps_ctx_t *ctx = NULL;
    ps_link_t *link = NULL;
    ps_job_t job;
    static ps_view_t view;
    Shardps__ModelInfo info = SHARDPS__MODEL_INFO__INIT;
    info.num_params = S_P;
    info.train_samples = S_SAMPLES;
    ps_kv_t *kv = NULL;
    if (ps_ctx_new(&ctx) != 0 ||
        ps_link_join(&link, ctx, argv[1], PS_ROLE_WORKER, 0, NULL, NULL, 10, 5, &job, err,
                     sizeof err) != 0 ||
        ps_link_wait_view(link, &info, &view, err, sizeof err) != 0 ||
        ps_kv_new(ctx, &link, &view, &kv, err, sizeof err) != 0) {
        fprintf(stderr, "optim-check: %s\n", err);
        return 1;
    }
    ps_optim_t o;
    if (ps_optim_from_job(&view.job, &o) != 0) {
        fprintf(stderr, "optim-check: unknown optimizer\n");
        return 1;
    }
    float *local = calloc(S_P, sizeof(float)), *remote = calloc(S_P, sizeof(float));
    float *state = calloc(2 * S_P, sizeof(float)), *g = calloc(S_P, sizeof(float));
    s_fill(local, S_P, 1);
    int rc = ps_kv_wait(kv, ps_kv_init(kv, 0, S_P, local));
    double worst = 0;
    for (int t = 0; rc == 0 && t < steps; t++) {
        s_fill(g, S_P, 100 + (uint64_t)t);
        int hp = ps_kv_push(kv, 0, S_P, g, t);
        int hl = ps_kv_pull(kv, 0, S_P, remote, t + 1);
        if ((rc = ps_kv_wait(kv, hp)) != 0 || (rc = ps_kv_wait(kv, hl)) != 0) {
            fprintf(stderr, "optim-check: step %d: %s\n", t, ps_kv_error(kv));
            break;
        }
        float lr = ps_optim_lr(&view.job, t, view.steps_per_epoch, view.total_steps);
        ps_optim_step(&o, lr, t + 1, local, state, S_P, g, 1.0f, S_P);
        double diff = 0, scale = 0;
        for (int i = 0; i < S_P; i++) {
            diff = fmax(diff, fabs((double)remote[i] - local[i]));
            scale = fmax(scale, fabs(local[i]));
        }
        worst = fmax(worst, diff / scale);
        if (diff / scale > 1e-6 || isnan(diff)) {
            fprintf(stderr, "optim-check: %s step %d: servers and local differ by %.3g "
                    "(relative)\n", view.job.optimizer, t, diff / scale);
            rc = PS_EPROTO;
        }
    }
    if (rc == 0) {
        printf("%s: %d steps over %d servers, largest relative difference %.3g\n",
               view.job.optimizer, steps, view.num_servers, worst);
        Shardps__Done done = SHARDPS__DONE__INIT;
        done.steps = steps;
        rc = ps_kv_finish(kv, &done);
    }
    ps_kv_destroy(&kv);
    ps_ctx_destroy(&ctx);
    free(local);
    free(remote);
    free(state);
    free(g);
    return rc == 0 ? 0 : 1;
}
