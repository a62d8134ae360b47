/* generate.c: a checkpoint loaded for generation on one process
 * (dt_generator, dt_sample.h).
 *
 * A checkpoint is written by the world that trained (docs/checkpoints.md):
 * one shard per rank, holding what the rank's role owns. Generation
 * rebuilds the whole GPT from them whatever the layout was: the model's
 * sizes come from the manifest's config, and every tensor of the GPT's
 * layout is taken from the first shard (in rank order) holding it whole,
 * as record param/<tensor>. One process and every data-parallel replica
 * hold all of them (shard 0 is enough); pipeline stages hold their blocks'
 * (the last stage's copy of a tied wte, lm_head.w, is not needed: the
 * model's head reads wte); parameter servers their ranges of tensors.
 * Tensor-parallel shards hold slices: shard s is tensor rank s % t of
 * data replica (s / t) % d, and replica 0's slices are put back together
 * (dt__gen_weights_tp): a block's through tp.c's map, the vocabulary rows
 * of wte and an untied head (vocabulary-parallel) in rank order, the
 * replicated tensors from tensor rank 0. ZeRO shards (any stage, any
 * grid) hold segments of a flat buffer: every shard is read through
 * dt__gen_read_shard (generate_zero.c), which joins each ZeRO group's
 * segments into the whole tensors (or slices) its first member would hold
 * without ZeRO. An mlp-bn checkpoint (a classifier, no text) is refused
 * in one line.
 *
 * A Hugging Face GPT-2 directory (dt_generator_options.hf_dir) loads
 * instead through import_hf.c (dt_safetensors.h), its context
 * n_positions.
 *
 * The tokenizer: the one named (dt_generator_options.tokenizer), else the
 * checkpoint's data's: GPT-2's BPE from the directory its config records
 * ("tokenizer", dt_data.h), a Hugging Face directory's own vocab.json or
 * tokenizer.json, or bytes (the tasks, text files without a tokenizer, a
 * Hugging Face directory without tokenizer files): encoding
 * and decoding the identity on bytes, a larger model vocabulary
 * (gpt2-124m's) sampled among its first 256 tokens. A BPE tokenizer's
 * vocabulary must fit in the model's and is the one sampled from. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt_bpe.h"
#include "dt_checkpoint.h"
#include "dt_internal.h"
#include "dt_safetensors.h"
#include "dt_sample.h"
#include "generate_zero.h"
#include "tp.h"

#define DT__GEN_BYTE_VOCAB 256

struct dt_generator {
    dt_backend *be;
    dt_gpt *gpt;
    dt_bpe *bpe; /* NULL: bytes */
    char tokenizer[4096]; /* the checkpoint config's, "" for none */
    int64_t iteration;
    int context; /* the training seq_length */
    int vocab;   /* the tokenizer's */
    dt_gpt_config mc;
    int t, d, vocab_parallel; /* the layout saved: tensor and data-parallel sizes, the vocabulary split */
    char path[4200];
    char note[2048];
    char describe[1024];
};

static json_int_t dt__gen_int(json_t *cfg, const char *key) { return json_integer_value(json_object_get(cfg, key)); }
static const char *dt__gen_str(json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The model's sizes and the tokenizer from the manifest's config; the
 * layouts this file cannot rebuild from are refused. */
static dt_status dt__gen_config(dt_generator *g, const dt_checkpoint_manifest *m, dt_gpt_config *mc, dt_dtype *prec)
{
    json_error_t err;
    json_t *cfg = json_loads(m->config_json ? m->config_json : "{}", 0, &err);
    if (!cfg) return DT_FAIL(DT_ERR_FORMAT, "%s: the manifest's config does not parse (%s)", g->path, err.text);
    dt_status st = DT_OK;
    const char *task = dt__gen_str(cfg, "task"), *data = dt__gen_str(cfg, "data");
    const char *model = dt__gen_str(cfg, "model"), *precision = dt__gen_str(cfg, "precision");
    const json_int_t t = dt__gen_int(cfg, "tensor_model_parallel_size");
    if (json_object_get(cfg, "mlp_hidden_size") || (task && !strcmp(task, "blobs"))) {
        st =
            DT_FAIL(DT_ERR_UNSUPPORTED, "%s: an mlp-bn classifier (task blobs): there is no text to generate", g->path);
        goto done;
    }
    if (!data && (!task || (strcmp(task, "add") && strcmp(task, "reverse") && strcmp(task, "sort")))) {
        st = DT_FAIL(DT_ERR_UNSUPPORTED,
                     "%s: data '%s' has no known text encoding (expected a task add, reverse or "
                     "sort, or a text file)",
                     g->path, task ? task : "?");
        goto done;
    }
    const char *tok = dt__gen_str(cfg, "tokenizer");
    if (data && tok) snprintf(g->tokenizer, sizeof g->tokenizer, "%s", tok);
    g->t = t > 1 ? (int)t : 1;
    g->d = (int)dt__gen_int(cfg, "data_parallel_size");
    if (g->d < 1) g->d = 1;
    g->vocab_parallel = g->t > 1 && json_is_true(json_object_get(cfg, "vocab_parallel"));
    *mc = (dt_gpt_config){.vocab_size = (int)dt__gen_int(cfg, "vocab_size"),
                          .seq_len = (int)dt__gen_int(cfg, "max_position_embeddings"),
                          .num_layers = (int)dt__gen_int(cfg, "num_layers"),
                          .num_heads = (int)dt__gen_int(cfg, "num_attention_heads"),
                          .hidden_size = (int)dt__gen_int(cfg, "hidden_size"),
                          .tie_embeddings = json_is_false(json_object_get(cfg, "untie_embeddings_and_output_weights"))};
    g->context = (int)dt__gen_int(cfg, "seq_length");
    g->mc = *mc;
    if (dt_gpt_config_validate(mc) != DT_OK || g->context < 1 || g->context > mc->seq_len) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: the manifest's model is not a valid GPT (%s)", g->path,
                     g->context < 1 || g->context > mc->seq_len ? "seq_length outside 1..max_position_embeddings"
                                                                : dt_last_error());
        goto done;
    }
    g->vocab = mc->vocab_size < DT__GEN_BYTE_VOCAB ? mc->vocab_size : DT__GEN_BYTE_VOCAB;
    *prec = DT_F32;
    if (precision && !strcmp(precision, dt_dtype_name(DT_F16))) *prec = DT_F16;
    if (precision && !strcmp(precision, dt_dtype_name(DT_BF16))) *prec = DT_BF16;
    json_t *layout = json_loads(m->layout_json ? m->layout_json : "{}", 0, &err);
    const char *kind = layout ? dt__gen_str(layout, "kind") : NULL;
    snprintf(g->describe, sizeof g->describe, "%s, %s%s, saved by %d rank%s: %s", model ? model : "custom",
             data ? "data " : "task ", data ? data : task, m->world_size, m->world_size == 1 ? "" : "s",
             kind ? kind : "?");
    json_decref(layout);
done:
    json_decref(cfg);
    return st;
}

/* Every tensor of the model from the first shard holding it whole. */
static dt_status dt__gen_weights(dt_generator *g, const dt_checkpoint_manifest *m)
{
    const dt_paramset *L = dt_gpt_layout(g->gpt);
    float *params = dt_gpt_params(g->gpt);
    uint8_t *have = calloc((size_t)L->count, 1);
    if (!have) return DT_FAIL(DT_ERR_NOMEM, "generate: out of memory");
    int missing = L->count;
    dt_status st = DT_OK;
    char name[DT_CHECKPOINT_NAME_MAX + 1];
    for (int r = 0; r < m->world_size && missing > 0 && st == DT_OK; r++) {
        dt_checkpoint_shard s;
        memset(&s, 0, sizeof s);
        DT_CHECK_GOTO(dt__gen_read_shard(m, r, &s), st, next);
        for (int i = 0; i < L->count; i++) {
            if (have[i]) continue;
            const dt_param_info *p = &L->info[i];
            snprintf(name, sizeof name, "param/%s", p->name);
            for (int k = 0; k < s.count; k++) {
                const dt_checkpoint_record *rec = &s.rec[k];
                if (strcmp(rec->name, name) != 0) continue;
                if (rec->kind != DT_CKPT_F32 || rec->count != p->numel) {
                    st = DT_FAIL(DT_ERR_FORMAT, "%s: record %s holds %zu elements, the model's tensor %zu", s.path,
                                 name, rec->count, p->numel);
                    goto next;
                }
                if (p->numel)
                    DT_CHECK_GOTO(
                        g->be->copy(g->be, params + p->offset, rec->data, p->numel * sizeof(float), DT_COPY_H2D), st,
                        next);
                have[i] = 1;
                missing--;
                break;
            }
        }
    next:
        dt_checkpoint_shard_free(&s);
    }
    for (int i = 0; st == DT_OK && i < L->count; i++)
        if (!have[i])
            st = DT_FAIL(DT_ERR_FORMAT, "%s: no shard holds the weights param/%s (%s)", g->path, L->info[i].name,
                         g->describe);
    free(have);
    return st;
}

/* A tensor-parallel checkpoint's weights (see the top): part[i * t + r],
 * tensor i's slice from tensor rank r (host copies of replica 0's
 * records), then each whole tensor from its parts. */
static dt_status dt__gen_weights_tp(dt_generator *g, const dt_checkpoint_manifest *m)
{
    const dt_gpt_config *c = &g->mc;
    const dt_paramset *L = dt_gpt_layout(g->gpt);
    const int t = g->t, n = L->count, C = c->hidden_size, nb = DT__BLOCK_NTENSORS;
    float **part = calloc((size_t)n * t, sizeof *part);
    size_t *want = calloc((size_t)n * t, sizeof *want);
    float *whole = malloc((L->numel ? L->numel : 1) * sizeof *whole);
    dt_paramset blk;
    dt_paramset_init(&blk);
    dt_status st = part && want && whole ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "generate: out of memory");
    if (st == DT_OK) st = dt__tp_block_layout(c, t, 0, &blk); /* a block's slices (the same for every block) */
    /* the elements each rank's record of tensor i holds (0: not needed from that rank) */
    for (int i = 0; st == DT_OK && i < n; i++) {
        const int l = dt__gpt_tensor_layer(c, i), rows = i == 0 || (l == c->num_layers && L->info[i].ndim == 2);
        for (int r = 0; r < t; r++) {
            int v0, nv;
            dt__vocab_rows(c->vocab_size, t, r, &v0, &nv);
            if (l >= 0 && l < c->num_layers) want[i * t + r] = blk.info[(i - 2) % nb].numel;
            else if (rows && g->vocab_parallel) want[i * t + r] = (size_t)nv * C;
            else want[i * t + r] = r == 0 ? L->info[i].numel : 0;
        }
    }
    char name[DT_CHECKPOINT_NAME_MAX + 1];
    for (int s = 0; st == DT_OK && s < m->world_size; s++) {
        const int r = s % t;
        if ((s / t) % g->d != 0) continue; /* another data replica's copy */
        dt_checkpoint_shard sh;
        memset(&sh, 0, sizeof sh);
        st = dt__gen_read_shard(m, s, &sh);
        for (int i = 0; st == DT_OK && i < n; i++) {
            if (part[i * t + r] || !want[i * t + r]) continue;
            snprintf(name, sizeof name, "param/%s", L->info[i].name);
            for (int k = 0; k < sh.count; k++) {
                const dt_checkpoint_record *rec = &sh.rec[k];
                if (strcmp(rec->name, name) != 0) continue;
                if (rec->kind != DT_CKPT_F32 || rec->count != want[i * t + r]) {
                    st = DT_FAIL(DT_ERR_FORMAT, "%s: record %s holds %zu elements, tensor rank %d's slice %zu",
                                 sh.path, name, rec->count, r, want[i * t + r]);
                    break;
                }
                if (!(part[i * t + r] = malloc((rec->count ? rec->count : 1) * sizeof(float)))) {
                    st = DT_FAIL(DT_ERR_NOMEM, "generate: out of memory");
                    break;
                }
                memcpy(part[i * t + r], rec->data, rec->count * sizeof(float));
                break;
            }
        }
        dt_checkpoint_shard_free(&sh);
    }
    for (int i = 0; st == DT_OK && i < n; i++)
        for (int r = 0; st == DT_OK && r < t; r++)
            if (want[i * t + r] && !part[i * t + r])
                st = DT_FAIL(DT_ERR_FORMAT, "%s: no shard of tensor rank %d holds the weights param/%s (%s)", g->path,
                             r, L->info[i].name, g->describe);
    for (int i = 0; st == DT_OK && i < n;) {
        const int l = dt__gpt_tensor_layer(c, i);
        if (l >= 0 && l < c->num_layers) { /* a block: its 12 tensors from every rank's slices */
            float *full[DT__BLOCK_NTENSORS];
            for (int k = 0; k < nb; k++) full[k] = whole + L->info[i + k].offset;
            for (int r = 0; r < t; r++) {
                /* the rank's slices laid out as blk (each part at its offset) */
                float *loc = malloc((blk.numel ? blk.numel : 1) * sizeof *loc);
                if (!loc) {
                    st = DT_FAIL(DT_ERR_NOMEM, "generate: out of memory");
                    break;
                }
                for (int k = 0; k < nb; k++)
                    memcpy(loc + blk.info[k].offset, part[(i + k) * t + r], blk.info[k].numel * sizeof *loc);
                dt__tp_block_unshard(c, t, r, &blk, 0, loc, full);
                free(loc);
            }
            i += nb;
            continue;
        }
        size_t at = L->info[i].offset;
        for (int r = 0; r < t; r++) /* vocabulary rows in rank order, or rank 0's whole tensor */
            if (want[i * t + r]) {
                memcpy(whole + at, part[i * t + r], want[i * t + r] * sizeof *whole);
                at += want[i * t + r];
            }
        i++;
    }
    if (st == DT_OK) st = g->be->copy(g->be, dt_gpt_params(g->gpt), whole, L->numel * sizeof *whole, DT_COPY_H2D);
    for (int i = 0; part && i < n * t; i++) free(part[i]);
    free(part), free(want), free(whole);
    dt_paramset_free(&blk);
    return st;
}

/* A Hugging Face GPT-2 directory: the model and its weights. */
static dt_status dt__gen_open_hf(dt_generator *g, const dt_generator_options *o)
{
    dt_hf_model *h = NULL;
    DT_CHECK(dt_hf_open(o->hf_dir, &h));
    g->mc = *dt_hf_config(h);
    g->context = g->mc.seq_len;
    g->vocab = g->mc.vocab_size < DT__GEN_BYTE_VOCAB ? g->mc.vocab_size : DT__GEN_BYTE_VOCAB;
    snprintf(g->path, sizeof g->path, "%s", o->hf_dir);
    snprintf(g->describe, sizeof g->describe, "Hugging Face GPT-2: %d layers, width %d, vocabulary %d",
             g->mc.num_layers, g->mc.hidden_size, g->mc.vocab_size);
    const dt_backend_options bo = {o->threads, -1};
    dt_status st = dt_backend_create_with(o->device, &bo, &g->be);
    if (st == DT_OK) st = dt_gpt_create(&g->mc, g->be, &g->gpt);
    if (st == DT_OK) {
        const dt_gpt_init init = dt_hf_init(h);
        st = dt_gpt_init_weights_from(g->gpt, &init);
    }
    dt_hf_close(h);
    return st;
}

/* A Hugging Face directory holding a tokenizer's files. */
static int dt__gen_has_tokenizer(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/vocab.json", dir);
    if (access(p, R_OK) == 0) return 1;
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    return access(p, R_OK) == 0;
}

/* The tokenizer named, else the checkpoint's (or the Hugging Face
 * directory's own files), else bytes. */
static dt_status dt__gen_tokenizer(dt_generator *g, const dt_generator_options *o)
{
    if (!o->tokenizer && o->hf_dir && dt__gen_has_tokenizer(o->hf_dir))
        snprintf(g->tokenizer, sizeof g->tokenizer, "%s", o->hf_dir);
    const char *dir = o->tokenizer ? o->tokenizer : g->tokenizer[0] ? g->tokenizer : NULL;
    if (!dir) return DT_OK;
    if (dir != g->tokenizer) snprintf(g->tokenizer, sizeof g->tokenizer, "%s", dir);
    const dt_status bs = dt_bpe_open(dir, &g->bpe);
    if (bs != DT_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", dt_last_error());
        return o->tokenizer ? bs /* its message names --tokenizer DIR */
                            : DT_FAIL(bs, "%s was trained with the tokenizer %s, which does not load (%s); name one "
                                          "with --tokenizer DIR",
                                      g->path, dir, why);
    }
    const int v = dt_bpe_vocab_size(g->bpe);
    if (v > g->mc.vocab_size)
        return DT_FAIL(DT_ERR_INVALID, "--tokenizer %s: %d tokens, more than the model's vocabulary of %d", dir, v,
                       g->mc.vocab_size);
    g->vocab = v;
    return DT_OK;
}

dt_status dt_generator_open(const dt_generator_options *o, dt_generator **out)
{
    *out = NULL;
    const int hf = o && o->hf_dir;
    if (!o || (!hf && (!o->dir || !o->dir[0])))
        return DT_FAIL(DT_ERR_INVALID, "--load: expected a checkpoint directory");
    dt_generator *g = calloc(1, sizeof *g);
    if (!g) return DT_FAIL(DT_ERR_NOMEM, "generate: out of memory");
    if (hf) {
        dt_status st = dt__gen_open_hf(g, o);
        if (st == DT_OK) st = dt__gen_tokenizer(g, o);
        if (st != DT_OK) {
            dt_generator_free(g);
            return st;
        }
        *out = g;
        return DT_OK;
    }
    dt_checkpoint_manifest m;
    memset(&m, 0, sizeof m);
    dt_status st = dt_checkpoint_find_latest(o->dir, g->path, sizeof g->path, g->note, sizeof g->note, &m);
    if (st != DT_OK) {
        free(g);
        return st;
    }
    g->iteration = m.iteration;
    dt_gpt_config mc;
    dt_dtype prec = DT_F32;
    DT_CHECK_GOTO(dt__gen_config(g, &m, &mc, &prec), st, fail);
    DT_CHECK_GOTO(dt__gen_tokenizer(g, o), st, fail);
    const dt_backend_options bo = {o->threads, -1};
    DT_CHECK_GOTO(dt_backend_create_with(o->device, &bo, &g->be), st, fail);
    DT_CHECK_GOTO(dt_gpt_create(&mc, g->be, &g->gpt), st, fail);
    DT_CHECK_GOTO(g->t > 1 ? dt__gen_weights_tp(g, &m) : dt__gen_weights(g, &m), st, fail);
    /* as it was trained: mixed precision computes from half copies of the masters */
    if (prec != DT_F32) DT_CHECK_GOTO(dt_gpt_set_precision(g->gpt, prec), st, fail);
    dt_checkpoint_manifest_free(&m);
    *out = g;
    return DT_OK;
fail:
    dt_checkpoint_manifest_free(&m);
    dt_generator_free(g);
    return st;
}

void dt_generator_free(dt_generator *g)
{
    if (!g) return;
    dt_gpt_free(g->gpt);
    if (g->be) dt_backend_destroy(g->be);
    dt_bpe_close(g->bpe);
    free(g);
}

dt_gpt *dt_generator_model(dt_generator *g) { return g->gpt; }
const char *dt_generator_path(const dt_generator *g) { return g->path; }
const char *dt_generator_note(const dt_generator *g) { return g->note; }
int64_t dt_generator_iteration(const dt_generator *g) { return g->iteration; }
int dt_generator_context(const dt_generator *g) { return g->context; }
int dt_generator_vocab(const dt_generator *g) { return g->vocab; }
const char *dt_generator_describe(const dt_generator *g) { return g->describe; }

const char *dt_generator_tokenizer(const dt_generator *g)
{
    return g->bpe ? "GPT-2 BPE" : "bytes";
}
const char *dt_generator_tokenizer_dir(const dt_generator *g) { return g->bpe ? g->tokenizer : NULL; }

dt_status dt_generator_encode(dt_generator *g, const char *text, size_t n, int32_t **tokens, size_t *n_tokens)
{
    if (g->bpe) return dt_bpe_encode(g->bpe, text, n, tokens, n_tokens);
    /* byte-level: a byte is its token */
    *tokens = malloc((n ? n : 1) * sizeof **tokens);
    if (!*tokens) return DT_FAIL(DT_ERR_NOMEM, "generate: out of memory for %zu tokens", n);
    for (size_t i = 0; i < n; i++) (*tokens)[i] = (unsigned char)text[i];
    *n_tokens = n;
    return DT_OK;
}

dt_status dt_generator_decode(const dt_generator *g, int32_t token, const uint8_t **bytes, size_t *n)
{
    if (g->bpe) return dt_bpe_decode(g->bpe, token, bytes, n);
    if (token < 0 || token >= DT__GEN_BYTE_VOCAB)
        return DT_FAIL(DT_ERR_INVALID, "generate: token %d is not a byte", (int)token);
    static const uint8_t bytes256[DT__GEN_BYTE_VOCAB] = {
#define DT__B4(i) i, i + 1, i + 2, i + 3
#define DT__B16(i) DT__B4(i), DT__B4(i + 4), DT__B4(i + 8), DT__B4(i + 12)
#define DT__B64(i) DT__B16(i), DT__B16(i + 16), DT__B16(i + 32), DT__B16(i + 48)
        DT__B64(0), DT__B64(64), DT__B64(128), DT__B64(192)
#undef DT__B64
#undef DT__B16
#undef DT__B4
    };
    *bytes = &bytes256[token];
    *n = 1;
    return DT_OK;
}
