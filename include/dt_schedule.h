/* dt_schedule.h: pipeline schedules as pure data (lib/parallel/schedule.c). One
 * generator makes them; the runtime (lib/parallel/pipeline.c) executes them and the
 * simulator times them. No I/O, no communication, no clocks.
 *
 * A schedule for p stages, m micro-batches per step and `steps` steps is,
 * for every stage s, an ordered list of instructions. Stage s runs its list
 * in order; an instruction may start once its dependencies (instructions
 * of this or other stages) are done. Micro-batches are numbered globally:
 * micro-batch i of step t is mb = t*m + i.
 *
 * Kinds:
 *   gpipe            every forward of the step, then every backward, then
 *                    the optimizer step (a flush per step).
 *   1f1b             PipeDream-Flush / Megatron's non-interleaved schedule:
 *                    stage s does min(p-1-s, m) warm-up forwards, then
 *                    alternates one forward and one backward (steady), then
 *                    the remaining backwards (cool-down), then the optimizer
 *                    step; at most p-s micro-batches in flight on stage s.
 *   pipedream        asynchronous 1F1B without flushes: the warm-up happens
 *                    once, then forward and backward alternate across step
 *                    boundaries; each stage applies an optimizer step after
 *                    every backward (each micro-batch is one update), and
 *                    each micro-batch's backward uses the weights its forward
 *                    used on that stage (weight stashing): up to p-s versions
 *                    alive on stage s.
 *   pipedream-vsync  the same with vertical sync: on every stage a
 *                    micro-batch uses the version that was current on stage
 *                    0 when it entered the pipeline (version numbers are
 *                    "optimizer steps applied on that stage", and at that
 *                    point of its list every stage has applied at least as
 *                    many as stage 0 had, so the version is one it has had;
 *                    it keeps every version later micro-batches will need:
 *                    p stashed copies per stage in the steady state).
 *
 *   interleaved-1f1b Megatron's interleaved schedule: v model chunks per
 *                    device (virtual stages), chunk c of device r is virtual
 *                    stage c*p + r; forwards go through the chunks in groups
 *                    of p micro-batches, with (p-r-1)*2 + (v-1)*p warm-up
 *                    forwards on device r (capped at m*v); m must be a
 *                    multiple of p. Bubble (p-1)/(v*m + p-1).
 *   zb-h1            zero-bubble H1 (arXiv 2401.10241): the backward is
 *                    split into BACKWARD_B (the input gradient, on the
 *                    critical path) and BACKWARD_W (the weight gradients);
 *                    stage s runs 1f1b's order with B for the backward and
 *                    defers the W of its first s micro-batches to the
 *                    cool-down, where it fills the drain's bubble; at most
 *                    p micro-batches in flight on any stage (1f1b's peak).
 *   zb-v             zero-bubble V: two chunks per device in a V, chunk 0
 *                    of device r is virtual stage r, chunk 1 is stage
 *                    2p-1-r (so the last virtual stage is on device 0, and
 *                    device p-1 passes from chunk 0 to chunk 1 locally); B and
 *                    W split; at most 2p chunk-micro-batches in flight on
 *                    a device, as 1f1b's first stage holds p of twice the
 *                    chunk's layers.
 *
 * Devices and chunks: the schedule has p devices (pipeline ranks) and v
 * chunks per device (v = 1 except interleaved-1f1b and zb-v), p*v virtual
 * stages; the model's blocks are split over the virtual stages in order.
 * Instruction lists are per device; each instruction names its chunk, and
 * sends and receives name the peer device (peer == the device itself for a
 * hand-over between two chunks of one device: the runtime copies). Between
 * a sending virtual stage and the receiving one, sends and receives are in
 * ascending mb order on both sides (so one tag per (receiving virtual
 * stage, direction) matches them).
 *
 * Weight versions: a stage's version v means "after v optimizer steps on
 * this stage". gpipe/1f1b: every instruction of step t uses version t.
 * pipedream: FORWARD uses the stage's current version, BACKWARD the same as
 * its FORWARD. The generator emits STASH v right after the instruction that
 * makes version v current (or at the start, for v = 0) when a later
 * instruction on the stage uses v while a newer version is current, and
 * DROP v after the last instruction that uses it; gpipe/1f1b never stash.
 *
 * Invariants (tests/check_schedule.c): every FORWARD of (s, mb) precedes its
 * BACKWARD; RECV_ACT(mb) precedes FORWARD(mb) on stages s > 0 and SEND_ACT
 * follows it on stages s < p-1; likewise RECV_GRAD / SEND_GRAD around
 * BACKWARD; every send has exactly one matching receive on the neighbour,
 * and sends and receives between two stages happen in the same order on
 * both sides (so point-to-point messages with one tag match up); an
 * interpreter that runs each stage's list in order, waiting only on
 * dependencies, finishes (no deadlock). */
#ifndef DT_SCHEDULE_H
#define DT_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_sched_kind {
    DT_SCHED_GPIPE = 0,
    DT_SCHED_1F1B,
    DT_SCHED_PIPEDREAM,
    DT_SCHED_PIPEDREAM_VSYNC,
    DT_SCHED_INTERLEAVED_1F1B,
    DT_SCHED_ZB_H1,
    DT_SCHED_ZB_V
} dt_sched_kind;

typedef enum dt_sched_op {
    DT_SCHED_RECV_ACT = 0, /* receive mb's activation from stage s-1 */
    DT_SCHED_FORWARD,      /* forward of mb through this stage's layers */
    DT_SCHED_SEND_ACT,     /* send mb's output activation to stage s+1 */
    DT_SCHED_RECV_GRAD,    /* receive the gradient of mb's output from stage s+1 */
    DT_SCHED_BACKWARD,     /* backward of mb (parameter gradients accumulate) */
    DT_SCHED_SEND_GRAD,    /* send the gradient of mb's input to stage s-1 */
    DT_SCHED_OPTIM_STEP,   /* apply the accumulated gradients: version becomes `version` */
    DT_SCHED_STASH,        /* keep a copy of the current weights, which are version `version` */
    DT_SCHED_DROP,         /* free the stashed copy of version `version` */
    DT_SCHED_BACKWARD_B,   /* zb kinds: the input gradient of mb only (then SEND_GRAD) */
    DT_SCHED_BACKWARD_W    /* zb kinds: the weight gradients of mb (after its BACKWARD_B) */
} dt_sched_op;

typedef enum dt_sched_phase { DT_SCHED_WARMUP = 0, DT_SCHED_STEADY, DT_SCHED_COOLDOWN } dt_sched_phase;

/* A dependency: instruction `index` of stage `stage`'s list. */
typedef struct dt_sched_dep {
    int stage, index;
} dt_sched_dep;

#define DT_SCHED_MAX_DEPS 2

typedef struct dt_sched_instr {
    dt_sched_op op;
    int mb;      /* global micro-batch (t*m + i); -1 for OPTIM_STEP, STASH, DROP */
    int step;    /* the training step the instruction belongs to (OPTIM_STEP: the step it ends;
                            pipedream: the step of its micro-batch) */
    int version; /* FORWARD/BACKWARD: weight version to use; OPTIM_STEP: version it makes;
                            STASH/DROP: the version; sends/receives: -1 */
    dt_sched_phase phase;
    int chunk; /* the model chunk on this device (0..v-1) */
    int peer;  /* sends/receives: the other end's device (itself: a local hand-over); else -1 */
    int ndeps;
    dt_sched_dep deps[DT_SCHED_MAX_DEPS]; /* on other instructions (the previous one of the same
                                             stage is implied and not listed) */
} dt_sched_instr;

typedef struct dt_schedule {
    dt_sched_kind kind;
    int p, m, steps;
    int v;                  /* model chunks per device; p*v virtual stages */
    int *vstage;            /* (p*v) virtual stage of device r's chunk c at [r*v + c] */
    int *count;             /* (p) instructions per stage */
    dt_sched_instr **instr; /* (p) each (count[s]) */
    int *max_in_flight;     /* (p) most micro-batches forwarded but not yet backwarded at once */
    int *max_versions;      /* (p) most distinct weight versions needed at once by in-flight
                               micro-batches (1 for gpipe/1f1b) */
} dt_schedule;

/* "gpipe", "1f1b", "pipedream", "pipedream-vsync" */
DT_API dt_status dt_sched_kind_parse(const char *s, dt_sched_kind *out);
DT_API const char *dt_sched_kind_name(dt_sched_kind k);
DT_API const char *dt_sched_op_name(dt_sched_op op); /* "recv_act", "forward", ... */

/* p >= 1, m >= 1, steps >= 1; messages name the flag (--pipeline-model-parallel-size,
 * micro-batches, --train-iters). */
DT_API dt_status dt_schedule_make(dt_sched_kind kind, int p, int m, int steps, dt_schedule **out);
DT_API void dt_schedule_free(dt_schedule *s);

/* The printable form (caller frees): a header line, then for each stage
 * one line "stage s:" followed by its instructions as short tokens, e.g.
 * "F0 F1 B0 F2 B1 ... OPT" (F/B with the micro-batch, R/S for receives and
 * sends only with verbose, versions as F3@v2 for pipedream kinds). NULL
 * when out of memory. */
DT_API char *dt_schedule_format(const dt_schedule *s, int verbose);

/* The ideal bubble fraction of gpipe/1f1b with equal per-stage costs:
 * (p-1)/(m+p-1). */
DT_API double dt_schedule_bubble_formula(int p, int m);
/* The ideal bubble fraction of schedule k over a run of `steps` steps of m
 * micro-batches, equal per-stage costs: gpipe/1f1b flush every step,
 * (p-1)/(m+p-1); pipedream and pipedream-vsync fill the pipeline once and
 * drain it once per run, (p-1)/(steps*m+p-1). */
DT_API double dt_schedule_bubble_ideal(dt_sched_kind k, int p, int m, int steps);
/* The formula of dt_schedule_bubble_ideal as text: "(p-1)/(m+p-1)" or
 * "(p-1)/(steps*m+p-1)". */
DT_API const char *dt_schedule_bubble_formula_text(dt_sched_kind k);

#ifdef __cplusplus
}
#endif
#endif
