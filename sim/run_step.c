/* run_step.c: the step boundary of every shape (see run_internal.h).
 * A pipelined step ends with the world allreduce of the loss
 * (lib/parallel/pipeline.c dt__pipe_step); then, as for the other shapes, the
 * host's per-step overhead, then the next step (the sim's begin_step) or,
 * after the last, the unit is finished.
 *
 * Invariants: a unit's step counter only grows, by one per step; a
 * finished unit schedules nothing more. */
#include "run_internal.h"

static void dts__step_next(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)a;
    (void)b;
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    u->step++;
    if (u->step >= s->sc->steps) {
        u->finished = 1;
        return;
    }
    s->begin_step(s, u);
}

void dts__step_end(dts__sim *s, dts__unit *u)
{
    if (dts__is_pipe(s->sc)) { /* lib/parallel/pipeline.c: the loss and norm allreduce over the world */
        dts__sync_arrive(s, &s->world_sync, u);
        return;
    }
    dts__at(s, dts_engine_now(s->e) + s->sc->cost.step_overhead_ns, dts__step_next, u, 0, 0);
}

void dts__step_synced(dts__sim *s, dts__unit *u)
{
    dts__at(s, dts_engine_now(s->e) + s->sc->cost.step_overhead_ns, dts__step_next, u, 0, 0);
}
