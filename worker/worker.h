/*
 * worker/worker.h - a training worker: data shard, model, and the step loop.
 *
 * Joins the job, builds the model the job names on the chosen backend, (as
 * worker 0) initialises the parameters on the servers, then loops: pull
 * weights, forward and backward on its shard of the global batch, push the
 * gradient. In allreduce mode there are no servers: every worker initialises
 * the parameters from the seed (and the ring checks they agree), then loops:
 * forward and backward, sum the gradients over the ring, apply the job's
 * optimizer locally (with overlap on, a communication thread sums the last
 * layers' gradient buckets while backward still runs). Worker 0 evaluates
 * test accuracy after every epoch and logs progress as key=value lines.
 */
#ifndef PS_WORKER_H
#define PS_WORKER_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *scheduler;   /* scheduler endpoint */
    int rank;                /* wanted rank, -1 = assigned by the scheduler */
    const char *data_dir;    /* directory of the Fashion-MNIST IDX files */
    const char *ctr_data;    /* --model ctr: the click log (worker/ctr_data.h); NULL: none */
    const char *device;      /* "auto", "cpu" or "cuda" */
    int gpu;                 /* CUDA: visible GPU index; -1 = by local rank (kernels/device.h) */
    int tf32;                /* 1: TF32 GEMMs on a GPU (other arithmetic); 0: plain FP32 */
    int graph;               /* 1: a GPU step is one replay of a recorded CUDA graph */
    int fuse_dense;          /* 1: dense layers' bias/ReLU fused into cuBLASLt GEMMs on a GPU */
    int conv_dnn;            /* 1: convolutions through cuDNN on a GPU; 0: im2col + GEMM */
    int threads;             /* BLAS threads for the CPU backend (0 = library default) */
    const char *dump_params; /* if set, the final parameters are written here (raw f32);
                                a "%d" in it is replaced by the worker's rank */
    const char *save_model;  /* if set, worker 0 writes the trained model here (safetensors) */
    const char *init_from;   /* if set, training starts from this model file, not the seed */
    const char *evaluate;    /* if set, no job: evaluate this model file on the test set */
    const char *summary;     /* with evaluate: write its result here as JSON */
    const char *bind;        /* allreduce: where the left neighbour connects */
    const char *advertise;   /* allreduce: host (or endpoint) announced; NULL: proto/addr.h */
    int ring_kib;            /* allreduce: KiB per ring message (pipelining granularity) */
    int allreduce_mpi;       /* allreduce: 1 = sum with MPI_Allreduce (worker/ring_mpi.h),
                                the workers being one mpirun's ranks; 0 = our ring */
    int overlap;             /* 1 = push (sync, ssp) or reduce (allreduce) layers during backward */
    int local_chunks;        /* testing: 1 = cut pushes to servers on this host into chunks
                                too (sync, ssp); 0 = they go whole */
    double connect_timeout;  /* seconds to wait for the scheduler's answer */
    double peer_timeout;     /* seconds of scheduler silence that mean it is lost */
    const char *job_id;      /* the job it belongs to (--job-id); NULL = any */
    const char *secret_file; /* the job's secret (--secret-file); NULL = none */
    const char *job_hash;     /* that job's configuration hash (--job-hash); NULL = unchecked */
    double scheduler_grace;  /* then go on this long for it to come back (0: give up) */
    double progress_seconds; /* worker 0 logs progress this often */
    int eval_every;          /* worker 0 also evaluates every N steps within an epoch; 0 = never */
    int skip_nonfinite;      /* a NaN or infinite gradient: 1 = push zeros instead, count
                                it and go on; 0 = end the job as diverged */
    int secure;              /* CurveZMQ on every socket, only the job's keys admitted */
    const char *keys;        /* --secure: the job's key directory (shardps-keygen) */
    int fault_nan_push;      /* testing: at this step a NaN push the servers must refuse
                                goes before the real ones; -1 = never */
    double fault_slow_build; /* testing: seconds more the model's building takes (the
                                heartbeats must go on meanwhile); 0 = none */
    int fault_huge_push;     /* testing: at this step 5 pushes of 3e38 to keys [0, 4) (async:
                                the servers apply the first and undo the others) before the
                                real one; -1 = never */
    const char *metrics_bind; /* serve Prometheus metrics on HOST:PORT; NULL = not served */
    const char *trace;       /* write a Chrome trace here at the end; NULL = no trace */
    const char *trace_steps; /* "A:B": trace steps A <= s < B; NULL = every step */
    int trace_kib;           /* the trace's budget in KiB (memory and file) */
} ps_worker_config_t;

/* Runs one job. Returns the process exit status: 0 when the job finished,
 * 1 on any failure (logged as one line naming it). */
int ps_worker_run(const ps_worker_config_t *cfg);

/* --evaluate: the test accuracy and loss of the model file cfg->evaluate
 * (its model told by its tensor names), printed as one key=value line on
 * stdout and, with cfg->summary, written there as JSON. No cluster. Returns
 * the process exit status: 0, or 1 after one error line. */
int ps_worker_evaluate(const ps_worker_config_t *cfg);

#ifdef __cplusplus
}
#endif
#endif
