/* import_hf.c: a Hugging Face GPT-2 directory (config.json,
 * model.safetensors) as a dtrain GPT's configuration and initial weights
 * (dt_hf_read_config, dt_hf_open, dt_hf_init; dt_safetensors.h).
 *
 * config.json must describe a model dtrain computes exactly: model_type
 * "gpt2"; n_embd, n_layer, n_head, n_positions (n_ctx, when present, the
 * same), vocab_size; n_inner absent, null or 4 n_embd; activation_function
 * "gelu_new" or "gelu_pytorch_tanh" (both the tanh approximation dtrain
 * computes; absent: transformers' default, gelu_new); layer_norm_epsilon
 * 1e-5 (absent: the default); scale_attn_weights not false,
 * scale_attn_by_inverse_layer_idx and add_cross_attention not true;
 * tie_word_embeddings (absent: true). Other keys (dropouts: dtrain has
 * none; generation settings; token ids) are not dtrain's concern and are
 * ignored. Each refusal names config.json and the key.
 *
 * model.safetensors (one file; a sharded checkpoint's index is refused)
 * must hold every tensor of the configuration's layout under
 * GPT2LMHeadModel's names (hf.h), all with or all without the
 * "transformer." prefix (save_pretrained of GPT2LMHeadModel writes it,
 * GPT2Model and the original OpenAI conversion do not), each F32, F16 or
 * BF16 (widened exactly) of exactly the layout's shape (Conv1D weights
 * (in, out), transposed here to dtrain's (out, in)). Besides them only the
 * attention's causal-mask buffers (h.N.attn.bias, h.N.attn.masked_bias,
 * which old checkpoints carry) are allowed, and lm_head.weight: with tied
 * embeddings it must equal wte element for element (transformers writes
 * the shared matrix twice in some versions), untied it is the head. Any
 * other tensor is refused by name: dtrain does not drop weights silently.
 *
 * Invariant: dt_hf_open checks every name, dtype and shape before a weight
 * is read, so a layout never starts half loaded from a bad file; reads
 * then fail only if the file changes underneath. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dt_file.h"
#include "dt_internal.h"
#include "dt_safetensors.h"
#include "gpt_layers.h"
#include "hf.h"

struct dt_hf_model {
    char dir[4096];
    char path[4200]; /* DIR/model.safetensors */
    dt_gpt_config cfg;
    dt_safetensors *st;
    dt_paramset whole;          /* the configuration's layout (lib/model/gpt.c) */
    const dt_st_tensor **src;   /* (whole.count) the file's tensor for each */
    unsigned char *transpose;   /* (whole.count) a Conv1D weight */
};

/* ---- config.json ------------------------------------------------------------- */

static dt_status dt__hf_int(const char *path, json_t *o, const char *key, int required, int dflt, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required) return DT_FAIL(DT_ERR_FORMAT, "%s: no \"%s\" (expected a positive integer)", path, key);
        *out = dflt;
        return DT_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": expected an integer 1..16777216", path, key);
    *out = (int)json_integer_value(v);
    return DT_OK;
}

/* A boolean key: absent gives dflt; present must be a boolean equal to
 * want (want < 0: either, returned). */
static dt_status dt__hf_bool(const char *path, json_t *o, const char *key, int dflt, int want, const char *why, int *out)
{
    json_t *v = json_object_get(o, key);
    int b = dflt;
    if (v) {
        if (!json_is_boolean(v)) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": expected true or false", path, key);
        b = json_is_true(v);
    }
    if (want >= 0 && b != want)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"%s\" %s: dtrain's GPT %s", path, key, b ? "true" : "false", why);
    if (out) *out = b;
    return DT_OK;
}

static dt_status dt__hf_config_object(const char *path, json_t *o, dt_gpt_config *c)
{
    if (!json_is_object(o)) return DT_FAIL(DT_ERR_FORMAT, "%s: expected a JSON object", path);
    json_t *mt = json_object_get(o, "model_type");
    if (!json_is_string(mt) || strcmp(json_string_value(mt), "gpt2") != 0)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"model_type\": expected \"gpt2\"%s%s%s", path, json_is_string(mt) ? ", found \"" : "",
                       json_is_string(mt) ? json_string_value(mt) : "", json_is_string(mt) ? "\"" : "");
    memset(c, 0, sizeof *c);
    DT_CHECK(dt__hf_int(path, o, "vocab_size", 1, 0, &c->vocab_size));
    DT_CHECK(dt__hf_int(path, o, "n_positions", 1, 0, &c->seq_len));
    DT_CHECK(dt__hf_int(path, o, "n_embd", 1, 0, &c->hidden_size));
    DT_CHECK(dt__hf_int(path, o, "n_layer", 1, 0, &c->num_layers));
    DT_CHECK(dt__hf_int(path, o, "n_head", 1, 0, &c->num_heads));
    int n_ctx = 0;
    DT_CHECK(dt__hf_int(path, o, "n_ctx", 0, c->seq_len, &n_ctx));
    if (n_ctx != c->seq_len)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"n_ctx\" %d differs from \"n_positions\" %d", path, n_ctx, c->seq_len);
    json_t *inner = json_object_get(o, "n_inner");
    if (inner && !json_is_null(inner) &&
        (!json_is_integer(inner) || json_integer_value(inner) != 4 * (json_int_t)c->hidden_size))
        return DT_FAIL(DT_ERR_INVALID, "%s: \"n_inner\": dtrain's MLP is 4 n_embd = %d wide (expected null or %d)",
                       path, 4 * c->hidden_size, 4 * c->hidden_size);
    json_t *act = json_object_get(o, "activation_function");
    if (act && (!json_is_string(act) || (strcmp(json_string_value(act), "gelu_new") != 0 &&
                                          strcmp(json_string_value(act), "gelu_pytorch_tanh") != 0)))
        return DT_FAIL(DT_ERR_INVALID,
                       "%s: \"activation_function\": dtrain computes GELU's tanh approximation (expected \"gelu_new\" "
                       "or \"gelu_pytorch_tanh\")",
                       path);
    json_t *eps = json_object_get(o, "layer_norm_epsilon");
    if (eps && (!json_is_number(eps) || fabs(json_number_value(eps) - 1e-5) > 1e-12))
        return DT_FAIL(DT_ERR_INVALID, "%s: \"layer_norm_epsilon\": dtrain's LayerNorm uses 1e-5", path);
    DT_CHECK(dt__hf_bool(path, o, "scale_attn_weights", 1, 1, "scales attention scores by 1/sqrt(head size)", NULL));
    DT_CHECK(dt__hf_bool(path, o, "scale_attn_by_inverse_layer_idx", 0, 0, "does not scale attention by layer",
                         NULL));
    DT_CHECK(dt__hf_bool(path, o, "add_cross_attention", 0, 0, "has no cross-attention", NULL));
    DT_CHECK(dt__hf_bool(path, o, "tie_word_embeddings", 1, -1, "", &c->tie_embeddings));
    if (c->hidden_size % c->num_heads != 0)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"n_embd\" %d is not divisible by \"n_head\" %d", path, c->hidden_size,
                       c->num_heads);
    dt_status s = dt_gpt_config_validate(c);
    if (s != DT_OK) return DT_FAIL(DT_ERR_INVALID, "%s: %s", path, dt_last_error());
    return DT_OK;
}

dt_status dt_hf_read_config(const char *dir, dt_gpt_config *out)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = NULL;
    size_t n = 0;
    DT_CHECK(dt_file_read_whole(path, "--load-hf", (size_t)16 << 20, &text, &n));
    json_error_t err;
    json_t *o = json_loadb(text, n, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (!o) return DT_FAIL(DT_ERR_FORMAT, "%s: not JSON (%s, line %d)", path, err.text, err.line);
    dt_status s = dt__hf_config_object(path, o, out);
    json_decref(o);
    return s;
}

/* ---- model.safetensors ------------------------------------------------------- */

static void dt__hf_shape_text(const int64_t *shape, int ndim, char *out, size_t n)
{
    size_t at = (size_t)snprintf(out, n, "[");
    for (int d = 0; d < ndim && at < n; d++) at += (size_t)snprintf(out + at, n - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < n) snprintf(out + at, n - at, "]");
}

/* The causal-mask buffers old GPT-2 checkpoints carry (not weights), of
 * one of the model's L layers. */
static int dt__hf_is_buffer(const char *name, int L)
{
    int l, at = 0;
    if (sscanf(name, "h.%d.attn.%n", &l, &at) != 1 || !at || l < 0 || l >= L) return 0;
    return !strcmp(name + at, "bias") || !strcmp(name + at, "masked_bias");
}

/* Match every tensor of the layout to the file's, and every file tensor to
 * a use. */
static dt_status dt__hf_match(dt_hf_model *h)
{
    const char *prefix = dt_safetensors_find(h->st, "transformer.wte.weight") ? "transformer." : "";
    if (!prefix[0] && !dt_safetensors_find(h->st, "wte.weight"))
        return DT_FAIL(DT_ERR_FORMAT, "%s: no tensor \"transformer.wte.weight\" (nor \"wte.weight\"): not a GPT-2 checkpoint",
                       h->path);
    const size_t plen = strlen(prefix);
    const int n_file = dt_safetensors_count(h->st);
    unsigned char *used = calloc((size_t)n_file + 1, 1);
    if (!used) return DT_FAIL(DT_ERR_NOMEM, "--load-hf: out of memory");
    dt_status s = DT_OK;
    char name[160], want[96], have[96];
    for (int i = 0; i < h->whole.count && s == DT_OK; i++) {
        const dt_param_info *p = &h->whole.info[i];
        int tr = 0;
        if (!dt__hf_name(p->name, name, sizeof name, &tr)) {
            s = DT_FAIL(DT_ERR_INVALID, "--load-hf: tensor %s has no GPT-2 name", p->name);
            break;
        }
        /* dt__hf_name's names carry the prefix (lm_head.weight has none) */
        const char *bare = strncmp(name, "transformer.", 12) == 0 ? name + 12 : name;
        char full[192];
        snprintf(full, sizeof full, "%s%s", bare == name ? "" : prefix, bare);
        const dt_st_tensor *t = dt_safetensors_find(h->st, full);
        if (!t) {
            s = DT_FAIL(DT_ERR_FORMAT, "%s: no tensor \"%s\" (config.json's n_layer %d%s needs it)", h->path, full,
                        h->cfg.num_layers, !strcmp(p->name, "lm_head.w") ? ", tie_word_embeddings false" : "");
            break;
        }
        int64_t shape[2] = {p->shape[0], p->ndim == 2 ? p->shape[1] : 0};
        if (tr) shape[0] = p->shape[1], shape[1] = p->shape[0];
        int same = t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == shape[d];
        if (!same) {
            dt__hf_shape_text(shape, p->ndim, want, sizeof want);
            dt__hf_shape_text(t->shape, t->ndim, have, sizeof have);
            s = DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": shape %s, expected %s for config.json's sizes", h->path, full,
                        have, want);
            break;
        }
        h->src[i] = t;
        h->transpose[i] = (unsigned char)tr;
        used[t - dt_safetensors_tensor(h->st, 0)] = 1;
    }
    for (int k = 0; k < n_file && s == DT_OK; k++) {
        const dt_st_tensor *t = dt_safetensors_tensor(h->st, k);
        if (used[k]) continue;
        const char *bare = plen && !strncmp(t->name, prefix, plen) ? t->name + plen : t->name;
        if (bare != t->name || !plen) {
            if (dt__hf_is_buffer(bare, h->cfg.num_layers)) continue;
        }
        if (!strcmp(t->name, "lm_head.weight") && h->cfg.tie_embeddings) {
            const dt_st_tensor *w = h->src[0]; /* wte */
            if (t->ndim != 2 || t->shape[0] != w->shape[0] || t->shape[1] != w->shape[1]) {
                s = DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"lm_head.weight\": not wte's shape, and config.json ties them",
                            h->path);
                break;
            }
            float *a = malloc(w->numel * sizeof *a), *b = malloc(w->numel * sizeof *b);
            s = a && b ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "--load-hf: out of memory");
            if (s == DT_OK) s = dt_safetensors_read_f32(h->st, w, a);
            if (s == DT_OK) s = dt_safetensors_read_f32(h->st, t, b);
            if (s == DT_OK && memcmp(a, b, w->numel * sizeof *a) != 0)
                s = DT_FAIL(DT_ERR_INVALID,
                            "%s: tensor \"lm_head.weight\" differs from \"%swte.weight\" while config.json's "
                            "tie_word_embeddings is true (set it false to load an untied head)",
                            h->path, prefix);
            free(a);
            free(b);
            continue;
        }
        s = DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\" is not part of the GPT-2 config.json describes%s", h->path,
                    t->name, !strcmp(t->name, "lm_head.weight") ? "" : " (dtrain drops no weights silently)");
    }
    free(used);
    return s;
}

dt_status dt_hf_open(const char *dir, dt_hf_model **out)
{
    *out = NULL;
    if (!dir || !dir[0]) return DT_FAIL(DT_ERR_INVALID, "--load-hf '': expected a directory");
    dt_hf_model *h = calloc(1, sizeof *h);
    if (!h) return DT_FAIL(DT_ERR_NOMEM, "--load-hf: out of memory");
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    snprintf(h->path, sizeof h->path, "%s/model.safetensors", dir);
    dt_paramset_init(&h->whole);
    dt_status s = dt_hf_read_config(dir, &h->cfg);
    struct stat sb;
    char idx[4300];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    if (s == DT_OK && stat(h->path, &sb) != 0) {
        if (stat(idx, &sb) == 0)
            s = DT_FAIL(DT_ERR_INVALID, "%s: a sharded checkpoint (model.safetensors.index.json): dtrain reads one "
                                        "model.safetensors",
                        dir);
        else
            s = DT_FAIL(DT_ERR_IO, "%s: no such file (a Hugging Face directory holds config.json and "
                                   "model.safetensors; pytorch_model.bin is not read)",
                        h->path);
    }
    if (s == DT_OK) s = dt_safetensors_open(h->path, &h->st);
    if (s == DT_OK) s = dt__gpt_whole_layout(&h->cfg, &h->whole);
    if (s == DT_OK) {
        h->src = calloc((size_t)h->whole.count, sizeof *h->src);
        h->transpose = calloc((size_t)h->whole.count, 1);
        if (!h->src || !h->transpose) s = DT_FAIL(DT_ERR_NOMEM, "--load-hf: out of memory");
    }
    if (s == DT_OK) s = dt__hf_match(h);
    if (s != DT_OK) {
        dt_hf_close(h);
        return s;
    }
    *out = h;
    return DT_OK;
}

void dt_hf_close(dt_hf_model *h)
{
    if (!h) return;
    dt_safetensors_close(h->st);
    dt_paramset_free(&h->whole);
    free(h->src);
    free(h->transpose);
    free(h);
}

const dt_gpt_config *dt_hf_config(const dt_hf_model *h) { return &h->cfg; }

/* dt_gpt_init's read: whole tensor `index`, in dtrain's (out, in). */
static dt_status dt__hf_read(void *ctx, const dt_param_info *p, int index, float *w)
{
    dt_hf_model *h = ctx;
    if (index < 0 || index >= h->whole.count || h->whole.info[index].numel != p->numel)
        return DT_FAIL(DT_ERR_INVALID, "--load-hf %s: tensor %s (index %d) is not in the checkpoint's layout", h->dir,
                       p->name, index);
    const dt_st_tensor *t = h->src[index];
    if (!h->transpose[index]) return dt_safetensors_read_f32(h->st, t, w);
    float *tmp = malloc(t->numel * sizeof *tmp);
    if (!tmp) return DT_FAIL(DT_ERR_NOMEM, "--load-hf: out of memory for %s", t->name);
    dt_status s = dt_safetensors_read_f32(h->st, t, tmp);
    if (s == DT_OK) { /* (in, out) -> (out, in) */
        const int64_t In = t->shape[0], Out = t->shape[1];
        for (int64_t i = 0; i < In; i++)
            for (int64_t o = 0; o < Out; o++) w[(size_t)(o * In + i)] = tmp[(size_t)(i * Out + o)];
    }
    free(tmp);
    return s;
}

dt_gpt_init dt_hf_init(dt_hf_model *h)
{
    const dt_gpt_init init = {.seed = 0, .read = dt__hf_read, .ctx = h};
    return init;
}
