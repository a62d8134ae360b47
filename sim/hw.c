/* hw.c: hardware descriptions (dts_hw.h): reading and writing the
 * sim/hw/NAME.json files, this machine's defaults, and the link between two
 * ranks.
 *
 * Invariants: dts_hw_load either fills *out with a description that passes
 * dts_hw_validate or leaves it untouched and returns a status whose message
 * names the file and the field; dts_hw_save writes numbers that read back
 * bit for bit (shortest decimal that round-trips). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dts_hw.h"

/* ---- reading ---------------------------------------------------------------- */

/* A JSON value in a message: its compact text, cut to fit. */
static const char *hw__show(const json_t *v, char *buf, size_t n)
{
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, n, "%s", s ? s : "?");
    if (s && strlen(s) >= n && n > 4) memcpy(buf + n - 4, "...", 4);
    free(s);
    return buf;
}

typedef enum { HW_GT0, HW_GE0, HW_UNIT } hw_range; /* > 0, >= 0, (0, 1] */

static const char *hw__range_text(hw_range r)
{
    return r == HW_GT0 ? "> 0" : r == HW_GE0 ? ">= 0" : "in (0, 1]";
}

static int hw__in_range(double v, hw_range r)
{
    if (!isfinite(v)) return 0;
    return r == HW_GT0 ? v > 0 : r == HW_GE0 ? v >= 0 : v > 0 && v <= 1;
}

/* obj[key] as a number in range; `full` is the key's path in the file. */
static dt_status hw__num(const char *path, const json_t *obj, const char *key, const char *full, hw_range r,
                         double *out)
{
    const json_t *v = json_object_get(obj, key);
    char buf[64];
    if (!v) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": missing (expected a number %s)", path, full, hw__range_text(r));
    if (!json_is_number(v) || !hw__in_range(json_number_value(v), r))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": expected a number %s, got %s", path, full, hw__range_text(r),
                       hw__show(v, buf, sizeof buf));
    *out = json_number_value(v);
    return DT_OK;
}

/* obj[key] as an integer in [min, max]; an integral real (1.41e11) counts. */
static dt_status hw__int(const char *path, const json_t *obj, const char *key, int64_t min, int64_t max,
                         int64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    char buf[64];
    if (!v) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": missing (expected an integer >= %" PRId64 ")", path, key, min);
    int ok = 0;
    int64_t x = 0;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
        ok = 1;
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && d >= -9.2e18 && d <= 9.2e18) x = (int64_t)d, ok = 1;
    }
    if (!ok || x < min || x > max)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": expected an integer from %" PRId64 " to %" PRId64 ", got %s", path,
                       key, min, max, hw__show(v, buf, sizeof buf));
    *out = x;
    return DT_OK;
}

/* obj[key] as a string of 1..cap-1 bytes, copied into out. */
static dt_status hw__str(const char *path, const json_t *obj, const char *key, char *out, size_t cap)
{
    const json_t *v = json_object_get(obj, key);
    char buf[64];
    if (!v) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": missing (expected a string)", path, key);
    if (!json_is_string(v) || json_string_length(v) < 1 || json_string_length(v) >= cap)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": expected a string of 1 to %zu bytes, got %s", path, key, cap - 1,
                       hw__show(v, buf, sizeof buf));
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return DT_OK;
}

/* Refuse keys of obj that are not in `known` (NULL-terminated). */
static dt_status hw__known_keys(const char *path, const json_t *obj, const char *prefix, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int found = 0;
        for (const char *const *k = known; *k && !found; k++) found = strcmp(*k, key) == 0;
        if (!found) {
            char list[512] = "";
            for (const char *const *k = known; *k; k++) {
                size_t u = strlen(list);
                snprintf(list + u, sizeof list - u, "%s%s", u ? ", " : "", *k);
            }
            return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s%s\": unknown key (expected only %s)", path, prefix, key, list);
        }
    }
    return DT_OK;
}

static dt_status hw__link(const char *path, const json_t *root, const char *key, dts_link *out)
{
    static const char *const known[] = {"alpha_ns", "bytes_per_ns", NULL};
    const json_t *o = json_object_get(root, key);
    char buf[64], full[64];
    if (!o)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": missing (expected an object {\"alpha_ns\": ..., \"bytes_per_ns\": ...})",
                       path, key);
    if (!json_is_object(o))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": expected an object {\"alpha_ns\": ..., \"bytes_per_ns\": ...}, got %s",
                       path, key, hw__show(o, buf, sizeof buf));
    snprintf(full, sizeof full, "%s.", key);
    DT_CHECK(hw__known_keys(path, o, full, known));
    snprintf(full, sizeof full, "%s.alpha_ns", key);
    DT_CHECK(hw__num(path, o, "alpha_ns", full, HW_GE0, &out->alpha_ns));
    snprintf(full, sizeof full, "%s.bytes_per_ns", key);
    DT_CHECK(hw__num(path, o, "bytes_per_ns", full, HW_GT0, &out->bytes_per_ns));
    return DT_OK;
}

static dt_status hw__from_json(const char *path, const json_t *root, dts_hw *hw)
{
    static const char *const known[] = {"format",     "version",          "name",     "source",
                                        "peak_flops", "mem_bytes_per_s",  "efficiency", "kernel_overhead_ns",
                                        "mem_capacity_bytes", "devices_per_node", "intra", "inter", NULL};
    char buf[64];
    if (!json_is_object(root))
        return DT_FAIL(DT_ERR_FORMAT, "%s: expected a JSON object (a dtsim hardware file), got %s", path,
                       hw__show(root, buf, sizeof buf));
    /* format and version first: another kind of file is named as such */
    const json_t *f = json_object_get(root, "format");
    if (!json_is_string(f) || strcmp(json_string_value(f), DTS_HW_FORMAT) != 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"format\": expected \"%s\", got %s", path, DTS_HW_FORMAT,
                       f ? hw__show(f, buf, sizeof buf) : "nothing (not a dtsim hardware file)");
    const json_t *ver = json_object_get(root, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) != DTS_HW_VERSION)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"version\": expected %d (the only version this dtsim reads), got %s", path,
                       DTS_HW_VERSION, ver ? hw__show(ver, buf, sizeof buf) : "nothing");
    DT_CHECK(hw__known_keys(path, root, "", known));
    DT_CHECK(hw__str(path, root, "name", hw->name, sizeof hw->name));
    DT_CHECK(hw__str(path, root, "source", hw->source, sizeof hw->source));
    DT_CHECK(hw__num(path, root, "peak_flops", "peak_flops", HW_GT0, &hw->peak_flops));
    DT_CHECK(hw__num(path, root, "mem_bytes_per_s", "mem_bytes_per_s", HW_GT0, &hw->mem_bytes_per_s));
    DT_CHECK(hw__num(path, root, "efficiency", "efficiency", HW_UNIT, &hw->efficiency));
    DT_CHECK(hw__int(path, root, "kernel_overhead_ns", 0, INT64_MAX, &hw->kernel_overhead_ns));
    DT_CHECK(hw__int(path, root, "mem_capacity_bytes", 1, INT64_MAX, &hw->mem_capacity_bytes));
    int64_t dpn;
    DT_CHECK(hw__int(path, root, "devices_per_node", 1, 1 << 20, &dpn));
    hw->devices_per_node = (int)dpn;
    DT_CHECK(hw__link(path, root, "intra", &hw->intra));
    DT_CHECK(hw__link(path, root, "inter", &hw->inter));
    return DT_OK;
}

dt_status dts_hw_load(const char *path, dts_hw *out)
{
    if (!path || !out) return DT_FAIL(DT_ERR_INVALID, "dts_hw_load: NULL argument");
    FILE *fp = fopen(path, "rb");
    if (!fp) return DT_FAIL(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    json_error_t jerr;
    json_t *root = json_loadf(fp, JSON_REJECT_DUPLICATES, &jerr);
    fclose(fp);
    if (!root)
        return DT_FAIL(DT_ERR_FORMAT, "%s: line %d, column %d: %s", path, jerr.line, jerr.column, jerr.text);
    dts_hw hw;
    memset(&hw, 0, sizeof hw);
    dt_status st = hw__from_json(path, root, &hw);
    json_decref(root);
    if (st != DT_OK) return st;
    *out = hw;
    return DT_OK;
}

/* ---- writing ---------------------------------------------------------------- */

/* The shortest %.*g text that reads back as the same double. */
static void hw__fmt_double(char *buf, size_t n, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static int hw__put_str(FILE *fp, const char *key, const char *s)
{
    json_t *j = json_string(s);
    char *txt = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!txt) return -1;
    int rc = fprintf(fp, "  \"%s\": %s,\n", key, txt);
    free(txt);
    return rc < 0 ? -1 : 0;
}

dt_status dts_hw_validate(const dts_hw *hw, const char *what)
{
    if (!hw->name[0] || memchr(hw->name, 0, sizeof hw->name) == NULL)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"name\": expected a string of 1 to %zu bytes", what, sizeof hw->name - 1);
    if (!hw->source[0] || memchr(hw->source, 0, sizeof hw->source) == NULL)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"source\": expected a string of 1 to %zu bytes", what,
                       sizeof hw->source - 1);
    const struct {
        const char *key;
        double v;
        hw_range r;
    } nums[] = {{"peak_flops", hw->peak_flops, HW_GT0},           {"mem_bytes_per_s", hw->mem_bytes_per_s, HW_GT0},
                {"efficiency", hw->efficiency, HW_UNIT},          {"intra.alpha_ns", hw->intra.alpha_ns, HW_GE0},
                {"intra.bytes_per_ns", hw->intra.bytes_per_ns, HW_GT0}, {"inter.alpha_ns", hw->inter.alpha_ns, HW_GE0},
                {"inter.bytes_per_ns", hw->inter.bytes_per_ns, HW_GT0}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (!hw__in_range(nums[i].v, nums[i].r))
            return DT_FAIL(DT_ERR_INVALID, "%s: \"%s\": expected a number %s, got %g", what, nums[i].key,
                           hw__range_text(nums[i].r), nums[i].v);
    if (hw->kernel_overhead_ns < 0)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"kernel_overhead_ns\": expected an integer >= 0, got %" PRId64, what,
                       hw->kernel_overhead_ns);
    if (hw->mem_capacity_bytes < 1)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"mem_capacity_bytes\": expected an integer >= 1, got %" PRId64, what,
                       hw->mem_capacity_bytes);
    if (hw->devices_per_node < 1 || hw->devices_per_node > (1 << 20))
        return DT_FAIL(DT_ERR_INVALID, "%s: \"devices_per_node\": expected an integer from 1 to %d, got %d", what,
                       1 << 20, hw->devices_per_node);
    return DT_OK;
}

dt_status dts_hw_save(const char *path, const dts_hw *hw)
{
    if (!path || !hw) return DT_FAIL(DT_ERR_INVALID, "dts_hw_save: NULL argument");
    DT_CHECK(dts_hw_validate(hw, path));
    FILE *fp = fopen(path, "w");
    if (!fp) return DT_FAIL(DT_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    char a[40], b[40], c[40];
    int bad = fprintf(fp, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n", DTS_HW_FORMAT, DTS_HW_VERSION) < 0;
    bad |= hw__put_str(fp, "name", hw->name) < 0;
    bad |= hw__put_str(fp, "source", hw->source) < 0;
    hw__fmt_double(a, sizeof a, hw->peak_flops);
    hw__fmt_double(b, sizeof b, hw->mem_bytes_per_s);
    hw__fmt_double(c, sizeof c, hw->efficiency);
    bad |= fprintf(fp, "  \"peak_flops\": %s,\n  \"mem_bytes_per_s\": %s,\n  \"efficiency\": %s,\n", a, b, c) < 0;
    bad |= fprintf(fp,
                   "  \"kernel_overhead_ns\": %" PRId64 ",\n  \"mem_capacity_bytes\": %" PRId64
                   ",\n  \"devices_per_node\": %d,\n",
                   hw->kernel_overhead_ns, hw->mem_capacity_bytes, hw->devices_per_node) < 0;
    hw__fmt_double(a, sizeof a, hw->intra.alpha_ns);
    hw__fmt_double(b, sizeof b, hw->intra.bytes_per_ns);
    bad |= fprintf(fp, "  \"intra\": {\"alpha_ns\": %s, \"bytes_per_ns\": %s},\n", a, b) < 0;
    hw__fmt_double(a, sizeof a, hw->inter.alpha_ns);
    hw__fmt_double(b, sizeof b, hw->inter.bytes_per_ns);
    bad |= fprintf(fp, "  \"inter\": {\"alpha_ns\": %s, \"bytes_per_ns\": %s}\n}\n", a, b) < 0;
    bad |= ferror(fp) != 0;
    if (fclose(fp) != 0) bad = 1;
    if (bad) return DT_FAIL(DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return DT_OK;
}

/* ---- defaults and links ------------------------------------------------------- */

void dts_hw_default(dts_hw *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "cpu-2core-default");
    /* One device = one core (what one rank of dtrain under mpirun uses).
     * peak: OpenBLAS sgemm ~150 GFLOP/s per core (shared/reference.md);
     * efficiency: `dtbench train --threads 1 --model small` achieved
     * 102.4 GFLOP/s; memory: a single-core STREAM triad measured 38.8 GB/s.
     * Links are guesses until fitted (sim/hw/cpu-2core.json has the fit). */
    out->peak_flops = 150e9;
    out->mem_bytes_per_s = 38.8e9;
    out->efficiency = 0.68;
    out->kernel_overhead_ns = 500;
    out->mem_capacity_bytes = 12638255104; /* half of the 23.5 GiB RAM per core */
    out->devices_per_node = 2;
    out->intra = (dts_link){.alpha_ns = 2000.0, .bytes_per_ns = 5.0};  /* shared memory, MPI: ~5 GB/s busbw */
    out->inter = (dts_link){.alpha_ns = 20000.0, .bytes_per_ns = 1.25}; /* 10 GbE, if hosts were added */
    snprintf(out->source, sizeof out->source,
             "uncalibrated defaults of dts_hw_default: sgemm 150 GFLOP/s per core (shared/reference.md), "
             "efficiency from dtbench train --threads 1 --model small, STREAM triad 38.8 GB/s; links guessed");
}

dts_link dts_hw_link(const dts_hw *hw, int rank_a, int rank_b)
{
    const int dpn = hw->devices_per_node > 0 ? hw->devices_per_node : 1;
    return rank_a / dpn == rank_b / dpn ? hw->intra : hw->inter;
}

int64_t dts_link_ns(dts_link l, double bytes)
{
    return (int64_t)llround(l.alpha_ns + (bytes > 0 ? bytes / l.bytes_per_ns : 0.0));
}
