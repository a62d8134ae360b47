/* data_tasks.c: the synthetic byte-level tasks (add, reverse, sort) and the
 * public dt_data_* entry points, which dispatch text files to data_text.c.
 *
 * An example is prompt + answer: "123+4567=" "4690\n", "hello=" "olleh\n",
 * "dbca=" "abcd\n". A row of a batch is T+1 bytes: examples packed back to
 * back from byte 0 until one no longer fits, whose first bytes then fill
 * the rest. tokens[t] = byte t, and target[t] = byte t+1 exactly when byte
 * t+1 is an answer byte (answer characters and the final '\n') of a
 * complete example, else -1; so the position holding '=' predicts the
 * first answer character and the position holding '\n' predicts nothing.
 *
 * Invariants:
 *  - batch (seed, split, index, B, T) is a pure function: row b is drawn
 *    by an RNG seeded with (seed, split stream, index * B + b);
 *  - an example is in validation iff a fixed 64-bit hash of its prompt
 *    bytes is below ds->val_threshold (independent of the seed, so every
 *    run holds out the same set); each split draws by rejection, so a
 *    validation prompt never appears in a training batch, not even as a
 *    truncated example. The threshold is 2^64/10 (10% of prompts in
 *    expectation), except for example spaces small enough to enumerate,
 *    where open sets it so that exactly round(10%) of the prompts (at
 *    least 1, never all) validate: a tiny space such as 1-digit add then
 *    holds out 10 of its 100 sums, not whatever a coin toss gives;
 *  - example ids count complete examples within the batch, rows in order. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "dt_checkpoint.h" /* dt_crc32c_update */
#include "dt_rng.h"

#define DT__MAX_DIGITS 9    /* sums of two 9-digit operands fit easily in 64 bits */
#define DT__MAX_WORD 64     /* longest reverse/sort word; examples up to 130 bytes */
#define DT__MAX_EXAMPLE 160 /* >= 3*DT__MAX_DIGITS + 4 and 2*DT__MAX_WORD + 2 */
#define DT__VAL_PERCENT 10  /* share of prompts that validate */
#define DT__MAX_TRIES (1 << 20)
#define DT__MAX_T (1 << 24) /* keeps T+1 and row arithmetic far from INT_MAX */

static const char *const dt__task_names[] = {"add", "reverse", "sort"};

/* ---- examples --------------------------------------------------------- */

/* FNV-1a over the prompt, salted with the task, then a 64-bit finalizer so
 * every bit of the result depends on every prompt byte. */
static uint64_t dt__prompt_hash(dt__data_kind kind, const uint8_t *prompt, int n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ ((uint64_t)kind * 0x9e3779b97f4a7c15ULL);
    for (int i = 0; i < n; i++) {
        h ^= prompt[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static int dt__prompt_is_val(const dt_dataset *ds, const uint8_t *prompt, int n)
{
    return dt__prompt_hash(ds->kind, prompt, n) < ds->val_threshold;
}

/* Decimal digits of v at out; returns their count. */
static int dt__put_uint(uint8_t *out, uint64_t v)
{
    uint8_t tmp[24];
    int n = 0;
    do {
        tmp[n++] = (uint8_t)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

static uint64_t dt__pow10(int k)
{
    uint64_t p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

/* Writes the example for its operands or word; returns its length and sets
 * *prompt_len (bytes up to and including '='). */
static int dt__format_add(uint8_t *e, uint64_t a, uint64_t b, int *prompt_len)
{
    int n = dt__put_uint(e, a);
    e[n++] = '+';
    n += dt__put_uint(e + n, b);
    e[n++] = '=';
    *prompt_len = n;
    n += dt__put_uint(e + n, a + b);
    e[n++] = '\n';
    return n;
}

static int dt__format_word(dt__data_kind kind, uint8_t *e, const uint8_t *w, int len, int *prompt_len)
{
    memcpy(e, w, (size_t)len);
    e[len] = '=';
    uint8_t *ans = e + len + 1;
    if (kind == DT__DATA_REVERSE) {
        for (int i = 0; i < len; i++) ans[i] = w[len - 1 - i];
    } else { /* counting sort of a..z */
        int count[26] = {0};
        for (int i = 0; i < len; i++) count[w[i] - 'a']++;
        int k = 0;
        for (int c = 0; c < 26; c++)
            while (count[c]-- > 0) ans[k++] = (uint8_t)('a' + c);
    }
    ans[len] = '\n';
    *prompt_len = len + 1;
    return 2 * len + 2;
}

/* A number of 1..digits digits: the digit count uniform first, so short
 * operands are as common as long ones (a curriculum for free). */
static uint64_t dt__draw_operand(dt_rng *r, int digits)
{
    int k = 1 + (int)dt_rng_below(r, (uint64_t)digits);
    uint64_t lo = k == 1 ? 0 : dt__pow10(k - 1);
    return lo + dt_rng_below(r, dt__pow10(k) - lo);
}

/* One example (any split) from r. */
static int dt__draw_example(const dt_dataset *ds, dt_rng *r, uint8_t *e, int *prompt_len)
{
    if (ds->kind == DT__DATA_ADD) {
        uint64_t a = dt__draw_operand(r, ds->digits);
        uint64_t b = dt__draw_operand(r, ds->digits);
        return dt__format_add(e, a, b, prompt_len);
    }
    uint8_t w[DT__MAX_WORD];
    int len = 1 + (int)dt_rng_below(r, (uint64_t)ds->max_len);
    for (int i = 0; i < len; i++) w[i] = (uint8_t)('a' + dt_rng_below(r, 26));
    return dt__format_word(ds->kind, e, w, len, prompt_len);
}

/* One example of the given split, by rejection (~1.1 draws for train, ~10
 * for validation). */
static dt_status dt__draw_split_example(const dt_dataset *ds, dt_rng *r, dt_split split, uint8_t *e, int *len,
                                        int *prompt_len)
{
    for (int tries = 0; tries < DT__MAX_TRIES; tries++) {
        int n = dt__draw_example(ds, r, e, prompt_len);
        if (dt__prompt_is_val(ds, e, *prompt_len) == (split == DT_SPLIT_VAL)) {
            *len = n;
            return DT_OK;
        }
    }
    return DT_FAIL(DT_ERR_INVALID, "task '%s': no %s example after %d draws", ds->name,
                   split == DT_SPLIT_VAL ? "validation" : "training", DT__MAX_TRIES);
}

static int dt__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Set ds->val_threshold. Spaces small enough to enumerate (add with <= 2
 * digits: 10^4 prompts; words of <= 3 letters: 18278) get a threshold that
 * puts exactly round(10%) of their prompts in validation; larger spaces
 * (>= 10^6 prompts) get 2^64/10, which holds out 10% up to sampling noise
 * of well under 1%. */
static dt_status dt__set_split(dt_dataset *ds)
{
    ds->val_threshold = UINT64_MAX / 100 * DT__VAL_PERCENT;
    size_t total = 0;
    if (ds->kind == DT__DATA_ADD && ds->digits <= 2) {
        uint64_t lim = dt__pow10(ds->digits);
        total = (size_t)(lim * lim);
    } else if (ds->kind != DT__DATA_ADD && ds->max_len <= 3) {
        for (int len = 1, count = 26; len <= ds->max_len; len++, count *= 26) total += (size_t)count;
    } else {
        return DT_OK;
    }
    uint64_t *h = malloc(total * sizeof *h);
    if (!h) return DT_FAIL(DT_ERR_NOMEM, "task '%s': out of memory", ds->name);
    uint8_t e[DT__MAX_EXAMPLE];
    int p;
    size_t n = 0;
    if (ds->kind == DT__DATA_ADD) {
        uint64_t lim = dt__pow10(ds->digits);
        for (uint64_t a = 0; a < lim; a++)
            for (uint64_t b = 0; b < lim; b++) {
                dt__format_add(e, a, b, &p);
                h[n++] = dt__prompt_hash(ds->kind, e, p);
            }
    } else {
        uint8_t w[3];
        for (int len = 1; len <= ds->max_len; len++) {
            uint64_t count = 1;
            for (int i = 0; i < len; i++) count *= 26;
            for (uint64_t x = 0; x < count; x++) {
                uint64_t y = x;
                for (int i = 0; i < len; i++, y /= 26) w[i] = (uint8_t)('a' + y % 26);
                dt__format_word(ds->kind, e, w, len, &p);
                h[n++] = dt__prompt_hash(ds->kind, e, p);
            }
        }
    }
    qsort(h, n, sizeof *h, dt__cmp_u64);
    size_t k = (n * DT__VAL_PERCENT + 50) / 100; /* rounded; 1 <= k < n since n >= 26 */
    if (k < 1) k = 1;
    ds->val_threshold = h[k]; /* hashes h[0..k-1] are below it */
    free(h);
    return DT_OK;
}

static dt_status dt__task_open(dt_dataset *ds, const dt_data_config *cfg, int T)
{
    const char *task = cfg->task;
    if (!task)
        return DT_FAIL(DT_ERR_INVALID, "no task and no --data file given (expected a task: add, reverse or sort)");
    int k = -1;
    for (int i = 0; i < (int)(sizeof dt__task_names / sizeof dt__task_names[0]); i++)
        if (strcmp(task, dt__task_names[i]) == 0) k = i;
    if (k < 0) return DT_FAIL(DT_ERR_INVALID, "--task '%s': unknown task (expected add, reverse or sort)", task);
    ds->kind = (dt__data_kind)k;
    if (ds->kind == DT__DATA_ADD) {
        if (cfg->digits < 1 || cfg->digits > DT__MAX_DIGITS)
            return DT_FAIL(DT_ERR_INVALID, "--task-digits %d: expected 1..%d", cfg->digits, DT__MAX_DIGITS);
        ds->digits = cfg->digits;
        /* a + b = c \n, with c one digit longer than the operands at most */
        ds->max_example = 3 * ds->digits + 4;
    } else {
        if (cfg->max_len < 1 || cfg->max_len > DT__MAX_WORD)
            return DT_FAIL(DT_ERR_INVALID, "--task-max-len %d: expected 1..%d", cfg->max_len, DT__MAX_WORD);
        ds->max_len = cfg->max_len;
        ds->max_example = 2 * ds->max_len + 2;
    }
    if (T + 1 < ds->max_example)
        return DT_FAIL(DT_ERR_INVALID,
                       "--seq-length %d is too short for task '%s' with %s %d: the longest example is %d bytes, "
                       "so T must be at least %d",
                       T, task, ds->kind == DT__DATA_ADD ? "--task-digits" : "--task-max-len",
                       ds->kind == DT__DATA_ADD ? ds->digits : ds->max_len, ds->max_example, ds->max_example - 1);
    return dt__set_split(ds);
}

static dt_status dt__task_batch(const dt_dataset *ds, dt_split split, uint64_t index, int B, int T, int32_t *tokens,
                                int32_t *targets, int32_t *example, int *n_examples)
{
    if (T + 1 < ds->max_example)
        return DT_FAIL(DT_ERR_INVALID, "--seq-length %d is too short for task '%s': T must be at least %d", T, ds->name,
                       ds->max_example - 1);
    dt_rng rng;
    int n_ex = 0;
    uint8_t e[DT__MAX_EXAMPLE];
    for (int b = 0; b < B; b++) {
        int32_t *tok = tokens + (size_t)b * T, *tgt = targets + (size_t)b * T;
        int32_t *ex = example ? example + (size_t)b * T : NULL;
        for (int t = 0; t < T; t++) tgt[t] = -1;
        if (ex)
            for (int t = 0; t < T; t++) ex[t] = -1;
        /* one stream per row of the whole run (see dt_data.h) */
        dt_rng_seed3(&rng, ds->seed, split == DT_SPLIT_VAL ? DT__STREAM_TASK_VAL : DT__STREAM_TASK_TRAIN,
                     index * (uint64_t)B + (uint64_t)b);
        int pos = 0; /* bytes of the row's T+1 filled */
        while (pos < T + 1) {
            int len, plen;
            DT_CHECK(dt__draw_split_example(ds, &rng, split, e, &len, &plen));
            if (pos + len > T + 1) { /* truncated: its bytes are context only */
                for (int j = 0; pos + j < T; j++) tok[pos + j] = e[j];
                break;
            }
            for (int j = 0; j < len && pos + j < T; j++) tok[pos + j] = e[j];
            /* position pos+j predicts byte j+1: answer bytes are plen..len-1 */
            for (int j = plen - 1; j <= len - 2; j++) {
                tgt[pos + j] = e[j + 1];
                if (ex) ex[pos + j] = n_ex;
            }
            n_ex++;
            pos += len;
        }
    }
    if (n_examples) *n_examples = n_ex;
    return DT_OK;
}

/* ---- public entry points --------------------------------------------- */

dt_status dt_data_open(const dt_data_config *cfg, int T, dt_dataset **out)
{
    *out = NULL;
    if (T < 1 || T > DT__MAX_T) return DT_FAIL(DT_ERR_INVALID, "--seq-length %d: expected 1..%d", T, DT__MAX_T);
    dt_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return DT_FAIL(DT_ERR_NOMEM, "data: out of memory");
    ds->seed = cfg->seed;
    ds->T = T;
    const char *name = cfg->path ? cfg->path : (cfg->task ? cfg->task : "");
    ds->name = strdup(name);
    dt_status st = ds->name ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "data: out of memory");
    if (st == DT_OK && !cfg->path && cfg->tokenizer)
        st = DT_FAIL(DT_ERR_INVALID, "--tokenizer %s: applies to --data text files only, not to the task '%s'",
                     cfg->tokenizer, name);
    if (st == DT_OK) st = cfg->path ? dt__data_text_open(ds, cfg->path, cfg->tokenizer, T) : dt__task_open(ds, cfg, T);
    if (st != DT_OK) {
        dt_data_close(ds);
        return st;
    }
    *out = ds;
    return DT_OK;
}

void dt_data_close(dt_dataset *ds)
{
    if (!ds) return;
    if (ds->kind == DT__DATA_TEXT) dt__data_text_free(ds);
    free(ds->name);
    free(ds);
}

int dt_data_vocab_size(const dt_dataset *ds) { return ds->kind == DT__DATA_TEXT && ds->ids ? ds->vocab : 256; }

int dt_data_has_accuracy(const dt_dataset *ds) { return ds->kind != DT__DATA_TEXT; }

const char *dt_data_name(const dt_dataset *ds) { return ds->name; }

dt_status dt_data_fingerprint(const dt_dataset *ds, uint64_t *bytes, uint32_t *crc32c)
{
    if (ds->kind != DT__DATA_TEXT) return DT_FAIL(DT_ERR_UNSUPPORTED, "%s: a built-in task has no file", ds->name);
    *bytes = ds->n_bytes;
    *crc32c = ds->crc32c;
    if (ds->ids) {
        const uint8_t t[4] = {(uint8_t)ds->tok_crc32c, (uint8_t)(ds->tok_crc32c >> 8), (uint8_t)(ds->tok_crc32c >> 16),
                              (uint8_t)(ds->tok_crc32c >> 24)};
        *crc32c = dt_crc32c_update(ds->crc32c, t, sizeof t);
    }
    return DT_OK;
}

const char *dt_data_note(const dt_dataset *ds) { return ds->note; }

dt_status dt_data_batch(const dt_dataset *ds, dt_split split, uint64_t index, int B, int T, int32_t *tokens,
                        int32_t *targets, int32_t *example, int *n_examples)
{
    if (n_examples) *n_examples = 0;
    if (B < 1 || T < 1 || T > DT__MAX_T)
        return DT_FAIL(DT_ERR_INVALID, "data batch: B=%d, T=%d (expected B >= 1 and T in 1..%d)", B, T, DT__MAX_T);
    if (split != DT_SPLIT_TRAIN && split != DT_SPLIT_VAL)
        return DT_FAIL(DT_ERR_INVALID, "data batch: split %d (expected train or val)", (int)split);
    if (ds->kind == DT__DATA_TEXT) return dt__data_text_batch(ds, split, index, B, T, tokens, targets, example);
    return dt__task_batch(ds, split, index, B, T, tokens, targets, example, n_examples);
}

/* Examples occupy contiguous runs of positions in dt_data_batch, but the
 * count does not rely on it: a per-example flag array remembers failures. */
void dt_data_count_correct(const int32_t *example, const uint8_t *correct, int n_positions, int n_examples,
                           int *n_correct)
{
    *n_correct = 0;
    if (n_examples <= 0) return;
    /* bit 0: seen, bit 1: some counted target wrong */
    uint8_t *state = calloc((size_t)n_examples, 1);
    if (state) {
        for (int i = 0; i < n_positions; i++) {
            int32_t e = example[i];
            if (e < 0 || e >= n_examples) continue;
            state[e] |= (uint8_t)(1 | (correct[i] ? 0 : 2));
        }
        int c = 0;
        for (int e = 0; e < n_examples; e++) c += state[e] == 1;
        free(state);
        *n_correct = c;
        return;
    }
    /* Out of memory: count runs of equal ids instead (exact for batches
     * from dt_data_batch, whose examples are contiguous). */
    int c = 0, cur = -1, ok = 0;
    for (int i = 0; i <= n_positions; i++) {
        int32_t e = i < n_positions ? example[i] : -1;
        if (e >= n_examples) e = -1;
        if (e != cur) {
            if (cur >= 0) c += ok;
            cur = e;
            ok = 1;
        }
        if (e >= 0 && !correct[i]) ok = 0;
    }
    *n_correct = c;
}
