/* vizbench.c: `dtbench viz`, the viewer's drawing speed.
 *
 *   dtbench viz [--events N] [--frames K]
 *       Simulates in-process a pipeline x data-parallel job (tiny model with
 *       4 blocks, p = 4, d = 4, m = 32, 1f1b, ring allreduce, roofline
 *       costs) with enough steps for about N trace events (default 100000;
 *       the actual count is printed), indexes it as dtviz does
 *       (dtv_trace_from_events) and times the timeline drawn headless at
 *       1400x800 (dtv_canvas_headless: SDL's software renderer), K frames
 *       (default 60) in each of three modes: the playback time sweeping
 *       over the whole trace (as dtviz --frames), fully zoomed out with
 *       everything played, and zoomed in on a window of 1/200 of the trace
 *       moving across it. A frame is clear + dtv_draw_timeline + the
 *       renderer's flush; a first, untimed frame warms the glyph caches
 *       (its time is printed apart). Prints ms/frame (mean and worst) and frames/s per
 *       mode against the goal of 60 frames/s (16.7 ms/frame) as a ratio.
 *
 * Exit status: 0 measured (the verdict is printed, not the exit code), 1 a
 * failure, 2 bad flags. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../programs/args.h"
#include "dtrain.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "dtv_view.h"

int dt_bench_viz(int argc, char **argv);

static double vb_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void vb_scenario(dts_scenario *sc, int64_t steps)
{
    dts_scenario_default(sc);
    snprintf(sc->model_name, sizeof sc->model_name, "custom");
    sc->model.num_layers = 4;
    sc->p = 4;
    sc->d = 4;
    sc->m = 32;
    sc->steps = steps;
    sc->schedule = DT_SCHED_1F1B;
}

/* Simulate `steps` steps with the events kept. */
static dt_status vb_simulate(int64_t steps, dts_summary *s, char **config)
{
    dts_scenario sc;
    vb_scenario(&sc, steps);
    DT_CHECK(dts_scenario_check(&sc));
    DT_CHECK(dts_scenario_set_cost(&sc, NULL));
    dts_run_opts o = {.keep_events = 1};
    DT_CHECK(dts_run(&sc, &o, s));
    if (config) *config = dts_scenario_json(&sc);
    return DT_OK;
}

enum { VB_SWEEP = 0, VB_ALL, VB_ZOOM, VB_MODES };
static const char *const vb_mode_names[VB_MODES] = {"playback sweeping", "zoomed out, all played",
                                                    "zoomed in (1/200), moving"};

int dt_bench_viz(int argc, char **argv)
{
    int events = 100000, frames = 60, help = 0;
    dt_arg args[] = {
        {"--events", DT_ARG_INT, &events, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1000, 50000000, NULL, "N",
         "about how many trace events to simulate (the actual count is printed)", NULL, 0},
        {"--frames", DT_ARG_INT, &frames, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 100000, NULL, "K",
         "frames timed per mode (sweep, zoomed out, zoomed in)", NULL, 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    if (dt_args_parse("dtbench viz", args, n_args, argc, argv) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, "dtbench viz [--events N] [--frames K]", args, n_args);
        return 0;
    }
    /* one step to count the events per step, then enough steps for ~N */
    dts_summary s;
    if (vb_simulate(1, &s, NULL) != DT_OK) {
        fprintf(stderr, "dtbench viz: simulating: %s\n", dt_last_error());
        return 1;
    }
    const size_t per_step = s.n_ev > 0 ? s.n_ev : 1;
    dts_summary_free(&s);
    int64_t steps = ((int64_t)events + (int64_t)per_step / 2) / (int64_t)per_step;
    if (steps < 1) steps = 1;
    char *config = NULL;
    const double ts0 = vb_now_s();
    if (vb_simulate(steps, &s, &config) != DT_OK) {
        fprintf(stderr, "dtbench viz: simulating: %s\n", dt_last_error());
        return 1;
    }
    const double sim_s = vb_now_s() - ts0;
    dt_trace_event *ev = s.ev;
    const size_t n_ev = s.n_ev;
    s.ev = NULL;
    s.n_ev = 0;
    dts_summary_free(&s);
    dtv_trace t;
    const double ti0 = vb_now_s();
    dt_status st = dtv_trace_from_events(ev, n_ev, "vizbench (p=4 d=4 m=32 1f1b)", "dtsim", config, &t);
    free(config);
    if (st != DT_OK) {
        fprintf(stderr, "dtbench viz: %s\n", dt_last_error());
        return 1;
    }
    const double index_s = vb_now_s() - ti0;
    size_t spans = 0;
    for (int r = 0; r < t.n_rows; r++) spans += (size_t)t.rows[r].n;
    printf("trace: p=4 d=4 m=32 1f1b, %lld steps: %zu events (%zu spans on %d rows, %d ranks); simulated in %.2f s, "
           "indexed in %.3f s\n",
           (long long)steps, n_ev, spans, t.n_rows, t.n_ranks, sim_s, index_s);
    dtv_canvas c;
    if (dtv_canvas_headless(1400, 800, &c) != DT_OK) {
        fprintf(stderr, "dtbench viz: %s\n", dt_last_error());
        dtv_trace_free(&t);
        return 1;
    }
    const SDL_Rect area = {0, 0, c.w, c.h};
    const int64_t span = t.t_max - t.t_min > 0 ? t.t_max - t.t_min : 1;
    const double goal_ms = 1000.0 / 60.0;
    double total_ms = 0, worst_all = 0;
    { /* the first frame fills the fonts' glyph caches: reported, not counted */
        dtv_view v;
        dtv_view_all(&v, &t);
        v.id = DTV_VIEW_TIMELINE;
        const double f0 = vb_now_s();
        dtv_clear(&c, DTV_BG);
        dtv_draw_timeline(&c, area, &t, &v);
        SDL_RenderFlush(c.r);
        printf("first frame (cold glyph caches, not counted): %.2f ms\n", 1e3 * (vb_now_s() - f0));
    }
    for (int mode = 0; mode < VB_MODES; mode++) {
        double sum = 0, worst = 0;
        for (int f = 0; f < frames; f++) {
            dtv_view v;
            dtv_view_all(&v, &t);
            v.id = DTV_VIEW_TIMELINE;
            const double frac = frames > 1 ? (double)f / (frames - 1) : 1.0;
            if (mode == VB_SWEEP) {
                v.now = t.t_min + (int64_t)(frac * (double)span);
            } else if (mode == VB_ZOOM) {
                const int64_t w = span / 200 > 0 ? span / 200 : 1;
                v.t0 = t.t_min + (int64_t)(frac * (double)(span - w));
                v.t1 = v.t0 + w;
            }
            const double f0 = vb_now_s();
            dtv_clear(&c, DTV_BG);
            dtv_draw_timeline(&c, area, &t, &v);
            SDL_RenderFlush(c.r);
            const double ms = 1e3 * (vb_now_s() - f0);
            sum += ms;
            if (ms > worst) worst = ms;
        }
        const double mean = sum / frames;
        total_ms += sum;
        if (worst > worst_all) worst_all = worst;
        printf("%-28s %d frames: %.2f ms/frame (worst %.2f), %.1f frames/s (goal 60: ratio %.2f)\n",
               vb_mode_names[mode], frames, mean, worst, 1000.0 / mean, (1000.0 / mean) / 60.0);
    }
    const double mean = total_ms / (VB_MODES * frames);
    printf("all modes: %.2f ms/frame, %.1f frames/s against the goal of 60 frames/s (%.1f ms/frame): ratio %.2f; "
           "worst frame %.2f ms: %s\n",
           mean, 1000.0 / mean, goal_ms, (1000.0 / mean) / 60.0, worst_all,
           worst_all <= goal_ms ? "every frame within the goal" : "some frames slower than the goal");
    dtv_canvas_free(&c);
    dtv_trace_free(&t);
    return 0;
}
