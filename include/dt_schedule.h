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
 *   interleaved-1f1b Megatron-LM's interleaved schedule: v >= 2 model chunks
 *                    per device, chunk c of device r is virtual stage c*p + r;
 *                    forward k (k = 0 .. v*m-1 of a step) runs chunk
 *                    (k mod p*v) div p on micro-batch (k div p*v)*p + k mod p,
 *                    backward k the same micro-batch on chunk
 *                    v-1 - (k mod p*v) div p; device r runs
 *                    min(2(p-r-1) + (v-1)p, v*m) warm-up forwards, then
 *                    forward/backward pairs, then the remaining backwards;
 *                    m must be a multiple of p. Bubble (p-1)/(v*m + p-1) of
 *                    a step with equal costs per virtual stage (the fill and
 *                    drain last (p-1)(F+B)/v); at most
 *                    min(v*m, (v-1)p + 2(p-1-r) + 1) chunk-micro-batches in
 *                    flight on device r.
 *   zb-h1            zero-bubble H1 (arXiv 2401.10241): the backward is
 *                    split into BACKWARD_B (the input gradient, on the
 *                    critical path) and BACKWARD_W (the weight gradients);
 *                    device r runs 1f1b's order with B for the backward and
 *                    a W after each steady B once r W's are held back (so
 *                    the W's of its first r micro-batches slide toward the
 *                    cool-down, where they fill the drain's bubble). A
 *                    micro-batch is in flight until its W: min(m, p) on
 *                    every device (1f1b's peak, on its first stage). Idle
 *                    per device and step (p-1)(F + B - min(F, B, W)) for
 *                    m >= p (the paper's (p-1)(F+B-W) when W is the
 *                    smallest; F = B = W: (p-1)F, a third of 1f1b's
 *                    (p-1)(F+B+W)).
 *   zb-v             zero-bubble V: two chunks per device in a V, chunk 0
 *                    of device r is virtual stage r, chunk 1 is stage
 *                    2p-1-r (so the last virtual stage is on device 0, and
 *                    device p-1 passes from chunk 0 to chunk 1 locally); B and
 *                    W split; the ordering of the paper's ZB-V figure
 *                    (lib/parallel/schedule_order.c); any m >= 1 (below
 *                    2p-1 micro-batches, the order of 2p-1 with the missing
 *                    ones left out). At most 2p chunk-micro-batches in
 *                    flight on a device (2p exactly once m >= 2p-1), as
 *                    1f1b's first stage holds p of twice the chunk's layers.
 *                    With F = B = W per chunk a device idles
 *                    max(p-1, 4p-2m-2) chunk forwards per step: p-1, the
 *                    fill alone, once m >= (3p-1)/2.
 *                    The paper's optimizer post-validation (updating before
 *                    the global gradient-norm / overflow checks and rolling
 *                    back) is not done: those checks stay synchronous at the
 *                    step's end, in OPTIM_STEP, as for 1f1b.
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
 * this stage". gpipe, 1f1b and the chunked / B-W-split kinds: every
 * instruction of step t uses version t.
 * pipedream: FORWARD uses the stage's current version, BACKWARD the same as
 * its FORWARD. The generator emits STASH v right after the instruction that
 * makes version v current (or at the start, for v = 0) when a later
 * instruction on the stage uses v while a newer version is current, and
 * DROP v after the last instruction that uses it; gpipe/1f1b never stash.
 *
 * Invariants (tests/check_schedule.c, tests/check_schedule_zb.c): on a
 * device, every FORWARD of (chunk, mb) precedes its BACKWARD (or its
 * BACKWARD_B, which precedes its BACKWARD_W); per chunk, forwards,
 * backwards and W's each come in ascending mb order; RECV_ACT(mb) right
 * before FORWARD(mb) on virtual stages q > 0 and SEND_ACT right after it on
 * q < p*v-1; likewise RECV_GRAD / SEND_GRAD around BACKWARD or BACKWARD_B;
 * every send has exactly one matching receive on the neighbouring virtual
 * stage, in the same order on both sides (so point-to-point messages with
 * one tag per link match up); dependencies: RECV on its SEND, BACKWARD and
 * BACKWARD_B on the FORWARD, BACKWARD_W on the BACKWARD_B; max_in_flight
 * counts chunk-micro-batches from FORWARD to BACKWARD or BACKWARD_W; an
 * interpreter that runs each device's list in order, waiting only on
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
    int *max_in_flight;     /* (p) most (chunk-)micro-batches forwarded but not yet backwarded (zb kinds:
                               not yet through BACKWARD_W) at once */
    int *max_versions;      /* (p) most distinct weight versions needed at once by in-flight
                               micro-batches (1 for gpipe/1f1b) */
} dt_schedule;

/* "gpipe", "1f1b", "pipedream", "pipedream-vsync", "interleaved-1f1b", "zb-h1", "zb-v" */
DT_API dt_status dt_sched_kind_parse(const char *s, dt_sched_kind *out);
DT_API const char *dt_sched_kind_name(dt_sched_kind k);
DT_API const char *dt_sched_op_name(dt_sched_op op); /* "recv_act", "forward", ..., "backward_b", "backward_w" */
/* The id of the message that the send or receive `in` of device `device`
 * moves, the same at both ends, so that traces join them (flow events,
 * docs/trace-format.md): with Q = p*v virtual stages, the receiving
 * virtual stage q, dir 0 for an activation and 1 for a gradient, and
 * pipeline 0..pipelines-1 (the runtime's tensor rank + t * data rank),
 * id = ((mb * Q + q) * 2 + dir) * pipelines + pipeline. -1 for another
 * instruction, a hand-over between two chunks of one device (not a
 * message), bad arguments, or an id above 2^53 - 1 (a trace's extras are
 * doubles). */
DT_API int64_t dt_sched_message_id(const dt_schedule *s, int device, const dt_sched_instr *in, int pipeline,
                                   int pipelines);
/* Model chunks per device when none is asked for: 2 for interleaved-1f1b and zb-v, 1 otherwise. */
DT_API int dt_sched_default_chunks(dt_sched_kind k);
/* 1 for the kinds whose lists use BACKWARD_B and BACKWARD_W (zb-h1, zb-v), 0 otherwise. */
DT_API int dt_sched_splits_backward(dt_sched_kind k);
/* The chunks per device of kind k for a model of num_layers blocks over p
 * stages, from Megatron-LM's flags: vflag = --virtual-pipeline-model-parallel-size
 * V and layers_per_vstage = --num-layers-per-virtual-pipeline-stage L (0:
 * not given; with both, V must be num_layers / (p*L)); neither: the
 * kind's default. interleaved-1f1b needs V >= 2, zb-v V = 2, the others
 * V = 1; with V > 1 num_layers must be a multiple of p*V. One-line
 * messages name the flag and the expectation. */
DT_API dt_status dt_sched_chunks_from_flags(dt_sched_kind k, int p, int num_layers, int vflag, int layers_per_vstage,
                                            int *v);

/* p >= 1, m >= 1, steps >= 1; messages name the flag (--pipeline-model-parallel-size,
 * micro-batches, --train-iters). dt_schedule_make uses the kind's default
 * chunks (dt_sched_default_chunks); dt_schedule_make_chunks takes v:
 * interleaved-1f1b v >= 2 and m a multiple of p, zb-v v = 2, the other
 * kinds v = 1. */
DT_API dt_status dt_schedule_make(dt_sched_kind kind, int p, int m, int steps, dt_schedule **out);
DT_API dt_status dt_schedule_make_chunks(dt_sched_kind kind, int p, int v, int m, int steps, dt_schedule **out);
/* What dt_schedule_make_chunks checks before it builds anything (the same messages). */
DT_API dt_status dt_schedule_check(dt_sched_kind kind, int p, int v, int m, int steps);
DT_API void dt_schedule_free(dt_schedule *s);

/* The printable form (caller frees): a header line, then for each stage
 * one line "stage s:" followed by its instructions as short tokens, e.g.
 * "F0 F1 B0 F2 B1 ... OPT" (F/B with the micro-batch, W for BACKWARD_W,
 * B also for BACKWARD_B; with v > 1 chunks ".c" after the micro-batch, as
 * F3.1 for micro-batch 3 on chunk 1, and the header says v and where the
 * chunks sit; R/S for receives and sends only with verbose, versions as
 * F3@v2 for pipedream kinds). NULL when out of memory. */
DT_API char *dt_schedule_format(const dt_schedule *s, int verbose);

/* The ideal bubble fraction of gpipe/1f1b with equal per-stage costs:
 * (p-1)/(m+p-1). */
DT_API double dt_schedule_bubble_formula(int p, int m);
/* The ideal bubble fraction (idle share of a device's step, or of the run
 * for the pipedream kinds) of schedule k with v chunks per device over a
 * run of `steps` steps of m micro-batches, when every virtual stage costs
 * the same and F = B = W (a whole backward BACKWARD = B + W = 2F), and
 * communication is free:
 *   gpipe, 1f1b           (p-1)/(m+p-1)       (any F:B ratio)
 *   pipedream(-vsync)     (p-1)/(steps*m+p-1) (filled and drained once per run)
 *   interleaved-1f1b      (p-1)/(v*m+p-1)     (the fill and drain take (p-1)/v of a stage's F+B)
 *   zb-h1                 I/(3m+I), I = max(p-1, 2p-m-1): (p-1)/(3m+p-1) for m >= p
 *   zb-v                  I/(6m+I), I = max(p-1, 4p-2m-2) (in chunk forwards, F/2):
 *                         (p-1)/(6m+p-1) for m >= (3p-1)/2
 * (tests/check_schedule*.c run every kind with these costs and compare
 * each device's idle share with them). dt_schedule_bubble_ideal uses the
 * kind's default chunks. */
DT_API double dt_schedule_bubble_ideal_chunks(dt_sched_kind k, int p, int v, int m, int steps);
DT_API double dt_schedule_bubble_ideal(dt_sched_kind k, int p, int m, int steps);
/* The formula of dt_schedule_bubble_ideal_chunks as text: "(p-1)/(m+p-1)",
 * "(p-1)/(steps*m+p-1)", "(p-1)/(v*m+p-1)", "I/(3m+I), I = max(p-1, 2p-m-1)",
 * "I/(6m+I), I = max(p-1, 4p-2m-2)". */
DT_API const char *dt_schedule_bubble_formula_text(dt_sched_kind k);

#ifdef __cplusplus
}
#endif
#endif
