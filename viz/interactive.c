/* interactive.c: dtviz's window (dtv_app_interactive) and what the user
 * does in it, as plain state changes on dtv_app that tests drive without a
 * display: dtv_app_key (a key), dtv_app_mouse (wheel zoom around the
 * pointer, drag pan), dtv_app_tick (playback advancing with wall time),
 * and the what-if re-runs of a simulated trace. The SDL loop only feeds
 * events to them and draws (dtv_app_render_window: the panes, a status
 * line, the help overlay).
 *
 * Keys (dtv_app_help_lines; programs/dtviz.c's --help says the same):
 * h help, 1-7 views, space play/pause, +/- speed x2 or /2, '.' to the end of
 * the next training step (the events' iter), left/right scrub 5% of the
 * window, z/x or the wheel zoom, a/d or a drag pan, up/down rows (the fp8
 * view: its tensors, as [ and ] and a click in its list), r reset,
 * q/Escape quit. What-if (the first pane a dtsim trace with its config):
 * p/P stages -1/+1 (the split reset to the runtime's default), m/M
 * micro-batches /2 or x2, s the next schedule, b/B link bandwidth /2 or x2
 * (dts_run_opts.bw_scale, cumulative in a->bw_scale). A what-if rebuilds
 * the scenario from the trace's config (+ --hw, --profile or the roofline),
 * simulates at most DTV_WHATIF_STEPS steps so that it answers in well under
 * a second, and replaces tr[0]; an invalid scenario keeps the old trace and
 * puts the error in the status line.
 *
 * Playback: space starts from the beginning (or resumes); at speed 1 the
 * longest pane plays in DTV_PLAY_SECONDS of wall time. Both panes advance
 * by the same trace time; '.' puts each pane at the end of the same step.
 *
 * Invariants: pane 1's window is pane 0's (same span, same offset from its
 * own start; dtv__sync after every change); a window lies inside
 * [t_min, t_min + full span] with t1 - t0 >= min(DTV__MIN_SPAN, full span);
 * view[].now is INT64_MAX (everything) or in [t_min, t_max]; the status
 * is one line.
 *
 * Environment (tests): DTV_MAX_FRAMES=N makes the loop quit by itself after
 * drawing N frames (a->frames counts them), so the real loop runs under
 * SDL_VIDEODRIVER=dummy. Without it a driver that opens no window (dummy,
 * offscreen) is an error rather than a loop waiting forever for keys. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtv_app.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "dt_trace_stats.h"

#define DTV__MIN_SPAN 1000 /* ns: the narrowest window */
#define DTV__MAX_SPEED 256.0
#define DTV__WHATIF_MAX_EVENTS 4e6 /* refuse a what-if expected to produce more events */

static const char *const dtv__help[] = {
    "h\thelp: this overlay (h or Escape closes it)",
    "1 2 3 4 5 6 7\tviews: timeline, ring, scale, memory, breakdown, cp, fp8",
    "[  ]\tfp8 view: previous, next tensor (most saturated first; up, down and a click in the list too)",
    "space\tplay / pause (from the start; the whole trace in 20 s at x1)",
    "+  -\tplayback speed x2, /2",
    ".\tsingle step: to the end of the next training step",
    "left  right\tscrub the playback time by 5% of the window",
    "z  x, wheel\tzoom in, out (the wheel around the pointer)",
    "a  d, drag\tpan left, right",
    "up  down\tscroll the timeline's rows",
    "r\treset the view, the playback and the speed",
    "q, Escape\tquit",
    "\twhat-if, a dtsim trace in the first pane (re-simulates 4 steps):",
    "p  P\tpipeline stages -1, +1",
    "m  M\tmicro-batches per step /2, x2",
    "s\tschedule: gpipe, 1f1b, pipedream, pipedream-vsync",
    "b  B\tlink bandwidth /2, x2",
    NULL,
};

const char *const *dtv_app_help_lines(void) { return dtv__help; }

static void dtv__status(dtv_app *a, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void dtv__status(dtv_app *a, int error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->status, sizeof a->status, fmt, ap);
    va_end(ap);
    for (char *p = a->status; *p; p++) /* one line */
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
    a->status_error = error;
}

static double dtv__speed(const dtv_app *a) { return a->speed > 0 ? a->speed : 1.0; }

/* The longest pane's span (>= 1). */
static int64_t dtv__full(const dtv_app *a)
{
    int64_t full = 1;
    for (int i = 0; i < a->n; i++)
        if (a->tr[i].t_max - a->tr[i].t_min > full) full = a->tr[i].t_max - a->tr[i].t_min;
    return full;
}

static int64_t dtv__clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Clamp pane 0's window and copy it to pane 1 (see the invariants). */
static void dtv__sync(dtv_app *a)
{
    if (a->n < 1) return;
    const int64_t full = dtv__full(a);
    const int64_t min_span = full < DTV__MIN_SPAN ? full : DTV__MIN_SPAN;
    dtv_view *v = &a->view[0];
    const int64_t span = dtv__clamp64(v->t1 - v->t0, min_span, full);
    const int64_t off = dtv__clamp64(v->t0 - a->tr[0].t_min, 0, full - span);
    const int want_row = v->first_row;
    for (int i = 0; i < a->n; i++) {
        dtv_view *w = &a->view[i];
        w->id = v->id;
        w->t0 = a->tr[i].t_min + off;
        w->t1 = w->t0 + span;
        w->fit_first = w->fit_count = 0; /* no picture's cut window here */
        const int max_row = a->tr[i].n_rows > 0 ? a->tr[i].n_rows - 1 : 0;
        w->first_row = want_row < 0 ? 0 : want_row > max_row ? max_row : want_row;
    }
}

/* The whole trace visible, everything played (keeps the view id). */
static void dtv__reset_windows(dtv_app *a)
{
    for (int i = 0; i < a->n; i++) {
        const dtv_view_id id = a->view[i].id;
        dtv_view_all(&a->view[i], &a->tr[i]);
        a->view[i].id = id;
    }
    if (a->n > 0) a->view[0].t1 = a->view[0].t0 + dtv__full(a);
    a->playing = 0;
    a->play_frac = 0;
    dtv__sync(a);
}

/* Keep pane 0's playback time in its window (paging, as a player does). */
static void dtv__follow(dtv_app *a)
{
    dtv_view *v = &a->view[0];
    if (v->now == INT64_MAX) return;
    const int64_t span = v->t1 - v->t0;
    if (v->now > v->t1) {
        v->t0 = v->now - span / 10;
        v->t1 = v->t0 + span;
    } else if (v->now < v->t0) {
        v->t0 = v->now - span + span / 10;
        v->t1 = v->t0 + span;
    }
    dtv__sync(a);
}

/* Zoom pane 0's window by `factor` (< 1 narrower) keeping the time at
 * fraction `at` of it in place. */
static void dtv__zoom(dtv_app *a, double factor, double at)
{
    dtv_view *v = &a->view[0];
    const int64_t full = dtv__full(a);
    const int64_t min_span = full < DTV__MIN_SPAN ? full : DTV__MIN_SPAN;
    const double span = (double)(v->t1 - v->t0);
    at = at < 0 ? 0 : at > 1 ? 1 : at;
    const double anchor = (double)v->t0 + at * span;
    double ns = span * factor;
    if (ns < (double)min_span) ns = (double)min_span;
    if (ns > (double)full) ns = (double)full;
    const int64_t nspan = (int64_t)llround(ns);
    v->t0 = (int64_t)llround(anchor - at * (double)nspan);
    v->t1 = v->t0 + nspan;
    dtv__sync(a);
}

static void dtv__pan(dtv_app *a, int64_t dt)
{
    a->view[0].t0 += dt;
    a->view[0].t1 += dt;
    dtv__sync(a);
}

/* The end of each step (the latest end of a span with that iter, not
 * counting evaluation) as a malloc'd array indexed by iter; *n steps
 * (entries with no span are INT64_MIN). NULL when there are none. */
static int64_t *dtv__step_ends(const dtv_trace *t, int64_t *n)
{
    int64_t max_iter = -1;
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (e->ph == DT_TRACE_COMPLETE && e->iter != DT_TRACE_NONE && e->iter >= 0 && e->iter > max_iter)
            max_iter = e->iter;
    }
    *n = 0;
    if (max_iter < 0 || max_iter >= 100000000) return NULL;
    int64_t *end = malloc((size_t)(max_iter + 1) * sizeof *end);
    if (!end) return NULL;
    for (int64_t k = 0; k <= max_iter; k++) end[k] = INT64_MIN;
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (e->ph != DT_TRACE_COMPLETE || e->iter == DT_TRACE_NONE || e->iter < 0 || dtv_kind_of(e) == DTV_EVAL)
            continue;
        if (e->ts_ns + e->dur_ns > end[e->iter]) end[e->iter] = e->ts_ns + e->dur_ns;
    }
    *n = max_iter + 1;
    return end;
}

/* '.': every pane to the end of the next step of pane 0 (the step ending
 * first after its playback time), paused. */
static void dtv__single_step(dtv_app *a)
{
    int64_t n0 = 0;
    int64_t *e0 = dtv__step_ends(&a->tr[0], &n0);
    const int64_t now0 = a->view[0].now == INT64_MAX ? INT64_MIN : a->view[0].now;
    int64_t best_k = -1;
    for (int64_t k = 0; k < n0; k++)
        if (e0[k] != INT64_MIN && e0[k] > now0 && (best_k < 0 || e0[k] < e0[best_k])) best_k = k;
    a->playing = 0;
    a->play_frac = 0;
    if (best_k < 0) {
        for (int i = 0; i < a->n; i++) a->view[i].now = a->tr[i].t_max;
        dtv__status(a, 0, n0 > 0 ? "no further step: at the end of the trace" : "no steps (iter) in this trace");
        free(e0);
        dtv__follow(a);
        return;
    }
    a->view[0].now = e0[best_k];
    free(e0);
    for (int i = 1; i < a->n; i++) {
        int64_t ni = 0;
        int64_t *ei = dtv__step_ends(&a->tr[i], &ni);
        a->view[i].now = best_k < ni && ei[best_k] != INT64_MIN ? ei[best_k] : a->tr[i].t_max;
        free(ei);
    }
    char b[32];
    dtv_fmt_time(b, sizeof b, (double)(a->view[0].now - a->tr[0].t_min));
    dtv__status(a, 0, "end of step %lld at %s", (long long)best_k, b);
    dtv__follow(a);
}

static void dtv__scrub(dtv_app *a, int dir)
{
    const int64_t dt = (a->view[0].t1 - a->view[0].t0) / 20; /* 5% of the window */
    for (int i = 0; i < a->n; i++) {
        dtv_view *v = &a->view[i];
        const int64_t base = v->now == INT64_MAX ? a->tr[i].t_max : v->now;
        v->now = dtv__clamp64(base + (dir > 0 ? dt : -dt), a->tr[i].t_min, a->tr[i].t_max);
    }
    dtv__follow(a);
}

static void dtv__play_pause(dtv_app *a)
{
    if (a->playing) {
        a->playing = 0;
        dtv__status(a, 0, "paused");
        return;
    }
    int at_end = 1;
    for (int i = 0; i < a->n; i++)
        if (a->view[i].now != INT64_MAX && a->view[i].now < a->tr[i].t_max) at_end = 0;
    if (at_end) /* everything shown, or played to the end: from the start */
        for (int i = 0; i < a->n; i++) a->view[i].now = a->tr[i].t_min;
    a->playing = 1;
    a->play_frac = 0;
    dtv__status(a, 0, "playing at x%g", dtv__speed(a));
    dtv__follow(a);
}

void dtv_app_tick(dtv_app *a, double wall_seconds)
{
    if (!a->playing || a->n < 1 || !(wall_seconds > 0)) return;
    const int64_t full = dtv__full(a);
    double adv = dtv__speed(a) * wall_seconds * (double)full / DTV_PLAY_SECONDS + a->play_frac;
    if (adv > (double)full) adv = (double)full;
    const int64_t d = (int64_t)floor(adv);
    a->play_frac = adv - (double)d;
    int done = 1;
    for (int i = 0; i < a->n; i++) {
        dtv_view *v = &a->view[i];
        if (v->now == INT64_MAX) v->now = a->tr[i].t_min;
        v->now = v->now + d >= a->tr[i].t_max ? a->tr[i].t_max : v->now + d;
        if (v->now < a->tr[i].t_max) done = 0;
    }
    if (done) {
        a->playing = 0;
        dtv__status(a, 0, "end of the trace (space plays it again)");
    }
    dtv__follow(a);
}

/* ---- what-if ------------------------------------------------------------------------ */

enum { DTV__WI_P, DTV__WI_M, DTV__WI_SCHED, DTV__WI_BW };

/* "p=2 m=8 1f1b bw x1" */
static void dtv__whatif_desc(const dts_scenario *sc, double bw, char *buf, size_t n)
{
    snprintf(buf, n, "p=%d m=%d %s bw x%g", sc->p, sc->m, dt_sched_kind_name(sc->schedule), bw);
}

/* Re-simulate tr[0] with one setting changed (dir -1 or +1). */
static void dtv__whatif(dtv_app *a, int what, int dir)
{
    dtv_trace *old = &a->tr[0];
    if (a->n < 1 || strcmp(old->tool, "dtsim") != 0 || !old->config_json) {
        dtv__status(a, 1, "what-if: needs a dtsim trace with its config in the first pane (this one is from %s)",
                    a->n > 0 && old->tool[0] ? old->tool : "?");
        return;
    }
    dts_scenario *sc = malloc(sizeof *sc);
    if (!sc) {
        dtv__status(a, 1, "what-if: out of memory");
        return;
    }
    dts_scenario_default(sc);
    double bw = a->bw_scale > 0 ? a->bw_scale : 1.0;
    char desc[96] = "";
    dt_status st = dts_scenario_from_config(sc, old->config_json, "the trace's config");
    if (st == DT_OK && a->hw) {
        dts_hw h;
        st = dts_hw_load(a->hw, &h);
        if (st == DT_OK) sc->hw = h;
    }
    if (st != DT_OK) {
        dtv__status(a, 1, "what-if: %s (kept the trace)", dt_last_error());
        goto out;
    }
    const int m0 = sc->m > 0 ? sc->m : 1;
    const int64_t steps0 = sc->steps > 0 ? sc->steps : 1;
    switch (what) {
    case DTV__WI_P:
        if (dir < 0 && sc->p <= 1) {
            dtv__status(a, 1, "what-if: p is 1 already");
            goto out;
        }
        sc->p += dir;
        sc->n_split = 0; /* the runtime's default split of the blocks over the new stages */
        break;
    case DTV__WI_M:
        if (dir < 0 && sc->m <= 1) {
            dtv__status(a, 1, "what-if: m is 1 already");
            goto out;
        }
        if (dir > 0 && sc->m > (1 << 20)) {
            dtv__status(a, 1, "what-if: m = %d is the largest a live what-if takes", sc->m);
            goto out;
        }
        sc->m = dir > 0 ? sc->m * 2 : sc->m / 2;
        break;
    case DTV__WI_SCHED:
        sc->schedule = sc->schedule >= DT_SCHED_PIPEDREAM_VSYNC ? DT_SCHED_GPIPE : (dt_sched_kind)(sc->schedule + 1);
        break;
    case DTV__WI_BW:
        bw = dir > 0 ? bw * 2 : bw / 2;
        if (bw > 1024 || bw < 1.0 / 1024) {
            dtv__status(a, 1, "what-if: bandwidth x%g is outside x1/1024 .. x1024", bw);
            goto out;
        }
        break;
    default: goto out;
    }
    if (sc->steps <= 0 || sc->steps > DTV_WHATIF_STEPS) sc->steps = DTV_WHATIF_STEPS;
    dtv__whatif_desc(sc, bw, desc, sizeof desc);
    st = dts_scenario_check(sc);
    if (st == DT_OK) st = dts_scenario_set_cost(sc, a->profile);
    if (st == DT_OK) st = dts_scenario_check(sc);
    if (st != DT_OK) {
        dtv__status(a, 1, "what-if %s: %s (kept the previous trace)", desc, dt_last_error());
        goto out;
    }
    const double est = (double)old->n_ev * ((double)sc->m / m0) * ((double)sc->steps / (double)steps0);
    if (est > DTV__WHATIF_MAX_EVENTS) {
        dtv__status(a, 1, "what-if %s: about %.3g events, too many for a live re-run (use dtsim)", desc, est);
        goto out;
    }
    dts_run_opts o;
    memset(&o, 0, sizeof o);
    o.keep_events = 1;
    o.bw_scale = bw;
    dts_summary sum;
    memset(&sum, 0, sizeof sum);
    st = dts_run(sc, &o, &sum);
    if (st != DT_OK) {
        dtv__status(a, 1, "what-if %s: %s (kept the previous trace)", desc, dt_last_error());
        dts_summary_free(&sum);
        goto out;
    }
    const double wall = sum.wall_seconds;
    char *cfg = dts_scenario_json(sc);
    if (a->whatif_runs == 0) snprintf(a->whatif_base, sizeof a->whatif_base, "%s", old->name);
    char name[640];
    snprintf(name, sizeof name, "%.500s, what-if %s", a->whatif_base, desc);
    dtv_trace nt;
    st = cfg ? dtv_trace_from_events(sum.ev, sum.n_ev, name, "dtsim", cfg, &nt)
             : DT_FAIL(DT_ERR_NOMEM, "out of memory for the scenario's JSON");
    if (cfg) sum.ev = NULL; /* owned by nt now (freed by it on failure) */
    free(cfg);
    dts_summary_free(&sum);
    if (st != DT_OK) {
        dtv__status(a, 1, "what-if %s: %s (kept the previous trace)", desc, dt_last_error());
        goto out;
    }
    const double was = a->step_ns[0];
    dtv_trace_free(old);
    a->tr[0] = nt;
    dt_trace_phase_times pt;
    a->step_ns[0] = dt_trace_phase_times_events(nt.ev, nt.n_ev, nt.pids[0], nt.n_steps > 2 ? 1 : 0, &pt) == DT_OK
                        ? pt.step_ns
                        : NAN;
    dt_clear_error();
    a->bw_scale = bw;
    a->whatif_runs++;
    dtv__reset_windows(a);
    char now_s[32], was_s[32];
    dtv_fmt_time(now_s, sizeof now_s, a->step_ns[0]);
    dtv_fmt_time(was_s, sizeof was_s, was);
    snprintf(a->whatif, sizeof a->whatif, "what-if %s: step %s", desc, now_s);
    dtv__status(a, 0, "was %s (%+.1f%%); %lld steps simulated (a what-if stops at %d) in %.2g ms; costs: %s", was_s,
                isnan(was) || was == 0 ? 0.0 : 100.0 * (a->step_ns[0] - was) / was, (long long)sc->steps,
                DTV_WHATIF_STEPS, 1e3 * wall, a->profile ? "profile" : "roofline");
out:
    free(sc);
}

/* ---- keys and mouse ----------------------------------------------------------------- */

/* The fp8 view's tensor: pane 0's next (dir > 0) or previous in its list (pane 1 follows it, dtv_app_render). */
static void dtv__fp8_cycle(dtv_app *a, int dir)
{
    const int k = dtv_fp8_cycle(&a->tr[0], &a->view[0], dir);
    if (k < 0) {
        dtv__status(a, 1, "fp8: this trace has no FP8 events");
        return;
    }
    const dtv_fp8_tensor *x = &a->tr[0].fp8->x[k];
    dtv__status(a, 0, "fp8 tensor %s: %.0f saturated values in %d steps", x->name, x->saturated, x->steps_saturated);
}

/* A click in pane i's list of the fp8 view: that tensor, in pane 0 (by name); 1 when it was one. */
static int dtv__fp8_click(dtv_app *a, const dtv_canvas *c, int x, int y)
{
    if (!c || a->view[0].id != DTV_VIEW_FP8) return 0;
    const int top = a->n == 2 ? 26 : 0, ph = (c->h - DTV_STATUS_H - top) / a->n;
    for (int i = 0; i < a->n; i++) {
        const SDL_Rect r = {0, top + i * ph, c->w, ph};
        const int k = y >= r.y && y < r.y + r.h ? dtv_fp8_hit(c, r, &a->tr[i], &a->view[i], x, y) : -1;
        if (k < 0) continue;
        const dtv_fp8_tensor *xt = &a->tr[i].fp8->x[k];
        const int k0 = dtv_fp8_find(a->tr[0].fp8, xt->name);
        if (k0 < 0) {
            dtv__status(a, 1, "fp8: the first trace has no tensor %s", xt->name);
            return 1;
        }
        a->view[0].fp8_tensor = k0 + 1;
        dtv__status(a, 0, "fp8 tensor %s: %.0f saturated values in %d steps", xt->name, a->tr[0].fp8->x[k0].saturated,
                    a->tr[0].fp8->x[k0].steps_saturated);
        return 1;
    }
    return 0;
}

int dtv_app_key(dtv_app *a, SDL_Keycode key, Uint16 mod)
{
    if (a->n < 1) return key == SDLK_q || key == SDLK_ESCAPE;
    const int upper = ((mod & KMOD_SHIFT) != 0) != ((mod & KMOD_CAPS) != 0);
    const int64_t span = a->view[0].t1 - a->view[0].t0;
    switch (key) {
    case SDLK_q: return 1;
    case SDLK_ESCAPE:
        if (!a->help) return 1;
        a->help = 0;
        return 0;
    case SDLK_h: a->help = !a->help; return 0;
    case SDLK_1:
    case SDLK_2:
    case SDLK_3:
    case SDLK_4:
    case SDLK_5:
    case SDLK_6:
    case SDLK_7:
    case SDLK_KP_1:
    case SDLK_KP_2:
    case SDLK_KP_3:
    case SDLK_KP_4:
    case SDLK_KP_5:
    case SDLK_KP_6:
    case SDLK_KP_7: {
        const int k = key >= SDLK_KP_1 ? (int)(key - SDLK_KP_1) : (int)(key - SDLK_1);
        a->view[0].id = (dtv_view_id)k;
        dtv__sync(a);
        dtv__status(a, 0, "view: %s", dtv_view_name((dtv_view_id)k));
        return 0;
    }
    case SDLK_SPACE: dtv__play_pause(a); return 0;
    case SDLK_PLUS:
    case SDLK_EQUALS:
    case SDLK_KP_PLUS:
    case SDLK_MINUS:
    case SDLK_KP_MINUS: {
        const int faster = key == SDLK_PLUS || key == SDLK_EQUALS || key == SDLK_KP_PLUS;
        double s = dtv__speed(a) * (faster ? 2.0 : 0.5);
        if (s > DTV__MAX_SPEED) s = DTV__MAX_SPEED;
        if (s < 1.0 / DTV__MAX_SPEED) s = 1.0 / DTV__MAX_SPEED;
        a->speed = s;
        dtv__status(a, 0, "speed x%g", s);
        return 0;
    }
    case SDLK_PERIOD:
    case SDLK_KP_PERIOD: dtv__single_step(a); return 0;
    case SDLK_LEFT: dtv__scrub(a, -1); return 0;
    case SDLK_RIGHT: dtv__scrub(a, +1); return 0;
    case SDLK_z: dtv__zoom(a, 0.5, 0.5); return 0;
    case SDLK_x: dtv__zoom(a, 2.0, 0.5); return 0;
    case SDLK_a: dtv__pan(a, -span / 10); return 0;
    case SDLK_d: dtv__pan(a, span / 10); return 0;
    case SDLK_LEFTBRACKET:
    case SDLK_RIGHTBRACKET: dtv__fp8_cycle(a, key == SDLK_RIGHTBRACKET ? 1 : -1); return 0;
    case SDLK_UP:
    case SDLK_DOWN:
        if (a->view[0].id == DTV_VIEW_FP8) { /* the fp8 view's list */
            dtv__fp8_cycle(a, key == SDLK_DOWN ? 1 : -1);
            return 0;
        }
        a->view[0].first_row += key == SDLK_UP ? -1 : 1;
        dtv__sync(a);
        return 0;
    case SDLK_r:
        dtv__reset_windows(a);
        for (int i = 0; i < a->n; i++) a->view[i].first_row = 0;
        a->speed = 1.0;
        dtv__status(a, 0, "reset: the whole trace, speed x1");
        return 0;
    case SDLK_p: dtv__whatif(a, DTV__WI_P, upper ? +1 : -1); return 0;
    case SDLK_m: dtv__whatif(a, DTV__WI_M, upper ? +1 : -1); return 0;
    case SDLK_s: dtv__whatif(a, DTV__WI_SCHED, +1); return 0;
    case SDLK_b: dtv__whatif(a, DTV__WI_BW, upper ? +1 : -1); return 0;
    default: return 0;
    }
}

/* Where pane 0 draws time: [x, x + w) of the canvas (the timeline's span
 * area, or the whole width for the other views). */
static void dtv__time_area(const dtv_app *a, const dtv_canvas *c, int *x, int *w)
{
    const int cw = c ? c->w : 1400, ch = (c ? c->h : 800) - DTV_STATUS_H;
    *x = 0;
    *w = cw > 1 ? cw : 1;
    if (a->n < 1 || a->view[0].id != DTV_VIEW_TIMELINE || !c) return;
    const int top = a->n == 2 ? 26 : 0;
    SDL_Rect r = {0, top, cw, (ch - top) / a->n};
    dtv_timeline_layout L;
    dtv_timeline_layout_of(c, r, &a->tr[0], &a->view[0], &L);
    *x = L.x;
    *w = L.w > 1 ? L.w : 1;
}

void dtv_app_mouse(dtv_app *a, const dtv_canvas *c, int kind, int x, int y, int wheel)
{
    if (a->n < 1) return;
    int ax, aw;
    dtv__time_area(a, c, &ax, &aw);
    dtv_view *v = &a->view[0];
    const int64_t span = v->t1 - v->t0;
    switch (kind) {
    case DTV_MOUSE_DOWN:
        if (dtv__fp8_click(a, c, x, y)) break;
        a->dragging = 1;
        a->drag_x = x;
        a->drag_t0 = v->t0;
        break;
    case DTV_MOUSE_MOVE:
        if (!a->dragging) break;
        v->t0 = a->drag_t0 - (int64_t)llround((double)(x - a->drag_x) * (double)span / aw);
        v->t1 = v->t0 + span;
        dtv__sync(a);
        break;
    case DTV_MOUSE_UP: a->dragging = 0; break;
    case DTV_MOUSE_WHEEL:
        if (wheel != 0) dtv__zoom(a, pow(0.8, wheel), (double)(x - ax) / aw);
        break;
    default: break;
    }
}

/* ---- drawing ------------------------------------------------------------------------ */

static void dtv__draw_help(dtv_canvas *c)
{
    const int lh = dtv_text_height(c, DTV_FONT_NORMAL) + 4;
    int n = 0, kw = 0, dw = 0;
    for (; dtv__help[n]; n++) {
        const char *tab = strchr(dtv__help[n], '\t');
        char k[64];
        snprintf(k, sizeof k, "%.*s", (int)(tab - dtv__help[n]), dtv__help[n]);
        int w1 = 0, w2 = 0;
        TTF_SizeUTF8(c->bold, k, &w1, NULL);
        TTF_SizeUTF8(c->font, tab + 1, &w2, NULL);
        if (w1 > kw) kw = w1;
        if (w2 > dw) dw = w2;
    }
    const int bw = kw + dw + 60, bh = (n + 2) * lh + 16;
    const int bx = (c->w - bw) / 2 > 4 ? (c->w - bw) / 2 : 4, by = (c->h - bh) / 2 > 4 ? (c->h - bh) / 2 : 4;
    dtv_fill(c, bx + 4, by + 4, bw, bh, DTV_GRID); /* shadow */
    dtv_fill(c, bx, by, bw, bh, DTV_BG);
    dtv_frame(c, bx, by, bw, bh, DTV_DIM);
    dtv_text(c, bx + 20, by + 10, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "dtviz keys");
    for (int i = 0; i < n; i++) {
        const char *tab = strchr(dtv__help[i], '\t');
        const int y = by + 10 + (i + 1) * lh + 6;
        if (tab == dtv__help[i]) { /* a section */
            dtv_text(c, bx + 20, y, DTV_FONT_NORMAL, DTV_LEFT, DTV_ACCENT, "%s", tab + 1);
            continue;
        }
        dtv_text(c, bx + 20, y, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%.*s", (int)(tab - dtv__help[i]), dtv__help[i]);
        dtv_text(c, bx + 40 + kw, y, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "%s", tab + 1);
    }
}

void dtv_app_render_window(dtv_app *a, dtv_canvas *c)
{
    const int h = c->h;
    c->h = h - DTV_STATUS_H > 32 ? h - DTV_STATUS_H : h;
    dtv_app_render(a, c);
    c->h = h;
    const int y = h - DTV_STATUS_H;
    dtv_fill(c, 0, y, c->w, DTV_STATUS_H, DTV_PANEL);
    dtv_line(c, 0, y, c->w, y, DTV_GRID);
    char when[48] = "everything played", t[32], span[32];
    if (a->n > 0 && a->view[0].now != INT64_MAX) {
        dtv_fmt_time(t, sizeof t, (double)(a->view[0].now - a->tr[0].t_min));
        snprintf(when, sizeof when, "%s %s", a->playing ? "playing" : "paused at", t);
    }
    dtv_fmt_time(span, sizeof span, a->n > 0 ? (double)(a->view[0].t1 - a->view[0].t0) : 0.0);
    int x = 8;
    x += dtv_text(c, x, y + 3, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s | %s | speed x%g | window %s",
                  a->n > 0 ? dtv_view_name(a->view[0].id) : "-", when, dtv__speed(a), span);
    if (a->whatif[0]) x += 16 + dtv_text(c, x + 16, y + 3, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%s", a->whatif);
    if (a->status[0])
        x += 16 + dtv_text(c, x + 16, y + 3, DTV_FONT_NORMAL, DTV_LEFT, a->status_error ? DTV_ACCENT : DTV_FG, "%s",
                           a->status);
    int hw = 0;
    TTF_SizeUTF8(c->font, "h: help", &hw, NULL);
    if (x + 24 + hw < c->w) dtv_text(c, c->w - 8, y + 3, DTV_FONT_NORMAL, DTV_RIGHT, DTV_DIM, "h: help");
    if (a->help) dtv__draw_help(c);
}

/* ---- the window --------------------------------------------------------------------- */

dt_status dtv_app_interactive(dtv_app *a, int w, int h)
{
    const char *mf = getenv("DTV_MAX_FRAMES");
    const long max_frames = mf && mf[0] ? strtol(mf, NULL, 10) : 0;
    DT_CHECK(dtv_sdl_init(1));
    /* no window to get keys from: the loop would wait forever */
    if (dtv_sdl_windowless() && max_frames <= 0)
        return DT_FAIL(DT_ERR_BACKEND,
                       "SDL_VIDEODRIVER=%s opens no window, so the viewer would wait forever for keys; use --png "
                       "FILE or --frames DIR",
                       SDL_GetCurrentVideoDriver());
    dtv_canvas c;
    DT_CHECK(dtv_canvas_window(w, h, "dtviz", &c));
    if (a->speed <= 0) a->speed = 1.0;
    a->frames = 0;
    dtv__sync(a);
    const double freq = (double)SDL_GetPerformanceFrequency();
    Uint64 last = SDL_GetPerformanceCounter();
    int quit = 0, dirty = 1;
    while (!quit) {
        const Uint64 frame_start = SDL_GetPerformanceCounter();
        SDL_Event e;
        /* sleep in the event queue unless something moves */
        int got = a->playing || max_frames > 0 ? SDL_PollEvent(&e) : SDL_WaitEventTimeout(&e, 250);
        for (; got && !quit; got = SDL_PollEvent(&e)) {
            int ww = c.w, wh = c.h;
            SDL_GetWindowSize(c.win, &ww, &wh);
            const double sx = ww > 0 ? (double)c.w / ww : 1.0, sy = wh > 0 ? (double)c.h / wh : 1.0;
            switch (e.type) {
            case SDL_QUIT: quit = 1; break;
            case SDL_KEYDOWN:
                quit = dtv_app_key(a, e.key.keysym.sym, e.key.keysym.mod);
                dirty = 1;
                break;
            case SDL_WINDOWEVENT:
                if (e.window.event == SDL_WINDOWEVENT_SIZE_CHANGED || e.window.event == SDL_WINDOWEVENT_RESIZED)
                    dtv_canvas_resized(&c);
                dirty = 1;
                break;
            case SDL_MOUSEBUTTONDOWN:
            case SDL_MOUSEBUTTONUP:
                if (e.button.button != SDL_BUTTON_LEFT) break;
                dtv_app_mouse(a, &c, e.type == SDL_MOUSEBUTTONDOWN ? DTV_MOUSE_DOWN : DTV_MOUSE_UP,
                              (int)(e.button.x * sx), (int)(e.button.y * sy), 0);
                dirty = 1;
                break;
            case SDL_MOUSEMOTION:
                if (!a->dragging) break;
                dtv_app_mouse(a, &c, DTV_MOUSE_MOVE, (int)(e.motion.x * sx), (int)(e.motion.y * sy), 0);
                dirty = 1;
                break;
            case SDL_MOUSEWHEEL: {
                const int notches = e.wheel.direction == SDL_MOUSEWHEEL_FLIPPED ? -e.wheel.y : e.wheel.y;
                int mx, my;
#if SDL_VERSION_ATLEAST(2, 26, 0)
                mx = e.wheel.mouseX;
                my = e.wheel.mouseY;
#else
                SDL_GetMouseState(&mx, &my);
#endif
                dtv_app_mouse(a, &c, DTV_MOUSE_WHEEL, (int)(mx * sx), (int)(my * sy), notches);
                dirty = 1;
                break;
            }
            default: break;
            }
        }
        if (quit) break;
        const Uint64 t = SDL_GetPerformanceCounter();
        double dt = (double)(t - last) / freq;
        last = t;
        if (dt > 0.25) dt = 0.25; /* after a what-if re-run or a stall: no jump */
        if (a->playing) {
            dtv_app_tick(a, dt);
            dirty = 1;
        }
        if (dirty || max_frames > 0) {
            dtv_app_render_window(a, &c);
            SDL_RenderPresent(c.r);
            a->frames++;
            dirty = 0;
        }
        if (max_frames > 0 && a->frames >= max_frames) break;
        /* about 60 frames a second at most (the dummy driver has no vsync) */
        const double spent = (double)(SDL_GetPerformanceCounter() - frame_start) / freq;
        if ((a->playing || max_frames > 0) && spent < 0.016) SDL_Delay((Uint32)((0.016 - spent) * 1000));
    }
    dtv_canvas_free(&c);
    return DT_OK;
}
