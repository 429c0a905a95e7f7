/*
 * worker/models/model.h - the models a worker trains (MLP, CNN on images; the
 * click-through-rate model ctr on embedding rows and numeric features), on
 * any backend.
 *
 * A model owns its activations and scratch buffers, sized once for max_batch,
 * and two host buffers of P floats: the parameters the worker pulls into, and
 * the gradients the worker pushes from. Tensors ("fc1.weight", ...) are laid
 * out back to back in that flat vector, in PyTorch's layouts. On a GPU backend
 * the host buffers are pinned and the model copies them to and from the device
 * itself, layer by layer, overlapped with compute: later layers' params copy
 * in while earlier layers run forward, and each layer's gradients copy out
 * while backward goes on. It also lends pinned batch buffers, whose copy in
 * is queued with the params'. The model knows nothing of servers, sockets or
 * data files.
 *
 * The ctr model keeps only its dense part (an MLP) in the flat vector. Its
 * embedding rows live on the servers: per step the caller deduplicates the
 * batch's keys (worker/models/embed.h), pulls the U rows into
 * ps_model_rows() and, after ps_model_train_step_ctr(), pushes the U row
 * gradients of ps_model_row_grads().
 */
#ifndef PS_WORKER_MODEL_H
#define PS_WORKER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/safetensors.h"
#include "kernels/kernels.h"
#include "worker/models/embed.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_model ps_model_t;

enum { PS_MODEL_MAX_DIMS = 4 }; /* a tensor has at most this many dimensions */
enum { PS_MODEL_MAX_HIDDEN = 8 }; /* the mlp has at most this many hidden layers */

/* One named tensor of the flat parameter vector. */
typedef struct {
    const char *name; /* e.g. "fc1.weight" */
    size_t offset;    /* first element in the flat vector */
    size_t count;     /* number of float32 elements */
    int ndim;         /* dimensions of its PyTorch shape */
    const int *shape; /* [ndim] that shape, row-major; borrowed, static */
} ps_tensor_info_t;

/* Input geometry every image model expects: one 28x28 grey image per sample. */
enum { PS_MODEL_IN_H = 28, PS_MODEL_IN_W = 28, PS_MODEL_CLASSES = 10 };

/* The ctr model's input per sample (the Criteo layout): 26 categorical fields,
 * each one embedding row of E floats, and 13 numeric floats; E is 16 unless
 * ps_model_new_ctr() says otherwise, at most PS_MODEL_MAX_EMBED_DIM. */
enum {
    PS_MODEL_CTR_FIELDS = 26,
    PS_MODEL_CTR_NUMERIC = 13,
    PS_MODEL_CTR_EMBED_DIM = 16,
    PS_MODEL_MAX_EMBED_DIM = 1024,
};

/*
 * Creates model `name` ("mlp", "cnn" or "ctr") for batches of up to max_batch
 * samples on backend k. hidden: the mlp's and the ctr's hidden widths
 * "H1,H2,..." (tensors fc1 .. fcN), NULL or "" for the default 256,128; the
 * cnn takes none. The ctr gets embedding rows of PS_MODEL_CTR_EMBED_DIM
 * floats. Returns 0 and stores the model in *out (caller owns the result;
 * destroy with ps_model_destroy()), PS_EINVAL for an unknown name or bad
 * widths, PS_ENOMEM.
 */
int ps_model_new(const char *name, const char *hidden, const ps_kernels_t *k, int max_batch,
                 ps_model_t **out);

/*
 * Creates the ctr model with rows of embed_dim floats (1 ..
 * PS_MODEL_MAX_EMBED_DIM): input x[n, 26*E + 13] = (the 26 rows, the 13
 * numeric floats), the MLP fc1 .. fcN of `hidden` (as ps_model_new) with
 * ReLU, one logit, the logistic loss. Returns as ps_model_new(), PS_EINVAL
 * also for a bad embed_dim.
 */
int ps_model_new_ctr(const char *hidden, int embed_dim, const ps_kernels_t *k, int max_batch,
                     ps_model_t **out);

/* Frees everything; NULL-safe; sets *m to NULL. */
void ps_model_destroy(ps_model_t **m);

/* P: length of the flat parameter vector. */
size_t ps_model_num_params(const ps_model_t *m);

/* Number of named tensors, and the i-th (borrowed; valid until destroy). */
size_t ps_model_num_tensors(const ps_model_t *m);
const ps_tensor_info_t *ps_model_tensor(const ps_model_t *m, size_t i);

/* Host parameter and gradient buffers of P floats each. Borrowed; valid until
 * ps_model_destroy(). The caller writes params (pull) and reads grads (push). */
float *ps_model_params(ps_model_t *m);
float *ps_model_grads(ps_model_t *m);

/* Host batch buffers for up to max_batch samples: x [max_batch*784] floats
 * (the ctr: [max_batch*13] numeric floats) and y [max_batch] labels, pinned
 * on device backends. Borrowed; valid until ps_model_destroy(). The caller
 * gathers a batch into them and passes them to ps_model_train_step() (the
 * ctr: ps_model_train_step_ctr()), which then copies the batch in on the
 * copy stream, overlapped with the params' copies, and returns once that
 * copy is done: the next batch may be gathered into them right away (one
 * pair, no double buffering needed). */
float *ps_model_batch_x(ps_model_t *m);
uint8_t *ps_model_batch_y(ps_model_t *m);

/* Writes PyTorch's default initialisation (kaiming-uniform weights, uniform
 * biases in +-1/sqrt(fan_in)) into ps_model_params(), deterministically from seed. */
void ps_model_init_params(ps_model_t *m, uint64_t seed);

/*
 * One training step on n <= max_batch samples using the current host params:
 * x is n*28*28 normalised floats (host), y n labels in [0,10), either in the
 * model's batch buffers (copied in overlapped on a device backend) or in any
 * other host memory (copied in before the ops, not overlapped). Writes the
 * gradient of the mean softmax cross-entropy into ps_model_grads() and the
 * mean loss into *loss. Returns 0, PS_EINVAL (bad n or label; the ctr, which
 * trains by ps_model_train_step_ctr()), or a backend error.
 */
int ps_model_train_step(ps_model_t *m, const float *x, const uint8_t *y, int n,
                        float *loss);

/*
 * Keeps a training set on the backend: count images of 28*28 grey levels
 * (pixels) and their labels, uploaded once (on a GPU 47 MB for
 * Fashion-MNIST), so ps_model_train_step_idx() gathers and normalises each
 * batch there (input = pixel * a + c, the conversion of worker/data.c,
 * bitwise). Replaces any set before. Returns 0, PS_EINVAL (a label >= 10,
 * count < 1, the ctr), PS_ENOMEM or a copy's error. The host arrays are not
 * kept.
 */
int ps_model_set_data(ps_model_t *m, const uint8_t *pixels, const uint8_t *labels, int count,
                      float a, float c);

/* Host buffer of max_batch sample indices into the resident set (pinned on
 * device backends): the caller writes a step's indices here. Borrowed;
 * valid until ps_model_destroy(). */
uint32_t *ps_model_batch_idx(ps_model_t *m);

/*
 * One training step on the n <= max_batch resident samples named by
 * ps_model_batch_idx()[0..n): the indices are copied in (one small copy),
 * one kernel gathers and normalises the batch, then the step of
 * ps_model_train_step() runs with the same arithmetic, copies and hook. The
 * index buffer may be rewritten once this returns. Returns 0, PS_EINVAL (bad
 * n, an index >= count, no resident set) or a backend error.
 */
int ps_model_train_step_idx(ps_model_t *m, int n, float *loss);

/*
 * on != 0: ps_model_train_step_idx() records its step (index copy, gather,
 * the params' copies in, forward, loss, backward, the gradients' copies out)
 * once per batch size as a backend graph (a CUDA graph) and replays it, one
 * launch per step; parameters, gradients and every buffer stay at fixed
 * device addresses. The same bits as without. Profiled steps are never
 * recorded. A backend without graphs (CPU) ignores it; one whose recording
 * fails turns graphs off (ps_model_graph_error). Returns 0.
 */
int ps_model_set_graph(ps_model_t *m, int on);

/* 0, or the error with which recording a step failed: graphs are then off
 * for this model and steps are queued by hand (the same results). */
int ps_model_graph_error(const ps_model_t *m);

/* TF32 GEMMs on (1) or off (0, the default): see kernels.h set_tf32. Returns
 * 0 or PS_ENOTSUP (on, with a backend that has no TF32). */
int ps_model_set_tf32(ps_model_t *m, int on);

/* The dense layers' GEMMs with their bias, ReLU and those gradients fused
 * in (1, the default) or as separate ops after plain GEMMs (0): see
 * kernels.h dense_fwd. A layer whose shape the backend cannot fuse, and
 * every layer on the CPU, runs the separate ops either way. A change drops
 * the recorded step (the next one records anew). Returns 0. */
int ps_model_set_fused(ps_model_t *m, int on);

/* The convolutions through cuDNN (1) or im2col + GEMM (0, the default): see
 * kernels.h set_conv. A change drops the recorded step. Returns 0, or
 * set_conv's error (PS_ENOTSUP: on, and the backend has no cuDNN). */
int ps_model_set_conv(ps_model_t *m, int cudnn);

/* Nodes of the recorded step (kernels, copies, event records: the launches
 * one replay makes), or 0 while none is recorded. */
int ps_model_graph_nodes(const ps_model_t *m);

/* Where a training step's time goes, accumulated over steps (seconds). */
typedef struct {
    double copy_in;  /* inputs and params host -> device (0 on the CPU) */
    double forward;  /* forward pass and loss */
    double backward; /* backward pass into the gradients */
    double copy_out; /* gradients device -> host (0 on the CPU) */
    long steps;      /* steps measured */
} ps_model_profile_t;

/* Starts (p != NULL) or stops (NULL) accumulating step times into *p, which is
 * borrowed until stopped. While profiling, each phase waits for the device
 * and a device backend copies all params in before forward and all gradients
 * out after backward, one copy each (serialised, as before the overlap), so
 * each phase is timed alone; this costs the overlap a GPU otherwise gets:
 * for measuring only, and never recorded as a graph. On a device backend a
 * phase's time is the device's, between events at its ends (copy_in: the
 * batch's copy or gather and the params' copies; forward and backward: the
 * kernels); on the CPU the clock's. The results are the same bits either way. */
void ps_model_set_profile(ps_model_t *m, ps_model_profile_t *p);

/* Called during ps_model_train_step() when the host gradients of keys
 * [from, P) are final for this step (from only decreases within a step; the
 * last call of a successful step has from = 0). On the CPU backend backward
 * reports after each layer; on a device backend after each layer's copy to
 * the host has landed (once, from = 0, while profiling). Runs on the
 * training thread; must not touch the model. */
typedef void ps_model_grad_ready_fn(void *arg, size_t from);

/* Sets (fn != NULL) or clears (NULL) the gradient-ready hook; arg is passed
 * to fn and borrowed until cleared. No hook: train_step is unchanged. */
void ps_model_set_grad_ready(ps_model_t *m, ps_model_grad_ready_fn *fn, void *arg);

/*
 * Evaluates the current host params on n samples (any n; processed in chunks
 * of max_batch). Stores the number of correct predictions and the mean loss.
 * An image model's: PS_EINVAL for the ctr (see ps_model_predict_ctr()).
 */
int ps_model_evaluate(ps_model_t *m, const float *x, const uint8_t *y, int n, int *correct,
                      float *loss);

/* ---- models with embedding rows (the ctr) -------------------------------------- */

/* E, the floats per embedding row; 0 for a model without rows. */
int ps_model_embed_dim(const ps_model_t *m);

/* Host buffers of max_batch*26*E floats each: the rows the caller pulled for
 * a step (row u of the batch's ps_embed_batch_t at [u*E, u*E + E)), and the
 * step's row gradients (the same layout, U rows). Pinned on device
 * backends. Borrowed; valid until ps_model_destroy(). NULL for a model
 * without rows. */
float *ps_model_rows(ps_model_t *m);
float *ps_model_row_grads(ps_model_t *m);

/*
 * One ctr training step on n <= max_batch samples with the current host
 * params and rows: b is the batch's lookups, built from its keys with
 * F = 26 (b->n == n); ps_model_rows() holds the b->U rows of b->keys; num
 * [n*13] the numeric features and label [n] the 0/1 labels (host; in the
 * model's batch buffers the copies in overlap, as ps_model_train_step's).
 * Gathers x, runs forward, the mean logistic loss, backward; writes the
 * dense gradients into ps_model_grads() (the gradient-ready hook reports
 * them as for the MLP), the U row gradients (each the sum over the
 * positions that use the row) into ps_model_row_grads(), and the mean loss
 * into *loss. b may be rebuilt and the buffers refilled once it returns.
 * Returns 0, PS_EINVAL (not a ctr model, bad n, b not of this batch, a
 * label > 1) or a backend error.
 */
int ps_model_train_step_ctr(ps_model_t *m, const ps_embed_batch_t *b, const float *num,
                            const uint8_t *label, int n, float *loss);

/*
 * Click probabilities sigmoid(logit) of n samples with the current host
 * params into prob[n] (host), the rows and inputs as for
 * ps_model_train_step_ctr() (no labels). One batch: 1 <= n <= max_batch, as
 * its rows must fit ps_model_rows(); evaluate more samples batch by batch.
 * Returns 0, PS_EINVAL (not a ctr model, bad n, b not of this batch) or a
 * backend error.
 */
int ps_model_predict_ctr(ps_model_t *m, const ps_embed_batch_t *b, const float *num, int n,
                         float *prob);

/* ---- model files (model_file.c): safetensors with PyTorch state_dict names ---- */

/*
 * Writes params (P floats laid out as this model's, e.g. ps_model_params())
 * to path as a safetensors file whose tensors are the model's, by name and
 * PyTorch shape, so torch's load_state_dict takes it. Its __metadata__ holds
 * "model" (the model's name) and then the caller's n_meta pairs (meta[2i]
 * key, meta[2i+1] value). Atomic. Returns 0 or ps_safetensors_write()'s
 * error with a one-line reason in why.
 */
int ps_model_save(const ps_model_t *m, const float *params, const char *path,
                  const char *const *meta, int n_meta, char *why, size_t why_cap);

/*
 * Copies the tensors of st into ps_model_params() after checking that st
 * holds exactly this model's tensors, with the same shapes. Returns 0, or
 * PS_EINVAL with a one-line reason in why (the params are then unchanged).
 */
int ps_model_load(ps_model_t *m, const ps_safetensors_t *st, char *why, size_t why_cap);

/* The name of the model ("mlp", "cnn", "ctr") whose tensor names st holds, or
 * NULL; its hidden widths as ps_model_new() takes them ("" = the default)
 * into hidden[cap]. */
const char *ps_model_name_of(const ps_safetensors_t *st, char *hidden, size_t cap);

/* The embedding dimension E of a ctr model's file (from fc1.weight's width,
 * 26*E + 13), for ps_model_new_ctr(); 0 when st is not a ctr model's. */
int ps_model_embed_dim_of(const ps_safetensors_t *st);

#ifdef __cplusplus
}
#endif
#endif
