/* export_hf.c: a GPT written as a Hugging Face GPT-2 directory
 * (dt_gpt_export_hf, dt_safetensors.h): config.json and
 * model.safetensors, what transformers.GPT2LMHeadModel.from_pretrained
 * loads.
 *
 * The mapping (dtrain's layout, lib/model/gpt.c -> GPT2LMHeadModel's
 * state dict, as save_pretrained names it):
 *   wte, wpe                  -> transformer.wte.weight, transformer.wpe.weight
 *   h.l.ln1.w/b, ln2.w/b      -> transformer.h.l.ln_1.weight/bias, ln_2
 *   h.l.qkv.w (3C, C), .b     -> transformer.h.l.attn.c_attn.weight (C, 3C), .bias
 *   h.l.attproj.w (C, C), .b  -> transformer.h.l.attn.c_proj.weight (C, C), .bias
 *   h.l.fc.w (4C, C), .b      -> transformer.h.l.mlp.c_fc.weight (C, 4C), .bias
 *   h.l.fcproj.w (C, 4C), .b  -> transformer.h.l.mlp.c_proj.weight (4C, C), .bias
 *   lnf.w, lnf.b              -> transformer.ln_f.weight, .bias
 *   lm_head.w (untied)        -> lm_head.weight (tie_word_embeddings false)
 * GPT-2's linear layers are Conv1D, weights stored (in, out): the
 * transpose of dtrain's (out, in); q, k, v keep their order along out and
 * the heads their channels, so the transpose is the whole conversion.
 * GELU is the tanh approximation ("gelu_new"), LayerNorm's eps 1e-5, no
 * dropout: the same function. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_file.h"
#include "dt_gpt.h"
#include "dt_internal.h"
#include "dt_safetensors.h"
#include "hf.h"

int dt__hf_name(const char *in, char *out, size_t n, int *transpose)
{
    static const char *const map[][3] = {
        {"ln1.w", "ln_1.weight", "0"},         {"ln1.b", "ln_1.bias", "0"},
        {"qkv.w", "attn.c_attn.weight", "1"},  {"qkv.b", "attn.c_attn.bias", "0"},
        {"attproj.w", "attn.c_proj.weight", "1"}, {"attproj.b", "attn.c_proj.bias", "0"},
        {"ln2.w", "ln_2.weight", "0"},         {"ln2.b", "ln_2.bias", "0"},
        {"fc.w", "mlp.c_fc.weight", "1"},      {"fc.b", "mlp.c_fc.bias", "0"},
        {"fcproj.w", "mlp.c_proj.weight", "1"}, {"fcproj.b", "mlp.c_proj.bias", "0"},
    };
    *transpose = 0;
    if (!strcmp(in, "wte")) snprintf(out, n, "transformer.wte.weight");
    else if (!strcmp(in, "wpe")) snprintf(out, n, "transformer.wpe.weight");
    else if (!strcmp(in, "lnf.w")) snprintf(out, n, "transformer.ln_f.weight");
    else if (!strcmp(in, "lnf.b")) snprintf(out, n, "transformer.ln_f.bias");
    else if (!strcmp(in, "lm_head.w")) snprintf(out, n, "lm_head.weight");
    else {
        int l, at = 0;
        if (sscanf(in, "h.%d.%n", &l, &at) != 1 || !at) return 0;
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (!strcmp(in + at, map[i][0])) {
                snprintf(out, n, "transformer.h.%d.%s", l, map[i][1]);
                *transpose = map[i][2][0] == '1';
                return 1;
            }
        return 0;
    }
    return 1;
}

static char *dt__hf_config(const dt_gpt_config *c)
{
    json_t *o = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:n, s:s, s:f, s:b, s:f, s:f, s:f, s:f, s:b}",
                          "architectures", "GPT2LMHeadModel", "model_type", "gpt2", "vocab_size", c->vocab_size,
                          "n_positions", c->seq_len, "n_embd", c->hidden_size, "n_layer", c->num_layers, "n_head",
                          c->num_heads, "n_inner", "activation_function", "gelu_new", "layer_norm_epsilon", 1e-5,
                          "tie_word_embeddings", c->tie_embeddings, "resid_pdrop", 0.0, "embd_pdrop", 0.0,
                          "attn_pdrop", 0.0, "summary_first_dropout", 0.0, "scale_attn_weights", 1);
    char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

dt_status dt_gpt_export_hf(dt_gpt *m, const char *dir)
{
    const dt_gpt_config *c = dt_gpt_config_of(m);
    const dt_paramset *ps = dt_gpt_layout(m);
    dt_backend *be = dt_gpt_backend(m);
    DT_CHECK(dt_file_check_output_dir(dir, "--export-hf", 1));
    DT_CHECK(dt_file_mkdir_p(dir));
    float *host = malloc(ps->numel * sizeof *host);
    dt_st_out *t = calloc((size_t)ps->count, sizeof *t);
    char (*names)[96] = calloc((size_t)ps->count, sizeof *names);
    float *tr = NULL;
    dt_status s = host && t && names ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "--export-hf %s: out of memory", dir);
    if (s == DT_OK) s = be->copy(be, host, dt_gpt_params(m), ps->numel * sizeof *host, DT_COPY_D2H);
    size_t tr_n = 0;
    for (int i = 0; s == DT_OK && i < ps->count; i++)
        if (ps->info[i].ndim == 2) tr_n += ps->info[i].numel;
    if (s == DT_OK && !(tr = malloc((tr_n ? tr_n : 1) * sizeof *tr)))
        s = DT_FAIL(DT_ERR_NOMEM, "--export-hf %s: out of memory", dir);
    size_t at = 0;
    for (int i = 0; s == DT_OK && i < ps->count; i++) {
        const dt_param_info *p = &ps->info[i];
        int transpose;
        if (!dt__hf_name(p->name, names[i], sizeof names[i], &transpose)) {
            s = DT_FAIL(DT_ERR_INVALID, "--export-hf: tensor %s has no GPT-2 name", p->name);
            break;
        }
        t[i].name = names[i];
        t[i].ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++) t[i].shape[d] = p->shape[d];
        t[i].data = host + p->offset;
        if (transpose) { /* (out, in) -> (in, out) */
            const int64_t R = p->shape[0], C = p->shape[1];
            float *dst = tr + at;
            for (int64_t r = 0; r < R; r++)
                for (int64_t k = 0; k < C; k++) dst[k * R + r] = host[p->offset + (size_t)(r * C + k)];
            t[i].shape[0] = C;
            t[i].shape[1] = R;
            t[i].data = dst;
            at += p->numel;
        }
    }
    char path[4200];
    if (s == DT_OK) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        s = dt_safetensors_write(path, t, ps->count);
    }
    char *cfg = s == DT_OK ? dt__hf_config(c) : NULL;
    if (s == DT_OK && !cfg) s = DT_FAIL(DT_ERR_NOMEM, "--export-hf %s: out of memory for config.json", dir);
    if (s == DT_OK) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        s = dt_file_write_whole(path, "--export-hf config.json", cfg, strlen(cfg));
    }
    free(cfg);
    free(tr);
    free(names);
    free(t);
    free(host);
    return s;
}
