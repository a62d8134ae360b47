/* check_viz_app.c: the viewer's interactive state (viz/interactive.c)
 * without a display: keys, mouse, playback, single step, what-if re-runs
 * of a simulated trace; and the real SDL loop under SDL_VIDEODRIVER=dummy
 * for a few frames (DTV_MAX_FRAMES), fed with keys through SDL's queue.
 *
 * The trace is simulated in-process once (tiny model, p = 2, m = 4,
 * 3 steps, roofline costs) into a temporary file that main removes. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtv_app.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "testutil.h"

static char g_trace[64] = "/tmp/check_viz_app_XXXXXX";

static void make_trace(void)
{
    const int fd = mkstemp(g_trace);
    if (fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    close(fd);
    dts_scenario *sc = malloc(sizeof *sc);
    dts_scenario_default(sc);
    sc->p = 2;
    sc->m = 4;
    sc->steps = 3;
    dts_summary sum;
    dts_run_opts o;
    memset(&o, 0, sizeof o);
    o.trace_path = g_trace;
    if (dts_scenario_check(sc) != DT_OK || dts_scenario_set_cost(sc, NULL) != DT_OK || dts_run(sc, &o, &sum) != DT_OK) {
        fprintf(stderr, "check_viz_app: simulating the trace: %s\n", dt_last_error());
        exit(1);
    }
    dts_summary_free(&sum);
    free(sc);
}

static void open_app(dtv_app *a, int panes)
{
    const char *paths[2] = {g_trace, g_trace};
    ck_dt(dtv_app_open(a, paths, panes));
}

static int64_t config_int(const dtv_trace *t, const char *key)
{
    ck_assert_ptr_nonnull(t->config_json);
    json_t *o = json_loads(t->config_json, 0, NULL);
    ck_assert_ptr_nonnull(o);
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(v != NULL, "config has no %s", key);
    int64_t r = json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
    if (json_is_string(v)) r = -2;
    json_decref(o);
    return r;
}

static const char *config_str(const dtv_trace *t, const char *key, char *buf, size_t n)
{
    json_t *o = json_loads(t->config_json, 0, NULL);
    ck_assert_ptr_nonnull(o);
    const json_t *v = json_object_get(o, key);
    snprintf(buf, n, "%s", json_is_string(v) ? json_string_value(v) : "?");
    json_decref(o);
    return buf;
}

static size_t count_named(const dtv_trace *t, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n_ev; i++)
        if (t->ev[i].ph == DT_TRACE_COMPLETE && !strcmp(t->ev[i].name, name)) n++;
    return n;
}

/* The end of step k: the latest end of a span with iter k (not evaluation). */
static int64_t step_end(const dtv_trace *t, int64_t k)
{
    int64_t e = INT64_MIN;
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *ev = &t->ev[i];
        if (ev->ph == DT_TRACE_COMPLETE && ev->iter == k && dtv_kind_of(ev) != DTV_EVAL && ev->ts_ns + ev->dur_ns > e)
            e = ev->ts_ns + ev->dur_ns;
    }
    return e;
}

START_TEST(test_views)
{
    dtv_app a;
    open_app(&a, 1);
    ck_assert_int_eq(a.view[0].id, DTV_VIEW_TIMELINE);
    ck_assert_int_eq(dtv_app_key(&a, SDLK_2, 0), 0);
    ck_assert_int_eq(a.view[0].id, DTV_VIEW_RING);
    dtv_app_key(&a, SDLK_3, 0);
    ck_assert_int_eq(a.view[0].id, DTV_VIEW_SCALE);
    dtv_app_key(&a, SDLK_4, 0);
    ck_assert_int_eq(a.view[0].id, DTV_VIEW_MEMORY);
    dtv_app_key(&a, SDLK_5, 0);
    ck_assert_int_eq(a.view[0].id, DTV_VIEW_BREAKDOWN);
    dtv_app_key(&a, SDLK_6, 0);
    ck_assert_int_eq(a.view[0].id, DTV_VIEW_CP);
    dtv_app_key(&a, SDLK_1, 0);
    ck_assert_int_eq(a.view[0].id, DTV_VIEW_TIMELINE);
    ck_assert(a.view[0].bd_scale_ns == 0); /* one pane: its own scale */
    dtv_app_close(&a);
    /* two panes: the breakdowns to one scale, the longer step's */
    open_app(&a, 2);
    ck_assert_int_gt(a.tr[0].n_breakdown, 0);
    double longest = 0;
    for (int i = 0; i < 2; i++)
        for (int r = 0; r < a.tr[i].n_breakdown; r++) longest = fmax(longest, a.tr[i].breakdown[r].step_ns);
    ck_assert(longest > 0 && a.view[0].bd_scale_ns == longest && a.view[1].bd_scale_ns == longest);
    /* help toggles; Escape closes it first, then quits; q quits */
    dtv_app_key(&a, SDLK_h, 0);
    ck_assert_int_eq(a.help, 1);
    ck_assert_int_eq(dtv_app_key(&a, SDLK_ESCAPE, 0), 0);
    ck_assert_int_eq(a.help, 0);
    ck_assert_int_eq(dtv_app_key(&a, SDLK_ESCAPE, 0), 1);
    ck_assert_int_eq(dtv_app_key(&a, SDLK_q, 0), 1);
    /* every key is in the help */
    int n = 0;
    for (const char *const *l = dtv_app_help_lines(); *l; l++) n++;
    ck_assert_int_ge(n, 15);
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_play_tick_speed)
{
    dtv_app a;
    open_app(&a, 1);
    const dtv_trace *t = &a.tr[0];
    const int64_t full = t->t_max - t->t_min;
    ck_assert(a.view[0].now == INT64_MAX);
    dtv_app_tick(&a, 1.0); /* paused: nothing */
    ck_assert(a.view[0].now == INT64_MAX);
    dtv_app_key(&a, SDLK_SPACE, 0);
    ck_assert_int_eq(a.playing, 1);
    ck_assert(a.view[0].now == t->t_min);
    dtv_app_tick(&a, 1.0); /* 1 s of 20 */
    const int64_t d1 = a.view[0].now - t->t_min;
    ck_assert_msg(llabs(d1 - full / 20) <= 1, "advanced %lld, expected %lld", (long long)d1, (long long)(full / 20));
    dtv_app_key(&a, SDLK_EQUALS, KMOD_SHIFT); /* '+' */
    ck_assert(a.speed == 2.0);
    int64_t before = a.view[0].now;
    dtv_app_tick(&a, 1.0);
    ck_assert(llabs(a.view[0].now - before - full / 10) <= 1);
    dtv_app_key(&a, SDLK_MINUS, 0);
    dtv_app_key(&a, SDLK_MINUS, 0);
    ck_assert(a.speed == 0.5);
    dtv_app_key(&a, SDLK_SPACE, 0); /* pause */
    ck_assert_int_eq(a.playing, 0);
    before = a.view[0].now;
    dtv_app_tick(&a, 1.0);
    ck_assert(a.view[0].now == before);
    /* scrub: 5% of the visible window */
    const int64_t span = a.view[0].t1 - a.view[0].t0;
    dtv_app_key(&a, SDLK_RIGHT, 0);
    ck_assert(a.view[0].now == before + span / 20);
    dtv_app_key(&a, SDLK_LEFT, 0);
    ck_assert(a.view[0].now == before);
    /* playing to the end stops there */
    dtv_app_key(&a, SDLK_SPACE, 0);
    for (int i = 0; i < 100 && a.playing; i++) dtv_app_tick(&a, 1.0);
    ck_assert_int_eq(a.playing, 0);
    ck_assert(a.view[0].now == t->t_max);
    /* space again: from the start */
    dtv_app_key(&a, SDLK_SPACE, 0);
    ck_assert(a.view[0].now == t->t_min);
    /* reset */
    dtv_app_key(&a, SDLK_r, 0);
    ck_assert(a.view[0].now == INT64_MAX && a.playing == 0 && a.speed == 1.0);
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_single_step)
{
    dtv_app a;
    open_app(&a, 1);
    const dtv_trace *t = &a.tr[0];
    ck_assert_int_ge(t->n_steps, 3);
    for (int64_t k = 0; k < 3; k++) {
        dtv_app_key(&a, SDLK_PERIOD, 0);
        ck_assert_msg(a.view[0].now == step_end(t, k), "step %lld: now %lld, end %lld", (long long)k,
                      (long long)a.view[0].now, (long long)step_end(t, k));
        ck_assert_int_eq(a.playing, 0);
        ck_assert(a.view[0].now >= a.view[0].t0 && a.view[0].now <= a.view[0].t1);
    }
    /* past the last step: the end of the trace */
    dtv_app_key(&a, SDLK_PERIOD, 0);
    ck_assert(a.view[0].now == t->t_max);
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_zoom_pan)
{
    dtv_app a;
    open_app(&a, 1);
    const dtv_trace *t = &a.tr[0];
    const int64_t full = t->t_max - t->t_min;
    const int64_t c0 = (a.view[0].t0 + a.view[0].t1) / 2;
    dtv_app_key(&a, SDLK_z, 0);
    int64_t span = a.view[0].t1 - a.view[0].t0;
    ck_assert(llabs(span - full / 2) <= 1);
    ck_assert(llabs((a.view[0].t0 + a.view[0].t1) / 2 - c0) <= 1);
    dtv_app_key(&a, SDLK_z, 0);
    span = a.view[0].t1 - a.view[0].t0;
    ck_assert(llabs(span - full / 4) <= 1);
    ck_assert(llabs((a.view[0].t0 + a.view[0].t1) / 2 - c0) <= 1);
    /* pan by a tenth; the window stays inside the trace */
    int64_t t0 = a.view[0].t0;
    dtv_app_key(&a, SDLK_d, 0);
    ck_assert(llabs(a.view[0].t0 - (t0 + span / 10)) <= 1);
    dtv_app_key(&a, SDLK_a, 0);
    ck_assert(llabs(a.view[0].t0 - t0) <= 1);
    for (int i = 0; i < 30; i++) dtv_app_key(&a, SDLK_d, 0);
    ck_assert(a.view[0].t1 <= t->t_max && a.view[0].t1 - a.view[0].t0 == span);
    for (int i = 0; i < 30; i++) dtv_app_key(&a, SDLK_a, 0);
    ck_assert(a.view[0].t0 == t->t_min);
    /* zooming out stops at the whole trace */
    for (int i = 0; i < 5; i++) dtv_app_key(&a, SDLK_x, 0);
    ck_assert(a.view[0].t0 == t->t_min && a.view[0].t1 - a.view[0].t0 == full);
    /* the wheel keeps the time under the pointer in place */
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(1000, 600, &c));
    SDL_Rect r = {0, 0, c.w, c.h - DTV_STATUS_H};
    dtv_timeline_layout L;
    dtv_timeline_layout_of(&c, r, t, &a.view[0], &L);
    const int px = L.x + L.w / 4;
    const double before = a.view[0].t0 + (double)(px - L.x) * (a.view[0].t1 - a.view[0].t0) / L.w;
    dtv_app_mouse(&a, &c, DTV_MOUSE_WHEEL, px, 100, 2);
    span = a.view[0].t1 - a.view[0].t0;
    ck_assert(llabs(span - (int64_t)(full * 0.64)) <= 2);
    const double after = a.view[0].t0 + (double)(px - L.x) * span / L.w;
    ck_assert_msg(fabs(after - before) <= 2, "pointer time %f -> %f", before, after);
    /* a drag of 100 pixels to the left shows later times */
    t0 = a.view[0].t0;
    dtv_app_mouse(&a, &c, DTV_MOUSE_DOWN, 500, 100, 0);
    dtv_app_mouse(&a, &c, DTV_MOUSE_MOVE, 450, 100, 0);
    dtv_app_mouse(&a, &c, DTV_MOUSE_MOVE, 400, 100, 0);
    dtv_app_mouse(&a, &c, DTV_MOUSE_UP, 400, 100, 0);
    ck_assert(llabs(a.view[0].t0 - (t0 + llround(100.0 * span / L.w))) <= 1);
    dtv_app_mouse(&a, &c, DTV_MOUSE_MOVE, 0, 100, 0); /* no button: nothing */
    ck_assert(llabs(a.view[0].t0 - (t0 + llround(100.0 * span / L.w))) <= 1);
    /* rows scroll and stay in range */
    dtv_app_key(&a, SDLK_DOWN, 0);
    ck_assert_int_eq(a.view[0].first_row, 1);
    for (int i = 0; i < 3; i++) dtv_app_key(&a, SDLK_UP, 0);
    ck_assert_int_eq(a.view[0].first_row, 0);
    /* the window's frame draws (status line, help overlay) */
    a.help = 1;
    dtv_app_render_window(&a, &c);
    ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, 2, c.h - 3), DTV_PANEL));
    dtv_canvas_free(&c);
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_two_panes_together)
{
    dtv_app a;
    open_app(&a, 2);
    dtv_app_key(&a, SDLK_z, 0);
    dtv_app_key(&a, SDLK_d, 0);
    dtv_app_key(&a, SDLK_3, 0);
    dtv_app_key(&a, SDLK_SPACE, 0);
    dtv_app_tick(&a, 0.5);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(a.view[i].id, DTV_VIEW_SCALE);
        ck_assert(a.view[i].t0 - a.tr[i].t_min == a.view[0].t0 - a.tr[0].t_min);
        ck_assert(a.view[i].t1 - a.view[i].t0 == a.view[0].t1 - a.view[0].t0);
        ck_assert(a.view[i].now - a.tr[i].t_min == a.view[0].now - a.tr[0].t_min);
    }
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_whatif_micro_batches)
{
    dtv_app a;
    open_app(&a, 1);
    ck_assert_int_eq(config_int(&a.tr[0], "micro_batches"), 4);
    const size_t fwd0 = count_named(&a.tr[0], "forward");
    ck_assert_uint_gt(fwd0, 0);
    ck_assert_int_eq(dtv_app_key(&a, SDLK_m, KMOD_LSHIFT), 0); /* M: x2 */
    ck_assert_msg(!a.status_error, "status: %s", a.status);
    ck_assert_int_eq(config_int(&a.tr[0], "micro_batches"), 8);
    ck_assert_int_eq(config_int(&a.tr[0], "pipeline_model_parallel_size"), 2);
    ck_assert_int_le(config_int(&a.tr[0], "train_iters"), DTV_WHATIF_STEPS);
    ck_assert_str_eq(a.tr[0].tool, "dtsim");
    ck_assert_uint_gt(count_named(&a.tr[0], "forward"), fwd0);
    ck_assert(!isnan(a.step_ns[0]) && a.step_ns[0] > 0);
    ck_assert_msg(strstr(a.whatif, "m=8") && strstr(a.whatif, "step"), "what-if: %s", a.whatif);
    ck_assert_msg(strstr(a.status, "was"), "status: %s", a.status);
    ck_assert(a.view[0].now == INT64_MAX && a.view[0].t0 == a.tr[0].t_min && a.view[0].t1 == a.tr[0].t_max);
    /* m: /2 */
    dtv_app_key(&a, SDLK_m, 0);
    ck_assert_msg(!a.status_error, "status: %s", a.status);
    ck_assert_int_eq(config_int(&a.tr[0], "micro_batches"), 4);
    /* s: the next schedule */
    char b0[32], b1[32];
    config_str(&a.tr[0], "pipeline_schedule", b0, sizeof b0);
    dtv_app_key(&a, SDLK_s, 0);
    ck_assert_msg(!a.status_error, "status: %s", a.status);
    ck_assert_str_ne(config_str(&a.tr[0], "pipeline_schedule", b1, sizeof b1), b0);
    /* b: the bandwidth, cumulative */
    dtv_app_key(&a, SDLK_b, KMOD_SHIFT);
    ck_assert_msg(!a.status_error, "status: %s", a.status);
    ck_assert(a.bw_scale == 2.0);
    ck_assert_int_eq(a.whatif_runs, 4);
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_whatif_invalid_keeps_trace)
{
    dtv_app a;
    open_app(&a, 1);
    const dt_trace_event *ev = a.tr[0].ev;
    const size_t n = a.tr[0].n_ev;
    /* the tiny model has 2 blocks: p = 3 is refused */
    dtv_app_key(&a, SDLK_p, KMOD_SHIFT);
    ck_assert_int_eq(a.status_error, 1);
    ck_assert_msg(strstr(a.status, "pipeline-model-parallel-size") && strstr(a.status, "kept"), "status: %s", a.status);
    ck_assert_ptr_eq(a.tr[0].ev, ev);
    ck_assert_uint_eq(a.tr[0].n_ev, n);
    ck_assert_int_eq(config_int(&a.tr[0], "pipeline_model_parallel_size"), 2);
    ck_assert_ptr_null(strchr(a.status, '\n'));
    /* p: 2 -> 1 is valid */
    dtv_app_key(&a, SDLK_p, 0);
    ck_assert_msg(!a.status_error, "status: %s", a.status);
    ck_assert_int_eq(config_int(&a.tr[0], "pipeline_model_parallel_size"), 1);
    dtv_app_key(&a, SDLK_p, 0); /* below 1 */
    ck_assert_int_eq(a.status_error, 1);
    ck_assert_int_eq(config_int(&a.tr[0], "pipeline_model_parallel_size"), 1);
    /* not a simulated trace: no what-if */
    snprintf(a.tr[0].tool, sizeof a.tr[0].tool, "dtrain");
    ev = a.tr[0].ev;
    dtv_app_key(&a, SDLK_m, KMOD_SHIFT);
    ck_assert_int_eq(a.status_error, 1);
    ck_assert_ptr_eq(a.tr[0].ev, ev);
    dtv_app_close(&a);
}
END_TEST

/* The real loop under the dummy video driver: a few frames, then by itself out. */
START_TEST(test_sdl_loop_dummy)
{
    setenv("SDL_VIDEODRIVER", "dummy", 1);
    setenv("DTV_MAX_FRAMES", "5", 1);
    dtv_app a;
    open_app(&a, 2);
    ck_dt(dtv_app_interactive(&a, 640, 400));
    ck_assert_int_eq(a.frames, 5);
    /* keys through SDL's queue: play, one what-if, quit before the frame limit */
    setenv("DTV_MAX_FRAMES", "1000", 1);
    SDL_Event e;
    const SDL_Keycode keys[] = {SDLK_SPACE, SDLK_z, SDLK_m, SDLK_q};
    for (int i = 0; i < 4; i++) {
        memset(&e, 0, sizeof e);
        e.type = SDL_KEYDOWN;
        e.key.keysym.sym = keys[i];
        e.key.keysym.mod = keys[i] == SDLK_m ? KMOD_LSHIFT : 0;
        ck_assert_int_eq(SDL_PushEvent(&e), 1);
    }
    ck_dt(dtv_app_interactive(&a, 640, 400));
    ck_assert_int_lt(a.frames, 1000);
    ck_assert_int_eq(a.whatif_runs, 1);
    ck_assert_int_eq(config_int(&a.tr[0], "micro_batches"), 8);
    dtv_app_close(&a);
}
END_TEST

int main(void)
{
    make_trace();
    Suite *s = suite_create("viz_app");
    TCase *tc = tcase_create("interactive");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_views);
    tcase_add_test(tc, test_play_tick_speed);
    tcase_add_test(tc, test_single_step);
    tcase_add_test(tc, test_zoom_pan);
    tcase_add_test(tc, test_two_panes_together);
    tcase_add_test(tc, test_whatif_micro_batches);
    tcase_add_test(tc, test_whatif_invalid_keeps_trace);
    tcase_add_test(tc, test_sdl_loop_dummy);
    suite_add_tcase(s, tc);
    const int rc = dt_test_run(s);
    remove(g_trace);
    return rc;
}
