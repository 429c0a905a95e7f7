/*
 * worker/models/model_impl.h - private: what model_new.c (building a model)
 * and model.c (running it) share with each other and with the architectures
 * mlp.c, cnn.c, ctr.c (the first and the last over fc.c) and with model_file.c.
 *
 * Those two own the plumbing every model needs (backend context, the flat
 * parameter and gradient buffers, tensor table, input staging, loss, chunked
 * evaluation, and for a model with embedding rows the rows, their gradients
 * and the batch's lookups); an architecture (ps_model_arch_t) declares its
 * tensors and supplies forward and backward over backend buffers. Only
 * worker/models/ includes this header.
 */
#ifndef PS_WORKER_MODEL_IMPL_H
#define PS_WORKER_MODEL_IMPL_H

#include "worker/models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One tensor an architecture declares, in flat-vector order. */
typedef struct {
    const char *name;             /* PyTorch name, e.g. "fc1.weight" */
    size_t count;                 /* float32 elements */
    int fan_in;                   /* PyTorch default init bound is 1/sqrt(fan_in) */
    int ndim;                     /* dimensions of its PyTorch shape */
    int shape[PS_MODEL_MAX_DIMS]; /* that shape; the product is count */
} ps_tensor_def_t;

typedef struct ps_model_arch {
    const char *name; /* "mlp", "cnn", "ctr" */
    /* 0 for an image model (input [n,784], 10 classes, softmax cross-entropy).
     * Otherwise the categorical fields per sample of a model with embedding
     * rows, whose input is the batch's rows (m->e_*, m->d_rows) beside
     * `numeric` floats per sample, with one logit and the logistic loss. */
    int fields;
    int numeric;                    /* numeric inputs per sample (fields > 0) */
    size_t ntensors;                /* entries in tensors (a fixed layout) */
    const ps_tensor_def_t *tensors; /* layout of the flat vector; NULL: layout() makes it */
    /* A shaped architecture: sets m->defs, m->ntensors (and m->layout, owned,
     * freed with free()) for the hidden widths ("" = its default). 0,
     * PS_EINVAL or PS_ENOMEM. NULL for a fixed layout, which takes no widths. */
    int (*layout)(ps_model_t *m, const char *hidden);
    /* A shaped architecture: the widths of the model whose tensors st holds,
     * as layout() takes them, into buf. 0 or PS_EINVAL (not this model). */
    int (*hidden_of)(const ps_safetensors_t *st, char *buf, size_t cap);
    /* Allocates the activations for m->max_batch into m->impl. 0 or PS_ENOMEM. */
    int (*setup)(ps_model_t *m);
    /* Frees m->impl; safe on a half-built model (m->impl NULL or partial). */
    void (*teardown)(ps_model_t *m);
    /* Forward pass of n <= max_batch samples d_x[n,784] (with fields:
     * d_x[n,numeric] and the step's rows) with m->d_params, calling
     * ps_model_params_needed() before each layer; returns the logits [n,10]
     * (with fields: [n,1]), a backend buffer owned by the architecture. */
    float *(*forward)(ps_model_t *m, const float *d_x, int n);
    /* Backward pass after forward on the same d_x: d_dlogits (may be the
     * logits buffer, overwritten by the loss) -> gradients into m->d_grads,
     * calling ps_model_grads_final() as layers finish (tensor 0 optional);
     * with fields also the rows' gradients into m->d_row_grads [e_U, E]. */
    void (*backward)(ps_model_t *m, const float *d_x, float *d_dlogits, int n);
} ps_model_arch_t;

struct ps_model {
    const ps_model_arch_t *arch; /* which network */
    const ps_kernels_t *k;       /* backend; borrowed, static */
    ps_kctx_t *ctx;              /* backend context; owned */
    int max_batch;               /* activations are sized for this many samples */
    size_t P;                    /* flat parameter count */
    size_t ntensors;             /* named tensors */
    const ps_tensor_def_t *defs; /* [ntensors] their layout; arch->tensors or in layout */
    void *layout;                /* a shaped architecture's layout; owned (free()) */
    ps_tensor_info_t *tensors;   /* ntensors entries; owned */
    float *params;               /* host [P]; pinned on device backends; owned */
    float *grads;                /* host [P]; owned */
    float *d_params;             /* backend [P]; == params when host_is_backend */
    float *d_grads;              /* backend [P]; == grads when host_is_backend */
    float *x;                    /* host [max_batch*784] batch; pinned on devices; owned */
    uint8_t *y;                  /* host [max_batch] its labels; as x */
    float *d_x;                  /* backend [max_batch*784]; NULL when host_is_backend */
    uint8_t *d_y;                /* backend [max_batch]; NULL when host_is_backend */
    void *impl;                  /* the architecture's activations; owned by arch */
    ps_model_profile_t *profile; /* when set, train_step times its phases; borrowed */
    int lap;                     /* profiling on a device: the last timing mark set */
    ps_model_grad_ready_fn *grad_ready; /* gradient-ready hook; NULL = none */
    void *grad_ready_arg;               /* its argument; borrowed */
    /* Per train_step / evaluate, for the copies of a device backend: */
    size_t sent;      /* params of tensors [0, sent) are queued in */
    size_t final;     /* grads of tensors [final, ntensors) are final (queued out) */
    size_t *out_from; /* [ntensors] first key of each grads copy out, in order; owned */
    size_t nout;      /* entries of out_from in use */
    int io_rc;        /* first failed copy (0 = none) */
    /* The training set resident on the backend (ps_model_set_data): */
    uint8_t *d_pixels; /* backend [ndata*784] grey levels; owned; NULL = none */
    uint8_t *d_labels; /* backend [ndata] labels; owned */
    int ndata;         /* samples resident */
    float norm_a;      /* input = pixel * norm_a + norm_c */
    float norm_c;
    uint32_t *idx;   /* host [max_batch] the step's sample indices; pinned; owned */
    uint32_t *d_idx; /* backend [max_batch]; == idx when host_is_backend */
    /* The recorded step (ps_model_set_graph): */
    int use_graph;          /* record the resident step once, then replay it */
    ps_kgraph_t *graph;     /* the recording; owned; NULL = none yet */
    int graph_n;            /* its batch size */
    int graph_rc;           /* why recording failed (graphs then off); 0 = it did not */
    size_t graph_nout;      /* its gradient copies out */
    size_t *graph_out_from; /* [ntensors] their first keys; owned */
    int graph_nodes;        /* its nodes (kernels.h graph_nodes) */
    int fused;              /* dense layers through the backend's fused GEMMs (set_fused) */
    /* Embedding rows (an architecture with fields: the ctr): */
    int embed_dim;             /* E: floats per row; 0 for the image models */
    int max_rows;              /* rows of a step at most: max_batch * fields */
    float *rows;               /* host [max_rows*E] the step's rows; pinned; owned */
    float *row_grads;          /* host [max_rows*E] their gradients; pinned; owned */
    float *d_rows;             /* backend [max_rows*E]; == rows when host_is_backend */
    float *d_row_grads;        /* backend [max_rows*E]; == row_grads when host_is_backend */
    uint32_t *d_csr;           /* backend [3*max_rows+1] room for the step's idx, order
                                  and offsets; owned; NULL when host_is_backend */
    const uint32_t *e_idx;     /* the step's backend idx [n*fields] (embed.h) */
    const uint32_t *e_order;   /* its order [n*fields] */
    const uint32_t *e_offsets; /* its offsets [e_U+1] */
    int e_U;                   /* its rows */
    int late_out;              /* async copies queued after the last gradient copy
                                  (the rows' gradients): 0 or 1 */
};

extern const ps_model_arch_t ps_model_arch_mlp;
extern const ps_model_arch_t ps_model_arch_cnn;
extern const ps_model_arch_t ps_model_arch_ctr;

/* The i-th architecture, NULL past the last. */
const ps_model_arch_t *ps_model_arch_at(size_t i);

/* Input features per sample of an image model. */
#define PS_MODEL_IN (PS_MODEL_IN_H * PS_MODEL_IN_W)

/* Floats per sample of the batch input buffers: an image, or a ctr's numeric features. */
static inline size_t ps_model_in_floats(const ps_model_t *m)
{
    return m->arch->fields ? (size_t)m->arch->numeric : PS_MODEL_IN;
}

/* Backend pointer to tensor i of the parameters / gradients. */
static inline float *ps_model_dparam(const ps_model_t *m, size_t i)
{
    return m->d_params + m->tensors[i].offset;
}

static inline float *ps_model_dgrad(const ps_model_t *m, size_t i)
{
    return m->d_grads + m->tensors[i].offset;
}

/* Forward calls this before it uses the params of tensors [0, end). On a
 * device backend it queues the copy in of those not yet sent (on the copy
 * stream), which the ops queued after it wait for; later layers' params keep
 * copying in while these layers run. Nothing on a host backend. */
void ps_model_params_needed(ps_model_t *m, size_t end);

/* Backward calls this once the gradients of tensors [i, ntensors) are final.
 * On a backend whose buffers are the host's it reports keys [offset of
 * tensor i, P) to the gradient-ready hook; on a device backend it queues the
 * newly final ones' copy out, which runs while backward goes on (train_step
 * reports each copy to the hook once it has landed). */
void ps_model_grads_final(ps_model_t *m, size_t i);

/* The ReLU mask of one hidden layer's output, for the fused backward. */
typedef struct {
    void *d_mask; /* backend [dense_mask_bytes(max_batch, O)]; NULL: the backend keeps none */
    int written;  /* 1: the last forward wrote it */
} ps_model_mask_t;

/* Gives masks[0..count) room for max_batch rows of widths[i] outputs, in
 * one backend block (*block, 256-byte aligned views; the caller frees it
 * with k->free). Nothing (*block NULL) on a backend without masks.
 * 0 or PS_ENOMEM. */
int ps_model_masks_setup(ps_model_t *m, ps_model_mask_t *masks, const int *widths, int count,
                         void **block);

/*
 * Fully connected layer, PyTorch layout: y[n,O] = x[n,I] @ w[O,I]^T + b[O],
 * then, when relu is not NULL, ReLU (its mask written there if the fused
 * path ran). The fused GEMM (m->fused, kernels.h dense_fwd) or the separate
 * ops: the one place a dense layer chooses.
 */
void ps_model_linear_fwd(ps_model_t *m, const float *x, const float *w, const float *b,
                         float *y, int n, int I, int O, ps_model_mask_t *relu);

/*
 * Its gradients: dw[O,I] = dy^T @ x, db[O] = column sums of dy, and when dx is
 * not NULL dx[n,I] = dy @ w. dy is the gradient at the layer's output before
 * any ReLU. When xrelu is not NULL, x is a ReLU's output (xrelu its mask)
 * and dx gets that ReLU's gradient too: the gradient at the ReLU's input.
 */
void ps_model_linear_bwd(ps_model_t *m, const float *x, const float *w, const float *dy,
                         float *dx, float *dw, float *db, int n, int I, int O,
                         const ps_model_mask_t *xrelu);

/*
 * The stack of fully connected layers fc1..fc(L+1) of the mlp and the ctr
 * (fc.c): widths w[0] (its input) -> w[1..L] (hidden, ReLU) -> w[L+1] (the
 * logits). A shaped architecture's m->layout.
 */
typedef struct {
    int L;                                               /* hidden layers */
    int w[PS_MODEL_MAX_HIDDEN + 2];                      /* layer widths */
    ps_tensor_def_t defs[2 * (PS_MODEL_MAX_HIDDEN + 1)]; /* fc1.weight, fc1.bias, ... */
    char names[2 * (PS_MODEL_MAX_HIDDEN + 1)][16];       /* their names */
} ps_model_fc_t;

/* Its activations: views into one backend block, each [max_batch, width].
 * The first member of the architecture's m->impl. */
typedef struct {
    float *block;                       /* the one allocation; owned */
    float *h[PS_MODEL_MAX_HIDDEN + 1];  /* h[1..L]: [N,Hi] post-ReLU */
    float *dh[PS_MODEL_MAX_HIDDEN + 1]; /* dh[1..L]: [N,Hi] */
    float *z;                           /* [N,w(L+1)] logits, then their gradient */
    void *masks;                        /* the ReLU masks' block; owned */
    ps_model_mask_t mask[PS_MODEL_MAX_HIDDEN + 1]; /* mask[1..L]: h[i]'s */
} ps_model_fc_acts_t;

/* The layout for the hidden widths ("" = 256,128) between in and out: sets
 * m->layout (owned), m->defs and m->ntensors. 0, PS_EINVAL or PS_ENOMEM. */
int ps_model_fc_layout(ps_model_t *m, const char *hidden, int in, int out);

/* Floats of a [max_batch, width] view, rounded up to 16 so every view stays
 * 64-byte aligned. */
size_t ps_model_fc_span(const ps_model_t *m, int width);

/* Allocates m->impl (impl_size bytes, a ps_model_fc_acts_t first) and the
 * block: `front` floats of the architecture's own first (at *front_p when
 * not NULL), then h[i], dh[i] for each hidden layer, then z. 0 or PS_ENOMEM. */
int ps_model_fc_setup(ps_model_t *m, size_t impl_size, size_t front, float **front_p);

/* Frees what ps_model_fc_setup made; safe on a half-built model. */
void ps_model_fc_teardown(ps_model_t *m);

/* Layers first..L+1 (first 0: fc1), the first on in [n, w(first)]; returns
 * the logits z. */
float *ps_model_fc_forward(ps_model_t *m, int first, const float *in, int n);

/* Backward of layers L+1..2 from the logits' gradient d_dz, each layer's
 * gradients reported final; returns the gradient at fc1's output, the ReLU's
 * applied (dh[1]). */
const float *ps_model_fc_backward(ps_model_t *m, const float *d_dz, int n);

/* The hidden widths of a file's fully connected layers fc1..fcN, whose
 * weights chain in -> ... -> out, as --hidden takes them ("" for the
 * default 256,128) into buf: the mlp's and the ctr's hidden_of. Returns 0
 * or PS_EINVAL (no such chain). */
int ps_model_fc_widths(const ps_safetensors_t *st, int in, int out, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
