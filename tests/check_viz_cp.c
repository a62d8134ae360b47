/* check_viz_cp.c: the viewer's sequence- and context-parallel pictures
 * (the kinds of viz/trace_model.c) on hand-made traces with known answers:
 *   - the kinds: sequence parallelism's tp all-gather, tp reduce-scatter and
 *     tp layernorm grad allreduce, and the four cp exchanges, each its own
 *     kind with its own name and colour (no two kinds share one), none
 *     "other"; the timeline draws each box in its kind's colour. */
#include <string.h>

#include "dtv_view.h"
#include "testutil.h"

#define MS 1000000LL

static void ck_pixel(const dtv_canvas *cv, int x, int y, SDL_Color want, const char *what)
{
    const SDL_Color got = dtv_canvas_pixel(cv, x, y);
    ck_assert_msg(dtv_color_eq(got, want), "%s at (%d, %d): got %d,%d,%d, expected %d,%d,%d", what, x, y, got.r, got.g,
                  got.b, want.r, want.g, want.b);
}

START_TEST(test_kinds)
{
    static const struct {
        const char *name, *cat;
        dtv_kind kind;
    } cases[] = {{"tp all-gather", "tp", DTV_SP_AG},
                 {"tp reduce-scatter", "tp", DTV_SP_RS},
                 {"tp layernorm grad allreduce", "tp", DTV_SP_LN},
                 {"tp allreduce f", "tp", DTV_TP},
                 {"tp allreduce g", "tp", DTV_TP},
                 {"tp vocab allreduce", "tp", DTV_TP},
                 {"tp vocab gather", "tp", DTV_TP},
                 {"cp ring step", "cp", DTV_CP_RING},
                 {"cp kv all-gather", "cp", DTV_CP_AG},
                 {"cp dkv reduce-scatter", "cp", DTV_CP_RS},
                 {"cp all-to-all", "cp", DTV_CP_A2A},
                 {"all-gather", "comm", DTV_AG}};
    enum { N = sizeof cases / sizeof cases[0] };
    dt_trace_event *ev = calloc(N + 1, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    for (int k = 0; k < N; k++) {
        dt_trace_event_init(&ev[k], DT_TRACE_COMPLETE, cases[k].name, cases[k].cat, 0, DT_LANE_COMM, k * 10 * MS,
                            10 * MS);
        if (cases[k].kind == DTV_CP_RING) { /* a ring step names its step and the block that arrived */
            ck_dt(dt_trace_event_add_arg(&ev[k], "step", 0));
            ck_dt(dt_trace_event_add_arg(&ev[k], "from", 0));
        }
        ck_assert_msg(dtv_kind_of(&ev[k]) == cases[k].kind, "%s: kind %d, expected %d", cases[k].name,
                      dtv_kind_of(&ev[k]), cases[k].kind);
    }
    /* every kind its own name and colour */
    for (int a = 0; a < DTV_N_KINDS; a++)
        for (int b = a + 1; b < DTV_N_KINDS; b++) {
            ck_assert_str_ne(dtv_kind_name((dtv_kind)a), dtv_kind_name((dtv_kind)b));
            ck_assert_msg(!dtv_color_eq(dtv_kind_color((dtv_kind)a), dtv_kind_color((dtv_kind)b)),
                          "kinds %s and %s share a colour", dtv_kind_name((dtv_kind)a), dtv_kind_name((dtv_kind)b));
        }
    /* the timeline: each box in its kind's colour (one compute span for a second row) */
    dt_trace_event_init(&ev[N], DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 0, N * 10 * MS);
    dtv_trace t;
    ck_dt(dtv_trace_from_events(ev, N + 1, "kinds", "dtrain", NULL, &t));
    dtv_canvas cv;
    ck_dt(dtv_canvas_headless(1400, 400, &cv));
    const SDL_Rect area = {0, 0, 1400, 400};
    dtv_view v = {.id = DTV_VIEW_TIMELINE};
    dtv_view_all(&v, &t);
    dtv_clear(&cv, DTV_BG);
    dtv_draw_view(&cv, area, &t, &v);
    dtv_timeline_layout L;
    dtv_timeline_layout_of(&cv, area, &t, &v, &L);
    ck_assert_int_eq(t.rows[1].lane, DT_LANE_COMM);
    for (int k = 0; k < N; k++) {
        const int x = (int)dtv_x_of(&v, L.x, L.w, k * 10 * MS + 5 * MS), y = L.y + L.row_h + L.row_h / 2;
        ck_pixel(&cv, x, y, dtv_kind_color(cases[k].kind), cases[k].name);
    }
    dtv_canvas_free(&cv);
    dtv_trace_free(&t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("viz_cp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_kinds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(suite()); }
