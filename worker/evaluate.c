/*
 * worker/evaluate.c - the trained model: worker 0's evaluations during
 * training (each epoch's end, --eval-every points), the model file it
 * writes at the end (--save-model) and --evaluate of a model file.
 *
 * An evaluation after steps whose values were not finite also decides
 * whether they broke the model: below PS_EVALS_SANE_ACCURACY the job has
 * diverged.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "kernels/threads.h"
#include "worker/evaluate.h"
#include "worker/worker.h"

/* ps_model_evaluate over a whole data set, its images normalised for the call
 * (the set keeps bytes). Returns 0, PS_ENOMEM or the model's error. */
static int s_evaluate_set(ps_model_t *m, const ps_dataset_t *ds, int *correct, float *loss)
{
    float *x = malloc((size_t)ds->n * ds->rows * ds->cols * sizeof *x);
    if (!x) {
        return PS_ENOMEM;
    }
    ps_data_images(ds, 0, ds->n, x);
    int rc = ps_model_evaluate(m, x, ds->labels, ds->n, correct, loss);
    free(x);
    return rc;
}

/* ps_evals_at for a model with embedding rows: the held-out rows' AUC and
 * log loss, with the rows as the servers hold them now. */
static int s_evaluate_ctr(ps_evals_t *e, int epoch, int64_t step, double t_train, char *err,
                          size_t cap)
{
    double auc, logloss;
    int rc = ps_ctr_job_evaluate(e->ctr, e->kv, &auc, &logloss, err, cap);
    if (rc != 0) {
        return rc;
    }
    if (!isfinite(logloss) ||
        !ps_optim_finite(ps_model_params(e->model), ps_model_num_params(e->model))) {
        snprintf(err, cap, "training diverged: epoch %d ends with test_logloss=%g", epoch,
                 logloss);
        return PS_ENONFINITE;
    }
    if (epoch == 0) {
        ps_log_info("eval step=%lld test_auc=%.4f test_logloss=%.4f elapsed=%.2fs",
                    (long long)step, auc, logloss, t_train);
        return 0;
    }
    if (e->n_auc < PS_MAX_EPOCHS) {
        e->auc[e->n_auc] = auc;
        e->logloss[e->n_auc++] = logloss;
    }
    ps_log_info("epoch=%d test_auc=%.4f test_logloss=%.4f elapsed=%.2fs step=%lld", epoch, auc,
                logloss, t_train, (long long)step);
    return 0;
}

int ps_evals_at(ps_evals_t *e, int epoch, int64_t step, double t_train, char *err, size_t cap)
{
    if (e->ctr) {
        return s_evaluate_ctr(e, epoch, step, t_train, err, cap);
    }
    int correct = 0;
    float loss = 0;
    int rc = s_evaluate_set(e->model, e->test, &correct, &loss);
    if (rc != 0) {
        snprintf(err, cap, "evaluation failed: %s", ps_strerror(rc));
        return rc;
    }
    double acc = (double)correct / e->test->n;
    const uint64_t skipped = ps_nonfinite_steps(e->nonfinite);
    /* Ending below any sane accuracy after skipped steps means they broke it. */
    if (!isfinite(loss) ||
        !ps_optim_finite(ps_model_params(e->model), ps_model_num_params(e->model)) ||
        (skipped && acc < PS_EVALS_SANE_ACCURACY)) {
        snprintf(err, cap, "training diverged: epoch %d ends with test_loss=%g test_accuracy=%.4f%s",
                 epoch, loss, acc, skipped ? " after steps with non-finite values" : "");
        return PS_ENONFINITE;
    }
    if (epoch == 0) {
        ps_log_info("eval step=%lld test_accuracy=%.4f test_loss=%.4f elapsed=%.2fs",
                    (long long)step, acc, loss, t_train);
        return 0;
    }
    if (e->n_accuracy < PS_MAX_EPOCHS) {
        e->accuracy[e->n_accuracy++] = acc;
    }
    ps_worker_obs_epoch(e->obs, epoch, acc);
    ps_log_info("epoch=%d test_accuracy=%.4f test_loss=%.4f elapsed=%.2fs step=%lld", epoch, acc,
                loss, t_train, (long long)step);
    return 0;
}

size_t ps_evals_epochs(const ps_evals_t *e)
{
    return e->ctr ? e->n_auc : e->n_accuracy;
}

void ps_evals_forget(ps_evals_t *e, size_t epochs)
{
    e->n_accuracy = e->n_accuracy > epochs ? epochs : e->n_accuracy;
    e->n_auc = e->n_auc > epochs ? epochs : e->n_auc;
}

void ps_evals_report(ps_evals_t *e, Shardps__Done *done)
{
    done->test_accuracy = e->accuracy;
    done->n_test_accuracy = e->n_accuracy;
    done->test_auc = e->auc;
    done->n_test_auc = e->n_auc;
    done->test_logloss = e->logloss;
    done->n_test_logloss = e->n_auc;
}

int ps_worker_evaluate(const ps_worker_config_t *cfg)
{
    ps_safetensors_t *st = NULL;
    ps_model_t *model = NULL;
    ps_dataset_t test = {0};
    const ps_kernels_t *k = NULL;
    char err[512] = "", device[256];
    const char *name = NULL;
    char hidden[PS_JOB_HIDDEN_TEXT];
    int correct = 0, rc;
    float loss = 0;
    if ((rc = ps_safetensors_read(cfg->evaluate, &st, err, sizeof err)) != 0) {
        goto done;
    }
    if (!(name = ps_model_name_of(st, hidden, sizeof hidden))) {
        snprintf(err, sizeof err, "%s: its tensors are not those of any model we know",
                 cfg->evaluate);
        rc = PS_EINVAL;
        goto done;
    }
    if ((rc = ps_kernels_select(cfg->device, &k, device, sizeof device)) != 0) {
        snprintf(err, sizeof err, "%s", device);
        goto done;
    }
    ps_kernels_set_threads(cfg->threads);
    if ((rc = ps_model_new(name, hidden, k, 256, &model)) != 0) {
        snprintf(err, sizeof err, "cannot build model %s: %s", name, ps_strerror(rc));
        goto done;
    }
    char why[200];
    if ((rc = ps_model_load(model, st, why, sizeof why)) != 0) {
        snprintf(err, sizeof err, "%s: %s", cfg->evaluate, why);
        goto done;
    }
    if ((rc = ps_dataset_load(cfg->data_dir, 0, &test, err, sizeof err)) != 0) {
        goto done;
    }
    if ((rc = s_evaluate_set(model, &test, &correct, &loss))) {
        snprintf(err, sizeof err, "evaluation failed: %s", ps_strerror(rc));
        goto done;
    }
    double acc = (double)correct / test.n;
    printf("model=%s test_accuracy=%.6f test_loss=%.6f samples=%d file=%s\n", name, acc, loss,
           test.n, cfg->evaluate);
    fflush(stdout);
    if (cfg->summary) {
        FILE *f = fopen(cfg->summary, "w");
        int bad = !f || fprintf(f,
                                "{\"model\": \"%s\", \"test_accuracy\": %.6f, "
                                "\"test_loss\": %.6f, \"samples\": %d}\n",
                                name, acc, loss, test.n) < 0;
        if ((f && fclose(f) != 0) || bad) {
            snprintf(err, sizeof err, "cannot write the summary to %s", cfg->summary);
            rc = PS_EIO;
        }
    }
done:
    if (rc != 0) {
        ps_log_err("%s", err[0] ? err : ps_strerror(rc));
    }
    ps_dataset_fini(&test);
    ps_model_destroy(&model);
    ps_safetensors_destroy(&st);
    return rc == 0 ? 0 : 1;
}

int ps_evals_save(const ps_evals_t *e, const ps_job_t *job, int64_t steps, const float *params,
                  const char *path, char *err, size_t cap)
{
    char mode[32], nsteps[32], epochs[16], seed[32], acc[32];
    ps_job_mode_str(job, mode, sizeof mode);
    snprintf(nsteps, sizeof nsteps, "%lld", (long long)steps);
    snprintf(epochs, sizeof epochs, "%d", job->epochs);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)job->seed);
    snprintf(acc, sizeof acc, "%.6f", e->n_accuracy ? e->accuracy[e->n_accuracy - 1] : -1.0);
    const char *meta[] = {"format", "pt", "mode", mode, "steps", nsteps, "epochs", epochs,
                          "seed", seed, "test_accuracy", acc};
    int rc = ps_model_save(e->model, params, path, meta, (int)(sizeof meta / sizeof meta[0] / 2),
                           err, cap);
    if (rc == 0) {
        ps_log_info("model saved to %s", path);
    }
    return rc;
}
