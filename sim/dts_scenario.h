/* dts_scenario.h: what the simulator simulates (sim/scenario.c): a model,
 * a parallel layout t x p x d, a pipeline schedule, the gradient exchange,
 * precision, the hardware and the per-operation costs.
 *
 * A scenario comes from dtsim's flags (the same names as dtrain's), from a
 * JSON config file, or from a real run's trace (otherData.config, which is
 * dtrain's full training configuration): dts_scenario_from_config reads
 * all three shapes of keys, so "predict this run" needs nothing but its
 * trace and the calibration inputs.
 *
 * Ranks: the library's process grid (dts_scenario_grid), world = t * c * d
 * * p (+ num_ps_servers with a parameter server), rank = t_i + t * (c_i + c
 * * (d_i + d * p_i)) as lib/parallel/grid.c orders them; parameter servers
 * are the last num_ps_servers ranks (lib/parallel/ps.c).
 *
 * Invariants after dts_scenario_check: every size >= 1; m * B * d ==
 * global batch (the c ranks of a context group take the same micro-batches);
 * 2c divides T; under full recomputation 1 <= recompute_num_layers <= L; the split (if any) has p entries summing to L; the cost
 * table's n_layer == model.num_layers. */
#ifndef DTS_SCENARIO_H
#define DTS_SCENARIO_H

#include <stdint.h>

#include "dt_gpt.h"
#include "dt_grid.h"
#include "dt_loss_scaler.h"
#include "dt_schedule.h"
#include "dt_status.h"
#include "dt_train.h"
#include "dts_cost.h"
#include "dts_hw.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DTS_MAX_STAGES 1024
/* Micro-batches per step and pipeline: the simulator keeps each one's
 * events and state for the step (about 9 KB each, measured), so 2^28 of
 * them (a global batch of 2^31 sequences) would need terabytes. */
#define DTS_MAX_MICRO 65536

typedef enum dts_exchange {
    DTS_EX_RING =
        0, /* also "mpi" and "nccl": simulated as the ring (what they run at these sizes; see docs/simulator.md) */
    DTS_EX_TREE,
    DTS_EX_NAIVE,
    DTS_EX_PS_SYNC,
    DTS_EX_PS_ASYNC
} dts_exchange;

/* What a real run's configuration (dtrain's trace header or summary)
 * records that the simulation does not model (sim/scenario_run.c). */
typedef struct dts_recorded {
    int hang_rank;         /* --hang-rank R:ITER: R (-1: none) */
    int64_t hang_iter;     /* ITER (0: none) */
    int max_staleness;     /* ps-async's bound on a push's staleness (-1: none) */
    int threads;           /* CPU threads per rank, as the backend resolved them (0: not recorded) */
    int64_t save_interval; /* iterations between checkpoint saves (0: none) */
    char device[16];       /* "cpu", "cuda" ("" not recorded) */
    char cluster[4097];    /* machine.cluster: DT_CLUSTER as the run saw it ("" none) */
} dts_recorded;

typedef struct dts_scenario {
    char model_name[32]; /* "tiny", "small", "gpt2-124m" or "custom" */
    dt_gpt_config model;
    int B;                     /* --micro-batch-size */
    int T;                     /* --seq-length */
    int m;                     /* micro-batches per step per pipeline (global / (B * d)) */
    int64_t steps;             /* --train-iters */
    int t, p, d;               /* tensor, pipeline, data-parallel sizes */
    /* t > 1: the embedding and LM head split by vocabulary rows over the t
     * ranks (Megatron's vocabulary-parallel embedding and cross-entropy;
     * rank r holds rows [V*r/t, V*(r+1)/t)); 0: --no-vocab-parallel, whole
     * on every tensor rank. Default 1. */
    int vocab_parallel;
    /* t > 1 and p > 1: each tensor rank sends 1/t of an activation (or its
     * gradient) to its peer on the neighbouring stage, and the receiving
     * stage all-gathers the t pieces over its tensor group; 0:
     * --no-scatter-gather-tensors-in-pipeline, every tensor rank sends the
     * whole tensor. Default 1. */
    int scatter_gather;
    /* t > 1: Megatron's sequence parallelism (--sequence-parallel,
     * lib/parallel/sp.c): the blocks' per-token regions (LayerNorms,
     * residuals, the block's input and output) hold the rank's B*T/t rows,
     * the tensor group reduce-scatters and all-gathers in place of the
     * allreduces, and a pipeline message is the rank's rows (no
     * scatter/gather). Needs the vocabulary split and t | T. Default 0. */
    int sequence_parallel;
    /* context parallelism (--context-parallel-size, lib/parallel/cp.c):
     * each sequence split over c ranks for the whole block (chunks i and
     * 2c-1-i of 2c on context rank i), every per-token tensor B*T/c rows,
     * the keys and values exchanged per block as cp_comm says; the
     * gradients reduced (and ZeRO-1 sharded) over the c x d ranks. Needs 2c
     * | T, c | a tensor rank's heads under a2a, no pipedream. Default 1, p2p. */
    int c;
    dt_cp_comm cp_comm;
    dt_sched_kind schedule;    /* --pipeline-schedule */
    int vpp;                   /* --virtual-pipeline-model-parallel-size (0: not given; dts_scenario_chunks) */
    int vpp_layers;            /* --num-layers-per-virtual-pipeline-stage (0: not given) */
    int split[DTS_MAX_STAGES]; /* --pipeline-split: layers per stage; n_split 0 = the runtime's default */
    int n_split;
    dts_exchange exchange;  /* --allreduce */
    char exchange_name[16]; /* as given: "ring", "mpi", "ps-async", ... */
    int num_ps_servers;     /* K (parameter server only) */
    int zero;               /* ZeRO stage: 1 --use-distributed-optimizer, 2 and 3 --zero-stage (0 none) */
    int zero_prefetch;      /* --zero-prefetch: stage 3 gathers the next layer during the current one */
    int64_t bucket_bytes;   /* --bucket-size-mb (25 MiB by default, as dtrain) */
    int64_t chunk_bytes;    /* --allreduce-chunk-bytes (1 MiB by default, as dtrain) */
    char precision[8];      /* "fp32", "fp16", "bf16" */
    int use_loss_scaling;   /* fp16 */
    dt_loss_scaler_config scaler;
    /* FP8 GEMMs (dtrain's --fp8-format and its fp8_* config keys; dt_fp8.h):
     * read, checked and written back, not timed: the run is priced in its
     * precision (bf16, which FP8 implies), and `dtsim fp8` (sim/fp8.c)
     * predicts the numerics. fp8 DT_FP8_OFF: none (the default). */
    dt_fp8_mode fp8;
    dt_fp8_recipe fp8_recipe;       /* delayed (default), tensorwise, blockwise */
    dt_fp8_amax_algo fp8_amax_algo; /* max (default), most_recent */
    int fp8_margin;                 /* 0..32 (default 0) */
    int fp8_amax_history_len;       /* 1..65536 (default 1024, dtrain's) */

    int recompute;            /* 0 none, 1 full, 2 selective */
    int recompute_num_layers; /* --recompute-num-layers K: full recomputation's blocks per checkpointed
                                 group (1..num_layers; each stage or chunk groups its own blocks, K at most
                                 their count, the last group shorter when K does not divide it) */
    int slow_rank;            /* --slow-rank R:MS: rank R sleeps MS before each exchange (-1 none) */
    int64_t slow_ns;
    int optimizer_states;  /* floats of optimizer state per parameter: 2 AdamW/LAMB, 1 SGD-momentum/LARS, 0 SGD */
    dts_hw hw;             /* the machine */
    dts_cost cost;         /* per-operation durations (profile or roofline) */
    int have_cost;         /* cost filled (dts_scenario_set_cost*) */
    uint64_t seed;         /* of the simulator's random draws (numerics) */
    char grad_trace[512];  /* fp16: a real run's trace with grad_amax events to fit the gradient model
                                (sim/dts_amp.h); "" = no numerics model */
    dts_recorded recorded; /* what the run read from dtrain's configuration recorded (never written back) */
} dts_scenario;

/* Defaults: tiny model, dtrain's default batch, t = p = d = 1 (with the
 * vocabulary split and scattered pipeline sends, when t > 1), gpipe,
 * ring, fp32, the default hardware (dts_hw_default), no cost yet. */
void dts_scenario_default(dts_scenario *sc);
/* Read a JSON object text: dtrain's trace/summary config keys
 * ("model", "num_layers", "hidden_size", "micro_batch_size",
 * "global_batch_size", "data_parallel_size", "pipeline_model_parallel_size",
 * "tensor_model_parallel_size", "pipeline_schedule", "allreduce", ...) or a
 * dtsim config file with the same keys plus "micro_batches" and "hardware"
 * (a path). Keys not given keep their values in *sc. `what` names the
 * source in error messages (a file name). */
dt_status dts_scenario_from_config(dts_scenario *sc, const char *json_text, const char *what);
/* Nothing recorded (hang_rank and max_staleness -1, the rest 0 or ""). */
void dts_recorded_default(dts_recorded *rec);
/* Read the keys of dts_recorded (and check the other run-only keys:
 * threads_requested, threads_automatic, data_bytes, comm_timeout,
 * machine.host, machine.online_cores) from dtrain's configuration object
 * cfg, each range-checked; an error names `what` and the key. *rec is
 * written only on success. */
dt_status dts_recorded_read(dts_recorded *rec, const struct json_t *cfg, const char *what);
/* One line listing what sc->recorded holds that the simulation leaves out
 * (a hung rank, a staleness bound, threads per rank on CPU ranks,
 * checkpoint saves, an emulated cluster unless hw_given), ", "-separated,
 * into buf; returns the number of items (0: nothing, buf ""). */
int dts_scenario_unmodelled(const dts_scenario *sc, int hw_given, char *buf, size_t cap);
/* Validate (messages name the flag or key and the expectation). */
dt_status dts_scenario_check(const dts_scenario *sc);
/* Fill sc->cost from a profile trace (dts_cost_from_profile) or, with
 * profile NULL, from the roofline of sc->hw. */
dt_status dts_scenario_set_cost(dts_scenario *sc, const char *profile_path);
/* The model chunks per stage of the scenario's schedule (vpp, vpp_layers
 * and the kind's default: dt_sched_chunks_from_flags). */
dt_status dts_scenario_chunks(const dts_scenario *sc, int *v);
/* The scenario's process grid (include/dt_grid.h): t x c x d x p workers,
 * then the parameter servers. */
dt_status dts_scenario_grid(const dts_scenario *sc, dt_grid *g);
/* world size (the grid's; -1 where the sizes form none), and the first and
 * last layer (-1 .. L, trace convention) of stage s */
int dts_scenario_world(const dts_scenario *sc);
dt_status dts_scenario_stage_layers(const dts_scenario *sc, int s, int *first, int *last);
/* The scenario as a JSON object text (caller frees), for otherData.config of
 * simulated traces and the summary. */
char *dts_scenario_json(const dts_scenario *sc);
/* "none", "full", "selective" for sc->recompute 0..2, else "?" */
const char *dts_recompute_name(int r);

#ifdef __cplusplus
}
#endif
#endif
