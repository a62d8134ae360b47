/* check_safetensors.c: the safetensors reader and writer
 * (include/dt_safetensors.h): a written file read back bit for bit and
 * laid out as the format says (header length, sorted names, 8-byte
 * aligned buffer, metadata); F16 and BF16 tensors written by hand here
 * widened exactly; and malformed files, each refused with one line that
 * names the problem, never a crash. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "dt_safetensors.h"
#include "testutil.h"

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

static Suite *st_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_half_types);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_export_hf);
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
