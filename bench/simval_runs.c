/* simval_runs.c: the validation matrix of `dtbench simval` (simval.h) and
 * the figures it reads from the runs' summaries and traces.
 *
 * The matrix covers every pipeline schedule (gpipe and 1f1b at m = 2, 4, 8,
 * 16; pipedream and pipedream-vsync), data parallelism (ring and tree, one
 * bucket and several, ZeRO-1), the parameter server (ps-sync, ps-async, and
 * ps-async with a slow worker), tensor parallelism (with and without
 * sequence parallelism), context parallelism (p2p, allgather, a2a with
 * t), t x p and p x d, fp16
 * and bf16, recomputation, and, on the emulated 2-node cluster, the
 * exchanges where the link dominates. Every run has the same model and
 * global batch (DT_SIMVAL_MODEL); m changes with the micro-batch size, as
 * a practitioner keeps the global batch. None of these runs is used to fit
 * anything: the calibration inputs are separate runs (bench/simval.c).
 *
 * Invariant: names are unique file stems (letters, digits, '-'). */
#include "simval.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const dt_simval_prec_name[DT_SIMVAL_NPREC] = {"fp32", "bf16", "fp16"};
const char *const dt_simval_prec_flag[DT_SIMVAL_NPREC] = {"", "--bf16", "--fp16"};

#define PP2 "--pipeline-model-parallel-size 2 --pipeline-schedule "
#define PS1 "--num-ps-servers 1 "
/* 4 MiB of fp32 gradients in 0.5 MiB buckets: 4 buckets allreduced while the backward goes on */
#define BUCKETS "--bucket-size-mb 0.5 "

const dt_simval_run dt_simval_runs[] = {
    /* name            set              np mbs prec            cl quick flags */
    {"gpipe-m2", "pipeline", 2, 32, DT_SIMVAL_FP32, 0, 0, PP2 "gpipe"},
    {"gpipe-m4", "pipeline", 2, 16, DT_SIMVAL_FP32, 0, 0, PP2 "gpipe"},
    {"gpipe-m8", "pipeline", 2, 8, DT_SIMVAL_FP32, 0, 0, PP2 "gpipe"},
    {"gpipe-m16", "pipeline", 2, 4, DT_SIMVAL_FP32, 0, 0, PP2 "gpipe"},
    {"1f1b-m2", "pipeline", 2, 32, DT_SIMVAL_FP32, 0, 0, PP2 "1f1b"},
    {"1f1b-m4", "pipeline", 2, 16, DT_SIMVAL_FP32, 0, 1, PP2 "1f1b"},
    {"1f1b-m8", "pipeline", 2, 8, DT_SIMVAL_FP32, 0, 0, PP2 "1f1b"},
    {"1f1b-m16", "pipeline", 2, 4, DT_SIMVAL_FP32, 0, 0, PP2 "1f1b"},
    {"pipedream-m4", "pipeline", 2, 16, DT_SIMVAL_FP32, 0, 0, PP2 "pipedream"},
    {"vsync-m4", "pipeline", 2, 16, DT_SIMVAL_FP32, 0, 0, PP2 "pipedream-vsync"},
    {"1f1b-m4-bf16", "pipeline+precision", 2, 16, DT_SIMVAL_BF16, 0, 1, PP2 "1f1b"},
    {"1f1b-m4-fp16", "pipeline+precision", 2, 16, DT_SIMVAL_FP16, 0, 0, PP2 "1f1b"},
    {"1f1b-m4-recompute", "pipeline+recompute", 2, 16, DT_SIMVAL_FP32, 0, 0, PP2 "1f1b --recompute-granularity full"},
    {"dp-ring", "data-parallel", 2, 16, DT_SIMVAL_FP32, 0, 1, "--allreduce ring"},
    {"dp-tree", "data-parallel", 2, 16, DT_SIMVAL_FP32, 0, 0, "--allreduce tree"},
    {"dp-ring-buckets", "data-parallel", 2, 16, DT_SIMVAL_FP32, 0, 0, BUCKETS "--allreduce ring"},
    {"dp-tree-buckets", "data-parallel", 2, 16, DT_SIMVAL_FP32, 0, 0, BUCKETS "--allreduce tree"},
    {"dp-zero1", "data-parallel", 2, 16, DT_SIMVAL_FP32, 0, 0, "--allreduce ring --use-distributed-optimizer"},
    {"dp-ring-bf16", "data-parallel+precision", 2, 16, DT_SIMVAL_BF16, 0, 0, "--allreduce ring"},
    {"dp-ring-fp16", "data-parallel+precision", 2, 16, DT_SIMVAL_FP16, 0, 0, "--allreduce ring"},
    {"dp-ring-recompute", "data-parallel+recompute", 2, 16, DT_SIMVAL_FP32, 0, 0,
     "--allreduce ring --recompute-activations"},
    {"ps-sync", "parameter-server", 2, 16, DT_SIMVAL_FP32, 0, 1, PS1 "--allreduce ps-sync"},
    {"ps-async", "parameter-server", 2, 16, DT_SIMVAL_FP32, 0, 0, PS1 "--allreduce ps-async"},
    {"ps-sync-w2", "parameter-server", 3, 16, DT_SIMVAL_FP32, 0, 0, PS1 "--allreduce ps-sync"},
    {"ps-async-slow", "parameter-server", 3, 16, DT_SIMVAL_FP32, 0, 0, PS1 "--allreduce ps-async --slow-rank 1:40"},
    {"tp2-m4", "tensor-parallel", 2, 16, DT_SIMVAL_FP32, 0, 0, "--tensor-model-parallel-size 2"},
    {"tp2-m4-bf16", "tensor-parallel+precision", 2, 16, DT_SIMVAL_BF16, 0, 0, "--tensor-model-parallel-size 2"},
    {"tp2-m4-fp16", "tensor-parallel+precision", 2, 16, DT_SIMVAL_FP16, 0, 1, "--tensor-model-parallel-size 2"},
    {"tp2-m4-recompute", "tensor-parallel+recompute", 2, 16, DT_SIMVAL_FP32, 0, 0,
     "--tensor-model-parallel-size 2 --recompute-activations"},
    /* sequence parallelism: reduce-scatters and all-gathers for the allreduces, the rank's rows between stages */
    {"tp2-sp-m4", "tensor-parallel", 2, 16, DT_SIMVAL_FP32, 0, 1, "--tensor-model-parallel-size 2 --sequence-parallel"},
    {"tp2-pp2-sp-1f1b-m4", "tensor x pipeline", 4, 16, DT_SIMVAL_FP32, 0, 1,
     "--tensor-model-parallel-size 2 --sequence-parallel " PP2 "1f1b"},
    /* context parallelism: each sequence over c ranks, the keys and values exchanged per block */
    {"cp2-m4", "context-parallel", 2, 16, DT_SIMVAL_FP32, 0, 1, "--context-parallel-size 2"},
    {"cp2-allgather-m4", "context-parallel", 2, 16, DT_SIMVAL_FP32, 0, 0,
     "--context-parallel-size 2 --cp-comm-type allgather"},
    {"cp4-m4", "context-parallel", 4, 16, DT_SIMVAL_FP32, 0, 0, "--context-parallel-size 4"},
    {"cp2-tp2-a2a-m4", "context x tensor", 4, 16, DT_SIMVAL_FP32, 0, 1,
     "--context-parallel-size 2 --tensor-model-parallel-size 2 --cp-comm-type a2a"},
    {"cp2-pp2-1f1b-m4", "context x pipeline", 4, 16, DT_SIMVAL_FP32, 0, 0, "--context-parallel-size 2 " PP2 "1f1b"},
    /* the embedding and LM head whole on both ranks (the others split them by vocabulary rows) */
    {"tp2-m4-whole", "tensor-parallel", 2, 16, DT_SIMVAL_FP32, 0, 1,
     "--tensor-model-parallel-size 2 --no-vocab-parallel"},
    /* scatter/gather of the pipeline's sends (the default), and without */
    {"tp2-pp2-1f1b-m4", "tensor x pipeline", 4, 16, DT_SIMVAL_FP32, 0, 1, "--tensor-model-parallel-size 2 " PP2 "1f1b"},
    {"tp2-pp2-1f1b-m4-nosg", "tensor x pipeline", 4, 16, DT_SIMVAL_FP32, 0, 0,
     "--tensor-model-parallel-size 2 --no-scatter-gather-tensors-in-pipeline " PP2 "1f1b"},
    {"pp2-dp2-1f1b-m4", "pipeline x data", 4, 16, DT_SIMVAL_FP32, 0, 0, PP2 "1f1b --allreduce ring"},
    /* the emulated cluster: 2 nodes, 1 rank each, a shaped link between them */
    {"cl-dp-ring", "cluster: data-parallel", 2, 16, DT_SIMVAL_FP32, 1, 0, "--allreduce ring"},
    {"cl-dp-tree", "cluster: data-parallel", 2, 16, DT_SIMVAL_FP32, 1, 0, "--allreduce tree"},
    {"cl-ps-sync", "cluster: parameter-server", 2, 16, DT_SIMVAL_FP32, 1, 0, PS1 "--allreduce ps-sync"},
    {"cl-1f1b-m4", "cluster: pipeline", 2, 16, DT_SIMVAL_FP32, 1, 0, PP2 "1f1b"},
};
const int dt_simval_n_runs = (int)(sizeof dt_simval_runs / sizeof dt_simval_runs[0]);

int64_t dt_simval_peak_act(const dt_trace *t)
{
    double best = -1;
    for (size_t k = 0; k < t->n_events; k++) {
        const dt_trace_event *e = &t->events[k];
        if (e->ph == DT_TRACE_COUNTER &&
            (!strcmp(e->name, "activation_bytes") || !strcmp(e->name, "peak_activation_bytes")) && e->value > best)
            best = e->value;
    }
    return best < 0 ? -1 : (int64_t)best;
}

int64_t dt_simval_sim_peak_act(const dt_trace_event *ev, size_t n, int pid)
{
    double best = -1;
    for (size_t k = 0; k < n; k++) {
        const dt_trace_event *e = &ev[k];
        if (e->ph != DT_TRACE_COUNTER || e->pid != pid || strcmp(e->name, "memory") != 0) continue;
        const double act = dt_trace_event_arg(e, "activations", 0); /* not the stashed weights */
        if (act > best) best = act;
    }
    return best < 0 ? -1 : (int64_t)best;
}

int dt_simval_staleness(const char *path, double *mean, int *max, int64_t hist[16])
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    const json_t *ps = json_object_get(root, "parameter_server");
    const json_t *h = json_object_get(ps, "staleness_histogram");
    const json_t *m = json_object_get(ps, "staleness_mean"), *x = json_object_get(ps, "staleness_max");
    if (!json_is_array(h) || !json_is_number(m) || !json_is_integer(x)) {
        fprintf(stderr, "dtbench simval: %s: no parameter_server staleness figures\n", path);
        json_decref(root);
        return -1;
    }
    memset(hist, 0, 16 * sizeof hist[0]);
    for (size_t i = 0; i < json_array_size(h); i++)
        hist[i < 15 ? i : 15] += (int64_t)json_integer_value(json_array_get(h, i));
    *mean = json_number_value(m);
    *max = (int)json_integer_value(x);
    json_decref(root);
    return 0;
}

double dt_simval_hist_distance(const int64_t a[16], const int64_t b[16])
{
    double sa = 0, sb = 0, d = 0;
    for (int i = 0; i < 16; i++) {
        sa += (double)a[i];
        sb += (double)b[i];
    }
    if (sa <= 0 || sb <= 0) return sa == sb ? 0 : 1;
    for (int i = 0; i < 16; i++) d += fabs((double)a[i] / sa - (double)b[i] / sb);
    return d / 2;
}
