/* check_viz_ring.c: the viewer's ring view (viz/view_ring.c) on hand-made
 * traces with known answers, rendered headless and probed pixel by pixel:
 *   - a 4-rank ring, S = 4000 bytes per rank (one bucket launch), steps of
 *     10 ms: reduce-scatter 0..2 at [10, 40) ms, all-gather 0..2 at
 *     [40, 70) ms, each sending 1000 bytes to rank r+1. Inside a step each
 *     rank's chunk box sits where dtv_ring_chunk_pos says on the lane
 *     r -> r+1, in the phase's colour; the step is numbered within its
 *     phase ("step 2 of 3"), also when the steps are numbered over the
 *     whole plan as dtsim does; the bytes by the end are 6000 on each link
 *     r -> r+1 and none elsewhere: 2(n-1)/n x S;
 *   - S without bucket launches, from the steps' sizes;
 *   - receive-only steps (peer -1) and the placeholders dtsim writes;
 *   - a parameter server: the staleness histogram (so far and at the end),
 *     its mean and max, and the bars' heights on the picture;
 *   - a trace with neither: the view says so instead of drawing nothing. */
#include <string.h>

#include "dtv_view.h"
#include "testutil.h"

#define MS 1000000LL

typedef struct evbuf {
    dt_trace_event *ev;
    size_t n, cap;
} evbuf;

static dt_trace_event *push(evbuf *b, char ph, const char *name, const char *cat, int pid, int tid, int64_t ts,
                            int64_t dur)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->ev = realloc(b->ev, b->cap * sizeof *b->ev);
        ck_assert_ptr_nonnull(b->ev);
    }
    dt_trace_event *e = &b->ev[b->n++];
    dt_trace_event_init(e, ph, name, cat, pid, tid, ts, dur);
    return e;
}

static void step(evbuf *b, const char *name, int pid, int64_t iter, int64_t t0, int64_t t1, int64_t bytes, int st,
                 int peer)
{
    dt_trace_event *e = push(b, DT_TRACE_COMPLETE, name, "comm", pid, DT_LANE_COMM, t0, t1 - t0);
    e->iter = iter;
    e->bytes = bytes;
    ck_dt(dt_trace_event_add_arg(e, "step", st));
    ck_dt(dt_trace_event_add_arg(e, "peer", peer));
}

enum { N = 4, S = 4000 };

/* The 4-rank ring above; `plan_numbering`: all-gather steps numbered 3..5
 * (dtsim); `buckets`: with the bucket launch events. Two iterations, the
 * second 100 ms later. */
static void ring_trace(dtv_trace *t, int plan_numbering, int buckets, const char *config)
{
    evbuf b = {0};
    for (int it = 0; it < 2; it++) {
        const int64_t o = it * 100 * MS;
        for (int r = 0; r < N; r++) {
            dt_trace_event *f = push(&b, DT_TRACE_COMPLETE, "backward", "compute", r, DT_LANE_COMPUTE, o, 10 * MS);
            f->iter = it;
            if (buckets) {
                dt_trace_event *e =
                    push(&b, DT_TRACE_INSTANT, "bucket launch", "comm", r, DT_LANE_COMM, o + 10 * MS, 0);
                e->iter = it;
                e->bytes = S;
            }
            for (int k = 0; k < N - 1; k++)
                step(&b, "reduce-scatter", r, it, o + (10 + 10 * k) * MS, o + (20 + 10 * k) * MS, S / N, k,
                     (r + 1) % N);
            for (int k = 0; k < N - 1; k++)
                step(&b, "all-gather", r, it, o + (40 + 10 * k) * MS, o + (50 + 10 * k) * MS, S / N,
                     plan_numbering ? N - 1 + k : k, (r + 1) % N);
        }
    }
    ck_dt(dtv_trace_from_events(b.ev, b.n, "ring", "dtsim", config, t));
}

static void render(dtv_canvas *c, const dtv_trace *t, int64_t now, SDL_Rect area)
{
    dtv_view v = {.id = DTV_VIEW_RING};
    dtv_view_all(&v, t);
    v.now = now;
    dtv_clear(c, DTV_BG);
    dtv_draw_view(c, area, t, &v);
}

static void ck_color(const dtv_canvas *c, int x, int y, SDL_Color want, const char *what)
{
    const SDL_Color got = dtv_canvas_pixel(c, x, y);
    ck_assert_msg(dtv_color_eq(got, want), "%s at (%d, %d): got %d,%d,%d, expected %d,%d,%d", what, x, y, got.r, got.g,
                  got.b, want.r, want.g, want.b);
}

START_TEST(test_ring_chunks_on_links)
{
    dtv_trace t;
    ring_trace(&t, 0, 1, "{\"allreduce\":\"ring\",\"data_parallel_size\":4}");
    ck_assert(t.has_ring);
    ck_assert_int_eq(t.coll->algo, DTV_ALGO_RING);
    ck_assert_int_eq(t.coll->n, N);
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(1400, 800, &c));
    const SDL_Rect area = {0, 0, 1400, 800};
    /* iteration 1, reduce-scatter step 1 (the second), at 25% and 75% of it; then all-gather step 2 at 50% */
    const struct {
        int64_t now;
        double frac;
        int name, step;
    } cases[] = {{100 * MS + 22500000LL, 0.25, DTV_STEP_RS, 1},
                 {100 * MS + 27500000LL, 0.75, DTV_STEP_RS, 1},
                 {100 * MS + 65 * MS, 0.5, DTV_STEP_AG, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        render(&c, &t, cases[k].now, area);
        for (int r = 0; r < N; r++) {
            dtv_ring_state s;
            dtv_ring_state_of(&t, r, cases[k].now, &s);
            ck_assert(s.active);
            ck_assert_int_eq(s.iter, 1);
            ck_assert_int_eq(s.peer, (r + 1) % N);
            ck_assert_int_eq(s.step_name, cases[k].name);
            ck_assert_int_eq(s.step, cases[k].step);
            ck_assert_int_eq(s.steps, N - 1);
            ck_assert(dt_test_close(s.frac, cases[k].frac, 1e-9, 0));
            int x, y;
            dtv_ring_chunk_pos(area, N, r, (r + 1) % N, cases[k].frac, &x, &y);
            ck_color(&c, x, y, dtv_kind_color(cases[k].name == DTV_STEP_RS ? DTV_RS : DTV_AG), "chunk box");
            /* the box is small: a quarter of the lane ahead (not yet travelled, so not coloured) is not the box */
            int x2, y2;
            dtv_ring_chunk_pos(area, N, r, (r + 1) % N, cases[k].frac + 0.25, &x2, &y2);
            ck_assert_msg(abs(x2 - x) + abs(y2 - y) > 20, "lane too short: (%d,%d) (%d,%d)", x, y, x2, y2);
            const SDL_Color ahead = dtv_canvas_pixel(&c, x2, y2);
            ck_assert_msg(!dtv_color_eq(ahead, dtv_kind_color(DTV_RS)) && !dtv_color_eq(ahead, dtv_kind_color(DTV_AG)),
                          "a quarter of the lane further on (%d, %d) is drawn as a box", x2, y2);
        }
        /* each rank sits on the circle: its disc is drawn in the phase's colour (it is inside a step) */
        for (int r = 0; r < N; r++) {
            int x, y;
            dtv_ring_point(area, N, r, &x, &y);
            ck_color(&c, x, y, dtv_kind_color(cases[k].name == DTV_STEP_RS ? DTV_RS : DTV_AG), "rank's node");
        }
    }
    /* the same at 900x600 inside an offset area */
    dtv_canvas_free(&c);
    ck_dt(dtv_canvas_headless(900, 600, &c));
    const SDL_Rect a2 = {0, 30, 900, 570};
    render(&c, &t, 100 * MS + 22500000LL, a2);
    for (int r = 0; r < N; r++) {
        int x, y;
        dtv_ring_chunk_pos(a2, N, r, (r + 1) % N, 0.25, &x, &y);
        ck_assert(y >= a2.y && y < a2.y + a2.h);
        ck_color(&c, x, y, dtv_kind_color(DTV_RS), "chunk box at 900x600");
    }
    dtv_canvas_free(&c);
    dtv_trace_free(&t);
}
END_TEST

START_TEST(test_ring_bytes)
{
    for (int variant = 0; variant < 3; variant++) {
        /* 0: bucket launches and a config; 1: neither (S from the steps, the algorithm from the peers);
         * 2: dtsim's numbering over the whole plan */
        dtv_trace t;
        ring_trace(&t, variant == 2, variant != 1, variant == 1 ? NULL : "{\"allreduce\":\"ring\"}");
        ck_assert_int_eq(t.coll->algo, DTV_ALGO_RING);
        ck_assert_int_eq(t.coll->buffer_from_buckets, variant != 1);
        ck_assert_int_eq(t.coll->step_count[DTV_STEP_AG], N - 1);
        for (int r = 0; r < N; r++) {
            dtv_ring_state s;
            /* the end: the last iteration's final state */
            dtv_ring_state_of(&t, r, INT64_MAX, &s);
            ck_assert(!s.active);
            ck_assert_int_eq(s.iter, 1);
            ck_assert_int_eq(s.step_name, DTV_STEP_AG);
            ck_assert_int_eq(s.step, N - 2);
            ck_assert(dt_test_close(s.buffer, S, 0, 0));
            ck_assert_int_eq(s.sent, 2 * (N - 1) * S / N); /* 6000 = 1.5 x S */
            ck_assert(dt_test_close((double)s.sent / s.buffer, 2.0 * (N - 1) / N, 1e-12, 0));
            for (int p = 0; p < N; p++)
                ck_assert_int_eq(dtv_ring_link_bytes(&t, r, INT64_MAX, p), p == (r + 1) % N ? 2 * (N - 1) * S / N : 0);
            /* inside reduce-scatter step 2 of iteration 0: steps 0 and 1 have ended */
            dtv_ring_state_of(&t, r, 35 * MS, &s);
            ck_assert(s.active);
            ck_assert_int_eq(s.iter, 0);
            ck_assert_int_eq(s.sent, 2 * S / N);
            ck_assert_int_eq(dtv_ring_link_bytes(&t, r, 35 * MS, (r + 1) % N), 2 * S / N);
            /* between the iterations: iteration 0 complete */
            dtv_ring_state_of(&t, r, 90 * MS, &s);
            ck_assert(!s.active);
            ck_assert_int_eq(s.iter, 0);
            ck_assert_int_eq(s.sent, 2 * (N - 1) * S / N);
            /* in iteration 1's first step: nothing sent yet this iteration */
            dtv_ring_state_of(&t, r, 115 * MS, &s);
            ck_assert_int_eq(s.iter, 1);
            ck_assert_int_eq(s.sent, 0);
            /* before any step */
            dtv_ring_state_of(&t, r, 5 * MS, &s);
            ck_assert_int_eq(s.span, -1);
        }
        dtv_trace_free(&t);
    }
}
END_TEST

/* Receive-only steps (peer -1) draw no box; dtsim's placeholders (no
 * bytes, no duration, no peer) are not steps; tree names and peers. */
START_TEST(test_tree_and_receive_only)
{
    evbuf b = {0};
    for (int r = 0; r < N; r++) {
        step(&b, "reduce-scatter", r, 0, 0, 0, 0, 0, -1); /* placeholder of the unused fold */
        step(&b, "reduce-scatter", r, 0, 10 * MS, 20 * MS, S / 2, 1, r ^ 2);
        step(&b, "reduce-scatter", r, 0, 20 * MS, 30 * MS, S / 4, 2, r ^ 1);
        step(&b, "all-gather", r, 0, 30 * MS, 40 * MS, S / 4, 3, r ^ 1);
        step(&b, "all-gather", r, 0, 40 * MS, 50 * MS, S / 2, 4, r ^ 2);
    }
    step(&b, "broadcast", 0, 0, 50 * MS, 60 * MS, 0, 0, -1); /* a receive */
    dtv_trace t;
    ck_dt(dtv_trace_from_events(b.ev, b.n, "tree", "dtsim", NULL, &t));
    ck_assert_int_eq(t.coll->algo, DTV_ALGO_TREE);
    ck_assert_int_eq(t.coll->step_count[DTV_STEP_RS], 2);
    ck_assert_int_eq(t.coll->step_base[DTV_STEP_RS], 1);
    dtv_ring_state s;
    dtv_ring_state_of(&t, 1, 15 * MS, &s);
    ck_assert_int_eq(s.step, 0);
    ck_assert_int_eq(s.peer, 3);
    ck_assert(dt_test_close(s.buffer, S, 0, 0)); /* twice the first halving's */
    dtv_ring_state_of(&t, 0, INT64_MAX, &s);
    ck_assert_int_eq(s.sent, S / 2 + S / 4 + S / 4 + S / 2); /* 2(p-1)/p x S */
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(1400, 800, &c));
    const SDL_Rect area = {0, 0, 1400, 800};
    render(&c, &t, 55 * MS, area); /* rank 0 receives: no box anywhere on its lanes */
    dtv_ring_state_of(&t, 0, 55 * MS, &s);
    ck_assert(s.active);
    ck_assert_int_eq(s.peer, -1);
    for (int to = 1; to < N; to++)
        for (int q = 1; q < 10; q++) {
            int x, y;
            dtv_ring_chunk_pos(area, N, 0, to, q / 10.0, &x, &y);
            const SDL_Color got = dtv_canvas_pixel(&c, x, y);
            ck_assert(!dtv_color_eq(got, dtv_kind_color(DTV_AG)) && !dtv_color_eq(got, dtv_kind_color(DTV_RS)));
        }
    /* the exchange's two ways do not meet: boxes 0 -> 2 and 2 -> 0 at mid-step are apart */
    int x0, y0, x1, y1;
    dtv_ring_chunk_pos(area, N, 0, 2, 0.5, &x0, &y0);
    dtv_ring_chunk_pos(area, N, 2, 0, 0.5, &x1, &y1);
    ck_assert(abs(x0 - x1) + abs(y0 - y1) > 30);
    render(&c, &t, 15 * MS, area);
    ck_color(&c, x0, y0, dtv_kind_color(DTV_RS), "0 -> 2");
    ck_color(&c, x1, y1, dtv_kind_color(DTV_RS), "2 -> 0");
    dtv_canvas_free(&c);
    dtv_trace_free(&t);
}
END_TEST

/* Three workers and a server; staleness of the pushes: 0 x2, 1 x4, 2 x1, 20 (15+) x1. */
START_TEST(test_ps_histogram)
{
    evbuf b = {0};
    dt_trace_event *m = push(&b, DT_TRACE_METADATA, "process_name", "meta", 3, 0, 0, 0);
    snprintf(m->label, sizeof m->label, "dtsim rank 3 (parameter server 0)");
    const int stale[8] = {0, 1, 1, 0, 1, 2, 1, 20};
    for (int i = 0; i < 8; i++) {
        const int w = i % 3;
        dt_trace_event *e =
            push(&b, DT_TRACE_COMPLETE, "push/pull", "comm", w, DT_LANE_COMM, (10 + 10 * i) * MS, 8 * MS);
        e->iter = i / 3;
        e->bytes = S;
        ck_dt(dt_trace_event_add_arg(e, "staleness", stale[i]));
        ck_dt(dt_trace_event_add_arg(e, "version", i + 1));
        dt_trace_event *a = push(&b, DT_TRACE_COMPLETE, "apply", "optim", 3, DT_LANE_OPTIM, (14 + 10 * i) * MS, 2 * MS);
        a->iter = i;
        ck_dt(dt_trace_event_add_arg(a, "worker", w));
    }
    dtv_trace t;
    ck_dt(dtv_trace_from_events(b.ev, b.n, "ps", "dtsim", "{\"allreduce\":\"ps-async\"}", &t));
    ck_assert(!t.has_ring);
    ck_assert_int_eq(t.pushes, 8);
    ck_assert_int_eq(t.coll->n_workers, 3);
    ck_assert_int_eq(t.coll->n_servers, 1);
    int64_t h[DTV_N_STALE], n, sum, mx;
    dtv_coll_hist_at(&t, INT64_MAX, h, &n, &sum, &mx);
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(sum, 26);
    ck_assert_int_eq(mx, 20);
    for (int k = 0; k < DTV_N_STALE; k++) ck_assert_int_eq(h[k], t.stale_hist[k]);
    ck_assert_int_eq(h[0], 2);
    ck_assert_int_eq(h[1], 4);
    ck_assert_int_eq(h[15], 1);
    /* so far: the pushes ended by 40 ms are the first three (ends 18, 28, 38) */
    dtv_coll_hist_at(&t, 40 * MS, h, &n, &sum, &mx);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(h[0], 1);
    ck_assert_int_eq(h[1], 2);
    ck_assert_int_eq(mx, 1);
    /* the bars on the picture */
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(1400, 800, &c));
    const SDL_Rect area = {0, 0, 1400, 800};
    render(&c, &t, INT64_MAX, area);
    dtv_coll_hist_at(&t, INT64_MAX, h, NULL, NULL, NULL);
    SDL_Rect P;
    dtv_ps_hist_plot(area, &P);
    int height[DTV_N_STALE];
    for (int k = 0; k < DTV_N_STALE; k++) { /* bar pixels (fill or outline) up from the axis in its middle column */
        const int x = P.x + (2 * k + 1) * P.w / (2 * DTV_N_STALE);
        int y = P.y + P.h - 1;
        while (y >= P.y && (dtv_color_eq(dtv_canvas_pixel(&c, x, y), dtv_kind_color(DTV_PUSHPULL)) ||
                            dtv_color_eq(dtv_canvas_pixel(&c, x, y), DTV_DIM)))
            y--;
        height[k] = P.y + P.h - 1 - y;
        ck_assert_msg(abs(height[k] - dtv_ps_bar_height(area, h, k)) <= 2, "bar %d: %d px, expected %d", k, height[k],
                      dtv_ps_bar_height(area, h, k));
    }
    ck_assert(height[1] > 20);
    ck_assert_msg(abs(height[1] - 2 * height[0]) <= 3, "bar 1 (%d px) should be twice bar 0 (%d px)", height[1],
                  height[0]);
    ck_assert_msg(abs(height[1] - 4 * height[2]) <= 4, "bar 1 (%d px) vs bar 2 (%d px)", height[1], height[2]);
    ck_assert_int_eq(height[3], 0);
    ck_assert_msg(abs(height[15] - height[2]) <= 1, "15+ holds one push like bar 2");
    /* worker 1's first push/pull spans [20, 28) ms: at 21 ms, 1/8 in, the push is a quarter of the way to the
     * server, which sits at the centre of the workers' circle */
    render(&c, &t, 21 * MS, area);
    int wx[3], wy[3];
    for (int i = 0; i < 3; i++) dtv_ring_point(area, 3, i, &wx[i], &wy[i]);
    const double cx = (wx[0] + wx[1] + wx[2]) / 3.0, cy = (wy[0] + wy[1] + wy[2]) / 3.0;
    ck_color(&c, (int)lround(wx[1] + 0.25 * (cx - wx[1])), (int)lround(wy[1] + 0.25 * (cy - wy[1])),
             dtv_kind_color(DTV_PUSHPULL), "push box");
    /* at 27 ms (7/8): the pull, three quarters of the way back */
    render(&c, &t, 27 * MS, area);
    ck_color(&c, (int)lround(cx + 0.75 * (wx[1] - cx)), (int)lround(cy + 0.75 * (wy[1] - cy)),
             dtv_kind_color(DTV_OPTIM), "pull box");
    dtv_canvas_free(&c);
    dtv_trace_free(&t);
}
END_TEST

START_TEST(test_neither)
{
    evbuf b = {0};
    for (int r = 0; r < 2; r++)
        push(&b, DT_TRACE_COMPLETE, "forward", "compute", r, DT_LANE_COMPUTE, 0, 10 * MS)->iter = 0;
    dtv_trace t;
    ck_dt(dtv_trace_from_events(b.ev, b.n, "plain", "dtrain", NULL, &t));
    ck_assert_int_eq(t.coll->algo, DTV_ALGO_NONE);
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(900, 600, &c));
    const SDL_Rect area = {0, 0, 900, 600};
    render(&c, &t, INT64_MAX, area);
    int ink = 0; /* the message is written across the middle third */
    for (int y = 200; y < 300; y++)
        for (int x = 100; x < 800; x += 2) ink += !dtv_color_eq(dtv_canvas_pixel(&c, x, y), DTV_BG);
    ck_assert_msg(ink > 200, "no message drawn (%d pixels)", ink);
    dtv_canvas_free(&c);
    dtv_trace_free(&t);
}
END_TEST

/* Many ranks: the view stays inside its area and draws without labels it cannot fit. */
START_TEST(test_many_ranks)
{
    enum { M = 256 };
    evbuf b = {0};
    for (int r = 0; r < M; r++)
        for (int k = 0; k < 2 * (M - 1); k++)
            step(&b, k < M - 1 ? "reduce-scatter" : "all-gather", r, 0, (10 + k) * MS, (11 + k) * MS, 16,
                 k < M - 1 ? k : k - (M - 1), (r + 1) % M);
    dtv_trace t;
    ck_dt(dtv_trace_from_events(b.ev, b.n, "big", "dtsim", "{\"allreduce\":\"ring\"}", &t));
    ck_assert_int_eq(t.coll->n, M);
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(900, 600, &c));
    const SDL_Rect area = {0, 100, 900, 400};
    dtv_clear(&c, DTV_BG);
    dtv_view v = {.id = DTV_VIEW_RING};
    dtv_view_all(&v, &t);
    v.now = 300 * MS;
    dtv_draw_view(&c, area, &t, &v);
    for (int x = 0; x < 900; x += 3) { /* nothing outside the area */
        ck_color(&c, x, 99, DTV_BG, "above the area");
        ck_color(&c, x, 500, DTV_BG, "below the area");
    }
    dtv_ring_state s;
    dtv_ring_state_of(&t, 7, INT64_MAX, &s);
    ck_assert_int_eq(s.sent, 2 * (M - 1) * 16);
    dtv_canvas_free(&c);
    dtv_trace_free(&t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("viz_ring");
    TCase *tc = tcase_create("ring");
    tcase_add_test(tc, test_ring_chunks_on_links);
    tcase_add_test(tc, test_ring_bytes);
    tcase_add_test(tc, test_tree_and_receive_only);
    tcase_add_test(tc, test_ps_histogram);
    tcase_add_test(tc, test_neither);
    tcase_add_test(tc, test_many_ranks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(suite()); }
