/* check_sim_scenario.c: the simulator's scenarios (sim/dts_scenario.h).
 *
 *   - the defaults are dtrain's (tiny, B 128, T 16, m 1, 2500 steps, 1f1b,
 *     ring, fp32, AdamW) and pass the check;
 *   - dts_scenario_json reads back through dts_scenario_from_config to an
 *     equal scenario, field by field, for the defaults and for a scenario
 *     where every field differs from them (so every field is written and
 *     read);
 *   - dtrain's own config (dt_train_config_json) is read: its batch, its
 *     precision, its recomputation; keys the simulator does not know are
 *     ignored there, refused in a dtsim config file;
 *   - bad values name the source and the key; the batch arithmetic; the
 *     preset-then-sizes rule; null means "not set";
 *   - dts_scenario_check refuses inconsistent layouts with the flag's name;
 *   - stage layers follow the trace convention (-1 embedding, L head);
 *   - the cost table from the roofline, and a missing profile;
 *   - the inline "hardware" object (sim/hw.c's reader): round trip, the
 *     optional sleep_overshoot_ns, its errors named under "hardware";
 *   - what a dtrain header records beyond the scenario (dts_recorded): a
 *     slow rank in the header raises the simulated staleness, the rest is
 *     named in one line, each key is range-checked. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "dt_backend.h"
#include "dt_gpt.h"
#include "dts_cost.h"
#include "dts_hw.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "testutil.h"

static dts_scenario *new_default(void)
{
    dts_scenario *sc = malloc(sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    dts_scenario_default(sc);
    return sc;
}

/* NULL if equal, else the first field that differs (the cost table is not
 * part of a scenario's JSON: only have_cost is compared when asked). */
static const char *scen_diff(const dts_scenario *a, const dts_scenario *b)
{
#define F(field) \
    if (a->field != b->field) return #field
#define S(field) \
    if (strcmp(a->field, b->field) != 0) return #field
    S(model_name);
    F(model.vocab_size);
    F(model.seq_len);
    F(model.num_layers);
    F(model.num_heads);
    F(model.hidden_size);
    F(B);
    F(T);
    F(m);
    F(steps);
    F(t);
    F(p);
    F(d);
    F(schedule);
    F(n_split);
    for (int i = 0; i < DTS_MAX_STAGES; i++)
        if (a->split[i] != b->split[i]) return "split[i]";
    F(exchange);
    S(exchange_name);
    F(num_ps_servers);
    F(zero);
    F(bucket_bytes);
    F(chunk_bytes);
    S(precision);
    F(use_loss_scaling);
    F(scaler.initial_scale);
    F(scaler.growth_factor);
    F(scaler.backoff_factor);
    F(scaler.window);
    F(scaler.hysteresis);
    F(scaler.consecutive_hysteresis);
    F(scaler.min_scale);
    F(scaler.static_scale);
    F(recompute);
    F(recompute_num_layers);
    F(slow_rank);
    F(slow_ns);
    F(optimizer_states);
    S(hw.name);
    S(hw.source);
    F(hw.peak_flops);
    F(hw.mem_bytes_per_s);
    F(hw.efficiency);
    F(hw.kernel_overhead_ns);
    F(hw.sleep_overshoot_ns);
    F(hw.mem_capacity_bytes);
    F(hw.devices_per_node);
    F(hw.intra.alpha_ns);
    F(hw.intra.bytes_per_ns);
    F(hw.inter.alpha_ns);
    F(hw.inter.bytes_per_ns);
    F(seed);
    S(grad_trace);
#undef F
#undef S
    return NULL;
}

/* json of sc read into a default scenario must equal sc */
static void check_round_trip(const dts_scenario *sc)
{
    char *text = dts_scenario_json(sc);
    ck_assert_ptr_nonnull(text);
    dts_scenario *back = new_default();
    ck_dt(dts_scenario_from_config(back, text, "round-trip.json"));
    const char *diff = scen_diff(sc, back);
    ck_assert_msg(diff == NULL, "round trip differs in %s: %s", diff ? diff : "", text);
    /* and the JSON of the copy is the same text */
    char *again = dts_scenario_json(back);
    ck_assert_ptr_nonnull(again);
    ck_assert_str_eq(text, again);
    free(again);
    free(text);
    free(back);
}

/* from_config on a default scenario must fail with st and a message holding want */
static void expect_config_error(const char *json, dt_status st, const char *want)
{
    dts_scenario *sc = new_default();
    dts_scenario *orig = new_default();
    dt_status got = dts_scenario_from_config(sc, json, "run.json");
    ck_assert_msg(got == st, "%s: got %s (%s), expected %s", json, dt_status_str(got), dt_last_error(),
                  dt_status_str(st));
    ck_assert_msg(strstr(dt_last_error(), want) != NULL, "%s: message '%s' lacks '%s'", json, dt_last_error(), want);
    ck_assert_msg(strncmp(dt_last_error(), "run.json: ", 10) == 0 || st == DT_ERR_IO,
                  "message does not name the source: %s", dt_last_error());
    ck_assert_msg(scen_diff(sc, orig) == NULL, "%s: the scenario changed on failure", json);
    free(orig);
    free(sc);
}

/* check on sc must fail naming want */
static void expect_check_error(const dts_scenario *sc, const char *want)
{
    dt_status st = dts_scenario_check(sc);
    ck_assert_msg(st == DT_ERR_INVALID, "check passed, expected an error with '%s'", want);
    ck_assert_msg(strstr(dt_last_error(), want) != NULL, "message '%s' lacks '%s'", dt_last_error(), want);
}

/* dts_cost_to_precision (the cost a bf16 scenario gets from an FP32
 * profile) by hand: C = 8, V = 10, B = 2, T = 4, so
 * a block's GEMMs are 2*12*64*8 = 12288 FLOPs forward and the head's
 * 2*10*8*8 = 1280; at peak_flops 1e9 that is 12288 and 1280 ns, at a bf16
 * rate 4x higher a quarter of it. */
START_TEST(test_cost_to_precision)
{
    const dt_gpt_config cfg = {.vocab_size = 10, .seq_len = 16, .num_layers = 3, .num_heads = 2, .hidden_size = 8};
    const dt_gpt_config *m = &cfg;
    dts_hw hw;
    dts_hw_default(&hw);
    hw.peak_flops = 1e9;
    hw.peak_flops_bf16 = 4e9;
    dts_cost c;
    memset(&c, 0, sizeof c);
    c.n_layer = 3;
    for (int s = 0; s <= 4; s++) c.fwd_ns[s] = 1000000, c.bwd_ns[s] = 2000000, c.bwd_w_ns[s] = 500000;
    c.fwd_ns[4] = 1000; /* the head: its 1280 ns of GEMMs capped at 95% of 1000 */
    snprintf(c.precision, sizeof c.precision, "fp32");
    int changed = -1;
    ck_dt(dts_cost_to_precision(&c, m, 2, 4, &hw, "bf16", &changed));
    ck_assert_int_eq(changed, 1);
    ck_assert_str_eq(c.precision, "bf16");
    ck_assert_int_eq(c.fwd_ns[0], 1000000);                  /* the embedding: no GEMM */
    ck_assert_int_eq(c.fwd_ns[1], 1000000 - 12288 + 3072);    /* 990784 */
    ck_assert_int_eq(c.bwd_ns[2], 2000000 - 24576 + 6144);    /* 1981568 */
    ck_assert_int_eq(c.bwd_w_ns[2], (int64_t)(500000.0 * 1981568 / 2000000 + 0.5)); /* W keeps its share */
    ck_assert_int_eq(c.fwd_ns[4], 1000 - 950 + 238);          /* 950 ns of GEMMs at a quarter: 237.5 rounds up */
    ck_assert_int_eq(c.bwd_ns[4], 2000000 - 2560 + 640);
    /* again: the table is bf16 now, nothing changes */
    dts_cost again = c;
    ck_dt(dts_cost_to_precision(&c, m, 2, 4, &hw, "bf16", &changed));
    ck_assert_int_eq(changed, 0);
    ck_assert(memcmp(&again, &c, sizeof c) == 0);
    /* no bf16 rate in the file, or an fp16 run: unchanged */
    snprintf(c.precision, sizeof c.precision, "fp32");
    hw.peak_flops_bf16 = 0;
    ck_dt(dts_cost_to_precision(&c, m, 2, 4, &hw, "bf16", &changed));
    ck_assert_int_eq(changed, 0);
    hw.peak_flops_bf16 = 4e9;
    ck_dt(dts_cost_to_precision(&c, m, 2, 4, &hw, "fp16", &changed));
    ck_assert_int_eq(changed, 0);
    ck_assert_int_eq(c.fwd_ns[1], 990784);
    /* bf16's own passes at 2 ns an element: a block's forward adds 18 C B T
     * = 18*8*8 = 1152 elements, 2304 ns; its backward 35*64 = 2240, 4480 ns;
     * the head none */
    hw.bf16_pass_ns = 2.0;
    for (int s = 0; s <= 4; s++) c.fwd_ns[s] = 1000000, c.bwd_ns[s] = 2000000, c.bwd_w_ns[s] = 0;
    snprintf(c.precision, sizeof c.precision, "fp32");
    ck_dt(dts_cost_to_precision(&c, m, 2, 4, &hw, "bf16", &changed));
    ck_assert_int_eq(changed, 1);
    ck_assert_int_eq(c.fwd_ns[3], 1000000 - 12288 + 3072 + 2304);
    ck_assert_int_eq(c.bwd_ns[3], 2000000 - 24576 + 6144 + 4480);
    ck_assert_int_eq(c.fwd_ns[4], 1000000 - 1280 + 320);
}
END_TEST

START_TEST(test_defaults)
{
    dts_scenario *sc = new_default();
    ck_assert_str_eq(sc->model_name, "tiny");
    ck_assert_int_eq(sc->model.num_layers, 2);
    ck_assert_int_eq(sc->model.hidden_size, 64);
    ck_assert_int_eq(sc->model.num_heads, 4);
    ck_assert_int_eq(sc->model.vocab_size, 256);
    dt_train_config tc;
    dt_train_config_default(&tc);
    ck_assert_int_eq(sc->B, tc.micro_batch_size);
    ck_assert_int_eq(sc->T, tc.seq_length);
    ck_assert_int_eq((int64_t)sc->m * sc->B, tc.global_batch_size);
    ck_assert_int_eq(sc->steps, tc.train_iters);
    ck_assert_int_eq(sc->schedule, tc.pipeline_schedule);
    ck_assert_int_eq(sc->bucket_bytes, (int64_t)tc.bucket_bytes);
    ck_assert_int_eq(sc->chunk_bytes, (int64_t)tc.allreduce_chunk_bytes);
    ck_assert_int_eq(sc->t * sc->p * sc->d, 1);
    ck_assert_int_eq(sc->exchange, DTS_EX_RING);
    ck_assert_str_eq(sc->precision, "fp32");
    ck_assert_int_eq(sc->use_loss_scaling, 0);
    ck_assert_int_eq(sc->optimizer_states, 2);
    ck_assert_int_eq(sc->slow_rank, -1);
    ck_assert_int_eq(sc->have_cost, 0);
    ck_assert_int_eq(dts_scenario_world(sc), 1);
    ck_dt(dts_scenario_check(sc));
    free(sc);
}
END_TEST

START_TEST(test_round_trip_default)
{
    dts_scenario *sc = new_default();
    check_round_trip(sc);
    free(sc);
}
END_TEST

START_TEST(test_round_trip_every_field)
{
    dts_scenario *sc = new_default();
    snprintf(sc->model_name, sizeof sc->model_name, "custom");
    sc->model = (dt_gpt_config){.vocab_size = 300, .seq_len = 96, .num_layers = 7, .num_heads = 6, .hidden_size = 96};
    sc->B = 3;
    sc->T = 40;
    sc->m = 5;
    sc->steps = 7;
    sc->t = 2;
    sc->p = 3;
    sc->d = 4;
    sc->schedule = DT_SCHED_PIPEDREAM_VSYNC;
    sc->n_split = 3;
    sc->split[0] = 1, sc->split[1] = 4, sc->split[2] = 2;
    sc->exchange = DTS_EX_TREE;
    snprintf(sc->exchange_name, sizeof sc->exchange_name, "tree");
    sc->bucket_bytes = 12345;
    sc->chunk_bytes = 0;
    snprintf(sc->precision, sizeof sc->precision, "fp16");
    sc->use_loss_scaling = 1;
    sc->scaler.initial_scale = 1024.0f;
    sc->scaler.growth_factor = 3.0f;
    sc->scaler.backoff_factor = 0.25f;
    sc->scaler.window = 17;
    sc->scaler.hysteresis = 5;
    sc->scaler.consecutive_hysteresis = 1;
    sc->scaler.min_scale = 0.125f;
    sc->scaler.static_scale = 0.0f;
    sc->recompute = 1;
    sc->recompute_num_layers = 3;
    sc->slow_rank = 5;
    sc->slow_ns = 1234567; /* 1.234567 ms: not whole milliseconds */
    sc->optimizer_states = 1;
    snprintf(sc->hw.name, sizeof sc->hw.name, "test-hw");
    snprintf(sc->hw.source, sizeof sc->hw.source, "made up \"quoted\" figures");
    sc->hw.peak_flops = 1.0 / 3.0 * 1e12;
    sc->hw.mem_bytes_per_s = 0.1 + 0.2;
    sc->hw.efficiency = 0.3333333333333333;
    sc->hw.kernel_overhead_ns = 7;
    sc->hw.sleep_overshoot_ns = 12345;
    sc->hw.mem_capacity_bytes = (int64_t)1 << 40;
    sc->hw.devices_per_node = 8;
    sc->hw.intra = (dts_link){.alpha_ns = 1.5, .bytes_per_ns = 450.0 / 7.0};
    sc->hw.inter = (dts_link){.alpha_ns = 0.0, .bytes_per_ns = 1e-3};
    sc->seed = UINT64_MAX - 3; /* above 2^63: written as text */
    snprintf(sc->grad_trace, sizeof sc->grad_trace, "runs/fp16.json");
    /* every field differs from the defaults, so every field is read back */
    dts_scenario *d = new_default();
    ck_assert_ptr_nonnull(scen_diff(sc, d));
    free(d);
    check_round_trip(sc);

    /* a parameter server, a static loss scale, bf16 */
    dts_scenario_default(sc);
    sc->exchange = DTS_EX_PS_ASYNC;
    snprintf(sc->exchange_name, sizeof sc->exchange_name, "ps-async");
    sc->num_ps_servers = 3;
    sc->d = 5;
    snprintf(sc->precision, sizeof sc->precision, "bf16");
    sc->scaler.static_scale = 128.0f;
    sc->use_loss_scaling = 1;
    sc->seed = 0;
    sc->zero = 0;
    check_round_trip(sc);
    /* ZeRO, "mpi" (simulated as the ring, its name kept) */
    dts_scenario_default(sc);
    sc->zero = 1;
    snprintf(sc->exchange_name, sizeof sc->exchange_name, "mpi");
    sc->d = 2;
    sc->recompute = 2;
    check_round_trip(sc);
    free(sc);
}
END_TEST

START_TEST(test_dtrain_config)
{
    dt_train_config tc;
    dt_train_config_default(&tc);
    tc.micro_batch_size = 32;
    tc.global_batch_size = 128;
    tc.precision = DT_F16;
    tc.use_loss_scaling = 1;
    tc.loss_scaler.window = 50;
    tc.recompute = DT_RECOMPUTE_SELECTIVE;
    tc.train_iters = 30;
    dt_optim_config_default(&tc.optim, DT_OPTIM_LARS);
    char *text = dt_train_config_json(&tc);
    ck_assert_ptr_nonnull(text);
    dts_scenario *sc = new_default();
    ck_dt(dts_scenario_from_config(sc, text, "run.json"));
    free(text);
    ck_assert_str_eq(sc->model_name, "tiny");
    ck_assert_int_eq(sc->B, 32);
    ck_assert_int_eq(sc->m, 4);
    ck_assert_int_eq(sc->d, 1);
    ck_assert_int_eq(sc->T, 16);
    ck_assert_int_eq(sc->steps, 30);
    ck_assert_str_eq(sc->precision, "fp16");
    ck_assert_int_eq(sc->use_loss_scaling, 1);
    ck_assert_int_eq(sc->scaler.window, 50);
    ck_assert_int_eq(sc->recompute, 2);
    ck_assert_int_eq(sc->optimizer_states, 1);
    ck_assert_int_eq(sc->model.vocab_size, 256); /* null in the config: kept */
    ck_assert_int_eq(sc->schedule, DT_SCHED_1F1B);
    ck_assert_int_eq(sc->recompute_num_layers, 1); /* written 0: not full */
    ck_dt(dts_scenario_check(sc));
    /* full recomputation in groups of K blocks */
    tc.recompute = DT_RECOMPUTE_FULL;
    tc.recompute_num_layers = 2;
    text = dt_train_config_json(&tc);
    ck_assert_ptr_nonnull(text);
    ck_dt(dts_scenario_from_config(sc, text, "run.json"));
    free(text);
    ck_assert_int_eq(sc->recompute, 1);
    ck_assert_int_eq(sc->recompute_num_layers, 2);
    ck_dt(dts_scenario_check(sc));

    /* a trace of a pipelined data-parallel run (hand-written), wrapped as
     * a trace; an unknown key is ignored in dtrain's config */
    const char *trace =
        "{\"otherData\": {\"format\": \"dtrain-trace\", \"version\": 1, \"tool\": \"dtrain\", \"config\": "
        "{\"model\": \"small\", \"num_layers\": 4, \"seq_length\": 64, \"task\": \"add\", \"data\": null, "
        "\"micro_batch_size\": 8, \"global_batch_size\": 64, \"precision\": \"f32\", \"data_parallel_size\": 2, "
        "\"allreduce\": \"ring\", \"num_ps_servers\": 0, \"pipeline_model_parallel_size\": 2, "
        "\"tensor_model_parallel_size\": 1, \"pipeline_schedule\": \"gpipe\", \"use_distributed_optimizer\": false, "
        "\"allreduce_chunk_bytes\": 0, \"bucket_bytes\": 1048576, \"recompute_granularity\": \"none\", "
        "\"lr\": 0.003, \"some_future_key\": [1, 2], \"seed\": 1337}}, \"traceEvents\": []}";
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(sc, trace, "pp.rank0.json"));
    ck_assert_str_eq(sc->model_name, "custom"); /* small with 4 layers */
    ck_assert_int_eq(sc->model.num_layers, 4);
    ck_assert_int_eq(sc->model.hidden_size, 384);
    ck_assert_int_eq(sc->model.num_heads, 6);
    ck_assert_int_eq(sc->T, 64);
    ck_assert_int_eq(sc->B, 8);
    ck_assert_int_eq(sc->d, 2);
    ck_assert_int_eq(sc->p, 2);
    ck_assert_int_eq(sc->m, 4);
    ck_assert_int_eq(sc->schedule, DT_SCHED_GPIPE);
    ck_assert_int_eq(sc->bucket_bytes, 1048576);
    ck_assert_int_eq(sc->chunk_bytes, 0);
    ck_assert_int_eq(sc->seed, 1337);
    ck_assert_int_eq(dts_scenario_world(sc), 4);
    ck_dt(dts_scenario_check(sc));

    /* a parameter server run: K servers after d workers */
    const char *ps = "{\"task\": \"add\", \"micro_batch_size\": 64, \"global_batch_size\": 128, "
                     "\"data_parallel_size\": 2, \"allreduce\": \"ps-sync\", \"num_ps_servers\": 1}";
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(sc, ps, "ps.json"));
    ck_assert_int_eq(sc->exchange, DTS_EX_PS_SYNC);
    ck_assert_int_eq(sc->num_ps_servers, 1);
    ck_assert_int_eq(sc->m, 1);
    ck_assert_int_eq(dts_scenario_world(sc), 3);
    ck_dt(dts_scenario_check(sc));
    free(sc);
}
END_TEST

START_TEST(test_config_rules)
{
    dts_scenario *sc = new_default();
    /* null = not set */
    ck_dt(dts_scenario_from_config(sc, "{\"num_layers\": null, \"pipeline_split\": null, \"grad_trace\": null}",
                                   "a.json"));
    ck_assert_int_eq(sc->model.num_layers, 2);
    /* micro_batches sets m, the global batch follows */
    ck_dt(dts_scenario_from_config(sc, "{\"micro_batches\": 6, \"micro_batch_size\": 4}", "a.json"));
    ck_assert_int_eq(sc->m, 6);
    ck_assert_int_eq(sc->B, 4);
    /* the global batch over B x d */
    ck_dt(dts_scenario_from_config(sc, "{\"global_batch_size\": 48, \"data_parallel_size\": 3}", "a.json"));
    ck_assert_int_eq(sc->m, 4);
    /* neither: m kept */
    ck_dt(dts_scenario_from_config(sc, "{\"data_parallel_size\": 1}", "a.json"));
    ck_assert_int_eq(sc->m, 4);
    /* a preset with a shorter context clamps T (unless given) */
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(sc, "{\"model\": \"small\", \"seq_length\": 200}", "a.json"));
    ck_assert_int_eq(sc->T, 200);
    ck_assert_str_eq(sc->model_name, "small");
    ck_dt(dts_scenario_from_config(sc, "{\"model\": \"tiny\"}", "a.json"));
    ck_assert_int_eq(sc->T, 64);
    ck_assert_int_eq(sc->model.hidden_size, 64);
    /* the preset first, then the sizes, whatever the order in the file */
    ck_dt(dts_scenario_from_config(sc, "{\"hidden_size\": 128, \"model\": \"tiny\"}", "a.json"));
    ck_assert_int_eq(sc->model.hidden_size, 128);
    ck_assert_str_eq(sc->model_name, "custom");
    /* the exchange: a parameter server gets one server by default, the ring none */
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(sc, "{\"allreduce\": \"ps-async\"}", "a.json"));
    ck_assert_int_eq(sc->num_ps_servers, 1);
    ck_dt(dts_scenario_from_config(sc, "{\"allreduce\": \"nccl\"}", "a.json"));
    ck_assert_int_eq(sc->num_ps_servers, 0);
    ck_assert_int_eq(sc->exchange, DTS_EX_RING);
    ck_assert_str_eq(sc->exchange_name, "nccl");
    /* a dtsim summary or trace holds the scenario under config / otherData.config */
    ck_dt(dts_scenario_from_config(sc, "{\"step_ns\": 5, \"config\": {\"micro_batch_size\": 7}}", "sum.json"));
    ck_assert_int_eq(sc->B, 7);
    /* the cost goes stale with the sizes */
    ck_dt(dts_scenario_set_cost(sc, NULL));
    ck_assert_int_eq(sc->have_cost, 1);
    ck_dt(dts_scenario_from_config(sc, "{\"train_iters\": 3}", "a.json"));
    ck_assert_int_eq(sc->have_cost, 1);
    ck_dt(dts_scenario_from_config(sc, "{\"micro_batch_size\": 9}", "a.json"));
    ck_assert_int_eq(sc->have_cost, 0);
    free(sc);
}
END_TEST

START_TEST(test_config_errors)
{
    expect_config_error("{\"pipeline_model_parallel_size\": \"2\"}", DT_ERR_INVALID,
                        "\"pipeline_model_parallel_size\": expected an integer");
    expect_config_error("{\"pipeline_model_parallel_size\": 0}", DT_ERR_INVALID, "\"pipeline_model_parallel_size\"");
    expect_config_error("{\"micro_batch_size\": 2.5}", DT_ERR_INVALID,
                        "\"micro_batch_size\": expected an integer >= 1");
    expect_config_error("{\"num_layers\": -1}", DT_ERR_INVALID, "\"num_layers\"");
    expect_config_error("{\"pipeline_schedule\": \"zigzag\"}", DT_ERR_INVALID, "\"pipeline_schedule\"");
    expect_config_error("{\"allreduce\": \"butterfly\"}", DT_ERR_INVALID, "\"allreduce\"");
    expect_config_error("{\"precision\": \"fp8\"}", DT_ERR_INVALID, "\"precision\"");
    expect_config_error("{\"model\": \"huge\"}", DT_ERR_INVALID, "\"model\"");
    expect_config_error("{\"model\": \"mlp-bn\"}", DT_ERR_INVALID, "GPT only");
    expect_config_error("{\"use_distributed_optimizer\": \"yes\"}", DT_ERR_INVALID, "\"use_distributed_optimizer\"");
    expect_config_error("{\"pipeline_split\": [2, 0]}", DT_ERR_INVALID, "\"pipeline_split\"");
    expect_config_error("{\"pipeline_split\": 3}", DT_ERR_INVALID, "\"pipeline_split\"");
    expect_config_error("{\"initial_loss_scale\": 0}", DT_ERR_INVALID, "\"initial_loss_scale\"");
    expect_config_error("{\"slow_ms\": -1}", DT_ERR_INVALID, "\"slow_ms\"");
    expect_config_error("{\"optimizer\": \"adam\"}", DT_ERR_INVALID, "\"optimizer\"");
    expect_config_error("{\"recompute_granularity\": \"some\"}", DT_ERR_INVALID, "\"recompute_granularity\"");
    expect_config_error("{\"recompute_num_layers\": -1}", DT_ERR_INVALID, "\"recompute_num_layers\"");
    expect_config_error("{\"hardware\": 5}", DT_ERR_INVALID, "\"hardware\"");
    /* an inline hardware object: sim/hw.c's checks, named under "hardware" */
    expect_config_error("{\"hardware\": {\"name\": \"x\"}}", DT_ERR_FORMAT,
                        "run.json: \"hardware\": \"format\": expected \"dtsim-hw\"");
    expect_config_error("{\"hardware\": {\"format\": \"dtsim-hw\", \"version\": 1, \"name\": \"x\"}}", DT_ERR_FORMAT,
                        "run.json: \"hardware\": \"source\": missing");
    expect_config_error("{\"global_batch_size\": 100}", DT_ERR_INVALID, "\"global_batch_size\": 100 is not a multiple");
    expect_config_error("{\"global_batch_size\": 256, \"micro_batches\": 3}", DT_ERR_INVALID, "\"micro_batches\"");
    expect_config_error("{\"seed\": \"12x\"}", DT_ERR_INVALID, "\"seed\"");
    /* unknown keys: refused in a dtsim config, named */
    expect_config_error("{\"num_layer\": 4}", DT_ERR_INVALID, "\"num_layer\": unknown key");
    /* not JSON, not an object */
    expect_config_error("{\"num_layers\": 4,}", DT_ERR_FORMAT, "run.json: line 1");
    expect_config_error("[1, 2]", DT_ERR_INVALID, "expected a JSON object");
    /* duplicate keys are refused (the second would silently win) */
    expect_config_error("{\"num_layers\": 4, \"num_layers\": 5}", DT_ERR_FORMAT, "duplicate");
    /* a profile that does not exist: the file's error */
    dts_scenario *sc = new_default();
    dt_status st = dts_scenario_from_config(sc, "{\"profile\": \"/nonexistent/profile.json\"}", "run.json");
    ck_assert_int_eq(st, DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "/nonexistent/profile.json"));
    ck_assert_int_eq(sc->have_cost, 0);
    st = dts_scenario_from_config(sc, "{\"hardware\": \"/nonexistent/hw.json\"}", "run.json");
    ck_assert_int_eq(st, DT_ERR_IO);
    free(sc);
}
END_TEST

START_TEST(test_check)
{
    dts_scenario *sc = new_default();
    sc->p = 3; /* tiny has 2 blocks */
    expect_check_error(sc, "--pipeline-model-parallel-size 3");
    sc->p = 1;
    sc->recompute_num_layers = 3; /* only full recomputation groups blocks */
    ck_dt(dts_scenario_check(sc));
    sc->recompute = 1;
    expect_check_error(sc, "--recompute-num-layers 3: expected 1..2 (the number of layers)");
    sc->recompute_num_layers = 0;
    expect_check_error(sc, "--recompute-num-layers 0");
    sc->recompute_num_layers = 2;
    ck_dt(dts_scenario_check(sc));
    dts_scenario_default(sc);
    sc->p = 2;
    ck_dt(dts_scenario_check(sc));
    sc->n_split = 2, sc->split[0] = 1, sc->split[1] = 2;
    expect_check_error(sc, "--pipeline-split");
    sc->split[1] = 1;
    ck_dt(dts_scenario_check(sc));
    sc->p = 1;
    expect_check_error(sc, "--pipeline-split needs");
    sc->n_split = 0, sc->split[0] = sc->split[1] = 0;
    sc->t = 3; /* 4 heads */
    expect_check_error(sc, "--tensor-model-parallel-size 3");
    sc->t = 2;
    ck_dt(dts_scenario_check(sc));
    snprintf(sc->precision, sizeof sc->precision, "bf16"); /* 16-bit stages and shards, as dtrain runs them */
    ck_dt(dts_scenario_check(sc));
    sc->t = 1, sc->p = 2, sc->schedule = DT_SCHED_PIPEDREAM;
    ck_dt(dts_scenario_check(sc));
    sc->model.tie_embeddings = 1;
    expect_check_error(sc, "pipedream with tied embeddings");
    sc->model.tie_embeddings = 0;
    snprintf(sc->precision, sizeof sc->precision, "fp16");
    sc->use_loss_scaling = 1;
    expect_check_error(sc, "pipedream with --fp16");
    sc->schedule = DT_SCHED_1F1B;
    ck_dt(dts_scenario_check(sc));
    dts_scenario_default(sc);
    sc->exchange = DTS_EX_PS_SYNC;
    snprintf(sc->exchange_name, sizeof sc->exchange_name, "ps-sync");
    expect_check_error(sc, "--num-ps-servers 0");
    sc->num_ps_servers = 1;
    ck_dt(dts_scenario_check(sc));
    sc->p = 2;
    expect_check_error(sc, "with a parameter server");
    sc->p = 1;
    sc->zero = 1;
    expect_check_error(sc, "--use-distributed-optimizer");
    dts_scenario_default(sc);
    sc->num_ps_servers = 2;
    expect_check_error(sc, "--num-ps-servers 2 needs --allreduce");
    dts_scenario_default(sc);
    sc->slow_rank = 1, sc->slow_ns = 5000000;
    expect_check_error(sc, "--slow-rank 1");
    sc->d = 2;
    ck_dt(dts_scenario_check(sc));
    sc->T = 65;
    expect_check_error(sc, "--seq-length 65");
    dts_scenario_default(sc);
    sc->model.hidden_size = 30;
    expect_check_error(sc, "--hidden-size");
    dts_scenario_default(sc);
    sc->m = 0;
    expect_check_error(sc, "--micro-batches");
    dts_scenario_default(sc);
    sc->steps = 0;
    expect_check_error(sc, "--train-iters");
    dts_scenario_default(sc);
    snprintf(sc->precision, sizeof sc->precision, "fp16");
    expect_check_error(sc, "use_loss_scaling"); /* not derived by hand */
    sc->use_loss_scaling = 1;
    ck_dt(dts_scenario_check(sc));
    sc->scaler.hysteresis = 0;
    expect_check_error(sc, "--hysteresis");
    dts_scenario_default(sc);
    sc->hw.efficiency = 0;
    expect_check_error(sc, "efficiency");
    dts_scenario_default(sc);
    ck_dt(dts_scenario_set_cost(sc, NULL));
    sc->model.num_layers = 3;
    expect_check_error(sc, "cost table");
    free(sc);
}
END_TEST

START_TEST(test_stages_and_world)
{
    dts_scenario *sc = new_default();
    int first, last;
    ck_dt(dts_scenario_stage_layers(sc, 0, &first, &last));
    ck_assert_int_eq(first, -1);
    ck_assert_int_eq(last, 2);
    sc->model.num_layers = 5;
    sc->p = 2;
    ck_dt(dts_scenario_stage_layers(sc, 0, &first, &last)); /* 3 + 2: earlier stages take the extra block */
    ck_assert_int_eq(first, -1);
    ck_assert_int_eq(last, 2);
    ck_dt(dts_scenario_stage_layers(sc, 1, &first, &last));
    ck_assert_int_eq(first, 3);
    ck_assert_int_eq(last, 5);
    sc->n_split = 2, sc->split[0] = 1, sc->split[1] = 4;
    ck_dt(dts_scenario_stage_layers(sc, 0, &first, &last));
    ck_assert_int_eq(first, -1);
    ck_assert_int_eq(last, 0);
    ck_dt(dts_scenario_stage_layers(sc, 1, &first, &last));
    ck_assert_int_eq(first, 1);
    ck_assert_int_eq(last, 5);
    sc->p = 3, sc->n_split = 0, sc->split[0] = sc->split[1] = 0;
    ck_dt(dts_scenario_stage_layers(sc, 1, &first, &last)); /* 2 + 2 + 1 */
    ck_assert_int_eq(first, 2);
    ck_assert_int_eq(last, 3);
    ck_assert_int_eq(dts_scenario_stage_layers(sc, 3, &first, &last), DT_ERR_INVALID);
    sc->t = 2, sc->d = 3;
    ck_assert_int_eq(dts_scenario_world(sc), 18);
    dts_scenario_default(sc);
    sc->exchange = DTS_EX_PS_ASYNC, sc->num_ps_servers = 2, sc->d = 3;
    ck_assert_int_eq(dts_scenario_world(sc), 5);
    free(sc);
}
END_TEST

START_TEST(test_cost)
{
    dts_scenario *sc = new_default();
    ck_dt(dts_scenario_set_cost(sc, NULL));
    ck_assert_int_eq(sc->have_cost, 1);
    ck_assert_int_eq(sc->cost.n_layer, sc->model.num_layers);
    ck_assert_int_gt(sc->cost.fwd_ns[1], 0);
    ck_dt(dts_scenario_check(sc));
    /* the JSON names the cost's source (informational) and still reads back */
    char *text = dts_scenario_json(sc);
    ck_assert_ptr_nonnull(strstr(text, "\"cost\":\""));
    dts_scenario *back = new_default();
    ck_dt(dts_scenario_from_config(back, text, "x.json"));
    ck_assert_ptr_null(scen_diff(sc, back));
    free(back);
    free(text);
    /* a missing profile leaves the cost as it was */
    sc->cost.fwd_ns[1] = 42;
    dt_status st = dts_scenario_set_cost(sc, "/nonexistent/profile.json");
    ck_assert_int_eq(st, DT_ERR_IO);
    ck_assert_int_eq(sc->cost.fwd_ns[1], 42);
    ck_assert_int_eq(sc->have_cost, 1);
    free(sc);
}
END_TEST

/* sc's JSON with the inline hardware's key `key` set to `value` (JSON; NULL: deleted) */
static char *json_with_hw_key(const dts_scenario *sc, const char *key, const char *value)
{
    char *text = dts_scenario_json(sc);
    ck_assert_ptr_nonnull(text);
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    free(text);
    ck_assert_ptr_nonnull(o);
    json_t *hw = json_object_get(o, "hardware");
    ck_assert(json_is_object(hw));
    if (value) ck_assert_int_eq(json_object_set_new(hw, key, json_loads(value, JSON_DECODE_ANY, &jerr)), 0);
    else ck_assert_int_eq(json_object_del(hw, key), 0);
    text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    ck_assert_ptr_nonnull(text);
    return text;
}

START_TEST(test_hardware_inline)
{
    dts_scenario *sc = new_default();
    ck_assert_int_eq(sc->hw.sleep_overshoot_ns, 68000); /* dts_hw_default's */
    sc->hw.sleep_overshoot_ns = 7;
    check_round_trip(sc); /* written inline, read back equal */

    /* absent: the unmeasured default, 60 us */
    char *text = json_with_hw_key(sc, "sleep_overshoot_ns", NULL);
    dts_scenario *back = new_default();
    ck_dt(dts_scenario_from_config(back, text, "c.json"));
    ck_assert_int_eq(back->hw.sleep_overshoot_ns, 60000);
    ck_assert_str_eq(back->hw.name, sc->hw.name);
    free(text);

    /* negative: refused, naming the config, "hardware" and the key */
    text = json_with_hw_key(sc, "sleep_overshoot_ns", "-1");
    dts_scenario_default(back);
    dt_status st = dts_scenario_from_config(back, text, "c.json");
    ck_assert_int_eq(st, DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "c.json: \"hardware\": \"sleep_overshoot_ns\": expected an integer from 0"),
                  "%s", dt_last_error());
    ck_assert_int_eq(back->hw.sleep_overshoot_ns, 68000); /* the scenario is kept */
    free(text);

    /* format and version stay required inline, as in a file */
    text = json_with_hw_key(sc, "version", NULL);
    st = dts_scenario_from_config(back, text, "c.json");
    ck_assert_int_eq(st, DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "c.json: \"hardware\": \"version\""), "%s", dt_last_error());
    free(text);
    text = json_with_hw_key(sc, "peak_flop", "1e12");
    st = dts_scenario_from_config(back, text, "c.json");
    ck_assert_int_eq(st, DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "c.json: \"hardware\": \"peak_flop\": unknown key"), "%s", dt_last_error());
    free(text);
    free(back);
    free(sc);
}
END_TEST

START_TEST(test_hardware_file)
{
    /* a hardware file by name (relative to the source tree here) */
    char text[1024];
    snprintf(text, sizeof text, "{\"hardware\": \"%s/sim/hw/h100-ib.json\"}", DT_SRCDIR);
    dts_scenario *sc = new_default();
    ck_dt(dts_scenario_from_config(sc, text, "a.json"));
    dts_hw hw;
    char path[1024];
    snprintf(path, sizeof path, "%s/sim/hw/h100-ib.json", DT_SRCDIR);
    ck_dt(dts_hw_load(path, &hw));
    ck_assert_str_eq(sc->hw.name, hw.name);
    ck_assert(sc->hw.peak_flops == hw.peak_flops);
    check_round_trip(sc);
    free(sc);
}
END_TEST

/* Activation memory under recomputation: the simulated peak, less the
 * static memory, against lib/'s own prediction of its arena
 * (dt_gpt_predicted_activation_bytes) for none, selective and full with
 * K = 1, 2 and 3 (groups of 3 and 1 of the 4 blocks). */
START_TEST(test_recompute_memory)
{
    dts_scenario *sc = malloc(sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    dt_backend *be = NULL;
    ck_dt(dt_backend_cpu_create(1, &be));
    const int modes[] = {0, 2, 1, 1, 1}, ks[] = {1, 1, 1, 2, 3}; /* dtsim's numbering: 0 none, 1 full, 2 selective */
    const dt_recompute lib_modes[] = {DT_RECOMPUTE_NONE, DT_RECOMPUTE_SELECTIVE, DT_RECOMPUTE_FULL, DT_RECOMPUTE_FULL,
                                      DT_RECOMPUTE_FULL};
    double got[5];
    for (int i = 0; i < 5; i++) {
        dts_scenario_default(sc);
        sc->model.num_layers = 4;
        sc->B = 8;
        sc->steps = 1;
        sc->recompute = modes[i];
        sc->recompute_num_layers = ks[i];
        ck_dt(dts_scenario_set_cost(sc, NULL));
        int64_t params = 0;
        for (int slot = 0; slot <= sc->model.num_layers + 1; slot++) params += sc->cost.params[slot];
        dts_summary sum;
        ck_dt(dts_run(sc, NULL, &sum));
        /* static: weights, gradients and AdamW's two moments, 4 bytes each */
        got[i] = (double)(sum.peak_mem[0] - params * 16);
        dts_summary_free(&sum);
        dt_gpt *m = NULL;
        ck_dt(dt_gpt_create(&sc->model, be, &m));
        ck_dt(dt_gpt_set_recompute(m, lib_modes[i], ks[i]));
        const double want = (double)dt_gpt_predicted_activation_bytes(m, sc->B, sc->T);
        dt_gpt_free(m);
        ck_assert_msg(got[i] == want, "recompute %d, K %d: simulated %.0f activation bytes, lib %.0f", modes[i],
                      ks[i], got[i], want);
    }
    ck_assert(got[1] < got[0] && got[2] < got[1]); /* selective saves some, full most */
    ck_assert(got[2] < got[3] && got[3] < got[4]); /* here each larger group holds more while rebuilt */
    dt_backend_destroy(be);
    free(sc);
}
END_TEST

/* What dtrain's trace header records beyond the scenario (issue 21): the
 * straggler is simulated, the rest kept and named, every key checked. */
START_TEST(test_recorded)
{
    const char *hdr =
        "{\"otherData\": {\"format\": \"dtrain-trace\", \"version\": 1, \"tool\": \"dtrain\", \"config\": "
        "{\"task\": \"add\", \"micro_batch_size\": 16, \"global_batch_size\": 32, \"train_iters\": 40, "
        "\"data_parallel_size\": 2, \"allreduce\": \"ps-async\", \"num_ps_servers\": 1, \"max_staleness\": 2, "
        "\"comm_timeout\": 300.0, \"slow_rank\": 1, \"slow_ms\": 30, \"hang_rank\": 0, \"hang_iter\": 3, "
        "\"threads\": 2, \"device\": \"cpu\", \"threads_requested\": 0, \"threads_automatic\": false, "
        "\"save_interval\": 0, \"data_bytes\": null, \"machine\": {\"host\": \"n0\", \"online_cores\": 2, "
        "\"cluster\": \"2 nodes\\nx 1 rank\"}}}, \"traceEvents\": []}";
    dts_scenario *sc = new_default();
    ck_dt(dts_scenario_from_config(sc, hdr, "ps.rank0.json"));
    ck_assert_int_eq(sc->slow_rank, 1);
    ck_assert_int_eq(sc->slow_ns, 30000000);
    ck_assert_int_eq(sc->recorded.hang_rank, 0);
    ck_assert_int_eq(sc->recorded.hang_iter, 3);
    ck_assert_int_eq(sc->recorded.max_staleness, 2);
    ck_assert_int_eq(sc->recorded.threads, 2);
    ck_assert_str_eq(sc->recorded.cluster, "2 nodes\nx 1 rank");
    ck_dt(dts_scenario_check(sc));
    char line[512];
    ck_assert_int_eq(dts_scenario_unmodelled(sc, 0, line, sizeof line), 4);
    ck_assert_str_eq(line, "hang_rank 0 at iteration 3, max_staleness 2, threads 2 per rank, "
                           "emulated cluster \"2 nodes x 1 rank\" (give its links with --hw)");
    ck_assert_int_eq(dts_scenario_unmodelled(sc, 1, line, sizeof line), 3); /* --hw gives the links */

    /* the header's straggler is simulated: staleness above the same run without it */
    ck_dt(dts_scenario_set_cost(sc, NULL));
    const dts_run_opts ro = {.keep_events = 0};
    dts_summary with, without;
    ck_dt(dts_run(sc, &ro, &with));
    sc->slow_ns = 0, sc->slow_rank = -1;
    ck_dt(dts_run(sc, &ro, &without));
    ck_assert_msg(with.staleness_max > without.staleness_max, "staleness max %d with the slow rank, %d without",
                  with.staleness_max, without.staleness_max);
    dts_summary_free(&with);
    dts_summary_free(&without);

    /* another dtrain configuration replaces the record: an older trace records nothing */
    ck_dt(dts_scenario_from_config(sc, "{\"task\": \"add\", \"threads\": 1}", "old.json"));
    ck_assert_int_eq(sc->recorded.hang_rank, -1);
    ck_assert_int_eq(sc->recorded.max_staleness, -1);
    ck_assert_str_eq(sc->recorded.cluster, "");
    ck_assert_int_eq(dts_scenario_unmodelled(sc, 0, line, sizeof line), 0);
    free(sc);

    /* each key in its range, named (in dtrain's config: "task" marks it) */
    static const char *const bad[][2] = {{"\"hang_iter\": -1", "\"hang_iter\""},
                                         {"\"hang_rank\": -2", "\"hang_rank\""},
                                         {"\"threads\": 1025", "\"threads\""},
                                         {"\"threads_requested\": 1025", "\"threads_requested\""},
                                         {"\"threads_automatic\": 2", "\"threads_automatic\""},
                                         {"\"save_interval\": 1.5", "\"save_interval\""},
                                         {"\"data_bytes\": -1", "\"data_bytes\""},
                                         {"\"max_staleness\": -1", "\"max_staleness\""},
                                         {"\"comm_timeout\": -1", "\"comm_timeout\""},
                                         {"\"machine\": 5", "\"machine\""},
                                         {"\"machine\": {\"online_cores\": 0}", "\"machine\": \"online_cores\""},
                                         {"\"machine\": {\"cluster\": 7}", "\"machine\": \"cluster\""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"task\": \"add\", %s}", bad[i][0]);
        expect_config_error(json, DT_ERR_INVALID, bad[i][1]);
    }
    /* a dtsim config file does not know them */
    expect_config_error("{\"hang_rank\": 1}", DT_ERR_INVALID, "\"hang_rank\": unknown key");
}
END_TEST

static Suite *scenario_suite(void)
{
    Suite *s = suite_create("sim_scenario");
    TCase *tc = tcase_create("scenario");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_cost_to_precision);
    tcase_add_test(tc, test_recompute_memory);
    tcase_add_test(tc, test_round_trip_default);
    tcase_add_test(tc, test_round_trip_every_field);
    tcase_add_test(tc, test_dtrain_config);
    tcase_add_test(tc, test_config_rules);
    tcase_add_test(tc, test_config_errors);
    tcase_add_test(tc, test_recorded);
    tcase_add_test(tc, test_check);
    tcase_add_test(tc, test_stages_and_world);
    tcase_add_test(tc, test_cost);
    tcase_add_test(tc, test_hardware_inline);
    tcase_add_test(tc, test_hardware_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(scenario_suite()); }
