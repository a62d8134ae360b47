/* check_safetensors.c: the safetensors reader and writer
 * (include/dt_safetensors.h): a written file read back bit for bit and
 * laid out as the format says (header length, sorted names, 8-byte
 * aligned buffer, metadata); F16 and BF16 tensors written by hand here
 * widened exactly; and malformed files, each refused with one line that
 * names the problem, never a crash. GPT-2 out (dt_gpt_export_hf): names,
 * Conv1D transposes, config.json.
 *
 * GPT-2 in (dt_hf_*), from Hugging Face directories written here byte by
 * byte (tests/interop.sh covers F32 round trips through the dtrain
 * program, tests/badinput-hf.sh the catalogue of bad directories): BF16,
 * F16 and mixed tensors each load as the exact widening of the bits
 * written (the expected floats computed here, not by the library), Conv1D
 * weights transposed to dtrain's (out, in); GPT2Model's unprefixed names,
 * the old causal-mask buffers and a tied head stored twice accepted, a
 * head differing from wte refused; config.json's defaults; a wrong shape
 * or dtype refused naming the tensor; and pipeline stages and
 * tensor-parallel shards initialised from the checkpoint hold exactly
 * their part of the whole model. */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dt_safetensors.h"
#include "stage.h"
#include "testutil.h"
#include "tp.h"

static char dir[] = "/tmp/dtrain-st.XXXXXX";

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

/* a file of an 8-byte header length, the header text, then data bytes */
static void raw_file(const char *path, const char *header, uint64_t hlen, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert(f);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(hlen >> (8 * i));
    ck_assert(fwrite(len8, 1, 8, f) == 8);
    if (header) ck_assert(fwrite(header, 1, strlen(header), f) == strlen(header));
    if (n) ck_assert(fwrite(data, 1, n, f) == n);
    ck_assert(fclose(f) == 0);
}

START_TEST(test_round_trip)
{
    char p[256];
    path_of(p, sizeof p, "a.safetensors");
    float w[6] = {1.5f, -2.0f, 3.25f, 1e-30f, -0.0f, 65504.0f}, b[3] = {0.1f, 0.2f, 0.3f}, s0 = 7.0f;
    const dt_st_out t[3] = {{"zeta.weight", 2, {2, 3}, w}, {"alpha.bias", 1, {3}, b}, {"scalar", 0, {0}, &s0}};
    ck_dt(dt_safetensors_write(p, t, 3));
    dt_safetensors *st;
    ck_dt(dt_safetensors_open(p, &st));
    ck_assert_int_eq(dt_safetensors_count(st), 3);
    ck_assert_str_eq(dt_safetensors_tensor(st, 0)->name, "alpha.bias"); /* name order */
    ck_assert_str_eq(dt_safetensors_metadata(st, "format"), "pt");
    const dt_st_tensor *x = dt_safetensors_find(st, "zeta.weight");
    ck_assert(x && x->dtype == DT_F32 && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 3 && x->numel == 6);
    float r[6];
    ck_dt(dt_safetensors_read_f32(st, x, r));
    ck_assert(!memcmp(r, w, sizeof w));
    x = dt_safetensors_find(st, "scalar");
    ck_assert(x && x->ndim == 0 && x->numel == 1);
    ck_dt(dt_safetensors_read_f32(st, x, r));
    ck_assert(r[0] == 7.0f);
    ck_assert(!dt_safetensors_find(st, "missing"));
    dt_safetensors_close(st);
    /* the layout: header length a multiple of 8, alpha.bias's bytes first */
    FILE *f = fopen(p, "rb");
    uint8_t len8[8];
    ck_assert(fread(len8, 1, 8, f) == 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | len8[i];
    ck_assert(hl % 8 == 0);
    fseek(f, (long)(8 + hl), SEEK_SET);
    float first;
    ck_assert(fread(&first, 4, 1, f) == 1);
    ck_assert(first == 0.1f);
    fclose(f);
    /* a repeated name is refused */
    const dt_st_out d[2] = {{"x", 1, {1}, b}, {"x", 1, {1}, b}};
    ck_assert_int_eq(dt_safetensors_write(p, d, 2), DT_ERR_INVALID);
}
END_TEST

START_TEST(test_half_types)
{
    char p[256];
    path_of(p, sizeof p, "h.safetensors");
    const uint16_t data[4] = {0x3c00, 0xc000, 0x3f80, 0x0001}; /* f16 1, -2; bf16 1, 2^-133 */
    const char *h = "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[4,8]}}";
    raw_file(p, h, strlen(h), data, sizeof data);
    dt_safetensors *st;
    ck_dt(dt_safetensors_open(p, &st));
    float r[2];
    ck_dt(dt_safetensors_read_f32(st, dt_safetensors_find(st, "a"), r));
    ck_assert(r[0] == 1.0f && r[1] == -2.0f);
    ck_dt(dt_safetensors_read_f32(st, dt_safetensors_find(st, "b"), r));
    ck_assert(r[0] == 1.0f && r[1] == ldexpf(1.0f, -133));
    dt_safetensors_close(st);
}
END_TEST

typedef struct bad_case {
    const char *header; /* NULL: no header bytes at all */
    int64_t hlen;       /* -1: strlen(header) */
    size_t data;        /* data bytes after the header */
    const char *want;   /* in the message */
} bad_case;

static const bad_case bad[] = {
    {NULL, 0, 0, "too short"},
    {"{}", 200 << 20, 0, "header of"},
    {"{}", 64, 0, "truncated"},
    {"[1,2]", -1, 0, "JSON object"},
    {"{\"a\":", -1, 0, "header:"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{}}", -1, 4, "header:"},
    {"{\"a\":3}", -1, 0, "expected an object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", -1, 4, "unknown key"},
    {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", -1, 8, "dtype F64"},
    {"{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4, "\"dtype\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", -1, 4, "\"shape\"[0]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", -1, 4, "at most 8"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", -1, 4, "span 4 bytes"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", -1, 4, "data_offsets"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 4, "truncated"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
     "\"data_offsets\":[0,4]}}",
     -1, 4, "overlaps"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", -1, 8, "hole"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 12, "end at byte 4"},
    {"{\"__metadata__\":{\"format\":1}}", -1, 0, "expected a string"},
    {"{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4, "empty name"},
    {"{}", -1, 4, "no tensor"},
};

START_TEST(test_malformed)
{
    char p[256];
    path_of(p, sizeof p, "bad.safetensors");
    uint8_t zeros[16] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bad_case *c = &bad[i];
        if (!c->header) {
            FILE *f = fopen(p, "wb");
            ck_assert(fwrite("abc", 1, 3, f) == 3);
            fclose(f);
        } else {
            raw_file(p, c->header, c->hlen >= 0 ? (uint64_t)c->hlen : strlen(c->header), zeros, c->data);
        }
        dt_safetensors *st = NULL;
        const dt_status s = dt_safetensors_open(p, &st);
        ck_assert_msg(s != DT_OK && !st, "case %zu (%s) was accepted", i, c->want);
        const char *m = dt_last_error();
        ck_assert_msg(strstr(m, c->want) && !strchr(m, '\n'), "case %zu: message '%s' lacks '%s'", i, m, c->want);
    }
    dt_safetensors *st = NULL;
    path_of(p, sizeof p, "missing.safetensors");
    ck_assert(dt_safetensors_open(p, &st) != DT_OK && !st);
}
END_TEST


/* dt_gpt_export_hf: every tensor under GPT-2's name, Conv1D weights the
 * transpose of dtrain's, the rest equal, and config.json's sizes. */
START_TEST(test_export_hf)
{
    dt_backend *be;
    ck_dt(dt_backend_create("cpu", 1, &be));
    dt_gpt_config c;
    ck_dt(dt_gpt_config_preset("tiny", &c));
    c.vocab_size = 256;
    c.tie_embeddings = 0;
    dt_gpt *m;
    ck_dt(dt_gpt_create(&c, be, &m));
    ck_dt(dt_gpt_init_weights(m, 7));
    char d[256], p[300];
    path_of(d, sizeof d, "hf");
    ck_dt(dt_gpt_export_hf(m, d));
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    dt_safetensors *st;
    ck_dt(dt_safetensors_open(p, &st));
    const dt_paramset *ps = dt_gpt_layout(m);
    const float *w = dt_gpt_params(m);
    ck_assert_int_eq(dt_safetensors_count(st), ps->count);
    const dt_st_tensor *q = dt_safetensors_find(st, "transformer.h.1.attn.c_attn.weight");
    ck_assert(q && q->ndim == 2 && q->shape[0] == c.hidden_size && q->shape[1] == 3 * c.hidden_size);
    float *r = malloc(q->numel * sizeof *r);
    ck_dt(dt_safetensors_read_f32(st, q, r));
    const dt_param_info *qi = NULL;
    for (int i = 0; i < ps->count; i++)
        if (!strcmp(ps->info[i].name, "h.1.qkv.w")) qi = &ps->info[i];
    ck_assert(qi);
    const int C = c.hidden_size;
    for (int o = 0; o < 3 * C; o++)
        for (int k = 0; k < C; k++) ck_assert(r[(size_t)k * 3 * C + o] == w[qi->offset + (size_t)o * C + k]);
    free(r);
    const dt_st_tensor *e = dt_safetensors_find(st, "transformer.wte.weight");
    ck_assert(e && e->shape[0] == 256 && e->shape[1] == C);
    ck_assert(dt_safetensors_find(st, "lm_head.weight") && dt_safetensors_find(st, "transformer.ln_f.bias"));
    dt_safetensors_close(st);
    snprintf(p, sizeof p, "%s/config.json", d);
    FILE *f = fopen(p, "r");
    char txt[2048] = "";
    ck_assert(f && fread(txt, 1, sizeof txt - 1, f) > 0);
    fclose(f);
    ck_assert(strstr(txt, "\"model_type\": \"gpt2\"") && strstr(txt, "\"gelu_new\"") &&
              strstr(txt, "\"tie_word_embeddings\": false") && strstr(txt, "\"vocab_size\": 256"));
    dt_gpt_free(m);
    dt_backend_destroy(be);
}
END_TEST

/* ---- GPT-2 in (dt_hf_*): Hugging Face directories written by hand ---------- */

/* The checkpoint's sizes: 2 blocks, C 8, 2 heads, 8 positions, and a
 * vocabulary of 11 (odd: 2 tensor ranks hold 5 and 6 of its rows). */
enum { HF_V = 11, HF_P = 8, HF_C = 8, HF_L = 2, HF_NH = 2, HF_MAXT = 48 };
enum { HF_F32, HF_F16, HF_BF16, HF_MIXED };
static const char *const hf_dtype_name[3] = {"F32", "F16", "BF16"};

/* One stored tensor: its bytes (little-endian) and the floats they widen
 * to, computed here from the bits written, not by the library. */
typedef struct hf_tensor {
    char name[80]; /* as stored */
    char key[64];  /* GPT2LMHeadModel's name without "transformer." */
    int dtype, ndim;
    const char *said; /* the dtype the header names, NULL: its own */
    int64_t shape[4];
    size_t numel;
    uint8_t *bytes;
    float *want; /* (numel) */
} hf_tensor;

typedef struct hf_ckpt {
    int n;
    hf_tensor t[HF_MAXT];
} hf_ckpt;

typedef struct hf_spec {
    int prefix;    /* "transformer." before the transformer's names */
    int dtype;     /* HF_F32, HF_F16, HF_BF16, or HF_MIXED: F32, F16, BF16 by turns */
    int tied;      /* no lm_head.weight among the weights */
    int head_copy; /* tied: lm_head.weight stored too, as F32: 1 wte's values, 2 one element off */
    int buffers;   /* the causal-mask buffers h.N.attn.bias, h.N.attn.masked_bias */
} hf_spec;

/* GPT-2's block tensors in GPT2LMHeadModel's order, dtrain's names (lib/model/gpt.c's
 * layout) and the shape stored: Conv1D weights (in, out), the transpose of dtrain's. */
static const struct {
    const char *dt, *hf;
    int conv1d;
    int64_t d0, d1; /* in units of C; d1 0: a vector */
} hf_block[12] = {
    {"ln1.w", "ln_1.weight", 0, 1, 0},
    {"ln1.b", "ln_1.bias", 0, 1, 0},
    {"qkv.w", "attn.c_attn.weight", 1, 1, 3},
    {"qkv.b", "attn.c_attn.bias", 0, 3, 0},
    {"attproj.w", "attn.c_proj.weight", 1, 1, 1},
    {"attproj.b", "attn.c_proj.bias", 0, 1, 0},
    {"ln2.w", "ln_2.weight", 0, 1, 0},
    {"ln2.b", "ln_2.bias", 0, 1, 0},
    {"fc.w", "mlp.c_fc.weight", 1, 1, 4},
    {"fc.b", "mlp.c_fc.bias", 0, 4, 0},
    {"fcproj.w", "mlp.c_proj.weight", 1, 4, 1},
    {"fcproj.b", "mlp.c_proj.bias", 0, 1, 0},
};

static uint32_t hf_mix(uint32_t x) /* a 32-bit integer hash (lowbias32) */
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

static float hf_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int hf_same(float a, float b) { return !memcmp(&a, &b, sizeof a); } /* bit for bit: -0 is not 0 */

/* The F16 bits of v, which must be an F16 value (checked): sign, 5-bit
 * exponent biased by 15, 10-bit mantissa; subnormals m * 2^-24. */
static uint16_t hf_f16_bits(float v)
{
    const uint16_t sign = signbit(v) ? 0x8000 : 0;
    const double a = fabs((double)v);
    if (a == 0.0) return sign;
    int ex;
    const double f = frexp(a, &ex); /* a = 2f * 2^(ex - 1), 2f in [1, 2) */
    const int e = ex + 14;          /* the biased exponent */
    const double m = e >= 1 ? (2.0 * f - 1.0) * 1024.0 : ldexp(a, 24);
    ck_assert_msg(e <= 30 && m == floor(m) && m < 1024.0, "%a is not an F16 value", (double)v);
    return (uint16_t)(sign | (e >= 1 ? e << 10 : 0) | (int)m);
}

/* Element j of stored tensor number k in dtype: its bits and exact value.
 * F32 and BF16: any finite bits (BF16 widens to bits << 16); F16: small
 * integers times powers of two, a few subnormals and -0. */
static void hf_value(int dtype, int k, size_t j, uint8_t *bytes, float *want)
{
    const uint32_t h = hf_mix((uint32_t)k * 0x9e3779b9u + (uint32_t)j + 1);
    if (dtype == HF_F32) {
        uint32_t u = (h & 0x7f800000u) == 0x7f800000u ? h ^ 0x40000000u : h;
        *want = hf_from_bits(u);
        for (int b = 0; b < 4; b++) bytes[4 * j + b] = (uint8_t)(u >> 8 * b);
        return;
    }
    uint16_t u;
    if (dtype == HF_BF16) {
        u = (uint16_t)h;
        if ((u & 0x7f80) == 0x7f80) u ^= 0x4000;
        *want = hf_from_bits((uint32_t)u << 16);
    } else {
        float v = ldexpf((float)((int)(h % 41) - 20), (int)(h >> 8) % 9 - 6);
        if (h % 17 == 0) v = ldexpf((float)((h >> 12) % 1023 + 1), -24) * (h & 0x100000 ? -1.0f : 1.0f);
        if (h % 29 == 0) v = -0.0f;
        u = hf_f16_bits(v);
        *want = v;
    }
    bytes[2 * j] = (uint8_t)u;
    bytes[2 * j + 1] = (uint8_t)(u >> 8);
}

static hf_tensor *hf_add(hf_ckpt *k, const char *prefix, const char *key, int dtype, int ndim, const int64_t *shape)
{
    ck_assert_int_lt(k->n, HF_MAXT);
    hf_tensor *t = &k->t[k->n];
    snprintf(t->key, sizeof t->key, "%s", key);
    snprintf(t->name, sizeof t->name, "%s%s", prefix, key);
    t->dtype = dtype == HF_MIXED ? k->n % 3 : dtype;
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) t->numel *= (size_t)(t->shape[d] = shape[d]);
    t->bytes = malloc(t->numel * 4);
    t->want = malloc(t->numel * sizeof *t->want);
    ck_assert(t->bytes && t->want);
    for (size_t j = 0; j < t->numel; j++) hf_value(t->dtype, k->n, j, t->bytes, t->want + j);
    k->n++;
    return t;
}

static size_t hf_nbytes(const hf_tensor *t) { return t->numel * (t->dtype == HF_F32 ? 4 : 2); }

static void hf_ckpt_make(const hf_spec *s, hf_ckpt *k)
{
    memset(k, 0, sizeof *k);
    const char *px = s->prefix ? "transformer." : "";
    char key[64];
    hf_add(k, px, "wte.weight", s->dtype, 2, (int64_t[]){HF_V, HF_C});
    hf_add(k, px, "wpe.weight", s->dtype, 2, (int64_t[]){HF_P, HF_C});
    for (int l = 0; l < HF_L; l++) {
        for (int i = 0; i < 12; i++) {
            snprintf(key, sizeof key, "h.%d.%s", l, hf_block[i].hf);
            const int64_t sh[2] = {hf_block[i].d0 * HF_C, hf_block[i].d1 * HF_C};
            hf_add(k, px, key, s->dtype, sh[1] ? 2 : 1, sh);
        }
        if (s->buffers) { /* as old transformers saved them (F32; no weights) */
            snprintf(key, sizeof key, "h.%d.attn.bias", l);
            hf_add(k, px, key, HF_F32, 4, (int64_t[]){1, 1, HF_P, HF_P});
            snprintf(key, sizeof key, "h.%d.attn.masked_bias", l);
            hf_add(k, px, key, HF_F32, 0, NULL);
        }
    }
    hf_add(k, px, "ln_f.weight", s->dtype, 1, (int64_t[]){HF_C});
    hf_add(k, px, "ln_f.bias", s->dtype, 1, (int64_t[]){HF_C});
    if (!s->tied) hf_add(k, "", "lm_head.weight", s->dtype, 2, (int64_t[]){HF_V, HF_C});
    if (s->tied && s->head_copy) { /* wte's values again, as F32 */
        hf_tensor *h = hf_add(k, "", "lm_head.weight", HF_F32, 2, (int64_t[]){HF_V, HF_C});
        for (size_t j = 0; j < h->numel; j++) {
            float v = k->t[0].want[j];
            if (s->head_copy == 2 && j == 17) v = v == 1.0f ? 2.0f : 1.0f;
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            for (int b = 0; b < 4; b++) h->bytes[4 * j + b] = (uint8_t)(u >> 8 * b);
            h->want[j] = v;
        }
    }
}

static void hf_ckpt_free(hf_ckpt *k)
{
    for (int i = 0; i < k->n; i++) free(k->t[i].bytes), free(k->t[i].want);
    k->n = 0;
}

/* config.json of the sizes with `keys` (each ", \"key\": value") after them. */
static void hf_write_config(const char *d, const char *keys)
{
    char p[300];
    snprintf(p, sizeof p, "%s/config.json", d);
    FILE *f = fopen(p, "w");
    ck_assert(f);
    fprintf(f,
            "{\"model_type\": \"gpt2\", \"vocab_size\": %d, \"n_positions\": %d, \"n_embd\": %d, \"n_layer\": %d, "
            "\"n_head\": %d%s}\n",
            HF_V, HF_P, HF_C, HF_L, HF_NH, keys);
    ck_assert(fclose(f) == 0);
}

/* DIR (made) = config.json (explicit keys, tie as s says) and the
 * checkpoint as model.safetensors: its tensors' bytes in k's order. */
static void hf_write(const char *d, const hf_spec *s, const hf_ckpt *k)
{
    ck_assert(mkdir(d, 0700) == 0);
    hf_write_config(d, s->tied ? ", \"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-05, "
                                 "\"n_inner\": null, \"tie_word_embeddings\": true"
                               : ", \"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-05, "
                                 "\"n_inner\": null, \"tie_word_embeddings\": false");
    static char h[16384];
    size_t at = (size_t)snprintf(h, sizeof h, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < k->n && at < sizeof h; i++) {
        const hf_tensor *t = &k->t[i];
        at += (size_t)snprintf(h + at, sizeof h - at, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name,
                               t->said ? t->said : hf_dtype_name[t->dtype]);
        for (int dd = 0; dd < t->ndim && at < sizeof h; dd++)
            at += (size_t)snprintf(h + at, sizeof h - at, "%s%lld", dd ? "," : "", (long long)t->shape[dd]);
        if (at < sizeof h)
            at += (size_t)snprintf(h + at, sizeof h - at, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                   (unsigned long long)(off + hf_nbytes(t)));
        off += hf_nbytes(t);
    }
    if (at < sizeof h) at += (size_t)snprintf(h + at, sizeof h - at, "}");
    ck_assert(at < sizeof h);
    char p[300];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    FILE *f = fopen(p, "wb");
    ck_assert(f);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)at >> (8 * i));
    ck_assert(fwrite(len8, 1, 8, f) == 8 && fwrite(h, 1, at, f) == at);
    for (int i = 0; i < k->n; i++) ck_assert(fwrite(k->t[i].bytes, 1, hf_nbytes(&k->t[i]), f) == hf_nbytes(&k->t[i]));
    ck_assert(fclose(f) == 0);
}

/* The stored tensor dtrain's tensor `name` comes from (*conv1d: stored
 * (in, out)), by the table above, not the library's. */
static const hf_tensor *hf_source(const hf_ckpt *k, const char *name, int *conv1d)
{
    char key[64] = "";
    int l, at = 0;
    *conv1d = 0;
    if (!strcmp(name, "wte")) snprintf(key, sizeof key, "wte.weight");
    else if (!strcmp(name, "wpe")) snprintf(key, sizeof key, "wpe.weight");
    else if (!strcmp(name, "lnf.w")) snprintf(key, sizeof key, "ln_f.weight");
    else if (!strcmp(name, "lnf.b")) snprintf(key, sizeof key, "ln_f.bias");
    else if (!strcmp(name, "lm_head.w")) snprintf(key, sizeof key, "lm_head.weight");
    else if (sscanf(name, "h.%d.%n", &l, &at) == 1 && at)
        for (int i = 0; i < 12; i++)
            if (!strcmp(name + at, hf_block[i].dt)) {
                snprintf(key, sizeof key, "h.%d.%s", l, hf_block[i].hf);
                *conv1d = hf_block[i].conv1d;
            }
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->t[i].key, key)) return &k->t[i];
    return NULL;
}

/* Every parameter of m is the exact widening of the value stored for it,
 * Conv1D weights transposed: dtrain's [o][i] is the stored [i][o]. */
static void hf_check_model(dt_gpt *m, const hf_ckpt *k, const char *what)
{
    const dt_paramset *ps = dt_gpt_layout(m);
    const float *w = dt_gpt_params(m);
    for (int i = 0; i < ps->count; i++) {
        const dt_param_info *p = &ps->info[i];
        int conv;
        const hf_tensor *t = hf_source(k, p->name, &conv);
        ck_assert_msg(t && t->numel == p->numel, "%s: %s has no stored tensor of its size", what, p->name);
        const size_t out = (size_t)p->shape[0], in = p->ndim == 2 ? (size_t)p->shape[1] : 1;
        if (conv) ck_assert(t->shape[0] == (int64_t)in && t->shape[1] == (int64_t)out);
        for (size_t j = 0; j < p->numel; j++) {
            const size_t src = conv ? (j % in) * out + j / in : j;
            ck_assert_msg(hf_same(w[p->offset + j], t->want[src]), "%s: %s[%zu] = %a, stored %s %s[%zu] is %a", what,
                          p->name, j, (double)w[p->offset + j], hf_dtype_name[t->dtype], t->name, src,
                          (double)t->want[src]);
        }
    }
}

/* Tensor `name` of m (host: the CPU backend), element [r][c]. */
static float hf_param_at(dt_gpt *m, const char *name, int64_t r, int64_t c)
{
    const dt_paramset *ps = dt_gpt_layout(m);
    for (int i = 0; i < ps->count; i++)
        if (!strcmp(ps->info[i].name, name))
            return dt_gpt_params(m)[ps->info[i].offset + (size_t)(r * ps->info[i].shape[1] + c)];
    ck_abort_msg("no tensor %s", name);
    return 0.0f;
}

static float hf_stored_at(const hf_ckpt *k, const char *key, int64_t r, int64_t c)
{
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->t[i].key, key)) return k->t[i].want[r * k->t[i].shape[1] + c];
    ck_abort_msg("no stored %s", key);
    return 0.0f;
}

static dt_backend *hf_be;
static void hf_setup(void) { ck_dt(dt_backend_create("cpu", 1, &hf_be)); }
static void hf_teardown(void) { dt_backend_destroy(hf_be); }

/* DIR opened and loaded into a whole model (dt_gpt_init_weights_from). */
static dt_gpt *hf_load(const char *d, dt_hf_model **out)
{
    dt_hf_model *h;
    ck_dt(dt_hf_open(d, &h));
    dt_gpt *m;
    ck_dt(dt_gpt_create(dt_hf_config(h), hf_be, &m));
    const dt_gpt_init init = dt_hf_init(h);
    ck_dt(dt_gpt_init_weights_from(m, &init));
    if (out) *out = h;
    else dt_hf_close(h);
    return m;
}

/* Every tensor BF16, then F16, then mixed (F32, F16, BF16 by turns): each
 * parameter the exact widening, Conv1D weights transposed. */
START_TEST(test_hf_half_dtypes)
{
    static const hf_spec specs[] = {
        {.prefix = 1, .dtype = HF_BF16}, {.prefix = 1, .dtype = HF_F16, .tied = 1}, {.prefix = 1, .dtype = HF_MIXED}};
    for (size_t c = 0; c < sizeof specs / sizeof *specs; c++) {
        const hf_spec *s = &specs[c];
        char d[256];
        snprintf(d, sizeof d, "%s/hf-dtype%zu", dir, c);
        hf_ckpt k;
        hf_ckpt_make(s, &k);
        hf_write(d, s, &k);
        dt_gpt_config cfg;
        ck_dt(dt_hf_read_config(d, &cfg));
        ck_assert(cfg.vocab_size == HF_V && cfg.seq_len == HF_P && cfg.hidden_size == HF_C && cfg.num_layers == HF_L &&
                  cfg.num_heads == HF_NH && cfg.tie_embeddings == s->tied);
        dt_gpt *m = hf_load(d, NULL);
        ck_assert_int_eq(dt_gpt_layout(m)->count, 2 + 12 * HF_L + 2 + !s->tied);
        hf_check_model(m, &k, s->dtype == HF_MIXED ? "mixed" : hf_dtype_name[s->dtype]);
        /* the four Conv1D weights by index: stored [i][o] is dtrain's [o][i] */
        ck_assert(hf_same(hf_param_at(m, "h.1.qkv.w", 17, 3), hf_stored_at(&k, "h.1.attn.c_attn.weight", 3, 17)));
        ck_assert(hf_same(hf_param_at(m, "h.0.attproj.w", 2, 6), hf_stored_at(&k, "h.0.attn.c_proj.weight", 6, 2)));
        ck_assert(hf_same(hf_param_at(m, "h.1.fc.w", 30, 1), hf_stored_at(&k, "h.1.mlp.c_fc.weight", 1, 30)));
        ck_assert(hf_same(hf_param_at(m, "h.0.fcproj.w", 7, 25), hf_stored_at(&k, "h.0.mlp.c_proj.weight", 25, 7)));
        dt_gpt_free(m);
        hf_ckpt_free(&k);
    }
}
END_TEST

/* GPT2Model's names (no "transformer."), the old causal-mask buffers, and
 * a tied head stored twice: accepted; the head differing from wte in one
 * element: refused, naming lm_head.weight. */
START_TEST(test_hf_names)
{
    static const hf_spec specs[] = {
        {.prefix = 0, .dtype = HF_MIXED, .tied = 1, .head_copy = 1, .buffers = 1},
        {.prefix = 1, .dtype = HF_BF16, .tied = 1, .head_copy = 1, .buffers = 1},
        {.prefix = 0, .dtype = HF_F16, .tied = 0, .buffers = 1},
    };
    for (size_t c = 0; c < sizeof specs / sizeof *specs; c++) {
        char d[256];
        snprintf(d, sizeof d, "%s/hf-names%zu", dir, c);
        hf_ckpt k;
        hf_ckpt_make(&specs[c], &k);
        hf_write(d, &specs[c], &k);
        dt_gpt *m = hf_load(d, NULL);
        hf_check_model(m, &k, d);
        dt_gpt_free(m);
        hf_ckpt_free(&k);
    }
    for (int prefix = 0; prefix <= 1; prefix++) {
        const hf_spec s = {.prefix = prefix, .dtype = HF_BF16, .tied = 1, .head_copy = 2};
        char d[256];
        snprintf(d, sizeof d, "%s/hf-head%d", dir, prefix);
        hf_ckpt k;
        hf_ckpt_make(&s, &k);
        hf_write(d, &s, &k);
        dt_hf_model *h = NULL;
        ck_assert_int_eq(dt_hf_open(d, &h), DT_ERR_INVALID);
        ck_assert(!h);
        const char *msg = dt_last_error();
        ck_assert_msg(strstr(msg, "\"lm_head.weight\" differs") &&
                          strstr(msg, prefix ? "\"transformer.wte.weight\"" : "\"wte.weight\"") && !strchr(msg, '\n'),
                      "%s", msg);
        hf_ckpt_free(&k);
    }
}
END_TEST

/* config.json's optional keys: without activation_function,
 * layer_norm_epsilon and tie_word_embeddings, transformers' defaults
 * (gelu_new, 1e-5, tied); gelu_pytorch_tanh; n_inner null or 4 n_embd. */
START_TEST(test_hf_config_defaults)
{
    const hf_spec s = {.prefix = 1, .dtype = HF_BF16, .tied = 1};
    char d[256];
    snprintf(d, sizeof d, "%s/hf-defaults", dir);
    hf_ckpt k;
    hf_ckpt_make(&s, &k);
    hf_write(d, &s, &k);
    hf_write_config(d, "");
    dt_gpt_config cfg;
    ck_dt(dt_hf_read_config(d, &cfg));
    ck_assert_int_eq(cfg.tie_embeddings, 1);
    dt_gpt *m = hf_load(d, NULL);
    ck_assert_int_eq(dt_gpt_layout(m)->count, 2 + 12 * HF_L + 2); /* tied: no lm_head.w */
    hf_check_model(m, &k, "defaults");
    dt_gpt_free(m);
    hf_ckpt_free(&k);
    static const struct {
        const char *keys;
        int tied;
        const char *refused; /* NULL: accepted; else the key its message names */
    } cases[] = {
        {", \"activation_function\": \"gelu_pytorch_tanh\"", 1, NULL},
        {", \"n_inner\": null, \"tie_word_embeddings\": false", 0, NULL},
        {", \"n_inner\": 32, \"n_ctx\": 8", 1, NULL},
        {", \"n_inner\": 33", 0, "\"n_inner\""},
        {", \"activation_function\": \"gelu\"", 0, "\"activation_function\""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        hf_write_config(d, cases[c].keys);
        memset(&cfg, 0, sizeof cfg);
        const dt_status st = dt_hf_read_config(d, &cfg);
        if (!cases[c].refused) {
            ck_assert_msg(st == DT_OK, "%s: %s", cases[c].keys, dt_last_error());
            ck_assert(cfg.hidden_size == HF_C && cfg.tie_embeddings == cases[c].tied);
        } else {
            ck_assert_msg(st == DT_ERR_INVALID, "%s accepted", cases[c].keys);
            ck_assert_msg(strstr(dt_last_error(), cases[c].refused) && !strchr(dt_last_error(), '\n'), "%s",
                          dt_last_error());
        }
    }
}
END_TEST

/* A 16-bit tensor of the wrong shape for its name, and one whose bytes are
 * another dtype's: one line naming the tensor, before any weight is read. */
START_TEST(test_hf_refusals)
{
    const hf_spec s = {.prefix = 1, .dtype = HF_BF16, .tied = 1}; /* ln_f.bias last */
    char d[256];
    hf_ckpt k;
    hf_ckpt_make(&s, &k);
    /* c_attn stored (out, in), as dtrain holds it: not GPT-2's Conv1D */
    hf_tensor *q = NULL;
    for (int i = 0; i < k.n; i++)
        if (!strcmp(k.t[i].key, "h.1.attn.c_attn.weight")) q = &k.t[i];
    ck_assert(q);
    q->shape[0] = 3 * HF_C, q->shape[1] = HF_C;
    snprintf(d, sizeof d, "%s/hf-shape", dir);
    hf_write(d, &s, &k);
    dt_hf_model *h = NULL;
    ck_assert_int_eq(dt_hf_open(d, &h), DT_ERR_FORMAT);
    ck_assert(!h);
    ck_assert_msg(strstr(dt_last_error(), "\"transformer.h.1.attn.c_attn.weight\": shape [24, 8], expected [8, 24]") &&
                      !strchr(dt_last_error(), '\n'),
                  "%s", dt_last_error());
    q->shape[0] = HF_C, q->shape[1] = 3 * HF_C;
    /* ln_f.bias's BF16 bytes named F32: the span is half F32's of its shape */
    hf_tensor *b = &k.t[k.n - 1];
    ck_assert(!strcmp(b->key, "ln_f.bias") && b->dtype == HF_BF16);
    b->said = "F32";
    snprintf(d, sizeof d, "%s/hf-span", dir);
    hf_write(d, &s, &k);
    ck_assert_int_eq(dt_hf_open(d, &h), DT_ERR_FORMAT);
    ck_assert(!h);
    ck_assert_msg(strstr(dt_last_error(), "\"transformer.ln_f.bias\": data_offsets span 16 bytes") &&
                      !strchr(dt_last_error(), '\n'),
                  "%s", dt_last_error());
    hf_ckpt_free(&k);
}
END_TEST

/* How tp.h splits block tensor sfx ("qkv.w", ...) over the tensor ranks,
 * written out here: 'q' the rows of the rank's heads in each of q, k and
 * v; 'r' its rows of 4C; 'c' its columns (of C or 4C); 0 whole. */
static char hf_tp_split(const char *sfx)
{
    if (!strcmp(sfx, "qkv.w") || !strcmp(sfx, "qkv.b")) return 'q';
    if (!strcmp(sfx, "fc.w") || !strcmp(sfx, "fc.b")) return 'r';
    if (!strcmp(sfx, "attproj.w") || !strcmp(sfx, "fcproj.w")) return 'c';
    return 0;
}

/* Each tensor of stage st holds the whole model m's values: its tensor by
 * whole-model index (the last stage's tied copy: wte), or with t = 2 rank
 * r's part of it (hf_tp_split; with vp, vocabulary parallel, wte and the
 * LM head, the tied copy too, its rows V r/t ..). */
static void hf_check_stage(dt__stage *st, dt_gpt *m, int t, int r, int vp, const char *what)
{
    const dt_paramset *L = dt__stage_layout(st), *W = dt_gpt_layout(m);
    const int *wi = dt__stage_whole_index(st);
    const float *sp = dt__stage_params(st), *wp = dt_gpt_params(m);
    for (int i = 0; i < L->count; i++) {
        const dt_param_info *p = &L->info[i], *q = &W->info[wi[i]];
        int l, at = 0;
        const char split = t > 1 && sscanf(p->name, "h.%d.%n", &l, &at) == 1 && at ? hf_tp_split(p->name + at) : 0;
        const int vocab = vp && t > 1 && (wi[i] == 0 || !strcmp(q->name, "lm_head.w"));
        const size_t rows = (size_t)p->shape[0], cols = p->ndim == 2 ? (size_t)p->shape[1] : 1;
        const size_t wrows = (size_t)q->shape[0], wcols = q->ndim == 2 ? (size_t)q->shape[1] : 1;
        const size_t v0 = (size_t)(HF_V * r / t), nv = (size_t)(HF_V * (r + 1) / t) - v0;
        ck_assert_msg(vocab ? rows == nv && cols == wcols
                            : rows * (split && split != 'c' ? (size_t)t : 1) == wrows &&
                                  cols * (split == 'c' ? (size_t)t : 1) == wcols,
                      "%s: stage tensor %s is %zu x %zu, the whole %s %zu x %zu", what, p->name, rows, cols, q->name,
                      wrows, wcols);
        for (size_t a = 0; a < rows; a++)
            for (size_t b = 0; b < cols; b++) {
                size_t wa = a, wb = b;
                if (split == 'q') wa = a / (rows / 3) * (wrows / 3) + (size_t)r * (rows / 3) + a % (rows / 3);
                if (split == 'r') wa = (size_t)r * rows + a;
                if (split == 'c') wb = (size_t)r * cols + b;
                if (vocab) wa = v0 + a;
                const float got = sp[p->offset + a * cols + b], want = wp[q->offset + wa * wcols + wb];
                ck_assert_msg(hf_same(got, want), "%s: stage %s[%zu][%zu] = %a, the whole model's %s[%zu][%zu] %a",
                              what, p->name, a, b, (double)got, q->name, wa, wb, (double)want);
            }
    }
}

/* A 2-stage pipeline initialised from the checkpoint (dt_hf_init, as
 * lib/parallel/pipeline.c does): each stage's tensors the whole model's,
 * the last stage's tied copy of wte included. */
START_TEST(test_hf_stages)
{
    for (int tied = 0; tied <= 1; tied++) {
        const hf_spec s = {.prefix = 1, .dtype = HF_MIXED, .tied = tied};
        char d[256], what[400];
        snprintf(d, sizeof d, "%s/hf-stages%d", dir, tied);
        hf_ckpt k;
        hf_ckpt_make(&s, &k);
        hf_write(d, &s, &k);
        dt_hf_model *h;
        dt_gpt *m = hf_load(d, &h);
        hf_check_model(m, &k, d);
        const dt_gpt_init init = dt_hf_init(h);
        for (int sx = 0; sx < 2; sx++) {
            int l0, l1;
            ck_dt(dt__stage_split(HF_L, 2, NULL, &l0, &l1, sx));
            dt__stage *st;
            ck_dt(dt__stage_create(dt_hf_config(h), hf_be, l0, l1, sx == 0, sx == 1, 1, 1, HF_P, NULL, NULL, &st));
            ck_dt(dt__stage_init_weights(st, &init));
            ck_assert_int_eq(dt__stage_has_tied_copy(st), tied && sx == 1);
            snprintf(what, sizeof what, "%s, stage %d of 2", d, sx);
            hf_check_stage(st, m, 1, 0, 0, what);
            dt__stage_free(st);
        }
        dt_gpt_free(m);
        dt_hf_close(h);
        hf_ckpt_free(&k);
    }
}
END_TEST

/* Tensor-parallel stages (t = 2, each rank in turn, the vocabulary split
 * or not; one stage or two) initialised from the checkpoint: each rank
 * holds its part of the whole model's tensors. Creating and initialising
 * a stage does not communicate, so a communicator that says "rank r of 2"
 * over the self backend stands in for the group. */
START_TEST(test_hf_tensor_parallel)
{
    dt_comm *self;
    ck_dt(dt_comm_self_create(&self));
    for (int tied = 0; tied <= 1; tied++) {
        const hf_spec s = {.prefix = 0, .dtype = HF_MIXED, .tied = tied};
        char d[256], what[400];
        snprintf(d, sizeof d, "%s/hf-tp%d", dir, tied);
        hf_ckpt k;
        hf_ckpt_make(&s, &k);
        hf_write(d, &s, &k);
        dt_hf_model *h;
        dt_gpt *m = hf_load(d, &h);
        hf_check_model(m, &k, d);
        const dt_gpt_init init = dt_hf_init(h);
        for (int vp = 0; vp <= 1; vp++)
            for (int p = 1; p <= 2; p++)
                for (int r = 0; r < 2; r++) {
                    dt_comm rank = {.ops = self->ops, .rank = r, .size = 2, .impl = self->impl, .local_rank = -1};
                    dt__tp tp = {.comm = &rank, .algo = DT_ALLREDUCE_RING, .vocab_parallel = vp};
                    for (int sx = 0; sx < p; sx++) {
                        int l0, l1;
                        ck_dt(dt__stage_split(HF_L, p, NULL, &l0, &l1, sx));
                        dt__stage *st;
                        ck_dt(dt__stage_create(dt_hf_config(h), hf_be, l0, l1, sx == 0, sx == p - 1, 1, 1, HF_P, &tp,
                                               NULL, &st));
                        ck_dt(dt__stage_init_weights(st, &init));
                        ck_assert_int_eq(dt__stage_has_tied_copy(st), tied && p > 1 && sx == p - 1);
                        snprintf(what, sizeof what, "%s, vocab-parallel %d, rank %d of 2, stage %d of %d", d, vp, r, sx,
                                 p);
                        hf_check_stage(st, m, 2, r, vp, what);
                        dt__stage_free(st);
                    }
                }
        dt_gpt_free(m);
        dt_hf_close(h);
        hf_ckpt_free(&k);
    }
    dt_comm_free(self);
}
END_TEST

static Suite *st_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_half_types);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_export_hf);
    suite_add_tcase(s, tc);
    tc = tcase_create("hf-import");
    tcase_add_checked_fixture(tc, hf_setup, hf_teardown);
    tcase_add_test(tc, test_hf_half_dtypes);
    tcase_add_test(tc, test_hf_names);
    tcase_add_test(tc, test_hf_config_defaults);
    tcase_add_test(tc, test_hf_refusals);
    tcase_add_test(tc, test_hf_stages);
    tcase_add_test(tc, test_hf_tensor_parallel);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!mkdtemp(dir)) return 99;
    const int rc = dt_test_run(st_suite());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 99;
    return rc;
}
