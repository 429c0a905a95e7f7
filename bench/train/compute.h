/*
 * bench/train/compute.h - what the pieces of `shardps-bench compute` share:
 * its configuration (flags parsed in compute.c), one run's figures, the
 * timed and profiled passes over any step (compute.c), and the click
 * model's step (compute_ctr.c). Not for the other subcommands.
 */
#ifndef PS_BENCH_COMPUTE_H
#define PS_BENCH_COMPUTE_H

#include "kernels/kernels.h"
#include "worker/models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COMPUTE_PROG "shardps-bench compute"

typedef struct {
    const char *model;        /* mlp, cnn or ctr */
    const char *device;       /* cpu, cuda or auto */
    const char *data;         /* Fashion-MNIST directory ("" = synthetic inputs); ctr:
                                 the click log ("" = one generated) */
    const char *json;         /* output file, or NULL */
    const char *out;          /* results page directory, or NULL */
    const char *torch_script; /* bench/torch/train.py */
    const char *python;       /* interpreter for it */
    int threads;              /* BLAS threads (0 = library default) */
    int batch;                /* samples per step */
    int steps;                /* timed steps */
    int warmup;               /* untimed steps before them */
    int profile_steps;        /* profiled steps after them (0 = none) */
    int torch;                /* run the PyTorch baseline too */
    double lr;                /* learning rate: SGD's; ctr: Adagrad's */
    int tf32;                 /* GPU: TF32 GEMMs (here and in PyTorch) */
    int graph;                /* GPU: the step as a replayed CUDA graph */
    int fuse;                 /* GPU: dense layers in cuBLASLt GEMMs with fused epilogues */
    const char *conv;         /* GPU: --conv, the convolutions' way (kernels.h) */
    int conv_dnn;             /* its parse: 1 = cuDNN, 0 = im2col + GEMM */
    int ctr_rows;             /* ctr: samples of the generated click log */
} compute_cfg_t;

/* What the two passes measured. */
typedef struct {
    const char *backend; /* the kernels table's name */
    int blas_threads;    /* in effect */
    double seconds;      /* timed pass, wall */
    double cpu_seconds;  /* timed pass, CPU time of the process */
    double step_median;  /* timed pass: median step, seconds */
    double loss;         /* mean training loss over the timed pass */
    /* Profiled pass, seconds per step. */
    double gather, copy_in, forward, backward, copy_out, update, step;
    double kernels, copies, host; /* the step split: device kernels, copies, the rest */
    double torch_sps;     /* PyTorch samples/s; NAN = not run or failed */
    double strong_sps;    /* PyTorch resident + graph samples/s (device only); NAN = none */
    int graph_error;      /* recording the step as a CUDA graph failed with this; 0 = no */
    int graph_nodes;      /* the recorded step's nodes (its launches); 0 = none recorded */
    double torch_cpu_sps; /* PyTorch samples per CPU second of its process; NAN = unknown */
    char torch_ver[64];   /* PyTorch's version, "" if unknown */
    char torch_note[256]; /* why there is no PyTorch figure */
} compute_result_t;

/* One training step of a loop: its loss into *loss; with t not NULL the
 * phases' ends into t[0..2] (after the gather, after the model's step, after
 * the update). Returns 0 or an error. */
typedef int (*compute_step_fn)(void *arg, float *loss, double *t);

/*
 * Warm-up, the timed pass and the profiled pass (ps_model_set_profile() on
 * m) of cfg's step counts over step(arg): the figures into res. Returns 0
 * or the first step's error.
 */
int ps_bench_compute_measure(const compute_cfg_t *cfg, ps_model_t *m, compute_step_fn step,
                             void *arg, compute_result_t *res);

/*
 * The click model on the CPU backend k: a worker's step, its rows in a
 * server's table (server/rows.h) in this process, Adagrad on the rows and
 * on the dense part. Returns 0, or an error after one line on stderr.
 */
int ps_bench_compute_ctr(const compute_cfg_t *cfg, const ps_kernels_t *k,
                         compute_result_t *res);

/*
 * Writes a click log of cfg->ctr_rows samples (shardps-datagen ctr, seed 1)
 * into a new temporary directory: its path into path[cap]. Returns 0, or 1
 * after one line on stderr. Remove it with ps_bench_compute_ctr_data_remove().
 */
int ps_bench_compute_ctr_data(const compute_cfg_t *cfg, char *path, size_t cap);

/* Removes the click log at path and its directory. */
void ps_bench_compute_ctr_data_remove(const char *path);

#ifdef __cplusplus
}
#endif
#endif
