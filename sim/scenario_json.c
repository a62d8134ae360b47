/* scenario_json.c: a scenario written back as JSON (dts_scenario_json,
 * dts_scenario.h) in dtrain's configuration keys, so that what dtsim
 * simulated can be read again (sim/scenario.c reads it) or compared with
 * a real run's configuration. The FP8 keys only with FP8, as dtrain. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_optim.h"
#include "dt_trace.h"
#include "dts_json.h"
#include "dts_scenario.h"
#include "dt_rules.h"

/* ---- writing ------------------------------------------------------------------------ */

char *dts_scenario_json(const dts_scenario *sc)
{
    if (!sc) return NULL;
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    const int64_t global = (int64_t)sc->m * sc->B * sc->d;
    dts__json_set(o, "model", json_string(sc->model_name), &bad);
    dts__json_set(o, "num_layers", json_integer(sc->model.num_layers), &bad);
    dts__json_set(o, "hidden_size", json_integer(sc->model.hidden_size), &bad);
    dts__json_set(o, "num_attention_heads", json_integer(sc->model.num_heads), &bad);
    dts__json_set(o, "max_position_embeddings", json_integer(sc->model.seq_len), &bad);
    dts__json_set(o, "untie_embeddings_and_output_weights", json_boolean(!sc->model.tie_embeddings), &bad);
    dts__json_set(o, "vocab_size", json_integer(sc->model.vocab_size), &bad);
    dts__json_set(o, "seq_length", json_integer(sc->T), &bad);
    dts__json_set(o, "micro_batch_size", json_integer(sc->B), &bad);
    dts__json_set(o, "micro_batches", json_integer(sc->m), &bad);
    dts__json_set(o, "global_batch_size", json_integer(global), &bad);
    dts__json_set(o, "train_iters", json_integer(sc->steps), &bad);
    dts__json_set(o, "tensor_model_parallel_size", json_integer(sc->t), &bad);
    dts__json_set(o, "pipeline_model_parallel_size", json_integer(sc->p), &bad);
    dts__json_set(o, "data_parallel_size", json_integer(sc->d), &bad);
    dts__json_set(o, "vocab_parallel", json_boolean(sc->vocab_parallel), &bad);
    dts__json_set(o, "scatter_gather_tensors_in_pipeline", json_boolean(sc->scatter_gather), &bad);
    dts__json_set(o, "sequence_parallel", json_boolean(sc->sequence_parallel), &bad);
    dts__json_set(o, "context_parallel_size", json_integer(sc->c), &bad);
    dts__json_set(o, "cp_comm_type", json_string(dt_cp_comm_name(sc->cp_comm)), &bad);
    dts__json_set(o, "pipeline_schedule", json_string(dt_sched_kind_name(sc->schedule)), &bad);
    if (sc->vpp > 0) dts__json_set(o, "virtual_pipeline_model_parallel_size", json_integer(sc->vpp), &bad);
    if (sc->vpp_layers > 0)
        dts__json_set(o, "num_layers_per_virtual_pipeline_stage", json_integer(sc->vpp_layers), &bad);
    if (sc->n_split > 0) {
        json_t *a = json_array();
        for (int i = 0; a && i < sc->n_split && i < DTS_MAX_STAGES; i++)
            if (json_array_append_new(a, json_integer(sc->split[i])) != 0) bad = 1;
        dts__json_set(o, "pipeline_split", a, &bad);
    } else {
        dts__json_set(o, "pipeline_split", json_null(), &bad);
    }
    dts__json_set(o, "allreduce", json_string(sc->exchange_name), &bad);
    dts__json_set(o, "num_ps_servers", json_integer(sc->num_ps_servers), &bad);
    dts__json_set(o, "use_distributed_optimizer", json_boolean(sc->zero == 1), &bad);
    dts__json_set(o, "zero_stage", json_integer(sc->zero), &bad);
    dts__json_set(o, "zero_prefetch", json_boolean(sc->zero_prefetch), &bad);
    dts__json_set(o, "bucket_bytes", json_integer(sc->bucket_bytes), &bad);
    dts__json_set(o, "allreduce_chunk_bytes", json_integer(sc->chunk_bytes), &bad);
    dts__json_set(o, "precision", json_string(sc->precision), &bad);
    dts__json_set(o, "loss_scale", json_real(sc->scaler.static_scale), &bad);
    dts__json_set(o, "initial_loss_scale", json_real(sc->scaler.initial_scale), &bad);
    dts__json_set(o, "loss_scale_window", json_integer(sc->scaler.window), &bad);
    dts__json_set(o, "hysteresis", json_integer(sc->scaler.hysteresis), &bad);
    dts__json_set(o, "min_loss_scale", json_real(sc->scaler.min_scale), &bad);
    dts__json_set(o, "loss_scale_growth_factor", json_real(sc->scaler.growth_factor), &bad);
    dts__json_set(o, "loss_scale_backoff_factor", json_real(sc->scaler.backoff_factor), &bad);
    dts__json_set(o, "consecutive_hysteresis", json_boolean(sc->scaler.consecutive_hysteresis), &bad);
    if (sc->fp8 != DT_FP8_OFF) { /* as dtrain: the keys only with FP8 */
        dts__json_set(o, "fp8_format", json_string(dt_fp8_mode_name(sc->fp8)), &bad);
        dts__json_set(o, "fp8_recipe", json_string(dt_fp8_recipe_name(sc->fp8_recipe)), &bad);
        dts__json_set(o, "fp8_margin", json_integer(sc->fp8_margin), &bad);
        dts__json_set(o, "fp8_amax_history_len", json_integer(sc->fp8_amax_history_len), &bad);
        dts__json_set(o, "fp8_amax_compute_algo", json_string(dt_fp8_amax_algo_name(sc->fp8_amax_algo)), &bad);
    }
    dts__json_set(o, "recompute_granularity",
                  json_string(dts_recompute_name(sc->recompute)),
                  &bad);
    dts__json_set(o, "recompute_num_layers", json_integer(sc->recompute_num_layers), &bad);
    dts__json_set(o, "slow_rank", json_integer(sc->slow_rank), &bad);
    if (sc->slow_ns % 1000000 == 0) dts__json_set(o, "slow_ms", json_integer(sc->slow_ns / 1000000), &bad);
    else dts__json_set(o, "slow_ms", json_real((double)sc->slow_ns / 1e6), &bad);
    dts__json_set(o, "optimizer_states", json_integer(sc->optimizer_states), &bad);
    if (sc->seed <= (uint64_t)INT64_MAX) {
        dts__json_set(o, "seed", json_integer((json_int_t)sc->seed), &bad);
    } else {
        char b[24];
        snprintf(b, sizeof b, "%llu", (unsigned long long)sc->seed);
        dts__json_set(o, "seed", json_string(b), &bad);
    }
    dts__json_set(o, "grad_trace", sc->grad_trace[0] ? json_string(sc->grad_trace) : json_null(), &bad);
    dts__json_set(o, "hardware", dts_hw_to_json(&sc->hw), &bad);
    dts__json_set(o, "cost", sc->have_cost ? json_string(sc->cost.source) : json_null(), &bad);
    char *text = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o);
    return text;
}
