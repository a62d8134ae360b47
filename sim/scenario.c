/* scenario.c: what the simulator simulates (dts_scenario.h): defaults,
 * reading a scenario from JSON (a dtsim config file, or dtrain's config of
 * a real run), checking it, its cost table, its stages (written back by
 * sim/scenario_json.c)
 * as JSON.
 *
 * Two shapes of JSON are read by one function:
 *   - dtrain's configuration (otherData.config of a trace, "config" of a
 *     summary; the whole trace or summary object is also accepted). It is
 *     recognised by dtrain's run-only keys ("task", "data", "device",
 *     "threads", "lr"): those and the other keys the simulator does not use
 *     (learning rate, data, evaluation, ...) are ignored, and so is any key
 *     this dtsim does not know (a newer dtrain may write more).
 *   - a dtsim config file (anything without those keys, including
 *     dts_scenario_json's output): every key must be known, so a misspelt
 *     key is an error naming it rather than a silently kept default.
 * Known keys: dtrain's ("model", "num_layers", ..., see dts__keys below)
 * plus "micro_batches", "hardware" (a path to a sim/hw file, or the file's
 * object inline as dts_scenario_json writes it, "format" and "version"
 * included: both read and written by sim/hw.c), "profile" (a dtrain
 * single-rank trace: the cost table is filled from it), "grad_trace",
 * "optimizer_states", "slow_rank", "slow_ms", "loss_scale_growth_factor",
 * "loss_scale_backoff_factor", "consecutive_hysteresis" and "cost" (the
 * cost's source, informational: ignored). dtrain's FP8 keys ("fp8_format",
 * "fp8_recipe", "fp8_margin", "fp8_amax_history_len",
 * "fp8_amax_compute_algo") are checked and kept, not timed: FP8 implies
 * bf16 for the rest, as in dtrain. A null value means "not set".
 * dtrain's configuration also holds what the run recorded beyond the
 * scenario (a hung rank, threads, the machine, ...): sim/scenario_run.c
 * checks and keeps it in sc->recorded, replaced by each dtrain config.
 * Paths are relative to the current directory.
 *
 * The batch: m = global_batch_size / (micro_batch_size x
 * data_parallel_size) when "global_batch_size" is given (it must divide),
 * "micro_batches" sets m directly (both given: they must agree), neither
 * keeps m. A "model" preset sets the four sizes first (not the vocabulary:
 * dtrain's comes from the data, 256 for its tasks), explicit sizes then
 * override it and make the name "custom" when they differ from the preset.
 *
 * Derived, never read: use_loss_scaling (fp16, or a static loss_scale > 0,
 * as dtrain). The cost table is not written by dts_scenario_json (only its
 * source, as "cost"): it comes from a profile or the roofline. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_optim.h"
#include "dt_trace.h"
#include "dts_json.h"
#include "dts_scenario.h"
#include "dt_rules.h"

/* dtrain's default data vocabulary (dt_data_vocab_size: bytes) */
#define DTS__VOCAB 256

void dts_scenario_default(dts_scenario *sc)
{
    memset(sc, 0, sizeof *sc);
    snprintf(sc->model_name, sizeof sc->model_name, "tiny");
    if (dt_gpt_config_preset("tiny", &sc->model) != DT_OK) { /* the preset table is the source of truth */
        sc->model.num_layers = 2, sc->model.num_heads = 4, sc->model.hidden_size = 64, sc->model.seq_len = 64;
        dt_clear_error();
    }
    sc->model.vocab_size = DTS__VOCAB;
    /* dtrain's defaults (dt_train_config_default): micro-batch 128, global
     * batch 128 (one micro-batch per step), T = 16, 2500 iterations */
    sc->B = 128;
    sc->T = 16;
    sc->m = 1;
    sc->steps = 2500;
    sc->t = sc->p = sc->d = sc->c = 1;
    sc->cp_comm = DT_CP_P2P;
    sc->vocab_parallel = 1;
    sc->scatter_gather = 1;
    sc->schedule = DT_SCHED_1F1B; /* dtrain's default --pipeline-schedule */
    sc->n_split = 0;
    sc->exchange = DTS_EX_RING;
    snprintf(sc->exchange_name, sizeof sc->exchange_name, "ring");
    sc->num_ps_servers = 0;
    sc->zero = 0;
    sc->bucket_bytes = (int64_t)25 << 20;
    sc->chunk_bytes = (int64_t)1 << 20;
    snprintf(sc->precision, sizeof sc->precision, "fp32");
    sc->use_loss_scaling = 0;
    dt_loss_scaler_config_default(&sc->scaler);
    sc->fp8 = DT_FP8_OFF;
    sc->fp8_recipe = DT_FP8_DELAYED;
    sc->fp8_amax_algo = DT_FP8_AMAX_MAX;
    sc->fp8_margin = 0;
    sc->fp8_amax_history_len = 1024;
    sc->recompute = 0;
    sc->recompute_num_layers = 1;
    sc->slow_rank = -1;
    sc->slow_ns = 0;
    sc->optimizer_states = 2; /* AdamW, dtrain's default optimizer */
    dts_hw_default(&sc->hw);
    sc->have_cost = 0;
    sc->seed = 1;
    sc->grad_trace[0] = '\0';
    dts_recorded_default(&sc->recorded);
}

/* ---- names ------------------------------------------------------------------------ */

static int dts__exchange_parse(const char *s, dts_exchange *out)
{
    if (!strcmp(s, "ring") || !strcmp(s, "mpi") || !strcmp(s, "nccl")) *out = DTS_EX_RING;
    else if (!strcmp(s, "tree")) *out = DTS_EX_TREE;
    else if (!strcmp(s, "naive")) *out = DTS_EX_NAIVE;
    else if (!strcmp(s, "ps-sync")) *out = DTS_EX_PS_SYNC;
    else if (!strcmp(s, "ps-async")) *out = DTS_EX_PS_ASYNC;
    else return 0;
    return 1;
}

static int dts__is_ps(dts_exchange e) { return e == DTS_EX_PS_SYNC || e == DTS_EX_PS_ASYNC; }

/* "f32"/"fp32" -> "fp32", ...; NULL if unknown */
const char *dts__precision_parse(const char *s)
{
    if (!strcmp(s, "f32") || !strcmp(s, "fp32")) return "fp32";
    if (!strcmp(s, "f16") || !strcmp(s, "fp16")) return "fp16";
    if (!strcmp(s, "bf16")) return "bf16";
    return NULL;
}

static const char *const dts__recompute_names[3] = {"none", "full", "selective"};

static int dts__optimizer_states(dt_optim_kind k)
{
    /* AdamW and LAMB: two moments; SGD and LARS keep a momentum buffer
     * even at momentum 0 (lib/optim/optim.c) */
    return k == DT_OPTIM_ADAMW || k == DT_OPTIM_LAMB ? 2 : 1;
}

/* ---- reading ----------------------------------------------------------------------- */

/* obj[key], or NULL when absent or null ("not set") */
static const json_t *dts__get(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* obj[key] as an integer in [min, max] (an integral real counts); 0 if
 * absent, 1 if read, -1 after recording the error. */
static int dts__int(const char *what, const json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out)
{
    const json_t *v = dts__get(obj, key);
    if (!v) return 0;
    if (dts__json_int(v, min, max, out)) return 1;
    char want[96];
    if (max == INT64_MAX || (max == INT_MAX && min > INT_MIN))
        snprintf(want, sizeof want, "an integer >= %" PRId64, min);
    else snprintf(want, sizeof want, "an integer in %" PRId64 "..%" PRId64, min, max);
    dts__json_expected(DT_ERR_INVALID, what, key, want, v);
    return -1;
}

static int dts__int32(const char *what, const json_t *obj, const char *key, int min, int max, int *out)
{
    int64_t x;
    int r = dts__int(what, obj, key, min, max, &x);
    if (r == 1) *out = (int)x;
    return r;
}

/* obj[key] as a finite number, > min (exclusive) or >= min */
static int dts__num(const char *what, const json_t *obj, const char *key, double min, int exclusive, double *out)
{
    const json_t *v = dts__get(obj, key);
    if (!v) return 0;
    double x;
    if (!dts__json_num(v, &x) || (exclusive ? !(x > min) : !(x >= min))) {
        char want[64];
        snprintf(want, sizeof want, "a number %s %g", exclusive ? ">" : ">=", min);
        dts__json_expected(DT_ERR_INVALID, what, key, want, v);
        return -1;
    }
    *out = x;
    return 1;
}

static int dts__float(const char *what, const json_t *obj, const char *key, double min, int exclusive, float *out)
{
    double x;
    int r = dts__num(what, obj, key, min, exclusive, &x);
    if (r == 1) {
        if (fabs(x) > 3.4028234663852886e38) {
            DT_FAIL(DT_ERR_INVALID, "%s: \"%s\": %g is out of range for a float", what, key, x);
            return -1;
        }
        *out = (float)x;
    }
    return r;
}

/* obj[key] as a string, one of `choices` ("a|b|c") when given */
static int dts__str(const char *what, const json_t *obj, const char *key, const char *expected, const char **out)
{
    const json_t *v = dts__get(obj, key);
    if (!v) return 0;
    if (!json_is_string(v) || json_string_length(v) == 0) {
        dts__json_expected(DT_ERR_INVALID, what, key, expected, v);
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

static int dts__bool(const char *what, const json_t *obj, const char *key, int *out)
{
    const json_t *v = dts__get(obj, key);
    if (!v) return 0;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 1;
    }
    if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
        *out = (int)json_integer_value(v);
        return 1;
    }
    dts__json_expected(DT_ERR_INVALID, what, key, "true or false", v);
    return -1;
}

/* Every key a scenario reads. */
static const char *const dts__keys[] = {"model",
                                        "num_layers",
                                        "hidden_size",
                                        "num_attention_heads",
                                        "max_position_embeddings",
                                        "vocab_size",
                                        "untie_embeddings_and_output_weights",
                                        "seq_length",
                                        "micro_batch_size",
                                        "global_batch_size",
                                        "micro_batches",
                                        "train_iters",
                                        "tensor_model_parallel_size",
                                        "vocab_parallel",
                                        "scatter_gather_tensors_in_pipeline",
                                        "sequence_parallel",
                                        "context_parallel_size",
                                        "cp_comm_type",
                                        "pipeline_model_parallel_size",
                                        "data_parallel_size",
                                        "pipeline_schedule",
                                        "pipeline_split",
                                        "virtual_pipeline_model_parallel_size",
                                        "num_layers_per_virtual_pipeline_stage",
                                        "allreduce",
                                        "num_ps_servers",
                                        "use_distributed_optimizer",
                                        "zero_stage",
                                        "zero_prefetch",
                                        "bucket_bytes",
                                        "allreduce_chunk_bytes",
                                        "precision",
                                        "loss_scale",
                                        "initial_loss_scale",
                                        "loss_scale_window",
                                        "hysteresis",
                                        "min_loss_scale",
                                        "loss_scale_growth_factor",
                                        "loss_scale_backoff_factor",
                                        "consecutive_hysteresis",
                                        "fp8_format",
                                        "fp8_recipe",
                                        "fp8_margin",
                                        "fp8_amax_history_len",
                                        "fp8_amax_compute_algo",
                                        "recompute_granularity",
                                        "recompute_num_layers",
                                        "slow_rank",
                                        "slow_ms",
                                        "optimizer",
                                        "optimizer_states",
                                        "seed",
                                        "grad_trace",
                                        "hardware",
                                        "profile",
                                        "cost",
                                        NULL};

/* dtrain's run-only keys: their presence marks dtrain's configuration */
static const char *const dts__dtrain_marks[] = {"task", "data", "device", "threads", "lr", NULL};

static int dts__in(const char *const *list, const char *key)
{
    for (const char *const *k = list; *k; k++)
        if (!strcmp(*k, key)) return 1;
    return 0;
}

/* The object holding the configuration: a trace's otherData.config, a
 * summary's config, or the object itself. */
static const json_t *dts__config_root(const json_t *root)
{
    const json_t *od = json_object_get(root, "otherData");
    if (json_is_object(od) && json_is_object(json_object_get(od, "config"))) return json_object_get(od, "config");
    const json_t *c = json_object_get(root, "config");
    if (json_is_object(c) && !json_object_get(root, "model")) return c;
    return root;
}

/* Name the config file and key in front of a message about the file it names. */
static dt_status dts__wrap(dt_status st, const char *what, const char *key)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    return DT_FAIL(st, "%s: \"%s\": %s", what, key, msg);
}

#define DTS__TRY(expr)           \
    do {                         \
        if ((expr) < 0) {        \
            st = DT_ERR_INVALID; \
            goto out;            \
        }                        \
    } while (0)

dt_status dts_scenario_from_config(dts_scenario *sc, const char *json_text, const char *what)
{
    if (!sc || !json_text) return DT_FAIL(DT_ERR_INVALID, "dts_scenario_from_config: NULL argument");
    if (!what) what = "config";
    json_error_t jerr;
    json_t *doc = json_loads(json_text, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) return DT_FAIL(DT_ERR_FORMAT, "%s: line %d, column %d: %s", what, jerr.line, jerr.column, jerr.text);
    dt_status st = DT_OK;
    dts_scenario *n = malloc(sizeof *n); /* the scenario is large (its cost table): not on the stack */
    if (!n) {
        json_decref(doc);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for a scenario", what);
    }
    *n = *sc;
    /* a trace's header: only the format and version this dtrain writes */
    const json_t *od = json_object_get(doc, "otherData");
    if (json_is_object(od)) {
        const json_t *fmt = json_object_get(od, "format"), *ver = json_object_get(od, "version");
        if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "dtrain-trace") != 0 || !json_is_integer(ver) ||
            json_integer_value(ver) != DT_TRACE_VERSION) {
            st = DT_FAIL(DT_ERR_FORMAT,
                         "%s: otherData: expected a dtrain trace (\"format\": \"dtrain-trace\", \"version\": %d; "
                         "this dtsim reads version %d only)",
                         what, DT_TRACE_VERSION, DT_TRACE_VERSION);
            goto out;
        }
    }
    const json_t *o = dts__config_root(doc);
    char buf[64];
    if (!json_is_object(o)) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: expected a JSON object (a dtsim config or dtrain's config), got %s", what,
                     dts__json_show(o, buf, sizeof buf));
        goto out;
    }

    /* dtrain's configuration, or a dtsim config file (every key known) */
    int dtrain_cfg = 0;
    for (const char *const *k = dts__dtrain_marks; *k; k++) dtrain_cfg |= json_object_get(o, *k) != NULL;
    if (!dtrain_cfg) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)o, key, v)
        {
            if (!dts__in(dts__keys, key)) {
                st = DT_FAIL(DT_ERR_INVALID,
                             "%s: \"%s\": unknown key (dtsim config keys are dtrain's config keys, "
                             "e.g. \"num_layers\", \"pipeline_model_parallel_size\", plus "
                             "\"micro_batches\", \"hardware\", \"profile\"; see docs/simulator.md)",
                             what, key);
                goto out;
            }
        }
    }

    /* what the run recorded beyond the scenario: a dtrain configuration's whole record */
    if (dtrain_cfg && dts_recorded_read(&n->recorded, o, what) != DT_OK) {
        st = DT_ERR_INVALID;
        goto out;
    }

    /* the model: the preset first, then the sizes */
    const char *s = NULL;
    int r;
    DTS__TRY(r = dts__str(what, o, "model", "a model name (tiny, small, gpt2-124m or custom)", &s));
    int model_given = r == 1;
    if (model_given) {
        if (!strcmp(s, "custom")) {
            snprintf(n->model_name, sizeof n->model_name, "custom");
        } else {
            dt_gpt_config pre;
            if (strlen(s) >= sizeof n->model_name || dt_gpt_config_preset(s, &pre) != DT_OK) {
                st = DT_FAIL(DT_ERR_INVALID, "%s: \"model\": expected tiny, small, gpt2-124m or custom, got \"%s\"%s",
                             what, s, !strcmp(s, "mlp-bn") ? " (the simulator models the GPT only)" : "");
                goto out;
            }
            n->model = pre; /* the preset's vocabulary (dtrain's rule); "vocab_size" below may change it */
            snprintf(n->model_name, sizeof n->model_name, "%s", s);
        }
    }
    DTS__TRY(dts__int32(what, o, "num_layers", 1, 1024, &n->model.num_layers));
    DTS__TRY(dts__int32(what, o, "hidden_size", 1, 65536, &n->model.hidden_size));
    DTS__TRY(dts__int32(what, o, "num_attention_heads", 1, 65536, &n->model.num_heads));
    DTS__TRY(dts__int32(what, o, "max_position_embeddings", 1, 65536, &n->model.seq_len));
    DTS__TRY(dts__int32(what, o, "vocab_size", 2, 1 << 24, &n->model.vocab_size));
    {
        int untie = !n->model.tie_embeddings;
        DTS__TRY(dts__bool(what, o, "untie_embeddings_and_output_weights", &untie));
        n->model.tie_embeddings = !untie;
    }
    DTS__TRY(r = dts__int32(what, o, "seq_length", 1, 65536, &n->T));
    /* a preset with a shorter context than T: train at its context (dtrain's rule) */
    if (model_given && r == 0 && n->T > n->model.seq_len) n->T = n->model.seq_len;
    if (strcmp(n->model_name, "custom") != 0) {
        dt_gpt_config pre;
        if (dt_gpt_config_preset(n->model_name, &pre) == DT_OK &&
            (pre.num_layers != n->model.num_layers || pre.hidden_size != n->model.hidden_size ||
             pre.num_heads != n->model.num_heads || pre.seq_len != n->model.seq_len))
            snprintf(n->model_name, sizeof n->model_name, "custom");
        dt_clear_error();
    }

    /* batch and parallel layout */
    int64_t G = 0, M = 0, v64 = 0;
    DTS__TRY(dts__int32(what, o, "micro_batch_size", 1, INT_MAX, &n->B));
    int g_given, m_given;
    DTS__TRY(g_given = dts__int(what, o, "global_batch_size", 1, INT64_MAX, &G));
    DTS__TRY(m_given = dts__int(what, o, "micro_batches", 1, DTS_MAX_MICRO, &M));
    DTS__TRY(dts__int(what, o, "train_iters", 1, INT64_MAX, &n->steps)); /* the simulator runs at least one step */
    DTS__TRY(dts__int32(what, o, "tensor_model_parallel_size", 1, 1024, &n->t));
    DTS__TRY(dts__int32(what, o, "pipeline_model_parallel_size", 1, DTS_MAX_STAGES, &n->p));
    DTS__TRY(dts__int32(what, o, "data_parallel_size", 1, 1 << 20, &n->d));
    /* dtrain writes the context keys only when c > 1: absent, none */
    DTS__TRY(r = dts__int32(what, o, "context_parallel_size", 1, 64, &n->c));
    if (r == 0 && dtrain_cfg) n->c = 1;
    DTS__TRY(r = dts__str(what, o, "cp_comm_type", "p2p, a2a or allgather", &s));
    if (r == 1 && dt_cp_comm_parse(s, &n->cp_comm) != DT_OK) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: \"cp_comm_type\": expected p2p, a2a or allgather, got \"%s\"", what, s);
        goto out;
    }
    if (r == 0 && dtrain_cfg) n->cp_comm = DT_CP_P2P;
    const int64_t per_micro = (int64_t)n->B * n->d;
    if (g_given && G % per_micro != 0) {
        st = DT_FAIL(DT_ERR_INVALID,
                     "%s: \"global_batch_size\": %" PRId64 " is not a multiple of micro_batch_size %d x "
                     "data_parallel_size %d",
                     what, G, n->B, n->d);
        goto out;
    }
    if (g_given && m_given && G != M * per_micro) {
        st = DT_FAIL(DT_ERR_INVALID,
                     "%s: \"micro_batches\": %" PRId64 " x micro_batch_size %d x data_parallel_size %d "
                     "is not global_batch_size %" PRId64,
                     what, M, n->B, n->d, G);
        goto out;
    }
    if (m_given) n->m = (int)M;
    else if (g_given) {
        if (G / per_micro > DTS_MAX_MICRO) {
            st = DT_FAIL(DT_ERR_INVALID,
                         "%s: \"global_batch_size\": %" PRId64 " gives %" PRId64 " micro-batches per step and "
                         "pipeline, more than the %d the simulator holds",
                         what, G, G / per_micro, DTS_MAX_MICRO);
            goto out;
        }
        n->m = (int)(G / per_micro);
    }

    DTS__TRY(r = dts__str(what, o, "pipeline_schedule",
                          "gpipe, 1f1b, pipedream, pipedream-vsync, interleaved-1f1b, zb-h1 or zb-v", &s));
    if (r == 1 && dt_sched_kind_parse(s, &n->schedule) != DT_OK) {
        st = DT_FAIL(DT_ERR_INVALID,
                     "%s: \"pipeline_schedule\": expected gpipe, 1f1b, pipedream, pipedream-vsync, "
                     "interleaved-1f1b, zb-h1 or zb-v, got \"%s\"",
                     what, s);
        goto out;
    }
    DTS__TRY(dts__int32(what, o, "virtual_pipeline_model_parallel_size", 1, 1 << 20, &n->vpp));
    DTS__TRY(dts__int32(what, o, "num_layers_per_virtual_pipeline_stage", 1, 1 << 20, &n->vpp_layers));
    const json_t *split = json_object_get(o, "pipeline_split");
    if (split && json_is_null(split)) {
        n->n_split = 0;
    } else if (split) {
        size_t cnt = json_is_array(split) ? json_array_size(split) : 0;
        int ok = json_is_array(split) && cnt <= DTS_MAX_STAGES;
        for (size_t i = 0; ok && i < cnt; i++) {
            const json_t *e = json_array_get(split, i);
            ok = json_is_integer(e) && json_integer_value(e) >= 1 && json_integer_value(e) <= 100000;
            if (ok) n->split[i] = (int)json_integer_value(e);
        }
        if (!ok) {
            st = DT_FAIL(DT_ERR_INVALID,
                         "%s: \"pipeline_split\": expected an array of positive block counts (one per "
                         "stage) or null, got %s",
                         what, dts__json_show(split, buf, sizeof buf));
            goto out;
        }
        n->n_split = (int)cnt;
        for (size_t i = cnt; i < DTS_MAX_STAGES; i++) n->split[i] = 0;
    }

    DTS__TRY(r = dts__str(what, o, "allreduce", "ring, tree, naive, mpi, nccl, ps-sync or ps-async", &s));
    if (r == 1) {
        if (!dts__exchange_parse(s, &n->exchange)) {
            st = DT_FAIL(DT_ERR_INVALID,
                         "%s: \"allreduce\": expected ring, tree, naive, mpi, nccl, ps-sync or "
                         "ps-async, got \"%s\"",
                         what, s);
            goto out;
        }
        snprintf(n->exchange_name, sizeof n->exchange_name, "%s", s);
    }
    int k_given;
    DTS__TRY(k_given = dts__int32(what, o, "num_ps_servers", 0, 1 << 20, &n->num_ps_servers));
    if (!k_given && r == 1) /* the exchange changed: dtrain's default K */
        n->num_ps_servers = dts__is_ps(n->exchange) ? (n->num_ps_servers > 0 ? n->num_ps_servers : 1) : 0;
    if (k_given == 1 && dts__is_ps(n->exchange) && n->num_ps_servers < 1) {
        st = DT_FAIL(DT_ERR_INVALID,
                     "%s: \"num_ps_servers\": expected an integer >= 1 with \"allreduce\" \"%s\", got %d", what,
                     n->exchange_name, n->num_ps_servers);
        goto out;
    }
    DTS__TRY(dts__bool(what, o, "use_distributed_optimizer", &n->zero));
    {
        int stage = 0; /* a dtrain configuration's, or a config file's: the larger of the two keys */
        DTS__TRY(r = dts__int32(what, o, "zero_stage", 0, 3, &stage));
        if (r == 1 && stage > n->zero) n->zero = stage;
    }
    DTS__TRY(dts__bool(what, o, "zero_prefetch", &n->zero_prefetch));
    /* the vocabulary split: dtrain writes "vocab_parallel" only when it
     * split (t > 1), so in its configuration the key's absence means a
     * whole embedding and head (--no-vocab-parallel, or a runtime before
     * the split); a dtsim config without it keeps the default (split) */
    DTS__TRY(r = dts__bool(what, o, "vocab_parallel", &n->vocab_parallel));
    if (r == 0 && dtrain_cfg) n->vocab_parallel = 0;
    DTS__TRY(dts__bool(what, o, "scatter_gather_tensors_in_pipeline", &n->scatter_gather));
    /* dtrain writes "sequence_parallel" only when on: absent, off */
    DTS__TRY(r = dts__bool(what, o, "sequence_parallel", &n->sequence_parallel));
    if (r == 0 && dtrain_cfg) n->sequence_parallel = 0;
    DTS__TRY(dts__int(what, o, "bucket_bytes", 0, INT64_MAX, &n->bucket_bytes));
    DTS__TRY(dts__int(what, o, "allreduce_chunk_bytes", 0, INT64_MAX, &n->chunk_bytes));

    /* precision and loss scaling */
    DTS__TRY(r = dts__str(what, o, "precision", "fp32, fp16 or bf16 (or f32, f16)", &s));
    const int precision_given = r == 1;
    if (r == 1) {
        const char *p = dts__precision_parse(s);
        if (!p) {
            st = DT_FAIL(DT_ERR_INVALID, "%s: \"precision\": expected fp32, fp16 or bf16 (or f32, f16), got \"%s\"",
                         what, s);
            goto out;
        }
        snprintf(n->precision, sizeof n->precision, "%s", p);
    }
    DTS__TRY(dts__float(what, o, "loss_scale", 0, 0, &n->scaler.static_scale));
    DTS__TRY(dts__float(what, o, "initial_loss_scale", 0, 1, &n->scaler.initial_scale));
    DTS__TRY(dts__int32(what, o, "loss_scale_window", 1, INT_MAX, &n->scaler.window));
    DTS__TRY(dts__int32(what, o, "hysteresis", 1, INT_MAX, &n->scaler.hysteresis));
    DTS__TRY(dts__float(what, o, "min_loss_scale", 0, 1, &n->scaler.min_scale));
    DTS__TRY(dts__float(what, o, "loss_scale_growth_factor", 1, 1, &n->scaler.growth_factor));
    DTS__TRY(dts__float(what, o, "loss_scale_backoff_factor", 0, 1, &n->scaler.backoff_factor));
    DTS__TRY(dts__bool(what, o, "consecutive_hysteresis", &n->scaler.consecutive_hysteresis));
    n->use_loss_scaling = !strcmp(n->precision, "fp16") || n->scaler.static_scale > 0;

    /* FP8: dtrain writes its keys only with --fp8-format, so in its
     * configuration an absent "fp8_format" means none; they are checked and
     * kept, not timed (dts_scenario.h) */
    DTS__TRY(r = dts__str(what, o, "fp8_format", "e4m3, hybrid or null (no FP8)", &s));
    if (r == 0 && dtrain_cfg) n->fp8 = DT_FP8_OFF;
    if (r == 1 && dt_fp8_mode_parse(s, &n->fp8) != DT_OK) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: \"fp8_format\": expected e4m3, hybrid or null (no FP8), got \"%s\"", what, s);
        goto out;
    }
    DTS__TRY(r = dts__str(what, o, "fp8_recipe", "delayed, tensorwise or blockwise", &s));
    if (r == 1 && dt_fp8_recipe_parse(s, &n->fp8_recipe) != DT_OK) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: \"fp8_recipe\": expected delayed, tensorwise or blockwise, got \"%s\"", what,
                     s);
        goto out;
    }
    DTS__TRY(r = dts__str(what, o, "fp8_amax_compute_algo", "max or most_recent", &s));
    if (r == 1 && dt_fp8_amax_algo_parse(s, &n->fp8_amax_algo) != DT_OK) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: \"fp8_amax_compute_algo\": expected max or most_recent, got \"%s\"", what, s);
        goto out;
    }
    DTS__TRY(dts__int32(what, o, "fp8_margin", 0, 32, &n->fp8_margin));
    DTS__TRY(dts__int32(what, o, "fp8_amax_history_len", 1, 65536, &n->fp8_amax_history_len));
    if (n->fp8 != DT_FP8_OFF) { /* FP8 runs everything else in bf16 (dtrain's rule) */
        if (precision_given && strcmp(n->precision, "bf16") != 0) {
            st = DT_FAIL(DT_ERR_INVALID, "%s: \"fp8_format\" %s with \"precision\" %s: FP8 runs the rest in bf16", what,
                         dt_fp8_mode_name(n->fp8), n->precision);
            goto out;
        }
        snprintf(n->precision, sizeof n->precision, "bf16");
        n->use_loss_scaling = n->scaler.static_scale > 0;
    }

    DTS__TRY(r = dts__str(what, o, "recompute_granularity", "none, full or selective", &s));
    if (r == 1) {
        int found = -1;
        for (int i = 0; i < 3; i++)
            if (!strcmp(s, dts__recompute_names[i])) found = i;
        if (found < 0) {
            st = DT_FAIL(DT_ERR_INVALID, "%s: \"recompute_granularity\": expected none, full or selective, got \"%s\"",
                         what, s);
            goto out;
        }
        n->recompute = found;
    }
    /* dtrain writes 0 when the recomputation is not full: K is then kept */
    int rc_k = 0;
    DTS__TRY(dts__int32(what, o, "recompute_num_layers", 0, 1024, &rc_k));
    if (rc_k > 0) n->recompute_num_layers = rc_k;
    DTS__TRY(dts__int32(what, o, "slow_rank", -1, INT_MAX, &n->slow_rank));
    double ms;
    DTS__TRY(r = dts__num(what, o, "slow_ms", 0, 0, &ms));
    if (r == 1) {
        if (ms > 3.6e6) {
            st = DT_FAIL(DT_ERR_INVALID, "%s: \"slow_ms\": expected a number in [0, 3600000], got %g", what, ms);
            goto out;
        }
        n->slow_ns = llround(ms * 1e6);
    }

    DTS__TRY(r = dts__str(what, o, "optimizer", "sgd, adamw, lars or lamb", &s));
    if (r == 1) {
        dt_optim_kind kind;
        if (dt_optim_kind_parse(s, &kind) != DT_OK) {
            st = DT_FAIL(DT_ERR_INVALID, "%s: \"optimizer\": expected sgd, adamw, lars or lamb, got \"%s\"", what, s);
            goto out;
        }
        n->optimizer_states = dts__optimizer_states(kind);
    }
    DTS__TRY(dts__int32(what, o, "optimizer_states", 0, 16, &n->optimizer_states));

    const json_t *seed = dts__get(o, "seed");
    if (seed && json_is_string(seed)) { /* dtrain writes seeds above 2^63 as text */
        const char *t = json_string_value(seed);
        char *end = NULL;
        errno = 0;
        unsigned long long u = strtoull(t, &end, 10);
        if (t[0] < '0' || t[0] > '9' || *end || errno) {
            st = DT_FAIL(DT_ERR_INVALID, "%s: \"seed\": expected an integer >= 0, got \"%s\"", what, t);
            goto out;
        }
        n->seed = (uint64_t)u;
    } else {
        DTS__TRY(r = dts__int(what, o, "seed", 0, INT64_MAX, &v64));
        if (r == 1) n->seed = (uint64_t)v64;
    }

    const json_t *gt = json_object_get(o, "grad_trace");
    if (gt && json_is_null(gt)) {
        n->grad_trace[0] = '\0';
    } else if (gt) {
        if (!dts__json_str_copy(gt, 0, n->grad_trace, sizeof n->grad_trace)) {
            char want[64];
            snprintf(want, sizeof want, "a file name (at most %zu bytes) or null", sizeof n->grad_trace - 1);
            st = dts__json_expected(DT_ERR_INVALID, what, "grad_trace", want, gt);
            goto out;
        }
    }

    const json_t *hw = dts__get(o, "hardware");
    if (hw && json_is_string(hw) && json_string_length(hw) > 0) {
        dts_hw h;
        st = dts_hw_load(json_string_value(hw), &h);
        if (st != DT_OK) {
            st = dts__wrap(st, what, "hardware");
            goto out;
        }
        n->hw = h;
    } else if (hw && json_is_object(hw)) {
        char src[1100];
        snprintf(src, sizeof src, "%s: \"hardware\"", what);
        st = dts_hw_from_json(hw, src, &n->hw);
        if (st != DT_OK) goto out;
    } else if (hw) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: \"hardware\": expected a sim/hw file name or a hardware object, got %s", what,
                     dts__json_show(hw, buf, sizeof buf));
        goto out;
    }
    const json_t *cost = dts__get(o, "cost");
    if (cost && !json_is_string(cost)) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: \"cost\": expected a string (the cost's source; ignored) or null, got %s",
                     what, dts__json_show(cost, buf, sizeof buf));
        goto out;
    }

    /* a cost table of other sizes or hardware is stale */
    if (memcmp(&n->model, &sc->model, sizeof n->model) != 0 || n->B != sc->B || n->T != sc->T ||
        !dts_hw_equal(&n->hw, &sc->hw))
        n->have_cost = 0;
    const char *profile = NULL;
    DTS__TRY(r = dts__str(what, o, "profile", "a trace file name (a dtrain single-rank profile)", &profile));
    if (r == 1) {
        st = dts_scenario_set_cost(n, profile);
        if (st != DT_OK) {
            st = dts__wrap(st, what, "profile");
            goto out;
        }
    }
    *sc = *n;
out:
    free(n);
    json_decref(doc);
    return st;
}

/* ---- checking ----------------------------------------------------------------------- */

dt_status dts_scenario_grid(const dts_scenario *sc, dt_grid *g)
{
    return dt_grid_init_sizes(g, sc->t, sc->c, sc->d, sc->p, dts__is_ps(sc->exchange) ? sc->num_ps_servers : 0);
}

int dts_scenario_world(const dts_scenario *sc)
{
    dt_grid g;
    return dts_scenario_grid(sc, &g) == DT_OK ? g.world : -1;
}

dt_status dts_scenario_check(const dts_scenario *sc)
{
    if (!sc) return DT_FAIL(DT_ERR_INVALID, "dts_scenario_check: NULL scenario");
    DT_CHECK(dt_gpt_config_validate(&sc->model));
    if (sc->B < 1) return DT_FAIL(DT_ERR_INVALID, "--micro-batch-size %d: expected an integer >= 1", sc->B);
    if (sc->T < 1) return DT_FAIL(DT_ERR_INVALID, "--seq-length %d: expected an integer >= 1", sc->T);
    if (sc->T > sc->model.seq_len)
        return DT_FAIL(DT_ERR_INVALID, "--seq-length %d exceeds --max-position-embeddings %d", sc->T,
                       sc->model.seq_len);
    if ((int64_t)sc->B * sc->T > (int64_t)1 << 30)
        return DT_FAIL(DT_ERR_INVALID, "--micro-batch-size %d x --seq-length %d: too many tokens per micro-batch",
                       sc->B, sc->T);
    if (sc->m < 1 || sc->m > DTS_MAX_MICRO)
        return DT_FAIL(DT_ERR_INVALID,
                       "--micro-batches %d: expected 1..%d per step and pipeline (the simulator holds each one's "
                       "state for the step)",
                       sc->m, DTS_MAX_MICRO);
    if (sc->steps < 1)
        return DT_FAIL(DT_ERR_INVALID,
                       "--train-iters %" PRId64 ": expected an integer >= 1 (the simulator runs at least "
                       "one step)",
                       sc->steps);
    if (sc->t < 1 || sc->t > 1024)
        return DT_FAIL(DT_ERR_INVALID, "--tensor-model-parallel-size %d: expected 1..1024", sc->t);
    if (sc->p < 1 || sc->p > DTS_MAX_STAGES)
        return DT_FAIL(DT_ERR_INVALID, "--pipeline-model-parallel-size %d: expected 1..%d", sc->p, DTS_MAX_STAGES);
    if (sc->d < 1) return DT_FAIL(DT_ERR_INVALID, "--data-parallel-size %d: expected an integer >= 1", sc->d);
    if (sc->c < 1 || sc->c > 64) return DT_FAIL(DT_ERR_INVALID, "--context-parallel-size %d: expected 1..64", sc->c);
    if ((int64_t)sc->t * sc->c * sc->p * sc->d + sc->num_ps_servers > (1 << 20))
        return DT_FAIL(DT_ERR_INVALID,
                       "--tensor-model-parallel-size %d x --context-parallel-size %d x "
                       "--pipeline-model-parallel-size %d x --data-parallel-size %d: more than %d ranks",
                       sc->t, sc->c, sc->p, sc->d, 1 << 20);
    if (sc->t > 1) DT_CHECK(dt__tp_check(&sc->model, sc->t));
    if (sc->t > 1 && sc->vocab_parallel && sc->model.vocab_size < sc->t)
        return DT_FAIL(DT_ERR_INVALID,
                       "--tensor-model-parallel-size %d: a vocabulary of %d has fewer rows than ranks (add "
                       "--no-vocab-parallel)",
                       sc->t, sc->model.vocab_size);
    /* sequence parallelism: lib/train/config.c's refusals, in its words */
    if (sc->sequence_parallel && sc->t == 1)
        return DT_FAIL(DT_ERR_INVALID, "--sequence-parallel needs --tensor-model-parallel-size > 1");
    if (sc->sequence_parallel && !sc->vocab_parallel)
        return DT_FAIL(DT_ERR_INVALID, "--sequence-parallel needs the vocabulary split: drop --no-vocab-parallel");
    if (sc->sequence_parallel && sc->T % sc->t)
        return DT_FAIL(DT_ERR_INVALID,
                       "--sequence-parallel: --tensor-model-parallel-size %d does not divide --seq-length %d", sc->t,
                       sc->T);
    /* context parallelism: the same file's, in its words */
    if (sc->c > 1 && sc->T % (2 * sc->c))
        return DT_FAIL(DT_ERR_INVALID,
                       "--context-parallel-size %d: --seq-length %d does not split into %d equal chunks (2 per rank)",
                       sc->c, sc->T, 2 * sc->c);
    if (sc->c > 1 && sc->cp_comm == DT_CP_A2A && (sc->model.num_heads / sc->t) % sc->c)
        return DT_FAIL(DT_ERR_INVALID,
                       "--cp-comm-type a2a: --context-parallel-size %d does not divide the %d attention heads of a "
                       "tensor rank (--num-attention-heads %d / %d)",
                       sc->c, sc->model.num_heads / sc->t, sc->model.num_heads, sc->t);
    if (sc->sequence_parallel && sc->c > 1 && (sc->T / sc->c) % sc->t)
        return DT_FAIL(DT_ERR_INVALID,
                       "--sequence-parallel: --tensor-model-parallel-size %d does not divide the %d positions of a "
                       "context-parallel rank",
                       sc->t, sc->T / sc->c);
    if (sc->c > 1 && sc->p > 1 && (sc->schedule == DT_SCHED_PIPEDREAM || sc->schedule == DT_SCHED_PIPEDREAM_VSYNC))
        return DT_FAIL(DT_ERR_INVALID,
                       "--context-parallel-size %d: not with --pipeline-schedule %s (each stage updates on its own: "
                       "no common loss over the sequence's ranks)",
                       sc->c, dt_sched_kind_name(sc->schedule));
    const int L = sc->model.num_layers;
    if (sc->n_split) {
        if (sc->p == 1) return DT_FAIL(DT_ERR_INVALID, "--pipeline-split needs --pipeline-model-parallel-size > 1");
        if (sc->n_split != sc->p)
            return DT_FAIL(DT_ERR_INVALID, "--pipeline-split: %d block counts for %d stages (expected one per stage)",
                           sc->n_split, sc->p);
        int64_t sum = 0;
        for (int i = 0; i < sc->n_split; i++) {
            if (sc->split[i] < 1)
                return DT_FAIL(DT_ERR_INVALID, "--pipeline-split: expected %d positive block counts (one per stage)",
                               sc->p);
            sum += sc->split[i];
        }
        if (sum != L)
            return DT_FAIL(DT_ERR_INVALID,
                           "--pipeline-split: the stages hold %" PRId64 " blocks, the model has %d "
                           "(--num-layers)",
                           sum, L);
    } else if (sc->p > L) {
        return DT_FAIL(DT_ERR_INVALID,
                       "--pipeline-model-parallel-size %d: the model has only %d blocks "
                       "(--num-layers; expected at least one per stage)",
                       sc->p, L);
    }
    if (sc->schedule < DT_SCHED_GPIPE || sc->schedule > DT_SCHED_ZB_V)
        return DT_FAIL(DT_ERR_INVALID, "--pipeline-schedule: unknown schedule %d", (int)sc->schedule);
    /* pipelined (the stage path): the chunks, and the schedule's own limits on p, m and them */
    if (sc->p > 1 || sc->t > 1 || sc->c > 1) {
        int v = 1;
        DT_CHECK(dts_scenario_chunks(sc, &v));
        if (v > 1 && sc->n_split > 0)
            return DT_FAIL(DT_ERR_INVALID,
                           "--pipeline-split: not with --pipeline-schedule %s (its blocks are split evenly over the "
                           "%d x %d virtual stages)",
                           dt_sched_kind_name(sc->schedule), sc->p, v);
        DT_CHECK(dt_schedule_check(sc->schedule, sc->p, v, sc->m, 1));
    }

    /* the gradient exchange */
    dts_exchange ex;
    if (!dts__exchange_parse(sc->exchange_name, &ex) || ex != sc->exchange)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce '%s': expected ring, tree, naive, mpi, nccl, ps-sync or ps-async",
                       sc->exchange_name);
    const int ps = dts__is_ps(sc->exchange);
    /* the first of the stage path's sizes above 1 (1: none), for the refusals */
    const int split = sc->p > 1 ? sc->p : sc->t > 1 ? sc->t : sc->c;
    const char *flag = sc->p > 1   ? "--pipeline-model-parallel-size"
                       : sc->t > 1 ? "--tensor-model-parallel-size"
                                   : "--context-parallel-size";
    if (!ps && sc->num_ps_servers != 0)
        return DT_FAIL(DT_ERR_INVALID, "--num-ps-servers %d needs --allreduce ps-sync or ps-async", sc->num_ps_servers);
    if (ps) {
        if (sc->num_ps_servers < 1)
            return DT_FAIL(DT_ERR_INVALID, "--num-ps-servers %d: expected an integer >= 1 with --allreduce %s",
                           sc->num_ps_servers, sc->exchange_name);
        if (split > 1) return DT_FAIL(DT_ERR_INVALID, "%s %d with a parameter server: not supported", flag, split);
        if (sc->zero)
            return DT_FAIL(DT_ERR_INVALID, "--use-distributed-optimizer shards over an allreduce group, not with a "
                                           "parameter server");
    }
    if (sc->zero_prefetch && sc->zero != 3)
        return DT_FAIL(DT_ERR_INVALID, "--zero-prefetch gathers stage 3's layers ahead: it needs --zero-stage 3");
    if (sc->zero >= 2 && split > 1)
        return DT_FAIL(DT_ERR_INVALID,
                       "--zero-stage %d with %s %d: not modelled (--zero-stage 1 shards each stage's optimizer over "
                       "its data group)",
                       sc->zero, flag, split);
    if (sc->bucket_bytes < 0)
        return DT_FAIL(DT_ERR_INVALID, "--bucket-size-mb: %" PRId64 " bytes: expected >= 0", sc->bucket_bytes);
    if (sc->chunk_bytes < 0)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce-chunk-bytes %" PRId64 ": expected an integer >= 0",
                       sc->chunk_bytes);

    /* precision, loss scaling, memory */
    if (!dts__precision_parse(sc->precision) || strcmp(dts__precision_parse(sc->precision), sc->precision) != 0)
        return DT_FAIL(DT_ERR_INVALID, "precision '%s': expected fp32, fp16 (--fp16) or bf16 (--bf16)", sc->precision);
    const int expect_scaling = !strcmp(sc->precision, "fp16") || sc->scaler.static_scale > 0;
    if (sc->use_loss_scaling != expect_scaling)
        return DT_FAIL(DT_ERR_INVALID,
                       "use_loss_scaling %d: expected %d (loss scaling is on with --fp16 or "
                       "--loss-scale > 0)",
                       sc->use_loss_scaling, expect_scaling);
    if (sc->use_loss_scaling) {
        dt_loss_scaler probe;
        DT_CHECK(dt_loss_scaler_init(&probe, &sc->scaler));
    }
    if (sc->exchange == DTS_EX_PS_ASYNC && sc->use_loss_scaling)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce ps-async: loss scaling (--fp16) is not supported; use ps-sync, "
                                       "or --bf16 without --loss-scale");
    if (sc->recompute < 0 || sc->recompute > 2)
        return DT_FAIL(DT_ERR_INVALID, "--recompute-granularity: unknown value %d", sc->recompute);
    if (sc->recompute == 1 && (sc->recompute_num_layers < 1 || sc->recompute_num_layers > L))
        return DT_FAIL(DT_ERR_INVALID, "--recompute-num-layers %d: expected 1..%d (the number of layers)",
                       sc->recompute_num_layers, L);
    /* what dtrain refuses (lib/train/config.c) */
    DT_CHECK(dt__pipe_check(&sc->model, sc->p, sc->schedule, sc->use_loss_scaling));
    const int world = dts_scenario_world(sc);
    if (sc->slow_rank < -1 || sc->slow_rank >= world)
        return DT_FAIL(DT_ERR_INVALID, "--slow-rank %d: expected a rank 0..%d", sc->slow_rank, world - 1);
    if (sc->slow_ns < 0) return DT_FAIL(DT_ERR_INVALID, "--slow-rank: MS %g: expected >= 0", (double)sc->slow_ns / 1e6);
    if (sc->slow_ns > 0 && sc->slow_rank < 0)
        return DT_FAIL(DT_ERR_INVALID, "--slow-rank: a delay of %g ms needs a rank (R:MS)", (double)sc->slow_ns / 1e6);
    if (sc->optimizer_states < 0 || sc->optimizer_states > 16)
        return DT_FAIL(DT_ERR_INVALID, "optimizer_states %d: expected 0..16", sc->optimizer_states);
    DT_CHECK(dts_hw_validate(&sc->hw, "hardware"));
    if (sc->have_cost && sc->cost.n_layer != L)
        return DT_FAIL(DT_ERR_INVALID,
                       "the cost table has %d blocks, the model %d (--num-layers): fill it again "
                       "(dts_scenario_set_cost)",
                       sc->cost.n_layer, L);
    return DT_OK;
}

dt_status dts_scenario_set_cost(dts_scenario *sc, const char *profile_path)
{
    if (!sc) return DT_FAIL(DT_ERR_INVALID, "dts_scenario_set_cost: NULL scenario");
    dts_cost *c = malloc(sizeof *c);
    if (!c) return DT_FAIL(DT_ERR_NOMEM, "out of memory for a cost table");
    memset(c, 0, sizeof *c);
    dt_status st;
    if (profile_path) {
        dt_trace *tr = NULL;
        st = dt_trace_read(profile_path, &tr);
        if (st == DT_OK) st = dts_cost_from_profile(tr, profile_path, &sc->model, sc->B, sc->T, c);
        if (st == DT_OK) st = dts_cost_to_precision(c, &sc->model, sc->B, sc->T, &sc->hw, sc->precision, NULL);
        dt_trace_free(tr);
    } else {
        /* a GEMM's efficiency ("gemm_efficiency") is its size's on one tensor rank */
        st = dts_cost_roofline_sharded(&sc->model, sc->B, sc->T, sc->t, sc->t > 1 && sc->vocab_parallel ? sc->t : 1,
                                       &sc->hw, c);
    }
    if (st == DT_OK) {
        sc->cost = *c;
        sc->have_cost = 1;
    }
    free(c);
    return st;
}

dt_status dts_scenario_chunks(const dts_scenario *sc, int *v)
{
    if (!sc || !v) return DT_FAIL(DT_ERR_INVALID, "dts_scenario_chunks: NULL argument");
    return dt_sched_chunks_from_flags(sc->schedule, sc->p, sc->model.num_layers, sc->vpp, sc->vpp_layers, v);
}

dt_status dts_scenario_stage_layers(const dts_scenario *sc, int s, int *first, int *last)
{
    if (!sc || !first || !last) return DT_FAIL(DT_ERR_INVALID, "dts_scenario_stage_layers: NULL argument");
    if (s < 0 || s >= sc->p)
        return DT_FAIL(DT_ERR_INVALID, "stage %d: expected 0..%d (--pipeline-model-parallel-size %d)", s, sc->p - 1,
                       sc->p);
    int l0 = 0, l1 = 0;
    DT_CHECK(dt__stage_split(sc->model.num_layers, sc->p, sc->n_split ? sc->split : NULL, &l0, &l1, s));
    *first = s == 0 ? -1 : l0;
    *last = s == sc->p - 1 ? sc->model.num_layers : l1 - 1;
    return DT_OK;
}

const char *dts_recompute_name(int r) { return r >= 0 && r <= 2 ? dts__recompute_names[r] : "?"; }
