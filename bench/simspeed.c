/* simspeed.c: `dtbench simspeed`, the simulator's own speed.
 *
 *   dtbench simspeed [--steps N]
 *       The engine alone (events per second of a heap under a steady load
 *       of pending events, goal > 10 million) and a 1024-device job:
 *       32 blocks of GPT-2's width 768, 12 heads, T = 1024, byte vocabulary,
 *       on sim/hw/h100-ib.json's figures with the roofline,
 *       p = 16, d = 64, m = 64, 1f1b, ring allreduce at step level; wall
 *       time for 10 steps (goal < 10 s on one core) and events per second.
 *
 * It prints each figure and its ratio to the goal. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../programs/args.h"
#include "dtbench.h"
#include "dtrain.h"
#include "dts_engine.h"
#include "dts_run.h"
#include "dts_scenario.h"

/* snprintf into an array, failing the benchmark instead of truncating a path */
#define FMT(buf, ...)                                                                              \
    do {                                                                                           \
        int n_ = snprintf((buf), sizeof(buf), __VA_ARGS__);                                        \
        if (n_ < 0 || (size_t)n_ >= sizeof(buf)) {                                                 \
            fprintf(stderr, "dtbench: a path or command is longer than %zu bytes\n", sizeof(buf)); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- simspeed ----------------------------------------------------------- */

typedef struct spin {
    dts_engine *e;
    uint64_t x;
    int64_t left;
} spin;

/* each event schedules one more at a pseudo-random later time: a steady
 * queue of `pending` events, as a large simulation keeps */
static void spin_fn(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)a;
    (void)b;
    spin *s = ctx;
    if (s->left-- <= 0) return;
    s->x = s->x * 6364136223846793005ull + 1442695040888963407ull;
    dts_engine_after(e, (int64_t)(s->x >> 50), spin_fn, s, 0, 0);
}

int dt_bench_simspeed(int argc, char **argv)
{
    int steps = 10, help = 0, pending = 4096;
    dt_arg args[] = {
        {"--steps", DT_ARG_INT, &steps, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1000, NULL, NULL,
         "steps of the 1024-device job", NULL, 0},
        {"--pending", DT_ARG_INT, &pending, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1 << 24, NULL, NULL,
         "engine test: events kept in the queue", NULL, 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    if (dt_args_parse("dtbench simspeed", args, n_args, argc, argv) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, "dtbench simspeed [--steps N]", args, n_args);
        return 0;
    }
    /* the engine alone */
    dts_engine *e = NULL;
    if (dts_engine_create(&e) != DT_OK) return 1;
    spin s = {.e = e, .x = 42, .left = 20000000};
    for (int i = 0; i < pending; i++) dts_engine_at(e, i, spin_fn, &s, 0, 0);
    double t0 = now_s();
    if (dts_engine_run(e) != DT_OK) return 1;
    double dt = now_s() - t0;
    const double eps = (double)dts_engine_events(e) / dt;
    printf("engine: %llu events with %d pending in %.3f s: %.1f million events/s (goal > 10: ratio %.2f)\n",
           (unsigned long long)dts_engine_events(e), pending, dt, eps * 1e-6, eps / 1e7);
    dts_engine_free(e);
    /* the 1024-device job */
    dts_scenario sc;
    dts_scenario_default(&sc);
    char hw[PATH_MAX];
    FMT(hw, "%s/sim/hw/h100-ib.json", getenv("DT_SRCDIR") ? getenv("DT_SRCDIR") : DT_SRCDIR_DEFAULT);
    const char *cfg_fmt =
        "{\"model\":\"custom\",\"num_layers\":32,\"hidden_size\":768,\"num_attention_heads\":12,"
        "\"max_position_embeddings\":1024,\"seq_length\":1024,\"micro_batch_size\":1,\"micro_batches\":64,"
        "\"pipeline_model_parallel_size\":16,\"data_parallel_size\":64,\"pipeline_schedule\":\"1f1b\","
        "\"allreduce\":\"ring\",\"allreduce_chunk_bytes\":0,\"train_iters\":%d,\"hardware\":\"%s\"}";
    char cfg[1024];
    FMT(cfg, cfg_fmt, steps, hw);
    if (dts_scenario_from_config(&sc, cfg, "simspeed") != DT_OK || dts_scenario_set_cost(&sc, NULL) != DT_OK) {
        fprintf(stderr, "dtbench simspeed: %s\n", dt_last_error());
        return 1;
    }
    dts_summary sum;
    t0 = now_s();
    if (dts_run(&sc, NULL, &sum) != DT_OK) {
        fprintf(stderr, "dtbench simspeed: %s\n", dt_last_error());
        return 1;
    }
    dt = now_s() - t0;
    printf("job: %s, %d layers, t=%d p=%d d=%d (%d devices), m=%d, %s, %d steps on %s\n", sc.model_name,
           sc.model.num_layers, sc.t, sc.p, sc.d, dts_scenario_world(&sc), sc.m, dt_sched_kind_name(sc.schedule), steps,
           sc.hw.name);
    printf("  simulated step %.2f ms, bubble stage 0 %.4f (formula %.4f)\n", sum.step_ns * 1e-6, sum.bubble_fb[0],
           sum.bubble_formula);
    printf("  %llu events in %.3f s: %.1f million events/s; wall %.2f s (goal < 10 s: ratio %.2f)\n",
           (unsigned long long)sum.events, dt, (double)sum.events / dt * 1e-6, dt, dt / 10.0);
    dts_summary_free(&sum);
    return 0;
}
