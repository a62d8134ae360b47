/* dt_rules.h: the rules the simulator models exactly as the runtime
 * applies them, declared once for both. This is the one internal header
 * that sim/ may include (docs/architecture.md): the library defines each
 * rule (lib/parallel/stage.c, tp.c, ps.c), the simulator only reads it.
 *
 *   dt__stage_split        which blocks a pipeline stage holds
 *   dt__tp_check           whether a model splits over t tensor ranks
 *   dt__pipe_check         what an asynchronous pipeline schedule refuses
 *   DT_PS_MSG_HEADER_BYTES the parameter server's message header on the wire
 *   DT_PS_POLL_*           a server's polling ladder (test, then sleeps)
 *
 * Invariants: nothing here allocates or touches a communicator; changing a
 * rule changes the runtime and the simulator together. */
#ifndef DT_RULES_H
#define DT_RULES_H

#include "dt_gpt.h"
#include "dt_schedule.h"
#include "dt_status.h"

/* The blocks of p stages: split[s] blocks on stage s (split may be NULL: as
 * even as possible, earlier stages taking the extra ones). */
dt_status dt__stage_split(int num_layers, int p, const int *split, int *l0, int *l1, int s);

/* Checks that C, NH and 4C split into t parts (messages name the flags). */
dt_status dt__tp_check(const dt_gpt_config *cfg, int t);

/* The combinations of p > 1 stages an asynchronous schedule (pipedream,
 * pipedream-vsync: each stage updates on its own) cannot run: loss
 * scaling (one decision per update would need a barrier per update) and
 * tied embeddings (the first and last stages' copies of wte would drift
 * apart). DT_OK for the flush schedules and p = 1. */
dt_status dt__pipe_check(const dt_gpt_config *model, int p, dt_sched_kind kind, int loss_scaling);

/* A server polls for messages (lib/parallel/ps.c dt__ps_idle_waitany): a
 * test, then a sleep of DT_PS_POLL_FIRST_NS doubling up to
 * DT_PS_POLL_MAX_NS between tests. */
#define DT_PS_POLL_FIRST_NS 20000L
#define DT_PS_POLL_MAX_NS 500000L

/* Bytes of a parameter-server message's header on the wire
 * (sizeof(dt__ps_msg), asserted in lib/parallel/ps.c). */
#define DT_PS_MSG_HEADER_BYTES 80

#endif
