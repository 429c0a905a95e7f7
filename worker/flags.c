/* worker/flags.c - shardps-worker's flag table and the checks after parsing. */
#include "worker/flags.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "common/http.h"
#include "common/log.h"
#include "common/trace.h"
#include "kernels/kernels.h"
#include "proto/addr.h"
#include "proto/curve.h"
#include "proto/link.h"
#include "worker/data.h"

/* Whether Meson found MPI for this build (worker/meson.build). */
#ifdef PS_WORKER_HAVE_MPI
static const int s_have_mpi = 1;
#else
static const int s_have_mpi = 0;
#endif

void ps_worker_flags_init(ps_worker_flags_t *f)
{
    memset(f, 0, sizeof *f);
    f->cfg.scheduler = PS_LINK_DEFAULT_SCHEDULER;
    f->cfg.rank = -1;
    f->cfg.data_dir = PS_DATA_DEFAULT_DIR;
    f->cfg.device = "auto";
    f->cfg.gpu = -1;
    f->cfg.graph = 1;
    f->cfg.fuse_dense = 1;
    f->conv = PS_KERNELS_CONV_DEFAULT;
    f->cfg.threads = 1;
    f->cfg.connect_timeout = PS_LINK_DEFAULT_CONNECT_TIMEOUT;
    f->cfg.peer_timeout = PS_LINK_DEFAULT_PEER_TIMEOUT;
    f->cfg.progress_seconds = 2.0;
    f->cfg.fault_nan_push = -1;
    f->cfg.fault_huge_push = -1;
    f->cfg.bind = "tcp://0.0.0.0:*";
    f->cfg.ring_kib = 128;
    f->cfg.overlap = 1;
    f->cpu_gemm = "auto";
    f->gemm = PS_CPU_GEMM_AUTO;
    f->log_level = "info";
    f->log_format = "text";
    f->on_nonfinite = "fail";
    f->allreduce_backend = "ring";
    f->cfg.trace_kib = 16384;
}

size_t ps_worker_flags_table(ps_worker_flags_t *f, ps_flag_t *out)
{
    ps_worker_config_t *c = &f->cfg;
    const ps_flag_t t[] = {
        ps_link_scheduler_flag(&c->scheduler),
        ps_link_rank_flag(&c->rank, PS_ROLE_WORKER),
        {"data", PS_FLAG_STR, &c->data_dir, "DIR", "directory of the Fashion-MNIST .gz files"},
        {"ctr-data", PS_FLAG_STR, &c->ctr_data, "FILE", "--model ctr: the click log, in the Criteo layout (label, 13 integers, 26 hexadecimal categories; tab-separated, plain or gzip); its last tenth is held out for the AUC. Without it the worker loads Fashion-MNIST"},
        {"device", PS_FLAG_STR, &c->device, "DEV", "compute backend: auto, cpu or cuda"},
        {"gpu", PS_FLAG_INT, &c->gpu, "N", "with CUDA: use visible GPU N (-1 = local rank mod visible GPUs: LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, else 0)"},
        {"tf32", PS_FLAG_INT, &c->tf32, "0|1", "GPU: 1 lets the GEMMs round their inputs to TF32 on tensor cores (faster, different arithmetic: results no longer track the CPU backend); 0 = plain FP32"},
        {"fuse-dense", PS_FLAG_INT, &c->fuse_dense, "0|1", "GPU: 1 runs each dense layer's bias, ReLU and their gradients inside its cuBLASLt GEMMs (fused epilogues; a shape cuBLASLt refuses runs unfused); 0 = cuBLAS GEMMs with separate kernels for them"},
        {"conv", PS_FLAG_STR, &f->conv, PS_KERNELS_CONV_NAMES, "GPU: how the convolutions run: cudnn = cuDNN with deterministic algorithms (builds with cuDNN only; a shape it has none for runs gemm); gemm = im2col + cuBLAS GEMMs"},
        {"cuda-graph", PS_FLAG_INT, &c->graph, "0|1", "GPU: 1 records a training step once as a CUDA graph and replays it each step; 0 = queue each step's work by hand (same results)"},
        {"threads", PS_FLAG_INT, &c->threads, "N", "compute threads on the CPU (0 = OpenBLAS default; 1 uses our AVX-512 kernels where the CPU has them)"},
        {"cpu-gemm", PS_FLAG_STR, &f->cpu_gemm, "NAME", "CPU sgemm: " PS_CPU_GEMM_NAMES " (auto: our AVX-512 one where the CPU has it and --threads is 1)"},
        {"dump-params", PS_FLAG_STR, &c->dump_params, "FILE", "write the final parameters here (raw float32; %d = the worker's rank)"},
        {"save-model", PS_FLAG_STR, &c->save_model, "FILE", "worker 0 writes the trained model here at the end (safetensors, PyTorch state_dict names)"},
        {"init-from", PS_FLAG_STR, &c->init_from, "FILE", "start training from this model file (safetensors) instead of the seed's initialisation"},
        {"evaluate", PS_FLAG_STR, &c->evaluate, "FILE", "no job: print the test accuracy and loss of this model file, then exit"},
        {"summary", PS_FLAG_STR, &c->summary, "FILE", "with --evaluate: write its result here as JSON (ignored otherwise)", "SHARDPS_EVALUATE_SUMMARY"},
        {"bind", PS_FLAG_STR, &c->bind, "ENDPOINT", "allreduce: where the left neighbour connects (port * = any free port)"},
        {"advertise", PS_FLAG_STR, &c->advertise, "HOST", "allreduce: the host the ring reaches this worker at, on its bound port (or a whole tcp://HOST:PORT); default: the bound host, or for 0.0.0.0 the local end of the route to the scheduler"},
        {"ring-kib", PS_FLAG_INT, &c->ring_kib, "KIB", "allreduce: KiB per ring message, the pipelining granularity (a chunk longer than four messages goes in four bigger ones)"},
        {"allreduce-backend", PS_FLAG_STR, &f->allreduce_backend, "ring|mpi", "allreduce: who sums the gradients: ring = our ring over ZeroMQ; mpi = MPI_Allreduce, the workers being the ranks of one mpirun (builds with MPI only)"},
        {"overlap", PS_FLAG_INT, &c->overlap, "0|1", "sync, ssp: push each layer's gradients as backward finishes it; allreduce: sum the last layers' gradients while backward still runs"},
        {"on-nonfinite", PS_FLAG_STR, &f->on_nonfinite, "skip|fail", "a NaN or infinite loss or gradient: fail = end the job as diverged; skip = push zeros for that step instead, count it and go on"},
        {"local-chunks", PS_FLAG_INT, &c->local_chunks, "0|1", "testing: sync, ssp: cut pushes to servers on this host into --chunk-kib chunks too, as to other hosts' (same arithmetic; 0 = one message per server and push)"},
        {"fault-huge-push", PS_FLAG_INT, &c->fault_huge_push, "STEP", "testing: at step STEP first push 3e38 to keys [0, 4) five times (finite, accepted; the servers leave undone an update that would overflow), then the real one (-1 = never)"},
        {"fault-slow-build", PS_FLAG_DOUBLE, &c->fault_slow_build, "SECONDS", "testing: building the model takes this much longer (the heartbeats go on meanwhile; 0 = no delay)"},
        {"fault-nan-push", PS_FLAG_INT, &c->fault_nan_push, "STEP", "testing: at step STEP first push a NaN gradient, which the servers must refuse, then the real one (-1 = never)"},
        {"progress", PS_FLAG_DOUBLE, &c->progress_seconds, "SECONDS", "worker 0 logs progress this often; in (0, 86400]"},
        {"eval-every", PS_FLAG_INT, &c->eval_every, "STEPS", "worker 0 also logs the test accuracy every STEPS steps within an epoch (time to accuracy finer than an epoch; 0 = only at epoch ends)"},
        ps_link_connect_timeout_flag(&c->connect_timeout),
        ps_link_peer_timeout_flag(&c->peer_timeout),
        ps_curve_secure_flag(&c->secure),
        ps_curve_keys_flag(&c->keys),
        ps_link_job_id_flag(&c->job_id),
        ps_link_secret_flag(&c->secret_file),
        ps_link_job_hash_flag(&c->job_hash),
        ps_http_bind_flag(&c->metrics_bind),
        ps_trace_file_flag(&c->trace),
        ps_trace_steps_flag(&c->trace_steps),
        ps_trace_kib_flag(&c->trace_kib),
        ps_link_scheduler_grace_flag(&c->scheduler_grace),
        ps_log_level_flag(&f->log_level),
        ps_log_format_flag(&f->log_format),
    };
    _Static_assert(sizeof t / sizeof t[0] == PS_WORKER_NFLAGS, "PS_WORKER_NFLAGS");
    memcpy(out, t, sizeof t);
    return PS_WORKER_NFLAGS;
}

/* The files written at the end, checked now: a typo must not cost the run.
 * (--dump-params's %d, the rank, is in the file name: its directory is the
 * pattern's.) */
static int s_check_outputs(const ps_worker_config_t *c, char *err, size_t errlen)
{
    char why[512];
    if (c->dump_params && ps_file_check_writable(c->dump_params, why, sizeof why)) {
        snprintf(err, errlen, "--dump-params %s", why);
        return PS_EINVAL;
    }
    if (c->save_model && !c->evaluate && ps_file_check_writable(c->save_model, why, sizeof why)) {
        snprintf(err, errlen, "--save-model %s", why);
        return PS_EINVAL;
    }
    if (c->summary && c->evaluate && ps_file_check_writable(c->summary, why, sizeof why)) {
        snprintf(err, errlen, "--summary %s", why);
        return PS_EINVAL;
    }
    return 0;
}

int ps_worker_flags_check(ps_worker_flags_t *f, char *err, size_t errlen)
{
    const ps_worker_config_t *c = &f->cfg;
    f->cfg.skip_nonfinite = !strcmp(f->on_nonfinite, "skip");
    f->cfg.allreduce_mpi = !strcmp(f->allreduce_backend, "mpi");
    if (ps_link_check_flags(c->rank, c->connect_timeout, c->peer_timeout, err, errlen) ||
        ps_config_check_endpoint("scheduler", c->scheduler, 0, err, errlen) ||
        ps_config_check_endpoint("bind", c->bind, 1, err, errlen) ||
        ps_addr_check_advertise(c->advertise, 1, err, errlen) ||
        s_check_outputs(c, err, errlen) ||
        ps_link_check_grace(c->scheduler_grace, err, errlen) ||
        ps_config_check_range("progress", c->progress_seconds, 0, PS_CONFIG_MAX_SECONDS,
                              PS_RANGE_OPEN_MIN, err, errlen) ||
        ps_config_check_range("threads", c->threads, 0, 1024, PS_RANGE_CLOSED, err, errlen) ||
        ps_config_check_range("gpu", c->gpu, -1, 1023, PS_RANGE_CLOSED, err, errlen) ||
        ps_curve_check_flags(c->secure, c->keys, PS_ROLE_WORKER, err, errlen) ||
        ps_link_read_secret(c->secret_file, &(ps_secret_t){0}, err, errlen) ||
        ps_config_check_range("fault-huge-push", c->fault_huge_push, -1, INT_MAX,
                              PS_RANGE_CLOSED, err, errlen) ||
        ps_config_check_range("fault-nan-push", c->fault_nan_push, -1, INT_MAX, PS_RANGE_CLOSED,
                              err, errlen) ||
        ps_config_check_range("fault-slow-build", c->fault_slow_build, 0, PS_CONFIG_MAX_SECONDS,
                              PS_RANGE_CLOSED, err, errlen) ||
        ps_config_check_range("eval-every", c->eval_every, 0, INT_MAX, PS_RANGE_CLOSED, err,
                              errlen)) {
        /* err says which */
    } else if (c->overlap != 0 && c->overlap != 1) {
        snprintf(err, errlen, "--overlap %d: expected 0 or 1", c->overlap);
    } else if (c->local_chunks != 0 && c->local_chunks != 1) {
        snprintf(err, errlen, "--local-chunks %d: expected 0 or 1", c->local_chunks);
    } else if (c->tf32 != 0 && c->tf32 != 1) {
        snprintf(err, errlen, "--tf32 %d: expected 0 or 1", c->tf32);
    } else if (c->fuse_dense != 0 && c->fuse_dense != 1) {
        snprintf(err, errlen, "--fuse-dense %d: expected 0 or 1", c->fuse_dense);
    } else if (ps_kernels_parse_conv(f->conv, &f->cfg.conv_dnn, err, errlen)) {
        /* err says which */
    } else if (c->graph != 0 && c->graph != 1) {
        snprintf(err, errlen, "--cuda-graph %d: expected 0 or 1", c->graph);
    } else if (c->ring_kib < 1 || c->ring_kib > 65536) {
        snprintf(err, errlen, "--ring-kib %d: expected 1 to 65536", c->ring_kib);
    } else if (strcmp(f->allreduce_backend, "ring") && strcmp(f->allreduce_backend, "mpi")) {
        snprintf(err, errlen, "--allreduce-backend %s: expected ring or mpi",
                 f->allreduce_backend);
    } else if (c->allreduce_mpi && !s_have_mpi) {
        snprintf(err, errlen, "--allreduce-backend mpi: this build has no MPI (install "
                              "libopenmpi-dev, then meson setup --reconfigure)");
    } else if (strcmp(f->on_nonfinite, "skip") && strcmp(f->on_nonfinite, "fail")) {
        snprintf(err, errlen, "--on-nonfinite %s: expected skip or fail", f->on_nonfinite);
    } else if (ps_http_check_bind(c->metrics_bind, err, errlen) ||
               ps_trace_check_flags(c->trace_steps, c->trace_kib, err, errlen)) {
        /* err says which */
    } else if (ps_kernels_parse_cpu_gemm(f->cpu_gemm, &f->gemm) != 0) {
        snprintf(err, errlen, "--cpu-gemm %s: expected " PS_CPU_GEMM_NAMES, f->cpu_gemm);
    } else {
        return 0;
    }
    return PS_EINVAL;
}
