/* run_step.c: the step boundary of every shape (see run_internal.h).
 * A pipelined step ends with the world allreduce of the loss
 * (lib/parallel/pipeline.c dt__pipe_step), except under pipedream, whose
 * last stage sends the loss to stage 0 a step ahead of its use; then, as
 * for the other shapes, the
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

void dts__step_synced(dts__sim *s, dts__unit *u);

/* pipedream: stage 0 has the loss it waited for (a: the step): add the pipelines' over its data group. */
static void dts__loss_arrived(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e, (void)a, (void)b;
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    if (s->sc->d > 1) dts__sync_arrive(s, &s->loss0_sync, u);
    else dts__step_synced(s, u);
}

/* pipedream at the end of step k: the last stage sends the step's loss and
 * goes on; stage 0 goes on once step k-1's has arrived (at the last step,
 * step k's); the stages between go on. */
static void dts__async_step_end(dts__sim *s, dts__unit *u)
{
    const dts_scenario *sc = s->sc;
    const int64_t now = dts_engine_now(s->e), k = u->step;
    if (u->stage == sc->p - 1) {
        const dts__unit *to = dts__unit_at(s, u->dpi, 0);
        const int64_t at = dts_net_send(&s->net, u->rank, to->rank, 4, now, NULL);
        s->loss_at[(int64_t)u->dpi * sc->steps + k] = at;
        dts__unit *w = dts__unit_at(s, u->dpi, 0);
        if (w->loss_wait == k) {
            w->loss_wait = -1;
            dts__at(s, at > now ? at : now, dts__loss_arrived, w, 0, 0);
        }
        dts__step_synced(s, u);
        return;
    }
    if (u->stage != 0) {
        dts__step_synced(s, u);
        return;
    }
    const int64_t want = k + 1 >= sc->steps ? k : k - 1;
    if (want < 0) {
        dts__step_synced(s, u);
        return;
    }
    const int64_t at = s->loss_at[(int64_t)u->dpi * sc->steps + want];
    if (at < 0) {
        u->loss_wait = want; /* the last stage wakes it */
        return;
    }
    dts__at(s, at > now ? at : now, dts__loss_arrived, u, 0, 0);
}

void dts__step_end(dts__sim *s, dts__unit *u)
{
    if (s->async_report) {
        dts__async_step_end(s, u);
        return;
    }
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
