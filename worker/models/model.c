/*
 * worker/models/model.c - running a model, the part every architecture
 * (mlp.c, cnn.c, ctr.c) shares: a training step on a batch, on the resident
 * training set (ps_model_set_data, recorded as a graph when asked) or on a
 * batch with embedding rows; chunked evaluation and the ctr's prediction;
 * staging their inputs, the loss, the params' copies in and the gradients'
 * copies out with the gradient-ready hook, profiling, and the linear layer
 * the architectures build on. Building a model, its buffers and accessors,
 * is model_new.c.
 *
 * On a backend whose memory is host memory (CPU) the ops run directly on the
 * host parameter, gradient and input buffers: no copies. On a device backend
 * each step copies params in and gradients out layer by layer on the copy
 * stream (kernels.h *_async): forward waits for each layer's params only,
 * while later ones still copy in, and each layer's gradients copy out while
 * backward goes on. A batch in the model's pinned batch buffers copies in on
 * the copy stream too, just ahead of the params; one from other memory
 * copies on the compute stream, as before. The ops are the same, in the same
 * order, as with serial copies, so the results are the same bits. A step
 * starts with both streams idle (the previous one synced), so params and
 * batch never land under a running kernel. Nothing here allocates but
 * ps_model_set_data() and the one recording per batch size of a graph step.
 *
 * With a resident training set a step queues the copy of its indices, one
 * gather kernel, then the same ops; with graphs on, that whole sequence,
 * copies included, is recorded once and each step is one launch. The loss is
 * read once the step's copies have been waited for, so nothing in the
 * sequence waits for the device.
 *
 * A model with embedding rows (the ctr) stages more per step: the batch's
 * lookups (idx, order, offsets) on the compute stream, its rows from the
 * model's pinned buffer on the copy stream like a batch; its loss is the
 * logistic one, and after the dense gradients the rows' gradients copy out
 * (after every gradient copy, so the hook's waits count it: late_out).
 */
#include <math.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/trace.h"
#include "worker/models/model_impl.h"

/* Validates an image batch: an image model, 1 <= n <= max_batch, labels in
 * [0, 10). */
static int s_check(const ps_model_t *m, const float *x, const uint8_t *y, int n)
{
    if (m->arch->fields || n < 1 || n > m->max_batch || !x || !y) {
        return PS_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if (y[i] >= PS_MODEL_CLASSES) {
            return PS_EINVAL;
        }
    }
    return 0;
}

/* First key of tensor i; P for i = ntensors. */
static size_t s_key(const ps_model_t *m, size_t i)
{
    return i < m->ntensors ? m->tensors[i].offset : m->P;
}

/* A train_step or evaluate begins: the caller wrote new host params, no
 * gradient is final and no copy has failed yet. */
static void s_begin(ps_model_t *m)
{
    m->sent = 0;
    m->final = m->ntensors;
    m->nout = 0;
    m->io_rc = 0;
    m->late_out = 0;
}

/* Keeps the step's first copy failure: the hooks that queue copies return
 * nothing, so train_step / evaluate report it at the end. */
static void s_io(ps_model_t *m, int rc)
{
    if (rc && !m->io_rc) {
        m->io_rc = rc;
    }
}

/* One input copy. From the model's own (pinned) buffer `own` it goes on the
 * copy stream, and the ops queued after it wait for it; the step's loss waits
 * for those ops, so the copy has landed (and the caller may refill the
 * buffer) when train_step or evaluate returns. From other memory, which may
 * be pageable, a plain copy on the compute stream. */
static void s_copy_in(ps_model_t *m, void *d_dst, const void *src, const void *own,
                      size_t bytes)
{
    s_io(m, src == own ? m->k->copy_h2d_async(m->ctx, d_dst, src, bytes)
                       : m->k->copy_h2d(m->ctx, d_dst, src, bytes));
}

/* Makes a checked batch's x, y backend buffers: themselves on a host
 * backend, else d_x, d_y copied in. An async copy does not wait for earlier
 * ops, so none may still read d_x, d_y: a step starts with the device idle,
 * and each evaluate chunk's loss waited for it. */
static void s_stage(ps_model_t *m, const float *x, const uint8_t *y, int n,
                    const float **d_x, const uint8_t **d_y)
{
    if (m->k->host_is_backend) {
        *d_x = x;
        *d_y = y;
        return;
    }
    s_copy_in(m, m->d_x, x, m->x, (size_t)n * ps_model_in_floats(m) * sizeof(float));
    if (y) {
        s_copy_in(m, m->d_y, y, m->y, (size_t)n);
    }
    *d_x = m->d_x;
    *d_y = m->d_y;
}

void ps_model_params_needed(ps_model_t *m, size_t end)
{
    end = end < m->ntensors ? end : m->ntensors;
    if (m->k->host_is_backend || end <= m->sent) {
        return;
    }
    const size_t from = s_key(m, m->sent), to = s_key(m, end);
    s_io(m, m->k->copy_h2d_async(m->ctx, m->d_params + from, m->params + from,
                                 (to - from) * sizeof(float)));
    m->sent = end;
}

/* End of a train_step or evaluate: waits for the gradients' copies in the
 * order they were queued, reporting each to the hook as it lands (the
 * late_out copies queued after them still pending), then for both streams
 * (cheap: the last copy out waited for every op, as evaluate's last loss
 * did), so the caller may change the host params and the next step's
 * copies in find nothing running. Returns the first failure. */
static int s_finish(ps_model_t *m)
{
    int rc = m->io_rc;
    for (size_t j = 0; rc == 0 && j < m->nout; j++) {
        rc = m->k->copy_wait(m->ctx, (int)(m->nout - 1 - j) + m->late_out);
        if (rc == 0 && m->grad_ready) {
            m->grad_ready(m->grad_ready_arg, m->out_from[j]);
        }
    }
    const int rc2 = m->k->sync(m->ctx);
    return rc ? rc : rc2;
}

void ps_model_set_profile(ps_model_t *m, ps_model_profile_t *p)
{
    m->profile = p;
}

void ps_model_set_grad_ready(ps_model_t *m, ps_model_grad_ready_fn *fn, void *arg)
{
    m->grad_ready = fn;
    m->grad_ready_arg = fn ? arg : NULL;
}

void ps_model_grads_final(ps_model_t *m, size_t i)
{
    if (i >= m->final) {
        return;
    }
    if (m->k->host_is_backend) {
        m->final = i;
        if (m->grad_ready) {
            m->grad_ready(m->grad_ready_arg, s_key(m, i));
        }
        return;
    }
    if (m->profile && i > 0) {
        return; /* profiling: all gradients go out in one copy, timed alone */
    }
    const size_t from = s_key(m, i), to = s_key(m, m->final);
    s_io(m, m->k->copy_d2h_async(m->ctx, m->grads + from, m->d_grads + from,
                                 (to - from) * sizeof(float)));
    m->out_from[m->nout++] = from;
    m->final = i;
}

/* Profiling: a step's first timing mark, on the compute stream of an idle
 * device (the step before was waited for). */
static void s_lap_begin(ps_model_t *m)
{
    if (m->profile && !m->k->host_is_backend) {
        m->lap = 0;
        m->k->mark(m->ctx, 0, 0);
    }
}

/* Profiling: ends a phase, waits for the device and adds the phase's time
 * to *acc. On a device backend the time between events (kernels.h mark) at
 * the phase's ends, the end on the stream that did its last work (copy: the
 * copy stream): the device's own time, without the host's. On the CPU the
 * clock since *t. */
static void s_lap(ps_model_t *m, double *t, double *acc, int copy)
{
    if (!m->profile) {
        return;
    }
    const ps_kernels_t *k = m->k;
    if (!k->host_is_backend && m->lap + 1 < PS_KERNELS_MARKS) {
        const int slot = ++m->lap;
        k->mark(m->ctx, slot, copy);
        k->sync(m->ctx);
        const double ms = k->mark_ms(m->ctx, slot - 1, slot);
        *acc += ms > 0 ? ms / 1e3 : 0.0;
        return;
    }
    k->sync(m->ctx);
    double now = ps_now();
    *acc += now - *t;
    *t = now;
}

/* The step's ops after its batch is staged, timed phase by phase when
 * profiling: forward, the loss (queued: read once the step is finished),
 * backward, the gradients' copies out. Queued only, so it can be recorded. */
static void s_ops(ps_model_t *m, const float *d_x, const uint8_t *d_y, int n,
                  ps_model_profile_t *p, double *t)
{
    if (m->profile) { /* serialised, so copy_in times the params' copy alone */
        ps_model_params_needed(m, m->ntensors);
    }
    s_lap(m, t, &p->copy_in, 0);
    /* on a GPU the spans are the times the work was queued */
    ps_trace_span_t span = ps_trace_span_begin(PS_TRACE_FORWARD, PS_TRACE_CURRENT_STEP, 0);
    float *logits = m->arch->forward(m, d_x, n);
    /* the loss overwrites the logits with their gradient, in place */
    if (m->arch->fields) {
        m->k->sigmoid_bce_queue(m->ctx, logits, d_y, n, logits);
    } else {
        m->k->softmax_xent_queue(m->ctx, logits, d_y, n, PS_MODEL_CLASSES, logits);
    }
    s_lap(m, t, &p->forward, 0);
    ps_trace_span_end(&span);
    span = ps_trace_span_begin(PS_TRACE_BACKWARD, PS_TRACE_CURRENT_STEP, 0);
    m->arch->backward(m, d_x, logits, n);
    s_lap(m, t, &p->backward, 0);
    ps_trace_span_end(&span);
    ps_model_grads_final(m, 0);
    if (m->arch->fields && !m->k->host_is_backend) { /* the rows' gradients, last */
        s_io(m, m->k->copy_d2h_async(m->ctx, m->row_grads, m->d_row_grads,
                                     (size_t)m->e_U * m->embed_dim * sizeof(float)));
        m->late_out = 1;
    }
}

/* Waits for the step's copies, then reads its loss. */
static int s_end_step(ps_model_t *m, int n, ps_model_profile_t *p, double *t, float *loss)
{
    s_lap(m, t, &p->copy_out, 1); /* before the hook runs: the copies' own time */
    int rc = s_finish(m);
    p->steps++;
    const float l = m->k->xent_result(m->ctx, n, NULL);
    if (loss) {
        *loss = l;
    }
    return rc;
}

int ps_model_train_step(ps_model_t *m, const float *x, const uint8_t *y, int n, float *loss)
{
    ps_model_profile_t none = {0}, *p = m->profile ? m->profile : &none;
    double t = ps_now();
    int rc = s_check(m, x, y, n);
    if (rc) {
        return rc;
    }
    const float *d_x;
    const uint8_t *d_y;
    s_begin(m);
    s_lap_begin(m);
    s_stage(m, x, y, n, &d_x, &d_y); /* the batch's copy first: forward needs it */
    s_ops(m, d_x, d_y, n, p, &t);
    return s_end_step(m, n, p, &t, loss);
}

int ps_model_set_data(ps_model_t *m, const uint8_t *pixels, const uint8_t *labels,
                      int count, float a, float c)
{
    const ps_kernels_t *k = m->k;
    if (m->arch->fields || count < 1 || !pixels || !labels) {
        return PS_EINVAL;
    }
    for (int i = 0; i < count; i++) {
        if (labels[i] >= PS_MODEL_CLASSES) {
            return PS_EINVAL;
        }
    }
    k->graph_destroy(&m->graph); /* it names the old buffers */
    k->free(m->d_pixels);
    k->free(m->d_labels);
    m->ndata = 0;
    const size_t bytes = (size_t)count * PS_MODEL_IN;
    m->d_pixels = k->alloc(bytes);
    m->d_labels = k->alloc((size_t)count);
    if (!m->d_pixels || !m->d_labels) {
        k->free(m->d_pixels);
        k->free(m->d_labels);
        m->d_pixels = m->d_labels = NULL;
        return PS_ENOMEM;
    }
    int rc = k->copy_h2d(m->ctx, m->d_pixels, pixels, bytes);
    if (rc == 0) {
        rc = k->copy_h2d(m->ctx, m->d_labels, labels, (size_t)count);
    }
    if (rc == 0) {
        rc = k->sync(m->ctx);
    }
    m->ndata = rc == 0 ? count : 0;
    m->norm_a = a;
    m->norm_c = c;
    return rc;
}

int ps_model_set_graph(ps_model_t *m, int on)
{
    m->use_graph = on != 0;
    return 0;
}

int ps_model_graph_error(const ps_model_t *m)
{
    return m->graph_rc;
}

int ps_model_set_tf32(ps_model_t *m, int on)
{
    return m->k->set_tf32(m->ctx, on);
}

int ps_model_set_fused(ps_model_t *m, int on)
{
    if (m->fused != (on != 0)) {
        m->k->graph_destroy(&m->graph); /* it replays the other path: record anew */
    }
    m->fused = on != 0;
    return 0;
}

int ps_model_set_conv(ps_model_t *m, int cudnn)
{
    m->k->graph_destroy(&m->graph); /* it replays the other path: record anew */
    return m->k->set_conv(m->ctx, cudnn);
}

int ps_model_graph_nodes(const ps_model_t *m)
{
    return m->graph ? m->graph_nodes : 0;
}

/* The resident step's batch: its indices in, then one gather kernel. */
static void s_gather(ps_model_t *m, int n, float **d_x, uint8_t **d_y)
{
    const ps_kernels_t *k = m->k;
    *d_x = k->host_is_backend ? m->x : m->d_x;
    *d_y = k->host_is_backend ? m->y : m->d_y;
    if (!k->host_is_backend) {
        s_io(m, k->copy_h2d_async(m->ctx, m->d_idx, m->idx, (size_t)n * sizeof(uint32_t)));
    }
    k->gather_u8(m->ctx, m->d_pixels, m->d_labels, PS_MODEL_IN, m->d_idx, n, m->norm_a,
                 m->norm_c, *d_x, *d_y);
}

/* Records the resident step of n samples (its copies out are kept, for each
 * replay's waits). PS_ENOTSUP: the backend has no graphs. */
static int s_record(ps_model_t *m, int n)
{
    const ps_kernels_t *k = m->k;
    k->graph_destroy(&m->graph);
    int rc = k->graph_begin(m->ctx);
    if (rc) {
        return rc;
    }
    ps_model_profile_t none = {0};
    double t = 0;
    float *d_x;
    uint8_t *d_y;
    s_begin(m);
    s_gather(m, n, &d_x, &d_y);
    s_ops(m, d_x, d_y, n, &none, &t);
    rc = k->graph_end(m->ctx, &m->graph);
    rc = rc ? rc : m->io_rc;
    if (rc) {
        k->graph_destroy(&m->graph);
        return rc;
    }
    m->graph_n = n;
    m->graph_nodes = k->graph_nodes(m->graph);
    ps_log_debug("step of %d samples recorded: %d graph nodes (kernels and copies), dense "
                 "layers %s",
                 n, m->graph_nodes, m->fused ? "fused where the backend can" : "unfused");
    m->graph_nout = m->nout;
    memcpy(m->graph_out_from, m->out_from, m->nout * sizeof(*m->out_from));
    return 0;
}

/* One replay of the recorded step; s_finish then waits for its copies. */
static int s_replay(ps_model_t *m, int n)
{
    if (!m->graph || m->graph_n != n) {
        int rc = s_record(m, n);
        if (rc) {
            /* nothing recorded ran: this and later steps go by hand */
            m->use_graph = 0;
            m->graph_rc = rc == PS_ENOTSUP ? 0 : rc;
            return PS_ENOTSUP;
        }
    }
    s_begin(m);
    m->nout = m->graph_nout;
    memcpy(m->out_from, m->graph_out_from, m->nout * sizeof(*m->out_from));
    return m->k->graph_launch(m->ctx, m->graph);
}

int ps_model_train_step_idx(ps_model_t *m, int n, float *loss)
{
    ps_model_profile_t none = {0}, *p = m->profile ? m->profile : &none;
    double t = ps_now();
    if (n < 1 || n > m->max_batch || m->ndata < 1) {
        return PS_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if (m->idx[i] >= (uint32_t)m->ndata) {
            return PS_EINVAL;
        }
    }
    int rc = PS_ENOTSUP;
    if (m->use_graph && !m->profile) {
        rc = s_replay(m, n);
        if (rc && rc != PS_ENOTSUP) {
            return rc;
        }
    }
    if (rc == PS_ENOTSUP) { /* queued by hand */
        float *d_x;
        uint8_t *d_y;
        s_begin(m);
        s_lap_begin(m);
        s_gather(m, n, &d_x, &d_y);
        s_ops(m, d_x, d_y, n, p, &t);
    }
    return s_end_step(m, n, p, &t, loss);
}

int ps_model_evaluate(ps_model_t *m, const float *x, const uint8_t *y, int n, int *correct,
                      float *loss)
{
    double total = 0.0;
    int hits = 0;
    if (n < 0) {
        return PS_EINVAL;
    }
    int rc = 0;
    s_begin(m); /* the first chunk's forward copies the params in */
    for (int first = 0; rc == 0 && first < n; first += m->max_batch) {
        const int c = n - first < m->max_batch ? n - first : m->max_batch;
        const float *xc = x + (size_t)first * PS_MODEL_IN, *d_x;
        const uint8_t *d_y;
        rc = s_check(m, xc, y + first, c);
        if (rc) {
            break;
        }
        s_stage(m, xc, y + first, c, &d_x, &d_y);
        float *logits = m->arch->forward(m, d_x, c);
        int ok = 0;
        float l = m->k->softmax_xent(m->ctx, logits, d_y, c, PS_MODEL_CLASSES, NULL, &ok);
        total += (double)l * c;
        hits += ok;
    }
    const int rc2 = s_finish(m);
    rc = rc ? rc : rc2;
    if (correct) {
        *correct = hits;
    }
    if (loss) {
        *loss = n > 0 ? (float)(total / n) : 0.0f;
    }
    return rc;
}

/* ---- models with embedding rows ---------------------------------------------------- */

/* Validates a batch of a model with rows: 1 <= n <= max_batch, b built from
 * these n samples' fields (so its U fits the rows' buffers), labels 0/1
 * when given. */
static int s_check_rows(const ps_model_t *m, const ps_embed_batch_t *b, const float *num,
                        const uint8_t *label, int n)
{
    if (!m->arch->fields || n < 1 || n > m->max_batch || !b || !num || b->n != n ||
        b->F != m->arch->fields || b->U < 1 || b->U > m->max_rows) {
        return PS_EINVAL;
    }
    for (int i = 0; label && i < n; i++) {
        if (label[i] > 1) {
            return PS_EINVAL;
        }
    }
    return 0;
}

/* Makes the batch's lookups and rows backend buffers (m->e_*, m->d_rows): b's
 * own arrays and the host rows on a host backend; else the lookups copied
 * on the compute stream (from any memory: the step's end syncs before b may
 * change) and the rows from their pinned buffer on the copy stream. Order
 * and offsets only when training. Then the inputs, as s_stage. */
static void s_stage_rows(ps_model_t *m, const ps_embed_batch_t *b, const float *num,
                         const uint8_t *label, int n, int train, const float **d_num,
                         const uint8_t **d_label)
{
    const ps_kernels_t *k = m->k;
    const size_t N = (size_t)n * m->arch->fields, U = (size_t)b->U;
    m->e_U = b->U;
    if (k->host_is_backend) {
        m->e_idx = b->idx;
        m->e_order = b->order;
        m->e_offsets = b->offsets;
    } else {
        uint32_t *d_idx = m->d_csr, *d_order = d_idx + m->max_rows,
                 *d_offsets = d_order + m->max_rows;
        m->e_idx = d_idx;
        m->e_order = d_order;
        m->e_offsets = d_offsets;
        s_io(m, k->copy_h2d(m->ctx, d_idx, b->idx, N * sizeof(uint32_t)));
        if (train) {
            s_io(m, k->copy_h2d(m->ctx, d_order, b->order, N * sizeof(uint32_t)));
            s_io(m, k->copy_h2d(m->ctx, d_offsets, b->offsets, (U + 1) * sizeof(uint32_t)));
        }
        s_copy_in(m, m->d_rows, m->rows, m->rows, U * m->embed_dim * sizeof(float));
    }
    s_stage(m, num, label, n, d_num, d_label);
}

int ps_model_train_step_ctr(ps_model_t *m, const ps_embed_batch_t *b, const float *num,
                            const uint8_t *label, int n, float *loss)
{
    ps_model_profile_t none = {0}, *p = m->profile ? m->profile : &none;
    double t = ps_now();
    int rc = s_check_rows(m, b, num, label, n);
    if (rc || !label) {
        return rc ? rc : PS_EINVAL;
    }
    const float *d_num;
    const uint8_t *d_label;
    s_begin(m);
    s_lap_begin(m);
    s_stage_rows(m, b, num, label, n, 1, &d_num, &d_label);
    s_ops(m, d_num, d_label, n, p, &t);
    return s_end_step(m, n, p, &t, loss);
}

int ps_model_predict_ctr(ps_model_t *m, const ps_embed_batch_t *b, const float *num, int n,
                         float *prob)
{
    int rc = s_check_rows(m, b, num, NULL, n);
    if (rc || !prob) {
        return rc ? rc : PS_EINVAL;
    }
    const float *d_num;
    const uint8_t *d_label;
    s_begin(m);
    s_stage_rows(m, b, num, NULL, n, 0, &d_num, &d_label);
    const float *logits = m->arch->forward(m, d_num, n);
    rc = m->k->copy_d2h(m->ctx, prob, logits, (size_t)n * sizeof(float));
    const int rc2 = s_finish(m);
    rc = rc ? rc : rc2;
    for (int i = 0; rc == 0 && i < n; i++) {
        /* sigmoid without overflow: e = exp(-|z|) <= 1 */
        const float z = prob[i], e = expf(-fabsf(z));
        prob[i] = z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    }
    return rc;
}

int ps_model_masks_setup(ps_model_t *m, ps_model_mask_t *masks, const int *widths, int count,
                         void **block)
{
    size_t at[PS_MODEL_MAX_HIDDEN + 2], total = 0;
    *block = NULL;
    for (int i = 0; i < count; i++) {
        at[i] = total;
        total += (m->k->dense_mask_bytes(m->max_batch, widths[i]) + 255) & ~(size_t)255;
    }
    if (total == 0) {
        return 0;
    }
    *block = m->k->alloc(total);
    if (!*block) {
        return PS_ENOMEM;
    }
    for (int i = 0; i < count; i++) {
        masks[i] = (ps_model_mask_t){(char *)*block + at[i], 0};
    }
    return 0;
}

void ps_model_linear_fwd(ps_model_t *m, const float *x, const float *w, const float *b,
                         float *y, int n, int I, int O, ps_model_mask_t *relu)
{
    const ps_kernels_t *k = m->k;
    void *mask = relu ? relu->d_mask : NULL;
    if (relu) {
        relu->written = 0;
    }
    if (m->fused && k->dense_fwd(m->ctx, x, w, b, y, mask, n, I, O, relu != NULL) == 0) {
        if (relu) {
            relu->written = mask != NULL;
        }
        return;
    }
    k->sgemm(m->ctx, 0, 1, n, O, I, 1.0f, x, I, w, I, 0.0f, y, O);
    if (relu) {
        k->bias_relu(m->ctx, y, b, n, O);
    } else {
        k->bias_add(m->ctx, y, b, n, O);
    }
}

void ps_model_linear_bwd(ps_model_t *m, const float *x, const float *w, const float *dy,
                         float *dx, float *dw, float *db, int n, int I, int O,
                         const ps_model_mask_t *xrelu)
{
    const ps_kernels_t *k = m->k;
    if (!m->fused || k->dense_wgrad(m->ctx, x, dy, dw, db, n, I, O) != 0) {
        k->sgemm(m->ctx, 1, 0, O, I, n, 1.0f, dy, O, x, I, 0.0f, dw, I);
        k->bias_grad(m->ctx, dy, db, n, O);
    }
    if (!dx) {
        return;
    }
    /* the ReLU's gradient from the mask only where this forward wrote it */
    if (m->fused && xrelu && xrelu->written &&
        k->dense_dgrad(m->ctx, dy, w, xrelu->d_mask, dx, n, I, O) == 0) {
        return;
    }
    k->sgemm(m->ctx, 0, 0, n, I, O, 1.0f, dy, O, w, I, 0.0f, dx, I);
    if (xrelu) {
        k->relu_bwd(m->ctx, x, dx, dx, (size_t)n * I);
    }
}
