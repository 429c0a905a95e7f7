/*
 * bench/train/compute.c - shardps-bench compute: one worker's arithmetic
 * alone, beside PyTorch on the same machine in the same run.
 *
 * Trains one model in this process with no servers and no network: batches
 * gathered from Fashion-MNIST (or synthetic inputs with --data "") into the
 * model's pinned batch buffers as the worker does, one ps_model_train_step
 * each, plain SGD applied on the host with ps_optim_sgd_step - the loop of
 * bench/torch/train.py (gather + forward/backward + SGD
 * update). The click model (--model ctr) has its own step (compute_ctr.c).
 * Two passes after a warm-up:
 *
 *   timed     --steps steps, nothing else running in the loop: samples/s
 *             (wall clock) and samples per CPU second of this process (all
 *             its threads; steadier than the wall clock on a shared machine);
 *   profiled  --profile-steps more steps with ps_model_set_profile() on, plus
 *             the gather and update timed around it: seconds per step of each
 *             phase. A separate pass because profiling waits for the device
 *             after each phase, which the timed pass must not pay. On a GPU
 *             profiling also serialises the copies (all params in before
 *             forward, all gradients out after backward), so copy in / copy
 *             out are the copies' own times, which the timed pass overlaps
 *             with forward and backward: the split can sum to more than a step.
 *
 * On a device backend the loop is the worker's there: the training set is
 * uploaded once and each step gathers its batch on the device from the
 * step's indices (ps_model_train_step_idx), replayed as a CUDA graph unless
 * --cuda-graph 0; the profiled pass's phases are then device times between
 * CUDA events, and the page splits a step into kernels (forward + backward),
 * copies (inputs, params in, gradients out) and host time (the rest of the
 * step's wall time: gather or index copy, launches, update, waiting).
 *
 * With --torch it checks first that PyTorch loads (it is optional: one line
 * saying how to install it, before any training), then runs the PyTorch
 * reference (--torch-script, under --python) for the same model, data, batch,
 * warm-up, step count and device, with
 * OPENBLAS_NUM_THREADS = --threads, and reports shardps/PyTorch samples/s, by
 * the wall clock and by CPU time (the script reports its own CPU share). On
 * a device it runs the script twice: eager (the loop as a user writes it)
 * and strong (--resident --graph: the data on the device, the whole step one
 * CUDA graph, no per-step sync), both with the same --tf32.
 * Writes one JSON object (--json) and prints a markdown table row. It never
 * judges a figure.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/train/compute.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "kernels/kernels.h"
#include "kernels/optim.h"
#include "kernels/threads.h"
#include "worker/data.h"
#include "worker/models/model.h"

#define S_PROG COMPUTE_PROG

/* Our PyTorch reference, in the source tree (PS_SOURCE_ROOT from meson.build). */
#ifndef PS_SOURCE_ROOT
#define PS_SOURCE_ROOT "."
#endif
#define S_TORCH_SCRIPT PS_SOURCE_ROOT "/bench/torch/train.py"

enum { S_SYNTH_BATCHES = 16 }; /* synthetic data: this many distinct batches */

/* The click model, which has its own step (compute_ctr.c)? */
static int s_ctr(const compute_cfg_t *cfg)
{
    return !strcmp(cfg->model, "ctr");
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Synthetic inputs: batch x S_SYNTH_BATCHES deterministic samples. */
static int s_synthetic(ps_dataset_t *ds, int batch)
{
    ds->n = batch * S_SYNTH_BATCHES;
    ds->rows = PS_MODEL_IN_H;
    ds->cols = PS_MODEL_IN_W;
    size_t px = (size_t)ds->n * PS_MODEL_IN_H * PS_MODEL_IN_W;
    ds->pixels = malloc(px);
    ds->labels = malloc((size_t)ds->n);
    if (!ds->pixels || !ds->labels) {
        return PS_ENOMEM;
    }
    for (size_t i = 0; i < px; i++) {
        ds->pixels[i] = (uint8_t)((i * 2654435761u) >> 24);
    }
    for (int i = 0; i < ds->n; i++) {
        ds->labels[i] = (uint8_t)(i % PS_MODEL_CLASSES);
    }
    return 0;
}

/* The training loop's buffers and state. */
typedef struct {
    const compute_cfg_t *cfg;
    const ps_dataset_t *ds;
    ps_model_t *m;
    uint32_t *order; /* ds->n: the sample order */
    float *x;        /* batch x 28 x 28: the model's pinned buffer; borrowed */
    uint8_t *y;      /* batch: likewise */
    int per_epoch;   /* whole batches in the data */
    int resident;    /* the data is on the device: steps by index */
    long next;       /* next step's index */
    ps_optim_sgd_t sgd;
} compute_loop_t;

/* One step as the PyTorch loop does it (a compute_step_fn on a compute_loop_t). */
static int s_step(void *arg, float *loss, double *t)
{
    compute_loop_t *L = arg;
    const int b = L->cfg->batch;
    long k = L->next++ % L->per_epoch;
    if (L->resident) {
        memcpy(ps_model_batch_idx(L->m), L->order + k * b, (size_t)b * sizeof *L->order);
    } else {
        ps_data_gather(L->ds, L->order, (int)k * b, b, L->x, L->y);
    }
    if (t) {
        t[0] = ps_now();
    }
    int rc = L->resident ? ps_model_train_step_idx(L->m, b, loss)
                         : ps_model_train_step(L->m, L->x, L->y, b, loss);
    if (t) {
        t[1] = ps_now();
    }
    ps_optim_sgd_step(&L->sgd, ps_model_params(L->m), NULL, ps_model_grads(L->m), 1.0f,
                      ps_model_num_params(L->m));
    if (t) {
        t[2] = ps_now();
    }
    return rc;
}

int ps_bench_compute_measure(const compute_cfg_t *cfg, ps_model_t *m, compute_step_fn step,
                             void *arg, compute_result_t *res)
{
    double *dt = malloc((size_t)cfg->steps * sizeof *dt);
    if (!dt) {
        return PS_ENOMEM;
    }
    float loss = 0;
    int rc = 0;
    for (int s = 0; s < cfg->warmup && rc == 0; s++) {
        rc = step(arg, &loss, NULL);
    }
    double loss_sum = 0, t0 = ps_now(), c0 = ps_cpu_seconds();
    for (int s = 0; s < cfg->steps && rc == 0; s++) {
        double a = ps_now();
        rc = step(arg, &loss, NULL);
        dt[s] = ps_now() - a;
        loss_sum += loss;
    }
    res->seconds = ps_now() - t0;
    res->cpu_seconds = ps_cpu_seconds() - c0;
    res->loss = loss_sum / cfg->steps;
    if (rc == 0) {
        qsort(dt, (size_t)cfg->steps, sizeof *dt, s_cmp_double);
        res->step_median = cfg->steps % 2
                               ? dt[cfg->steps / 2]
                               : 0.5 * (dt[cfg->steps / 2 - 1] + dt[cfg->steps / 2]);
    }
    free(dt);
    ps_model_profile_t prof = {0};
    double gather = 0, update = 0, total = 0;
    ps_model_set_profile(m, &prof);
    for (int s = 0; s < cfg->profile_steps && rc == 0; s++) {
        double t[3], a = ps_now();
        rc = step(arg, &loss, t);
        gather += t[0] - a;
        update += t[2] - t[1];
        total += t[2] - a;
    }
    ps_model_set_profile(m, NULL);
    double n = cfg->profile_steps > 0 ? cfg->profile_steps : NAN;
    res->gather = gather / n;
    res->copy_in = prof.copy_in / n;
    res->forward = prof.forward / n;
    res->backward = prof.backward / n;
    res->copy_out = prof.copy_out / n;
    res->update = update / n;
    res->step = total / n;
    res->kernels = res->forward + res->backward;
    res->copies = res->copy_in + res->copy_out;
    res->host = res->step - res->kernels - res->copies;
    return rc;
}

/* The last line of the file at path into buf ("" when unreadable). */
static void s_last_line(const char *path, char *buf, size_t len)
{
    char *text = NULL;
    buf[0] = '\0';
    if (ps_bench_read_file(path, &text) == 0) {
        size_t n = strlen(text);
        while (n > 0 && text[n - 1] == '\n') {
            text[--n] = '\0';
        }
        const char *last = strrchr(text, '\n') ? strrchr(text, '\n') + 1 : text;
        snprintf(buf, len, "%s", last);
    }
    free(text);
}

/* Runs the script with args (NULL-ended) in a temporary directory; its output
 * goes to DIR/torch.log and --out to DIR/torch.json, whose document comes
 * back in *doc (caller owns it: json_decref; NULL when absent or not JSON).
 * On failure, why goes to note. */
static int s_torch_run(const compute_cfg_t *cfg, char *const args[], json_t **doc,
                       char *note, size_t len)
{
    char dir[] = "/tmp/sps-compute.XXXXXX";
    *doc = NULL;
    if (access(cfg->torch_script, R_OK) != 0) {
        snprintf(note, len, "%s: %s (--torch-script)", cfg->torch_script, strerror(errno));
        return -1;
    }
    if (!mkdtemp(dir)) {
        snprintf(note, len, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    char log[PATH_MAX], out[PATH_MAX];
    snprintf(log, sizeof log, "%s/torch.log", dir);
    snprintf(out, sizeof out, "%s/torch.json", dir);
    char *argv[32] = {(char *)cfg->python, (char *)cfg->torch_script, "--out", out};
    int n = 4;
    for (int i = 0; args[i] && n < 31; i++) {
        argv[n++] = args[i];
    }
    int rc = ps_bench_run(argv, log);
    if (rc == 0) {
        ps_json_read_file(out, PS_BENCH_JSON_MAX, doc, NULL, 0);
    }
    if (rc != 0) {
        char last[200];
        s_last_line(log, last, sizeof last);
        snprintf(note, len, "PyTorch run failed (exit %d): %s", rc, last);
    }
    unlink(out);
    unlink(log);
    rmdir(dir);
    return rc;
}

/* Before any training: PyTorch loads (it is optional). Returns 0, or prints
 * one line saying why not (the script's own, e.g. how to install it). */
static int s_torch_check(const compute_cfg_t *cfg)
{
    char note[256];
    char *args[] = {"--check", NULL};
    json_t *doc = NULL;
    int rc = s_torch_run(cfg, args, &doc, note, sizeof note);
    json_decref(doc);
    if (rc != 0) {
        const char *why = strstr(note, "): ");
        fprintf(stderr, S_PROG ": error: --torch: %s\n", why && why[3] ? why + 3 : note);
    }
    return rc;
}

/* One run of bench/torch/train.py for the same model, data, batch, warm-up,
 * steps and device at the same thread count, with `extra` flags (NULL-ended,
 * at most 3). Stores its samples/s in *sps (NAN when it failed: why in
 * res->torch_note) and what it says of its CPU share and version in res. */
static void s_torch_one(const compute_cfg_t *cfg, const char *device, char *const extra[],
                        double *sps, compute_result_t *res)
{
    char thr[16], batch[16], steps[16], warmup[16], lr[32], tf32[4];
    /* Library default (0): as many as the machine has cores. */
    int threads = cfg->threads > 0 ? cfg->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(thr, sizeof thr, "%d", threads);
    snprintf(batch, sizeof batch, "%d", cfg->batch);
    snprintf(steps, sizeof steps, "%d", cfg->steps);
    snprintf(warmup, sizeof warmup, "%d", cfg->warmup);
    snprintf(lr, sizeof lr, "%g", cfg->lr);
    snprintf(tf32, sizeof tf32, "%d", cfg->tf32);
    /* The script sets it too (from --threads) before importing torch; set here
     * as well so nothing it starts sees another value. */
    setenv("OPENBLAS_NUM_THREADS", thr, 1);
    char *args[24] = {"--model",  (char *)cfg->model, "--threads", thr,   "--batch",
                      batch,      "--lr",             lr,          "--steps", steps,
                      "--warmup", warmup,             "--data",    (char *)cfg->data,
                      "--device", (char *)device,     "--tf32",    tf32};
    int n = 18;
    for (int i = 0; extra[i] && i < 3; i++) {
        args[n++] = extra[i];
    }
    args[n] = NULL;
    fprintf(stderr, S_PROG ": PyTorch reference: %s %s --model %s --device %s%s%s ...\n",
            cfg->python, cfg->torch_script, cfg->model, device, extra[0] ? " " : "",
            extra[0] ? extra[0] : "");
    json_t *doc = NULL;
    const char *ver;
    *sps = NAN;
    int rc = s_torch_run(cfg, args, &doc, res->torch_note, sizeof res->torch_note);
    if (rc == 0 && ps_json_get_num(doc, "samples_per_sec", sps, NULL, 0) != 0) {
        snprintf(res->torch_note, sizeof res->torch_note, "%s wrote no samples_per_sec",
                 cfg->torch_script);
        *sps = NAN;
    } else if (rc == 0 && sps == &res->torch_sps) {
        /* own_cpu_frac: the script's CPU seconds (all threads) per wall second. */
        double frac;
        if (ps_json_get_num(doc, "own_cpu_frac", &frac, NULL, 0) == 0 && frac > 0) {
            res->torch_cpu_sps = res->torch_sps / frac;
        }
        if (ps_json_get_str(doc, "torch", &ver, NULL, 0) == 0) {
            snprintf(res->torch_ver, sizeof res->torch_ver, "%s", ver);
        }
    }
    json_decref(doc);
}

/* The PyTorch references: eager, and on a device strong as well. */
static void s_torch(const compute_cfg_t *cfg, const ps_kernels_t *k, compute_result_t *res)
{
    res->torch_sps = res->torch_cpu_sps = res->strong_sps = NAN;
    char *eager[] = {NULL}, *strong[] = {"--resident", "--graph", NULL};
    s_torch_one(cfg, k->name, eager, &res->torch_sps, res);
    if (!k->host_is_backend && !s_ctr(cfg)) { /* the ctr reference runs eagerly only */
        s_torch_one(cfg, k->name, strong, &res->strong_sps, res);
    }
}

/* Sets o's key to v (a new reference, taken; NULL when out of memory):
 * each pair in the order the file shows them. Returns 1 when it failed. */
static int s_put(json_t *o, const char *key, json_t *v)
{
    return json_object_set_new(o, key, v) != 0;
}

/* Sets o's keys[i] to reals[i] for i < n (NAN: null). Returns the failures. */
static int s_put_reals(json_t *o, const char *const keys[], const double reals[], int n)
{
    int failed = 0;
    for (int i = 0; i < n; i++) {
        failed += s_put(o, keys[i], ps_json_real(reals[i], -1));
    }
    return failed;
}

/* Writes the figures as one JSON object, in one line, to cfg->json; returns
 * 0, or PS_ENOMEM or PS_EIO after saying why. */
static int s_write_json(const compute_cfg_t *cfg, const compute_result_t *r,
                        const char *machine)
{
    const double samples = (double)cfg->steps * cfg->batch;
    const double sps = samples / r->seconds, cps = samples / r->cpu_seconds;
    static const char *const speed[] = {"samples_per_sec", "cpu_samples_per_sec", "step_ms",
                                        "step_ms_median", "train_loss"};
    static const char *const split[] = {"gather",   "copy_in", "forward", "backward",
                                        "copy_out", "update",  "kernels", "copies",
                                        "host",     "step"};
    static const char *const torch[] = {
        "torch_samples_per_sec",        "ratio_vs_torch",
        "torch_strong_samples_per_sec", "ratio_vs_torch_strong",
        "torch_cpu_samples_per_sec",    "cpu_ratio_vs_torch"};
    const double speed_v[] = {sps, cps, 1e3 * r->seconds / cfg->steps, 1e3 * r->step_median,
                              r->loss};
    const double split_v[] = {r->gather, r->copy_in, r->forward, r->backward, r->copy_out,
                              r->update, r->kernels, r->copies,  r->host,     r->step};
    const double torch_v[] = {r->torch_sps,     sps / r->torch_sps,
                              r->strong_sps,    sps / r->strong_sps,
                              r->torch_cpu_sps, cps / r->torch_cpu_sps};
    json_t *doc = json_pack("{s:o, s:s, s:i, s:i, s:i, s:i, s:i, s:s}", "model",
                            ps_json_text(cfg->model), "device", r->backend, "threads",
                            cfg->threads, "blas_threads", r->blas_threads, "batch",
                            cfg->batch, "steps", cfg->steps, "warmup", cfg->warmup, "data",
                            s_ctr(cfg)     ? "click log"
                            : cfg->data[0] ? "fashion-mnist"
                                           : "synthetic");
    json_t *ts = json_object();
    int failed = !doc || !ts;
    failed += s_put_reals(doc, speed, speed_v, 5);
    failed += s_put(doc, "profile_steps", json_integer(cfg->profile_steps));
    failed += s_put_reals(ts, split, split_v, 10);
    failed += s_put(doc, "time_split", ts);
    failed += s_put(doc, "tf32", json_integer(cfg->tf32));
    failed += s_put(doc, "cuda_graph", json_integer(cfg->graph));
    failed += s_put(doc, "fuse_dense", json_integer(cfg->fuse));
    failed += s_put(doc, "conv", ps_json_text(cfg->conv));
    failed += s_put(doc, "graph_nodes", json_integer(r->graph_nodes));
    failed += s_put(doc, "graph_error",
                    json_string(r->graph_error ? ps_strerror(r->graph_error) : ""));
    failed += s_put_reals(doc, torch, torch_v, 6);
    failed += s_put(doc, "torch_version", ps_json_text(r->torch_ver));
    failed += s_put(doc, "machine", ps_json_text(machine));
    char why[PATH_MAX + 64];
    snprintf(why, sizeof why, "%s: out of memory", cfg->json);
    int rc = failed ? PS_ENOMEM
                    : ps_json_write_file(cfg->json, doc, PS_JSON_LINE, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: --json %s\n", why);
    }
    json_decref(doc);
    return rc;
}

/* Under the table: how the steps were timed and split, the PyTorch
 * reference's settings, the click log, and why PyTorch did not run. */
static void s_table_notes(const compute_cfg_t *cfg, const compute_result_t *r,
                          int host_is_backend, ps_bench_table_t *t)
{
    ps_bench_table_note(
        t,
        "Timed steps: %s, after %d warm-up steps; the split is per step over %d separate "
        "profiled steps%s.",
        s_ctr(cfg) ? "the batch gathered and its keys deduplicated, its rows read from a "
                     "server's table in this process (gather), forward and backward, "
                     "Adagrad on the batch's rows in the table and on the dense part "
                     "(update)"
                   : "gather + step + SGD update",
        cfg->warmup, cfg->profile_steps,
        host_is_backend
            ? ""
            : " (the data on the device, each batch gathered there from the step's "
              "indices; profiled steps are queued by hand, not replayed, with their "
              "copies serialised, and each phase is the device's time between CUDA "
              "events: kernels = forward + backward, copies = inputs and params in + "
              "gradients out, host = the rest of the step's wall time; the timed steps "
              "overlap the copies with compute; graph nodes per step: the kernels and "
              "copies one replay of the recorded step launches, fewer with the dense "
              "layers fused)");
    if (cfg->torch) {
        ps_bench_table_note(t,
                            "PyTorch: bench/torch/train.py, same model, data, batch, lr, "
                            "warm-up, step count and device, OPENBLAS_NUM_THREADS = %d%s.",
                            cfg->threads > 0 ? cfg->threads
                                             : (int)sysconf(_SC_NPROCESSORS_ONLN),
                            host_is_backend ? ""
                                            : "; eager: batches gathered on the host, "
                                              "loss read every step; strong: --resident "
                                              "--graph (data on the device, the whole "
                                              "step one CUDA graph, no per-step sync)");
    }
    if (s_ctr(cfg) && cfg->data[0]) {
        ps_bench_table_note(t, "Click log: %s, its last tenth held out.", cfg->data);
    } else if (s_ctr(cfg)) {
        ps_bench_table_note(t,
                            "Click log: %d samples of `shardps-datagen ctr --seed 1`, "
                            "their last tenth held out.",
                            cfg->ctr_rows);
    }
    if (r->torch_note[0]) {
        ps_bench_table_note(t, "PyTorch: %s", r->torch_note);
    }
}

/* The table: one row (on the page with --out, and on stdout), and how it
 * was measured. Returns 0 or PS_EIO. */
static int s_table(const compute_cfg_t *cfg, const compute_result_t *r, int host_is_backend,
                   ps_bench_page_t *page)
{
    const double samples = (double)cfg->steps * cfg->batch;
    const double sps = samples / r->seconds;
    const double cps = samples / r->cpu_seconds;
    char torch[32] = "", ratio[32] = "", tcpu[32] = "", cratio[32] = "";
    char strong[32] = "", sratio[32] = "", nodes[16] = "";
    if (r->graph_nodes > 0) {
        snprintf(nodes, sizeof nodes, "%d", r->graph_nodes);
    }
    if (!isnan(r->strong_sps)) {
        snprintf(strong, sizeof strong, "%.0f", r->strong_sps);
        snprintf(sratio, sizeof sratio, "%.2f", sps / r->strong_sps);
    }
    if (!isnan(r->torch_sps)) {
        snprintf(torch, sizeof torch, "%.0f", r->torch_sps);
        snprintf(ratio, sizeof ratio, "%.2f", sps / r->torch_sps);
    }
    if (!isnan(r->torch_cpu_sps)) {
        snprintf(tcpu, sizeof tcpu, "%.0f", r->torch_cpu_sps);
        snprintf(cratio, sizeof cratio, "%.2f", cps / r->torch_cpu_sps);
    }
    ps_bench_table_t *t;
    if (ps_bench_table_new(
            page, s_ctr(cfg) ? "compute_ctr" : "compute",
            "### One worker's arithmetic, alone, beside PyTorch",
            "model,device,tf32,fuse_dense,conv,graph_nodes,threads,batch,steps,"
            "samples_per_sec,torch_samples_per_sec,ratio_vs_torch,"
            "torch_strong_samples_per_sec,ratio_vs_torch_strong,cpu_samples_per_sec,"
            "torch_cpu_samples_per_sec,cpu_ratio_vs_torch,"
            "gather_ms,copy_in_ms,forward_ms,backward_ms,copy_out_ms,update_ms,kernels_ms,"
            "copies_ms,host_ms",
            "model,device,tf32,fused dense,conv,graph nodes per step,threads,batch,steps,"
            "shardps samples/s,PyTorch samples/s,shardps/PyTorch,PyTorch strong samples/s,"
            "shardps/PyTorch strong,shardps samples/CPU-s,PyTorch samples/CPU-s,"
            "shardps/PyTorch (CPU time),ms/step: gather,copy in,forward,backward,copy out,"
            "update,kernels,copies,host",
            &t) != 0) {
        return PS_EIO;
    }
    ps_bench_table_rowf(t,
                        "%s,%s,%d,%s,%s,%s,%d,%d,%d,%.0f,%s,%s,%s,%s,%.0f,%s,%s,%.3f,%.3f,"
                        "%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f",
                        cfg->model, r->backend, cfg->tf32,
                        strcmp(r->backend, "cpu") ? (cfg->fuse ? "1" : "0") : "n/a", /* none */
                        /* only the CNN has convolutions, only a device a choice */
                        strcmp(r->backend, "cpu") && !strcmp(cfg->model, "cnn") ? cfg->conv
                                                                                 : "n/a",
                        nodes, cfg->threads,
                        cfg->batch, cfg->steps, sps, torch, ratio, strong, sratio, cps, tcpu,
                        cratio,
                        1e3 * r->gather, 1e3 * r->copy_in, 1e3 * r->forward,
                        1e3 * r->backward, 1e3 * r->copy_out, 1e3 * r->update,
                        1e3 * r->kernels, 1e3 * r->copies, 1e3 * r->host);
    s_table_notes(cfg, r, host_is_backend, t);
    ps_bench_table_destroy(&t, 1);
    return 0;
}

/* As the worker: --tf32, --fuse-dense, --conv; on a device the data
 * uploaded once and graph steps. Unlike the worker's, --conv cudnn on the
 * CPU is an error, as --tf32 1 is: a figure must be what it is labelled. */
static int s_device_setup(const compute_cfg_t *cfg, const ps_kernels_t *k, compute_loop_t *L,
                          const ps_dataset_t *ds)
{
    ps_model_set_fused(L->m, cfg->fuse);
    int rc = ps_model_set_tf32(L->m, cfg->tf32);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: --tf32 1: the %s backend has no TF32 mode\n", k->name);
        return rc;
    }
    rc = ps_model_set_conv(L->m, cfg->conv_dnn);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: --conv cudnn on the %s backend: %s\n", k->name,
                rc == PS_ENOTSUP ? "it has no cuDNN" : ps_strerror(rc));
        return rc;
    }
    if (k->host_is_backend) {
        return 0;
    }
    float a, c;
    ps_data_norm(&a, &c);
    rc = ps_model_set_data(L->m, ds->pixels, ds->labels, ds->n, a, c);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: the data on the %s device: %s\n", k->name,
                ps_strerror(rc));
        return rc;
    }
    L->resident = 1;
    return ps_model_set_graph(L->m, cfg->graph);
}

/* Loads the data, builds the model, measures. */
static int s_run(const compute_cfg_t *cfg, const ps_kernels_t *k, compute_result_t *res)
{
    char err[512];
    ps_dataset_t ds = {0};
    ps_model_t *m = NULL;
    compute_loop_t L = {.cfg = cfg, .ds = &ds};
    int rc = cfg->data[0] ? ps_dataset_load(cfg->data, 1, &ds, err, sizeof err)
                          : s_synthetic(&ds, cfg->batch);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: %s\n",
                cfg->data[0] ? err : "out of memory for synthetic data");
        goto fail;
    }
    if (ds.n < cfg->batch) {
        fprintf(stderr, S_PROG ": error: --batch %d: the data has %d samples\n", cfg->batch,
                ds.n);
        rc = PS_EINVAL;
        goto fail;
    }
    rc = ps_model_new(cfg->model, NULL, k, cfg->batch, &m);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: model %s on %s: %s\n", cfg->model, k->name,
                ps_strerror(rc));
        goto fail;
    }
    ps_model_init_params(m, 1);
    L.m = m;
    if ((rc = s_device_setup(cfg, k, &L, &ds)) != 0) {
        goto fail;
    }
    L.order = malloc((size_t)ds.n * sizeof *L.order);
    L.x = ps_model_batch_x(m); /* as the worker: the step copies it in overlapped */
    L.y = ps_model_batch_y(m);
    if (!L.order) {
        fprintf(stderr, S_PROG ": error: out of memory\n");
        rc = PS_ENOMEM;
        goto fail;
    }
    ps_data_order(1, 0, L.order, ds.n);
    L.per_epoch = ds.n / cfg->batch;
    L.sgd = (ps_optim_sgd_t){.lr = (float)cfg->lr, .momentum = 0.0f, .weight_decay = 0.0f};
    res->backend = k->name;
    res->blas_threads = ps_kernels_threads();
    fprintf(stderr,
            S_PROG ": %s on %s, %d threads, batch %d: %d + %d steps + %d profiled\n",
            cfg->model, k->name, res->blas_threads, cfg->batch, cfg->warmup, cfg->steps,
            cfg->profile_steps);
    rc = ps_bench_compute_measure(cfg, m, s_step, &L, res);
    res->graph_error = ps_model_graph_error(m);
    res->graph_nodes = ps_model_graph_nodes(m);
    if (res->graph_error) {
        fprintf(stderr, S_PROG ": the step could not be recorded as a CUDA graph (%s): "
                        "steps were queued by hand\n", ps_strerror(res->graph_error));
    }
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: training step: %s\n", ps_strerror(rc));
    }
fail:
    free(L.order);
    ps_model_destroy(&m);
    ps_dataset_fini(&ds);
    return rc;
}

/* shardps's run, then PyTorch's on the same data; a ctr without --data on a
 * click log generated for them both. Returns shardps's run's status. */
static int s_run_both(compute_cfg_t *cfg, const ps_kernels_t *k, compute_result_t *res)
{
    char clicks[PATH_MAX] = "";
    int rc = 0;
    if (s_ctr(cfg) && !cfg->data[0]) {
        rc = ps_bench_compute_ctr_data(cfg, clicks, sizeof clicks);
        cfg->data = clicks; /* only until the return */
    }
    if (rc == 0) {
        rc = s_ctr(cfg) ? ps_bench_compute_ctr(cfg, k, res) : s_run(cfg, k, res);
    }
    if (rc == 0 && cfg->torch) {
        s_torch(cfg, k, res);
        if (res->torch_note[0]) {
            fprintf(stderr, S_PROG ": %s\n", res->torch_note);
        }
    }
    if (clicks[0]) {
        ps_bench_compute_ctr_data_remove(clicks);
        cfg->data = "";
    }
    return rc;
}

/* The flags' defaults that depend on the model, and every bound. Returns 0,
 * or 2 after saying what is wrong. */
static int s_check(compute_cfg_t *cfg, const char *cpu_gemm, ps_cpu_gemm_t *gemm)
{
    if (isnan(cfg->lr)) { /* the model's default */
        cfg->lr = s_ctr(cfg) ? 0.05 : 0.1;
    }
    if (!cfg->data) {
        cfg->data = s_ctr(cfg) ? "" : PS_DATA_DEFAULT_DIR;
    }
    if ((strcmp(cfg->model, "mlp") && strcmp(cfg->model, "cnn") && !s_ctr(cfg)) ||
        cfg->threads < 0 || cfg->batch < 1 || cfg->steps < 1 || cfg->warmup < 0 ||
        cfg->profile_steps < 0 || !(cfg->lr > 0) || (cfg->tf32 != 0 && cfg->tf32 != 1) ||
        (cfg->graph != 0 && cfg->graph != 1) || (cfg->fuse != 0 && cfg->fuse != 1) ||
        cfg->ctr_rows < 1) {
        fprintf(stderr,
                S_PROG ": error: expected --model mlp|cnn|ctr, --threads >= 0, --batch "
                       ">= 1, --steps >= 1, --warmup/--profile-steps >= 0, --lr > 0, "
                       "--tf32, --cuda-graph and --fuse-dense 0 or 1, --ctr-rows >= 1\n");
        return 2;
    }
    char why[512];
    if (ps_kernels_parse_conv(cfg->conv, &cfg->conv_dnn, why, sizeof why) != 0) {
        fprintf(stderr, S_PROG ": error: %s\n", why);
        return 2;
    }
    if (ps_kernels_parse_cpu_gemm(cpu_gemm, gemm) != 0) {
        fprintf(stderr, S_PROG ": error: --cpu-gemm %s: expected " PS_CPU_GEMM_NAMES "\n",
                cpu_gemm);
        return 2;
    }
    if (cfg->json && ps_file_check_writable(cfg->json, why, sizeof why) != 0) {
        fprintf(stderr, S_PROG ": error: --json %s\n", why); /* now, not after the run */
        return 2;
    }
    return 0;
}

/* Both runs, then the results page (--out), the table on stdout and the
 * JSON (--json). Returns the exit status: 1 when shardps's run or a file
 * failed, or PyTorch's asked for did not run. */
static int s_measure(compute_cfg_t *cfg, const ps_kernels_t *k, int argc, char **argv)
{
    ps_bench_page_t *page = NULL;
    if (cfg->out && (ps_file_mkdirs(cfg->out) != 0 ||
                     ps_bench_page_new(cfg->out, s_ctr(cfg) ? "compute_ctr" : "compute",
                                       argc, argv, &page) != 0)) {
        fprintf(stderr, S_PROG ": error: cannot write the results page in %s\n", cfg->out);
        return 1;
    }
    compute_result_t res = {.torch_sps = NAN, .torch_cpu_sps = NAN, .strong_sps = NAN};
    int rc = s_run_both(cfg, k, &res);
    char machine[256];
    ps_bench_machine(machine, sizeof machine);
    if (rc == 0) {
        rc = s_table(cfg, &res, k->host_is_backend, page);
    }
    ps_bench_page_destroy(&page);
    if (rc != 0 || (cfg->json && s_write_json(cfg, &res, machine) != 0)) {
        return 1;
    }
    return cfg->torch && isnan(res.torch_sps) ? 1 : 0;
}

int ps_bench_compute_main(int argc, char **argv)
{
    compute_cfg_t cfg = {.model = "mlp",
                         .device = "cpu",
                         .torch_script = S_TORCH_SCRIPT,
                         .python = "/usr/bin/python3",
                         .threads = 1,
                         .batch = 64,
                         .steps = 500,
                         .warmup = 20,
                         .profile_steps = 100,
                         .lr = NAN,
                         .ctr_rows = 100000,
                         .graph = 1,
                         .fuse = 1,
                         .conv = PS_KERNELS_CONV_DEFAULT};
    const char *cpu_gemm = "auto";
    ps_cpu_gemm_t gemm = PS_CPU_GEMM_AUTO;
    ps_flag_t flags[] = {
        {"model", PS_FLAG_STR, &cfg.model, "NAME", "mlp or cnn"},
        {"device", PS_FLAG_STR, &cfg.device, "DEV", "cpu, cuda or auto"},
        {"threads", PS_FLAG_INT, &cfg.threads, "N",
         "BLAS threads (as the worker's --threads; 0 = library default)"},
        {"cpu-gemm", PS_FLAG_STR, &cpu_gemm, "NAME",
         "CPU sgemm: " PS_CPU_GEMM_NAMES " (as the worker's --cpu-gemm)"},
        {"steps", PS_FLAG_INT, &cfg.steps, "N", "timed steps"},
        {"warmup", PS_FLAG_INT, &cfg.warmup, "N", "untimed steps before them"},
        {"profile-steps", PS_FLAG_INT, &cfg.profile_steps, "N",
         "profiled steps after them, for the time split (0 = none)"},
        {"batch", PS_FLAG_INT, &cfg.batch, "N", "samples per step"},
        {"lr", PS_FLAG_DOUBLE, &cfg.lr, "X",
         "learning rate: SGD's (default 0.1); ctr: Adagrad's (default 0.05)"},
        {"tf32", PS_FLAG_INT, &cfg.tf32, "0|1",
         "GPU: TF32 GEMMs, here and in PyTorch (other arithmetic; 0 = plain FP32)"},
        {"cuda-graph", PS_FLAG_INT, &cfg.graph, "0|1",
         "GPU: each step one replay of a recorded CUDA graph (as the worker's)"},
        {"fuse-dense", PS_FLAG_INT, &cfg.fuse, "0|1",
         "GPU: dense layers' bias, ReLU and their gradients fused into cuBLASLt GEMMs (as "
         "the worker's; 0 = separate kernels)"},
        {"conv", PS_FLAG_STR, &cfg.conv, PS_KERNELS_CONV_NAMES,
         "GPU: the CNN's convolutions on cuDNN or im2col + GEMMs (as the worker's --conv)"},
        {"data", PS_FLAG_STR, &cfg.data, "DIR",
         "Fashion-MNIST directory (\"\": synthetic inputs); ctr: the click log (Criteo "
         "TSV; default: --ctr-rows generated)"},
        {"ctr-rows", PS_FLAG_INT, &cfg.ctr_rows, "N",
         "ctr without --data: samples of the click log generated with shardps-datagen"},
        {"json", PS_FLAG_STR, &cfg.json, "FILE", "write the figures as one JSON object"},
        {"out", PS_FLAG_STR, &cfg.out, "DIR",
         "also write the results page compute.md and compute.csv into DIR"},
        {"torch", PS_FLAG_BOOL, &cfg.torch, NULL,
         "also run the PyTorch reference at the same thread count (needs PyTorch: "
         "apt-get install python3-torch)"},
        {"torch-script", PS_FLAG_STR, &cfg.torch_script, "PATH",
         "the PyTorch reference: bench/torch/train.py in the source tree"},
        {"python", PS_FLAG_STR, &cfg.python, "PATH", "Python with torch, for --torch"},
    };
    int rc = ps_config_parse_argv(
        S_PROG,
        "Trains one model in one process, no servers, no network: samples/s of gather +\n"
        "training step + SGD update, where a step's time goes, and with --torch the\n"
        "PyTorch baseline's samples/s at the same thread count in the same run.",
        flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (s_check(&cfg, cpu_gemm, &gemm) != 0) {
        return 2;
    }
    ps_log_set_role("B", -1);
    ps_kernels_set_threads(cfg.threads);
    ps_kernels_set_cpu_gemm(gemm);
    const ps_kernels_t *k = NULL;
    char why[512];
    rc = ps_kernels_select(cfg.device, &k, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: --device %s: %s\n", cfg.device, why);
        return rc == PS_EINVAL ? 2 : 1;
    }
    return cfg.torch && s_torch_check(&cfg) != 0 ? 1 : s_measure(&cfg, k, argc, argv);
}
