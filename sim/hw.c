/* hw.c: hardware descriptions (dts_hw.h): reading and writing the
 * sim/hw/NAME.json files, this machine's defaults, the link between two
 * ranks and the choice of collective model ("collectives").
 *
 * The JSON object is read by dts_hw_from_json and built by dts_hw_to_json
 * only: files (dts_hw_load, dts_hw_save) and the inline "hardware" object
 * of a scenario config (sim/scenario.c) share them. Also the compute
 * speed of ranks sharing a node (dts_hw_compute_rate).
 *
 * Invariants: dts_hw_from_json / dts_hw_load either fill *out with a
 * description that passes dts_hw_validate or leave it untouched and return
 * a status whose message names the source and the field; dts_hw_save writes
 * numbers that read back bit for bit (shortest decimal that round-trips). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_file.h"
#include "dts_engine.h"
#include "dts_hw.h"
#include "dts_json.h"

/* ---- reading ---------------------------------------------------------------- */

/* > 0, >= 0, (0, 1], a duration in [0, 2^60] ns (the engine's horizon: one latency beyond it is a
 * run that cannot be simulated, refused here with the file's field named) */
typedef enum { HW_GT0, HW_GE0, HW_UNIT, HW_NS } hw_range;

static const char *hw__range_text(hw_range r)
{
    return r == HW_GT0 ? "> 0" : r == HW_GE0 ? ">= 0" : r == HW_UNIT ? "in (0, 1]" : "in [0, 2^60] (ns)";
}

static int hw__in_range(double v, hw_range r)
{
    if (!isfinite(v)) return 0;
    return r == HW_GT0  ? v > 0
           : r == HW_GE0 ? v >= 0
           : r == HW_UNIT ? v > 0 && v <= 1
                          : v >= 0 && v <= (double)DTS_HORIZON_NS;
}

/* obj[key] as a number in range; `full` is the key's path in the object. */
static dt_status hw__num(const char *what, const json_t *obj, const char *key, const char *full, hw_range r,
                         double *out)
{
    const json_t *v = json_object_get(obj, key);
    char want[32];
    snprintf(want, sizeof want, "a number %s", hw__range_text(r));
    if (!v) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": missing (expected %s)", what, full, want);
    double x;
    if (!dts__json_num(v, &x) || !hw__in_range(x, r)) return dts__json_expected(DT_ERR_FORMAT, what, full, want, v);
    *out = x;
    return DT_OK;
}

/* obj[key] as an integer in [min, max]; an integral real (1.41e11) counts.
 * Absent: *out = *absent for an optional key (absent not NULL), else an error. */
static dt_status hw__int(const char *what, const json_t *obj, const char *key, int64_t min, int64_t max,
                         const int64_t *absent, int64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v && absent) {
        *out = *absent;
        return DT_OK;
    }
    if (!v) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": missing (expected an integer >= %" PRId64 ")", what, key, min);
    if (!dts__json_int(v, min, max, out)) {
        char want[96];
        snprintf(want, sizeof want, "an integer from %" PRId64 " to %" PRId64, min, max);
        return dts__json_expected(DT_ERR_FORMAT, what, key, want, v);
    }
    return DT_OK;
}

/* obj[key] as a string of 1..cap-1 bytes, copied into out. */
static dt_status hw__str(const char *what, const json_t *obj, const char *key, char *out, size_t cap)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": missing (expected a string)", what, key);
    if (!dts__json_str_copy(v, 1, out, cap)) {
        char want[64];
        snprintf(want, sizeof want, "a string of 1 to %zu bytes", cap - 1);
        return dts__json_expected(DT_ERR_FORMAT, what, key, want, v);
    }
    return DT_OK;
}

/* Refuse keys of obj that are not in `known` (NULL-terminated). */
static dt_status hw__known_keys(const char *what, const json_t *obj, const char *prefix, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        int found = 0;
        for (const char *const *k = known; *k && !found; k++) found = strcmp(*k, key) == 0;
        if (!found) {
            char list[512] = "";
            for (const char *const *k = known; *k; k++) {
                size_t u = strlen(list);
                snprintf(list + u, sizeof list - u, "%s%s", u ? ", " : "", *k);
            }
            return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s%s\": unknown key (expected only %s)", what, prefix, key, list);
        }
    }
    return DT_OK;
}

static dt_status hw__link(const char *what, const json_t *root, const char *key, dts_link *out)
{
    static const char *const known[] = {"alpha_ns", "bytes_per_ns", NULL};
    const json_t *o = json_object_get(root, key);
    char buf[64], full[64];
    if (!o)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: \"%s\": missing (expected an object {\"alpha_ns\": ..., \"bytes_per_ns\": ...})", what,
                       key);
    if (!json_is_object(o))
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: \"%s\": expected an object {\"alpha_ns\": ..., \"bytes_per_ns\": ...}, got %s", what, key,
                       dts__json_show(o, buf, sizeof buf));
    snprintf(full, sizeof full, "%s.", key);
    DT_CHECK(hw__known_keys(what, o, full, known));
    snprintf(full, sizeof full, "%s.alpha_ns", key);
    DT_CHECK(hw__num(what, o, "alpha_ns", full, HW_NS, &out->alpha_ns));
    snprintf(full, sizeof full, "%s.bytes_per_ns", key);
    DT_CHECK(hw__num(what, o, "bytes_per_ns", full, HW_GT0, &out->bytes_per_ns));
    return DT_OK;
}

/* "contention": absent = [1]; else 1..DTS_HW_MAX_CONTENTION numbers, the first 1, each in
 * [1, DTS_HW_CONTENTION_MAX] (a slowdown; more than 1000x is not a measurement) */
#define DTS_HW_CONTENTION_MAX 1000.0
static dt_status hw__contention(const char *what, const json_t *root, dts_hw *hw)
{
    const json_t *a = json_object_get(root, "contention");
    hw->contention[0] = 1.0;
    hw->n_contention = 1;
    if (!a) return DT_OK;
    char want[160];
    snprintf(want, sizeof want,
             "an array of 1 to %d slowdowns, the first 1 and each from 1 to %g (entry k-1: k ranks computing at once)",
             DTS_HW_MAX_CONTENTION, DTS_HW_CONTENTION_MAX);
    const size_t n = json_is_array(a) ? json_array_size(a) : 0;
    if (n < 1 || n > DTS_HW_MAX_CONTENTION) return dts__json_expected(DT_ERR_FORMAT, what, "contention", want, a);
    for (size_t i = 0; i < n; i++) {
        double x;
        const json_t *v = json_array_get(a, i);
        if (!dts__json_num(v, &x) || !isfinite(x) || x < 1.0 || x > DTS_HW_CONTENTION_MAX || (i == 0 && x != 1.0)) {
            char full[32];
            snprintf(full, sizeof full, "contention[%zu]", i);
            return dts__json_expected(DT_ERR_FORMAT, what, full, want, v);
        }
        hw->contention[i] = x;
    }
    hw->n_contention = (int)n;
    return DT_OK;
}

/* "collectives": optional, one of dts_hw_coll_name's words (absent: auto). */
static dt_status hw__coll(const char *what, const json_t *root, dts_hw_coll *out)
{
    const json_t *v = json_object_get(root, "collectives");
    const int c = v && json_is_string(v) ? dts_hw_coll_parse(json_string_value(v)) : -1;
    if (!v) *out = DTS_HW_COLL_AUTO;
    else if (c < 0)
        return dts__json_expected(DT_ERR_FORMAT, what, "collectives", "\"messages\", \"analytic\" or \"auto\"", v);
    else *out = (dts_hw_coll)c;
    return DT_OK;
}

/* "gemm_efficiency": absent (no entries), or 1..DTS_HW_MAX_GEMM_EFF objects
 * {"flops": > 0, "efficiency": (0, 1]} in strictly ascending flops. */
static dt_status hw__gemm_eff(const char *what, const json_t *root, dts_hw *hw)
{
    const json_t *a = json_object_get(root, "gemm_efficiency");
    hw->n_gemm_eff = 0;
    if (!a) return DT_OK;
    char buf[64];
    if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > DTS_HW_MAX_GEMM_EFF)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: \"gemm_efficiency\": expected an array of 1 to %d {\"flops\": F, \"efficiency\": E} "
                       "objects, got %s",
                       what, DTS_HW_MAX_GEMM_EFF, dts__json_show(a, buf, sizeof buf));
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *e = json_array_get(a, i);
        char key[48];
        snprintf(key, sizeof key, "gemm_efficiency[%zu]", i);
        static const char *const entry_keys[] = {"flops", "efficiency", NULL};
        if (!json_is_object(e))
            return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\": expected an object {\"flops\": F, \"efficiency\": E}, got %s",
                           what, key, dts__json_show(e, buf, sizeof buf));
        char prefix[56];
        snprintf(prefix, sizeof prefix, "%s.", key);
        DT_CHECK(hw__known_keys(what, e, prefix, entry_keys));
        char kf[64], ke[64];
        snprintf(kf, sizeof kf, "%s.flops", key);
        snprintf(ke, sizeof ke, "%s.efficiency", key);
        dts_gemm_eff g;
        DT_CHECK(hw__num(what, e, "flops", kf, HW_GT0, &g.flops));
        DT_CHECK(hw__num(what, e, "efficiency", ke, HW_UNIT, &g.efficiency));
        if (i > 0 && !(g.flops > hw->gemm_eff[i - 1].flops))
            return DT_FAIL(DT_ERR_FORMAT,
                           "%s: \"%s\": %g, not above the entry before's %g: expected strictly ascending flops", what,
                           kf, g.flops, hw->gemm_eff[i - 1].flops);
        hw->gemm_eff[hw->n_gemm_eff++] = g;
    }
    return DT_OK;
}

dt_status dts_hw_from_json(const json_t *root, const char *what, dts_hw *out)
{
    static const char *const known[] = {"format",
                                        "version",
                                        "name",
                                        "source",
                                        "peak_flops",
                                        "peak_flops_bf16",
                                        "bf16_pass_ns",
                                        "mem_bytes_per_s",
                                        "efficiency",
                                        "kernel_overhead_ns",
                                        "sleep_overshoot_ns",
                                        "mem_capacity_bytes",
                                        "devices_per_node",
                                        "intra",
                                        "inter",
                                        "contention",
                                        "gemm_efficiency",
                                        "collectives",
                                        NULL};
    if (!out) return DT_FAIL(DT_ERR_INVALID, "dts_hw_from_json: NULL argument");
    if (!what) what = "hardware";
    char buf[64];
    if (!json_is_object(root))
        return DT_FAIL(DT_ERR_FORMAT, "%s: expected a JSON object (a dtsim hardware description), got %s", what,
                       root ? dts__json_show(root, buf, sizeof buf) : "nothing");
    /* format and version first: another kind of file is named as such */
    const json_t *f = json_object_get(root, "format");
    if (!json_is_string(f) || strcmp(json_string_value(f), DTS_HW_FORMAT) != 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"format\": expected \"%s\", got %s", what, DTS_HW_FORMAT,
                       f ? dts__json_show(f, buf, sizeof buf) : "nothing (not a dtsim hardware file)");
    const json_t *ver = json_object_get(root, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) != DTS_HW_VERSION)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"version\": expected %d (the only version this dtsim reads), got %s", what,
                       DTS_HW_VERSION, ver ? dts__json_show(ver, buf, sizeof buf) : "nothing");
    DT_CHECK(hw__known_keys(what, root, "", known));
    dts_hw hw;
    memset(&hw, 0, sizeof hw);
    DT_CHECK(hw__str(what, root, "name", hw.name, sizeof hw.name));
    DT_CHECK(hw__str(what, root, "source", hw.source, sizeof hw.source));
    DT_CHECK(hw__num(what, root, "peak_flops", "peak_flops", HW_GT0, &hw.peak_flops));
    if (json_object_get(root, "peak_flops_bf16")) /* optional: absent is 0, one rate */
        DT_CHECK(hw__num(what, root, "peak_flops_bf16", "peak_flops_bf16", HW_GT0, &hw.peak_flops_bf16));
    if (json_object_get(root, "bf16_pass_ns")) /* optional: absent is 0, not measured */
        DT_CHECK(hw__num(what, root, "bf16_pass_ns", "bf16_pass_ns", HW_GE0, &hw.bf16_pass_ns));
    DT_CHECK(hw__num(what, root, "mem_bytes_per_s", "mem_bytes_per_s", HW_GT0, &hw.mem_bytes_per_s));
    DT_CHECK(hw__num(what, root, "efficiency", "efficiency", HW_UNIT, &hw.efficiency));
    static const int64_t overshoot_absent = DTS_HW_SLEEP_OVERSHOOT_UNMEASURED_NS;
    /* durations: at most the engine's horizon (DTS_HORIZON_NS, 2^60 ns), so that sums of them cannot overflow */
    DT_CHECK(hw__int(what, root, "kernel_overhead_ns", 0, DTS_HORIZON_NS, NULL, &hw.kernel_overhead_ns));
    DT_CHECK(
        hw__int(what, root, "sleep_overshoot_ns", 0, DTS_HORIZON_NS, &overshoot_absent, &hw.sleep_overshoot_ns));
    DT_CHECK(hw__int(what, root, "mem_capacity_bytes", 1, INT64_MAX, NULL, &hw.mem_capacity_bytes));
    int64_t dpn;
    DT_CHECK(hw__int(what, root, "devices_per_node", 1, 1 << 20, NULL, &dpn));
    hw.devices_per_node = (int)dpn;
    DT_CHECK(hw__link(what, root, "intra", &hw.intra));
    DT_CHECK(hw__link(what, root, "inter", &hw.inter));
    DT_CHECK(hw__contention(what, root, &hw));
    DT_CHECK(hw__gemm_eff(what, root, &hw));
    DT_CHECK(hw__coll(what, root, &hw.collectives));
    DT_CHECK(dts_hw_validate(&hw, what)); /* the checks above imply it; kept as the invariant's guard */
    *out = hw;
    return DT_OK;
}

dt_status dts_hw_load(const char *path, dts_hw *out)
{
    if (!path || !out) return DT_FAIL(DT_ERR_INVALID, "dts_hw_load: NULL argument");
    char *text; /* a regular file only (a FIFO would block), of a sane size (dt_file.h) */
    size_t len;
    DT_CHECK(dt_file_read_whole(path, NULL, DTS_JSON_FILE_MAX, &text, &len));
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root) return DT_FAIL(DT_ERR_FORMAT, "%s: line %d, column %d: %s", path, jerr.line, jerr.column, jerr.text);
    dt_status st = dts_hw_from_json(root, path, out);
    json_decref(root);
    return st;
}

/* ---- writing ---------------------------------------------------------------- */

static json_t *hw__link_json(dts_link l)
{
    json_t *o = json_object();
    int bad = !o;
    if (o) {
        dts__json_set(o, "alpha_ns", json_real(l.alpha_ns), &bad);
        dts__json_set(o, "bytes_per_ns", json_real(l.bytes_per_ns), &bad);
    }
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

json_t *dts_hw_to_json(const dts_hw *hw)
{
    if (!hw) return NULL;
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    dts__json_set(o, "format", json_string(DTS_HW_FORMAT), &bad);
    dts__json_set(o, "version", json_integer(DTS_HW_VERSION), &bad);
    dts__json_set(o, "name", json_string(hw->name), &bad);
    dts__json_set(o, "source", json_string(hw->source), &bad);
    dts__json_set(o, "peak_flops", json_real(hw->peak_flops), &bad);
    if (hw->peak_flops_bf16 > 0) /* absent reads as 0: older files write back unchanged */
        dts__json_set(o, "peak_flops_bf16", json_real(hw->peak_flops_bf16), &bad);
    if (hw->bf16_pass_ns > 0)
        dts__json_set(o, "bf16_pass_ns", json_real(hw->bf16_pass_ns), &bad);
    dts__json_set(o, "mem_bytes_per_s", json_real(hw->mem_bytes_per_s), &bad);
    dts__json_set(o, "efficiency", json_real(hw->efficiency), &bad);
    dts__json_set(o, "kernel_overhead_ns", json_integer(hw->kernel_overhead_ns), &bad);
    dts__json_set(o, "sleep_overshoot_ns", json_integer(hw->sleep_overshoot_ns), &bad);
    dts__json_set(o, "mem_capacity_bytes", json_integer(hw->mem_capacity_bytes), &bad);
    dts__json_set(o, "devices_per_node", json_integer(hw->devices_per_node), &bad);
    dts__json_set(o, "intra", hw__link_json(hw->intra), &bad);
    dts__json_set(o, "inter", hw__link_json(hw->inter), &bad);
    if (hw->n_contention > 1) {
        json_t *a = json_array();
        bad |= !a;
        for (int i = 0; a && i < hw->n_contention; i++) bad |= json_array_append_new(a, json_real(hw->contention[i]));
        dts__json_set(o, "contention", a, &bad);
    }
    if (hw->n_gemm_eff > 0) {
        json_t *a = json_array();
        bad |= !a;
        for (int i = 0; a && i < hw->n_gemm_eff; i++) {
            json_t *e = json_object();
            bad |= !e;
            if (e) {
                dts__json_set(e, "flops", json_real(hw->gemm_eff[i].flops), &bad);
                dts__json_set(e, "efficiency", json_real(hw->gemm_eff[i].efficiency), &bad);
            }
            bad |= !e || json_array_append_new(a, e) != 0;
        }
        dts__json_set(o, "gemm_efficiency", a, &bad);
    }
    if (hw->collectives != DTS_HW_COLL_AUTO) /* absent reads as auto: older files and configs write back unchanged */
        dts__json_set(o, "collectives", json_string(dts_hw_coll_name(hw->collectives)), &bad);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The shortest %.*g text that reads back as the same double; an integral
 * value as plain digits when that is no longer (20000, not 2e+04). */
static void hw__fmt_double(char *buf, size_t n, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    char digits[40];
    if (v == floor(v) && fabs(v) < 1e17 && (size_t)snprintf(digits, sizeof digits, "%.0f", v) <= strlen(buf))
        snprintf(buf, n, "%s", digits);
}

/* One value of dts_hw_to_json's object: strings escaped by jansson, reals
 * as the shortest text that reads back bit for bit, objects (the links) on
 * one line. */
static int hw__put_value(FILE *fp, const json_t *v)
{
    if (json_is_object(v)) {
        const char *key;
        json_t *x;
        int first = 1, rc = fputc('{', fp) == EOF ? -1 : 0;
        json_object_foreach((json_t *)v, key, x)
        {
            if (fprintf(fp, "%s\"%s\": ", first ? "" : ", ", key) < 0 || hw__put_value(fp, x) < 0) rc = -1;
            first = 0;
        }
        return fputc('}', fp) == EOF ? -1 : rc;
    }
    if (json_is_array(v)) {
        int rc = fputc('[', fp) == EOF ? -1 : 0;
        for (size_t i = 0; i < json_array_size(v); i++)
            if ((i && fputs(", ", fp) == EOF) || hw__put_value(fp, json_array_get(v, i)) < 0) rc = -1;
        return fputc(']', fp) == EOF ? -1 : rc;
    }
    if (json_is_real(v)) {
        char b[40];
        hw__fmt_double(b, sizeof b, json_real_value(v));
        return fputs(b, fp) == EOF ? -1 : 0;
    }
    char *txt = json_dumps(v, JSON_ENCODE_ANY);
    if (!txt) return -1;
    int rc = fputs(txt, fp) == EOF ? -1 : 0;
    free(txt);
    return rc;
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
    } nums[] = {{"peak_flops", hw->peak_flops, HW_GT0},
                {"mem_bytes_per_s", hw->mem_bytes_per_s, HW_GT0},
                {"peak_flops_bf16 (0: absent)", hw->peak_flops_bf16, HW_GE0},
                {"bf16_pass_ns", hw->bf16_pass_ns, HW_GE0},
                {"efficiency", hw->efficiency, HW_UNIT},
                {"intra.alpha_ns", hw->intra.alpha_ns, HW_NS},
                {"intra.bytes_per_ns", hw->intra.bytes_per_ns, HW_GT0},
                {"inter.alpha_ns", hw->inter.alpha_ns, HW_NS},
                {"inter.bytes_per_ns", hw->inter.bytes_per_ns, HW_GT0}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (!hw__in_range(nums[i].v, nums[i].r))
            return DT_FAIL(DT_ERR_INVALID, "%s: \"%s\": expected a number %s, got %g", what, nums[i].key,
                           hw__range_text(nums[i].r), nums[i].v);
    if (hw->kernel_overhead_ns < 0 || hw->kernel_overhead_ns > DTS_HORIZON_NS)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"kernel_overhead_ns\": expected an integer from 0 to %" PRId64 ", got %" PRId64,
                       what, DTS_HORIZON_NS, hw->kernel_overhead_ns);
    if (hw->sleep_overshoot_ns < 0 || hw->sleep_overshoot_ns > DTS_HORIZON_NS)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"sleep_overshoot_ns\": expected an integer from 0 to %" PRId64 ", got %" PRId64,
                       what, DTS_HORIZON_NS, hw->sleep_overshoot_ns);
    if (hw->mem_capacity_bytes < 1)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"mem_capacity_bytes\": expected an integer >= 1, got %" PRId64, what,
                       hw->mem_capacity_bytes);
    if (hw->devices_per_node < 1 || hw->devices_per_node > (1 << 20))
        return DT_FAIL(DT_ERR_INVALID, "%s: \"devices_per_node\": expected an integer from 1 to %d, got %d", what,
                       1 << 20, hw->devices_per_node);
    if (hw->n_contention < 1 || hw->n_contention > DTS_HW_MAX_CONTENTION || hw->contention[0] != 1.0)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"contention\": expected 1 to %d entries, the first 1", what,
                       DTS_HW_MAX_CONTENTION);
    for (int i = 1; i < hw->n_contention; i++)
        if (!isfinite(hw->contention[i]) || hw->contention[i] < 1.0 || hw->contention[i] > DTS_HW_CONTENTION_MAX)
            return DT_FAIL(DT_ERR_INVALID, "%s: \"contention[%d]\": expected a number from 1 to %g, got %g", what, i,
                           DTS_HW_CONTENTION_MAX, hw->contention[i]);
    if (!dts_hw_coll_name(hw->collectives))
        return DT_FAIL(DT_ERR_INVALID, "%s: \"collectives\": expected \"messages\", \"analytic\" or \"auto\", got %d",
                       what, (int)hw->collectives);
    if (hw->n_gemm_eff < 0 || hw->n_gemm_eff > DTS_HW_MAX_GEMM_EFF)
        return DT_FAIL(DT_ERR_INVALID, "%s: \"gemm_efficiency\": expected 0 to %d entries, got %d", what,
                       DTS_HW_MAX_GEMM_EFF, hw->n_gemm_eff);
    for (int i = 0; i < hw->n_gemm_eff; i++) {
        const dts_gemm_eff *g = &hw->gemm_eff[i];
        if (!hw__in_range(g->flops, HW_GT0) || !hw__in_range(g->efficiency, HW_UNIT) ||
            (i > 0 && !(g->flops > hw->gemm_eff[i - 1].flops)))
            return DT_FAIL(DT_ERR_INVALID,
                           "%s: \"gemm_efficiency[%d]\": flops %g, efficiency %g: expected flops > 0 above the entry "
                           "before's and an efficiency in (0, 1]",
                           what, i, g->flops, g->efficiency);
    }
    return DT_OK;
}

dt_status dts_hw_save(const char *path, const dts_hw *hw)
{
    if (!path || !hw) return DT_FAIL(DT_ERR_INVALID, "dts_hw_save: NULL argument");
    DT_CHECK(dts_hw_validate(hw, path));
    json_t *o = dts_hw_to_json(hw);
    if (!o) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
    dt_file_out *out = NULL; /* whole or not at all (dt_file.h) */
    dt_status st = dt_file_out_open(path, NULL, &out);
    if (st != DT_OK) {
        json_decref(o);
        return st;
    }
    FILE *fp = dt_file_out_stream(out);
    /* one key a line, as the shipped files are laid out */
    const char *key;
    json_t *v;
    int bad = fputs("{\n", fp) == EOF, first = 1;
    json_object_foreach(o, key, v)
    {
        bad |= fprintf(fp, "%s  \"%s\": ", first ? "" : ",\n", key) < 0;
        bad |= hw__put_value(fp, v) < 0;
        first = 0;
    }
    bad |= fputs("\n}\n", fp) == EOF;
    json_decref(o);
    if (bad) {
        const int e = errno;
        dt_file_out_abort(out);
        return DT_FAIL(DT_ERR_IO, "%s: write failed (%s)", path, strerror(e ? e : EIO));
    }
    return dt_file_out_commit(out);
}

int dts_hw_equal(const dts_hw *a, const dts_hw *b)
{
    return !strcmp(a->name, b->name) && !strcmp(a->source, b->source) && a->peak_flops == b->peak_flops &&
           a->peak_flops_bf16 == b->peak_flops_bf16 && a->bf16_pass_ns == b->bf16_pass_ns &&
           a->mem_bytes_per_s == b->mem_bytes_per_s && a->efficiency == b->efficiency &&
           a->kernel_overhead_ns == b->kernel_overhead_ns && a->sleep_overshoot_ns == b->sleep_overshoot_ns &&
           a->mem_capacity_bytes == b->mem_capacity_bytes && a->devices_per_node == b->devices_per_node &&
           a->intra.alpha_ns == b->intra.alpha_ns && a->intra.bytes_per_ns == b->intra.bytes_per_ns &&
           a->inter.alpha_ns == b->inter.alpha_ns && a->inter.bytes_per_ns == b->inter.bytes_per_ns &&
           a->n_contention == b->n_contention &&
           !memcmp(a->contention, b->contention, (size_t)a->n_contention * sizeof a->contention[0]) &&
           a->collectives == b->collectives && a->n_gemm_eff == b->n_gemm_eff &&
           !memcmp(a->gemm_eff, b->gemm_eff, (size_t)a->n_gemm_eff * sizeof a->gemm_eff[0]);
}

double dts_hw_gemm_efficiency(const dts_hw *hw, double flops)
{
    const int n = hw->n_gemm_eff;
    if (n <= 0) return hw->efficiency;
    const dts_gemm_eff *g = hw->gemm_eff;
    if (!(flops > g[0].flops)) return g[0].efficiency;
    if (flops >= g[n - 1].flops) return g[n - 1].efficiency;
    int i = 0;
    while (i + 1 < n && g[i + 1].flops <= flops) i++;
    const double x = (log(flops) - log(g[i].flops)) / (log(g[i + 1].flops) - log(g[i].flops));
    return g[i].efficiency + x * (g[i + 1].efficiency - g[i].efficiency);
}

/* ---- defaults and links ------------------------------------------------------- */

void dts_hw_default(dts_hw *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "cpu-2core-default");
    /* One device = one core (what one rank of dtrain under mpirun uses).
     * peak: ~150 GFLOP/s per core (OpenBLAS sgemm, measured);
     * efficiency: `dtbench train --threads 1 --model small` achieved
     * 102.4 GFLOP/s; memory: a single-core STREAM triad measured 38.8 GB/s.
     * Links are guesses until fitted (sim/hw/cpu-2core.json has the fit). */
    out->peak_flops = 150e9;
    out->mem_bytes_per_s = 38.8e9;
    out->efficiency = 0.68;
    out->kernel_overhead_ns = 500;
    /* measured on this machine: mean overshoot of 50 nanosleeps of 20-500 us
     * each, 68 us */
    out->sleep_overshoot_ns = 68000;
    out->mem_capacity_bytes = 12638255104; /* half of the 23.5 GiB RAM per core */
    out->devices_per_node = 2;
    out->contention[0] = 1.0; /* unmeasured: processor sharing only */
    out->n_contention = 1;
    out->intra = (dts_link){.alpha_ns = 2000.0, .bytes_per_ns = 5.0};   /* shared memory, MPI: ~5 GB/s busbw */
    out->inter = (dts_link){.alpha_ns = 20000.0, .bytes_per_ns = 1.25}; /* 10 GbE, if hosts were added */
    snprintf(out->source, sizeof out->source,
             "uncalibrated defaults of dts_hw_default: sgemm 150 GFLOP/s per core (OpenBLAS sgemm, measured), "
             "efficiency from dtbench train --threads 1 --model small, STREAM triad 38.8 GB/s; links guessed");
}

dts_link dts_hw_link(const dts_hw *hw, int rank_a, int rank_b)
{
    const int dpn = hw->devices_per_node > 0 ? hw->devices_per_node : 1;
    return rank_a / dpn == rank_b / dpn ? hw->intra : hw->inter;
}

/* log of the binomial coefficient C(a, b), 0 <= b <= a */
static double hw__lchoose(int a, int b) { return lgamma(a + 1.0) - lgamma(b + 1.0) - lgamma(a - b + 1.0); }

double dts_hw_share(int k, int n, int c)
{
    if (k <= 0 || c <= 0) return 1.0;
    if (n < k) n = k;
    if (n <= c) return 1.0;
    const int m = (n + c - 1) / c - 1; /* the ranks a core holds beside this one */
    const int others = n - 1, comp = k - 1, idle = n - k;
    double speed = 0.0;
    for (int j = 0; j <= m && j <= comp; j++) /* P(J = j) = C(comp, j) C(idle, m - j) / C(others, m) */
        if (m - j <= idle)
            speed += exp(hw__lchoose(comp, j) + hw__lchoose(idle, m - j) - hw__lchoose(others, m)) / (1.0 + j);
    return speed;
}

double dts_hw_compute_rate(const dts_hw *hw, int k, int n)
{
    const int c = hw->cores_per_node, len = hw->n_contention;
    if (k <= 0 || c <= 0) return 1.0;
    const int kc = k < len ? k : len; /* the measured entry that applies */
    /* the cache and bandwidth part of the measured slowdown: its sharing of cores taken out */
    const double cache = hw->contention[kc - 1] * dts_hw_share(kc, kc, c);
    return dts_hw_share(k, n, c) / (cache > 1.0 ? cache : 1.0);
}

static const char *const hw__coll_names[] = {"auto", "messages", "analytic"};

const char *dts_hw_coll_name(dts_hw_coll c) { return (int)c >= 0 && (int)c < 3 ? hw__coll_names[c] : NULL; }

int dts_hw_coll_parse(const char *name)
{
    for (int k = 0; name && k < 3; k++)
        if (!strcmp(name, hw__coll_names[k])) return k;
    return -1;
}

int dts_hw_coll_analytic(const dts_hw *hw, int members)
{
    if (hw->collectives == DTS_HW_COLL_AUTO) return members > DTS_HW_COLL_AUTO_MAX_MEMBERS;
    return hw->collectives == DTS_HW_COLL_ANALYTIC;
}

int64_t dts_link_ns(dts_link l, double bytes)
{
    return dts_ns_sat(l.alpha_ns + (bytes > 0 ? bytes / l.bytes_per_ns : 0.0));
}
