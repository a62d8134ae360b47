/* cost.c: per-operation durations of one device (dts_cost.h): the layer
 * shapes of the GPT (parameters, activation bytes, FLOPs, bytes moved, ops),
 * the roofline on a dts_hw, and the means of a real single-rank profile.
 *
 * Legend: B micro-batch, T sequence length, C hidden size, NH heads,
 * V vocabulary, P = cfg->seq_len positions of wpe, L blocks.
 *
 * Invariants: the per-slot parameter counts add up to
 * dt_gpt_config_num_params (tests/check_sim_cost.c checks it); a function
 * that fails leaves *out untouched. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dts_json.h"
#include "dts_cost.h"
#include "dts_engine.h"

/* ---- layer shapes ------------------------------------------------------------ */

static int cost__kind(const dt_gpt_config *cfg, int slot) /* 0 embedding, 1 block, 2 head, -1 out of range */
{
    if (slot == 0) return 0;
    if (slot >= 1 && slot <= cfg->num_layers) return 1;
    if (slot == cfg->num_layers + 1) return 2;
    return -1;
}

int64_t dts_layer_params(const dt_gpt_config *cfg, int slot)
{
    const int64_t C = cfg->hidden_size, V = cfg->vocab_size, P = cfg->seq_len;
    switch (cost__kind(cfg, slot)) {
    case 0: return V * C + P * C;       /* wte, wpe */
    case 1: return 12 * C * C + 13 * C; /* ln1 2C, qkv 3C^2+3C, attproj C^2+C, ln2 2C, fc 4C^2+4C, fcproj 4C^2+C */
    case 2: return 2 * C + (cfg->tie_embeddings ? 0 : V * C); /* lnf 2C, lm_head V x C (none when tied to wte) */
    }
    return -1;
}

int64_t dts_layer_act_bytes(const dt_gpt_config *cfg, int slot, int B, int T)
{
    const int64_t BT = (int64_t)B * T, C = cfg->hidden_size, NH = cfg->num_heads, V = cfg->vocab_size;
    int64_t floats;
    switch (cost__kind(cfg, slot)) {
    case 0: floats = BT * C; break;                                     /* the embedding's output */
    case 1: floats = 10 * BT * C + 4 * BT + NH * (int64_t)B * T; break; /* see dts_cost.h */
    case 2: floats = BT * C + 2 * BT + BT * V; break;                   /* lnf, mean/rstd, logits */
    default: return -1;
    }
    return floats * (int64_t)sizeof(float);
}

double dts_layer_fwd_flops(const dt_gpt_config *cfg, int slot, int B, int T)
{
    const double BT = (double)B * T, C = cfg->hidden_size, V = cfg->vocab_size;
    switch (cost__kind(cfg, slot)) {
    case 0: return 0.0;                                                   /* a gather and an add */
    case 1: return 2.0 * 12.0 * C * C * BT + 4.0 * (double)B * T * T * C; /* GEMMs + Q K^T and att V */
    case 2: return 2.0 * V * C * BT;                                      /* the LM head's GEMM */
    }
    return 0.0;
}

double dts_layer_fwd_bytes(const dt_gpt_config *cfg, int slot, int B, int T)
{
    const double BT = (double)B * T, C = cfg->hidden_size, NH = cfg->num_heads, V = cfg->vocab_size;
    double floats = 0.0;
    switch (cost__kind(cfg, slot)) {
    case 0: /* read the B*T rows of wte and T rows of wpe it uses, write the output */
        floats = BT * C + (double)T * C + BT * C;
        break;
    case 1:
        /* weights once; activations in units of B*T*C read + written per op:
         * ln1 1+1, qkv 1+3, attention 3+1, proj 1+1, residual 2+1, ln2 1+1,
         * fc 1+4, gelu 4+4, fcproj 4+1, residual 2+1 = 38; the LayerNorm
         * statistics 4*B*T; the attention probabilities written and read
         * back, 2*NH*B*T*T: CUDA's unfused kernels do (in their workspace);
         * the CPU's fused tiles stay in cache, which a profile measures. */
        floats = (double)dts_layer_params(cfg, slot) + 38.0 * BT * C + 4.0 * BT + 2.0 * NH * B * (double)T * T;
        break;
    case 2: /* weights (the V x C matrix, tied or not); lnf 1+1 (+2 statistics); GEMM reads B*T*C, writes
             * the logits; the loss reads them */
        floats = 2.0 * C + (double)V * C + 3.0 * BT * C + 2.0 * BT + 2.0 * BT * V;
        break;
    default: return 0.0;
    }
    return floats * sizeof(float);
}

double dts_layer_bwd_w_share(const dt_gpt_config *cfg, int slot, int T)
{
    const double C = cfg->hidden_size;
    switch (cost__kind(cfg, slot)) {
    case 0: return 1.0;                     /* wte/wpe gradients only: no input gradient */
    case 1: return 3.0 * C / (6.0 * C + T); /* 24C^2BT of 48C^2BT + 8BT^2C */
    case 2: return 0.5;                     /* the LM head's dW GEMM of its dX + dW */
    }
    return 0.0;
}

int dts_layer_ops(const dt_gpt_config *cfg, int slot, int backward)
{
    switch (cost__kind(cfg, slot)) {
    case 0:
        return 1; /* encoder_forward / encoder_backward */
    /* forward: ln1, qkv, attention, attproj, residual, ln2, fc, gelu, fcproj, residual;
     * backward: 4 matmul_backward, gelu, ln2, attention, ln1 */
    case 1: return backward ? 8 : 10;
    /* forward: lnf, lm_head, cross-entropy; backward: cross-entropy, lm_head, zero dx, lnf */
    case 2: return backward ? 4 : 3;
    }
    return 0;
}

int64_t dts_cost_total_params(const dts_cost *c)
{
    int64_t s = 0;
    for (int i = 0; i <= c->n_layer + 1; i++) s += c->params[i];
    return s;
}

int64_t dts_cost_total_act_bytes(const dts_cost *c)
{
    int64_t s = 0;
    for (int i = 0; i <= c->n_layer + 1; i++) s += c->act_bytes[i];
    return s;
}

static dt_status cost__check_shape(const dt_gpt_config *model, int B, int T, const char *who)
{
    if (!model) return DT_FAIL(DT_ERR_INVALID, "%s: no model", who);
    /* dt_gpt_config_validate's limits, but for the layers: the simulator
     * goes to DTS_MAX_LAYERS, beyond what dtrain itself builds (1024) */
    if (model->num_heads < 1 || model->hidden_size < 1 || model->hidden_size % model->num_heads != 0)
        return DT_FAIL(DT_ERR_INVALID,
                       "%s: --hidden-size %d, --num-attention-heads %d: expected heads >= 1 dividing the size", who,
                       model->hidden_size, model->num_heads);
    if (model->vocab_size < 2 || model->seq_len < 1)
        return DT_FAIL(DT_ERR_INVALID, "%s: vocabulary %d, --max-position-embeddings %d: expected >= 2 and >= 1", who,
                       model->vocab_size, model->seq_len);
    if (model->num_layers < 1 || model->num_layers > DTS_MAX_LAYERS)
        return DT_FAIL(DT_ERR_INVALID, "%s: --num-layers %d: expected 1..%d", who, model->num_layers, DTS_MAX_LAYERS);
    if (B < 1) return DT_FAIL(DT_ERR_INVALID, "%s: --micro-batch-size %d: expected >= 1", who, B);
    if (T < 1 || T > model->seq_len)
        return DT_FAIL(DT_ERR_INVALID, "%s: --seq-length %d: expected 1..%d (the model's positions)", who, T,
                       model->seq_len);
    return DT_OK;
}

/* The model-only columns: params and act_bytes of every slot. */
static void cost__shapes(const dt_gpt_config *model, int B, int T, dts_cost *c)
{
    c->n_layer = model->num_layers;
    for (int s = 0; s <= model->num_layers + 1; s++) {
        c->params[s] = dts_layer_params(model, s);
        c->act_bytes[s] = dts_layer_act_bytes(model, s, B, T);
    }
}

/* ---- roofline ------------------------------------------------------------------ */

/* Bytes per parameter of one AdamW update, unscale/norm/clip included:
 * norm pass reads g (4); the step reads p, g, m, v (16) and writes p, m, v
 * (12); zeroing the gradient writes g (4). */
#define COST_OPTIM_BYTES_PER_PARAM 36.0

/* Seconds of slot's forward GEMMs at B x T (dts_layer_fwd_flops: every
 * FLOP counted is a GEMM's) on hw, each GEMM at the efficiency of its size
 * on one of `shards` ranks (its 1/shards share: the tensor split), the
 * time of the whole slot. Without a "gemm_efficiency" table, the single
 * efficiency for all of them: flops / (peak * efficiency), as before. */
static double cost__gemm_s(const dt_gpt_config *m, int slot, int B, int T, int shards, const dts_hw *hw)
{
    const double flops = dts_layer_fwd_flops(m, slot, B, T);
    if (hw->n_gemm_eff == 0 || !(flops > 0)) return flops / (hw->peak_flops * hw->efficiency);
    const double BT = (double)B * T, C = m->hidden_size, V = m->vocab_size, n = shards > 0 ? shards : 1;
    double g[6];
    int k = 0;
    if (slot == m->num_layers + 1) {
        g[k++] = 2.0 * V * C * BT; /* the LM head */
    } else { /* qkv, attention projection, fc, fc projection; Q K^T and att V */
        g[k++] = 2.0 * 3.0 * C * C * BT, g[k++] = 2.0 * C * C * BT, g[k++] = 2.0 * 4.0 * C * C * BT;
        g[k++] = 2.0 * 4.0 * C * C * BT, g[k++] = 2.0 * (double)B * T * T * C, g[k++] = 2.0 * (double)B * T * T * C;
    }
    double s = 0.0;
    for (int i = 0; i < k; i++) s += g[i] / (hw->peak_flops * dts_hw_gemm_efficiency(hw, g[i] / n));
    return s;
}

static int64_t cost__roof_ns(double compute_s, double bytes, int ops, const dts_hw *hw)
{
    const double memory_s = bytes / hw->mem_bytes_per_s;
    return dts_ns_add_sat(dts_ns_sat((compute_s > memory_s ? compute_s : memory_s) * 1e9),
                          dts_ns_mul_sat(hw->kernel_overhead_ns, ops));
}

dt_status dts_cost_roofline(const dt_gpt_config *model, int B, int T, const dts_hw *hw, dts_cost *out)
{
    return dts_cost_roofline_sharded(model, B, T, 1, 1, hw, out);
}

dt_status dts_cost_roofline_sharded(const dt_gpt_config *model, int B, int T, int t_blocks, int t_head,
                                    const dts_hw *hw, dts_cost *out)
{
    DT_CHECK(cost__check_shape(model, B, T, "roofline"));
    if (!hw || !out) return DT_FAIL(DT_ERR_INVALID, "roofline: NULL hardware or output");
    DT_CHECK(dts_hw_validate(hw, hw->name[0] ? hw->name : "hardware"));
    dts_cost *c = calloc(1, sizeof *c);
    if (!c) return DT_FAIL(DT_ERR_NOMEM, "roofline: out of memory");
    cost__shapes(model, B, T, c);
    for (int s = 0; s <= model->num_layers + 1; s++) {
        const double by = dts_layer_fwd_bytes(model, s, B, T);
        const int shards = s == 0 ? 1 : s == model->num_layers + 1 ? t_head : t_blocks;
        const double f_s = cost__gemm_s(model, s, B, T, shards, hw); /* the backward: dX and dW, each its size */
        c->fwd_ns[s] = cost__roof_ns(f_s, by, dts_layer_ops(model, s, 0), hw);
        c->bwd_ns[s] = cost__roof_ns(2.0 * f_s, 2.0 * by, dts_layer_ops(model, s, 1), hw);
        c->bwd_w_ns[s] = dts_ns_sat((double)c->bwd_ns[s] * dts_layer_bwd_w_share(model, s, T));
    }
    c->optim_ns_per_param = COST_OPTIM_BYTES_PER_PARAM / hw->mem_bytes_per_s * 1e9;
    /* tensors: wte, wpe, 12 per block, lnf.w, lnf.b, lm_head.w; 3 passes */
    c->step_overhead_ns = dts_ns_mul_sat(hw->kernel_overhead_ns, 3 * (5 + 12 * (int64_t)model->num_layers));
    snprintf(c->source, sizeof c->source, "roofline %s", hw->name);
    *out = *c;
    free(c);
    return DT_OK;
}

/* ---- profile ----------------------------------------------------------------- */

/* config[key] as an integer; *out keeps dflt when absent and dflt_ok. */
static dt_status cost__cfg_int(const char *name, const json_t *cfg, const char *key, int dflt_ok, int64_t *out)
{
    const json_t *v = json_object_get(cfg, key);
    if (!v && dflt_ok) return DT_OK;
    if (!json_is_integer(v))
        return DT_FAIL(DT_ERR_INVALID, "profile %s: config \"%s\": expected an integer, got %s", name, key,
                       v ? "another type" : "nothing");
    *out = (int64_t)json_integer_value(v);
    return DT_OK;
}

typedef struct cost__iter {
    int64_t spans_ns; /* forward/backward/recompute/optimizer spans of this iteration */
    int64_t end_ns;   /* end of its last span */
    int64_t eval_ns;  /* evaluation spans ending between the previous iteration's end and this one's */
    int seen;
} cost__iter;

typedef struct cost__mean {
    double sum;
    int64_t n;
} cost__mean;

static void mean_add(cost__mean *m, double v) { m->sum += v, m->n++; }
static double mean_of(const cost__mean *m) { return m->n ? m->sum / (double)m->n : 0.0; }
/* Durations kept to measure their spread robustly. */
typedef struct cost__spread {
    double *v;
    size_t n, cap;
} cost__spread;

static int spread_add(cost__spread *s, double x)
{
    if (s->n == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 256;
        double *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v, s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

static int cost__cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cost__median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cost__cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A robust standard deviation: 1.4826 x the median absolute deviation (a
 * normal's sd), so that a span the scheduler preempted once does not
 * stand for the spread of every run of the layer; 0 with fewer than 3
 * values. Reorders s. */
static double spread_sd(cost__spread *s)
{
    if (s->n < 3) return 0.0;
    const double med = cost__median(s->v, s->n);
    for (size_t i = 0; i < s->n; i++) s->v[i] = fabs(s->v[i] - med);
    return 1.4826 * cost__median(s->v, s->n);
}

dt_status dts_cost_from_profile(const dt_trace *profile, const char *profile_name, const dt_gpt_config *model, int B,
                                int T, dts_cost *out)
{
    const char *name = profile_name ? profile_name : "(unnamed)";
    if (!profile || !out) return DT_FAIL(DT_ERR_INVALID, "profile %s: NULL trace or output", name);
    DT_CHECK(cost__check_shape(model, B, T, "profile"));
    if (!profile->config_json)
        return DT_FAIL(DT_ERR_INVALID, "profile %s: no otherData.config (expected a dtrain --trace file)", name);
    json_error_t jerr;
    json_t *cfg = json_loads(profile->config_json, 0, &jerr);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return DT_FAIL(DT_ERR_INVALID, "profile %s: otherData.config is not a JSON object", name);
    }
    /* the profile's model and layout */
    int64_t Lp = -1, C = -1, NH = -1, V = -1, Tp = -1, Bp = -1, P = model->seq_len, dp = 1, pp = 1, tp = 1;
    dt_status st = DT_OK;
    const json_t *kind = json_object_get(cfg, "model");
    if (json_is_string(kind) && strcmp(json_string_value(kind), "mlp-bn") == 0)
        st = DT_FAIL(DT_ERR_INVALID, "profile %s: config \"model\": \"mlp-bn\" is not a GPT", name);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "num_layers", 0, &Lp);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "hidden_size", 0, &C);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "num_attention_heads", 0, &NH);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "vocab_size", 0, &V);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "seq_length", 0, &Tp);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "micro_batch_size", 0, &Bp);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "max_position_embeddings", 1, &P);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "data_parallel_size", 1, &dp);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "pipeline_model_parallel_size", 1, &pp);
    if (st == DT_OK) st = cost__cfg_int(name, cfg, "tensor_model_parallel_size", 1, &tp);
    char prec[8] = "fp32"; /* a config without the key is an FP32 run's */
    const json_t *pj = json_object_get(cfg, "precision");
    if (st == DT_OK && pj) {
        const char *p = dts__precision_parse(json_is_string(pj) ? json_string_value(pj) : "");
        if (p) snprintf(prec, sizeof prec, "%s", p);
        else
            st = DT_FAIL(DT_ERR_INVALID, "profile %s: config \"precision\": expected \"f32\", \"f16\" or \"bf16\"",
                         name);
    }
    json_decref(cfg);
    if (st != DT_OK) return st;
    /* the model must be the profile's, but for the number of blocks */
    if (C != model->hidden_size)
        return DT_FAIL(DT_ERR_INVALID, "profile %s: hidden_size %lld, the simulated model has %d", name, (long long)C,
                       model->hidden_size);
    if (NH != model->num_heads)
        return DT_FAIL(DT_ERR_INVALID, "profile %s: num_attention_heads %lld, the simulated model has %d", name,
                       (long long)NH, model->num_heads);
    if (V != model->vocab_size)
        return DT_FAIL(DT_ERR_INVALID, "profile %s: vocab_size %lld, the simulated model has %d", name, (long long)V,
                       model->vocab_size);
    if (Tp != T)
        return DT_FAIL(DT_ERR_INVALID, "profile %s: seq_length %lld, the simulation has %d", name, (long long)Tp, T);
    if (Lp < 1 || Bp < 1 || P < 1)
        return DT_FAIL(DT_ERR_INVALID, "profile %s: num_layers %lld, micro_batch_size %lld: expected >= 1", name,
                       (long long)Lp, (long long)Bp);
    if (dp != 1 || pp != 1 || tp != 1)
        return DT_FAIL(DT_ERR_INVALID,
                       "profile %s: data_parallel_size %lld, pipeline_model_parallel_size %lld, "
                       "tensor_model_parallel_size %lld: a profile must be a single-rank run (all 1)",
                       name, (long long)dp, (long long)pp, (long long)tp);

    /* the highest iteration, and one rank only */
    int64_t max_iter = -1;
    int pid = -1;
    for (size_t i = 0; i < profile->n_events; i++) {
        const dt_trace_event *e = &profile->events[i];
        if (e->ph != DT_TRACE_COMPLETE) continue;
        if (pid < 0) pid = e->pid;
        if (e->pid != pid)
            return DT_FAIL(DT_ERR_INVALID, "profile %s: traceEvents[%zu]: pid %d after pid %d: expected one rank", name,
                           i, e->pid, pid);
        if (e->iter != DT_TRACE_NONE && e->iter > max_iter) max_iter = e->iter;
    }
    if (max_iter < 1)
        return DT_FAIL(DT_ERR_INVALID,
                       "profile %s: no spans after iteration 0 (the warm-up is skipped: profile 2 iterations or more)",
                       name);
    if ((uint64_t)max_iter > profile->n_events)
        return DT_FAIL(DT_ERR_INVALID, "profile %s: iteration %lld with only %zu events", name, (long long)max_iter,
                       profile->n_events);
    cost__iter *it = calloc((size_t)max_iter + 1, sizeof *it);
    if (!it) return DT_FAIL(DT_ERR_NOMEM, "profile %s: out of memory", name);

    /* per layer kind: forward, backward, and a split backward's B and W */
    cost__mean fwd[3] = {{0}}, bwd[3] = {{0}}, bb[3] = {{0}}, bw[3] = {{0}}, opt = {0};
    cost__spread sp_f = {0}, sp_b = {0}; /* the blocks' forward and (whole) backward spans */
    int sp_fail = 0;
    for (size_t i = 0; i < profile->n_events; i++) {
        const dt_trace_event *e = &profile->events[i];
        if (e->ph != DT_TRACE_COMPLETE || e->iter == DT_TRACE_NONE || e->iter < 0) continue;
        const int split = strcmp(e->name, "backward_b") == 0 ? 1 : strcmp(e->name, "backward_w") == 0 ? 2 : 0;
        const int is_fb = strcmp(e->cat, "compute") == 0 &&
                          (strcmp(e->name, "forward") == 0 || strcmp(e->name, "backward") == 0 || split);
        const int is_re = strcmp(e->cat, "compute") == 0 && strcmp(e->name, "recompute") == 0;
        const int is_opt = strcmp(e->cat, "optim") == 0 && strcmp(e->name, "optimizer") == 0;
        if (!is_fb && !is_re && !is_opt) continue;
        cost__iter *s = &it[e->iter];
        s->spans_ns = s->spans_ns > INT64_MAX - e->dur_ns ? INT64_MAX : s->spans_ns + e->dur_ns;
        if (!s->seen || e->ts_ns + e->dur_ns > s->end_ns) s->end_ns = e->ts_ns + e->dur_ns;
        s->seen = 1;
        if (e->iter == 0) continue; /* warm-up */
        if (is_opt) mean_add(&opt, (double)e->dur_ns);
        if (!is_fb) continue;
        int k;
        if (e->layer == DT_TRACE_NONE || e->layer == -1) k = 0;
        else if (e->layer >= 0 && e->layer < Lp) k = 1;
        else if (e->layer == Lp) k = 2;
        else {
            free(it);
            free(sp_f.v);
            free(sp_b.v);
            return DT_FAIL(DT_ERR_INVALID,
                           "profile %s: traceEvents[%zu]: layer %d: expected -1..%lld (num_layers %lld)", name, i,
                           e->layer, (long long)Lp, (long long)Lp);
        }
        mean_add(split == 1 ? &bb[k] : split == 2 ? &bw[k] : e->name[0] == 'f' ? &fwd[k] : &bwd[k], (double)e->dur_ns);
        if (k == 1 && !split) sp_fail |= spread_add(e->name[0] == 'f' ? &sp_f : &sp_b, (double)e->dur_ns);
    }
    /* evaluations between two steps are not part of either */
    for (size_t i = 0; i < profile->n_events; i++) {
        const dt_trace_event *e = &profile->events[i];
        if (e->ph != DT_TRACE_COMPLETE || strcmp(e->name, "evaluate") != 0) continue;
        for (int64_t j = 1; j <= max_iter; j++)
            if (it[j].seen && it[j - 1].seen && e->ts_ns >= it[j - 1].end_ns && e->ts_ns + e->dur_ns <= it[j].end_ns)
                it[j].eval_ns += e->dur_ns;
    }
    cost__mean over = {0};
    for (int64_t j = 1; j <= max_iter; j++)
        if (it[j].seen && it[j - 1].seen)
            mean_add(&over, (double)(it[j].end_ns - it[j - 1].end_ns - it[j].spans_ns - it[j].eval_ns));
    free(it);
    const double sd_f = spread_sd(&sp_f), sd_b = spread_sd(&sp_b);
    free(sp_f.v);
    free(sp_b.v);
    if (sp_fail) return DT_FAIL(DT_ERR_NOMEM, "profile %s: out of memory", name);
    static const char *const what[3] = {"embedding", "block", "head"};
    double bwd_ns[3], w_share[3] = {-1, -1, -1}; /* -1: by FLOPs (dts_layer_bwd_w_share) */
    for (int k = 0; k < 3; k++) {
        const int measured = bb[k].n > 0 && bw[k].n > 0;
        const double b = mean_of(&bb[k]), w = mean_of(&bw[k]);
        bwd_ns[k] = bwd[k].n ? mean_of(&bwd[k]) : measured ? b + w : 0.0;
        if (measured && b + w > 0) w_share[k] = w / (b + w);
        if (measured && !bwd[k].n) bwd[k].n = bb[k].n; /* a backward seen, as its two parts */
    }
    for (int k = 0; k < 3; k++)
        if (!fwd[k].n || !bwd[k].n)
            return DT_FAIL(DT_ERR_INVALID, "profile %s: no %s %s spans (cat \"compute\") after iteration 0", name,
                           what[k], fwd[k].n ? "backward" : "forward");
    if (!opt.n)
        return DT_FAIL(DT_ERR_INVALID, "profile %s: no \"optimizer\" span (cat \"optim\") after iteration 0", name);

    dts_cost *c = calloc(1, sizeof *c);
    if (!c) return DT_FAIL(DT_ERR_NOMEM, "profile %s: out of memory", name);
    cost__shapes(model, B, T, c);
    const double scale = (double)B / (double)Bp; /* per-micro-batch work is linear in B */
    const int L = model->num_layers;
    for (int s = 0; s <= L + 1; s++) {
        const int k = s == 0 ? 0 : s <= L ? 1 : 2;
        c->fwd_ns[s] = dts_ns_sat(mean_of(&fwd[k]) * scale);
        c->bwd_ns[s] = dts_ns_sat(bwd_ns[k] * scale);
        const double share = w_share[k] >= 0 ? w_share[k] : dts_layer_bwd_w_share(model, s, T);
        c->bwd_w_ns[s] = dts_ns_sat((double)c->bwd_ns[s] * share);
    }
    dt_gpt_config pm = *model; /* the profile's model: its blocks and positions */
    pm.num_layers = (int)Lp;
    pm.seq_len = (int)P;
    c->optim_ns_per_param = mean_of(&opt) / (double)dt_gpt_config_num_params(&pm);
    /* a sum of many small ops' independent variations: the variance grows with the work, linear in B */
    c->block_fwd_sd_ns = sd_f * sqrt(scale);
    c->block_bwd_sd_ns = sd_b * sqrt(scale);
    const double ov = mean_of(&over);
    c->step_overhead_ns = dts_ns_sat(ov);
    snprintf(c->source, sizeof c->source, "profile %s", name);
    snprintf(c->precision, sizeof c->precision, "%s", prec);
    *out = *c;
    free(c);
    return DT_OK;
}

dt_status dts_cost_to_precision(dts_cost *c, const dt_gpt_config *m, int B, int T, const dts_hw *hw,
                                const char *precision, int *changed)
{
    if (changed) *changed = 0;
    if (!c || !m || !hw || !precision) return DT_FAIL(DT_ERR_INVALID, "dts_cost_to_precision: NULL argument");
    if (strcmp(c->precision, "fp32") != 0 || strcmp(precision, "bf16") != 0 || !(hw->peak_flops_bf16 > 0)) return DT_OK;
    DT_CHECK(cost__check_shape(m, B, T, "dts_cost_to_precision"));
    const double BT = (double)B * T, C = m->hidden_size, V = m->vocab_size;
    const double speed = hw->peak_flops / hw->peak_flops_bf16; /* < 1 where bf16 is faster */
    for (int s = 1; s <= c->n_layer + 1; s++) {
        const double gemm = s <= c->n_layer ? 2.0 * 12.0 * C * C * BT : 2.0 * V * C * BT; /* forward FLOPs */
        int64_t *t[2] = {&c->fwd_ns[s], &c->bwd_ns[s]};
        for (int k = 0; k < 2; k++) {
            const double was = (double)*t[k];
            double g = (k ? 2.0 : 1.0) * gemm / hw->peak_flops * 1e9; /* ns at the FP32 peak */
            if (g > 0.95 * was) g = 0.95 * was;
            /* bf16's own passes: 18C forward, 35C backward per token of a block (dts_cost.h) */
            const double passes = s <= c->n_layer ? (k ? 35.0 : 18.0) * C * BT * hw->bf16_pass_ns : 0.0;
            const double now = was - g + g * speed + passes;
            if (k == 1 && was > 0) c->bwd_w_ns[s] = (int64_t)((double)c->bwd_w_ns[s] * now / was + 0.5);
            *t[k] = (int64_t)(now + 0.5);
        }
    }
    snprintf(c->precision, sizeof c->precision, "bf16");
    const size_t n = strlen(c->source);
    if (n + 40 < sizeof c->source) snprintf(c->source + n, sizeof c->source - n, ", GEMMs at bf16 x%.2f", 1.0 / speed);
    if (changed) *changed = 1;
    return DT_OK;
}
