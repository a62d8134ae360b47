/* json_util.c: the typed JSON getters shared by the hardware and scenario
 * readers (dts_json.h). */
#include "dts_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dts__json_show(const json_t *v, char *buf, size_t n)
{
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, n, "%s", s ? s : "?");
    if (s && strlen(s) >= n && n > 4) memcpy(buf + n - 4, "...", 4);
    free(s);
    return buf;
}

dt_status dts__json_expected(dt_status code, const char *what, const char *key, const char *want, const json_t *v)
{
    char buf[64];
    return DT_FAIL(code, "%s: \"%s\": expected %s, got %s", what, key, want, dts__json_show(v, buf, sizeof buf));
}

int dts__json_int(const json_t *v, int64_t min, int64_t max, int64_t *out)
{
    int64_t x = 0;
    int ok = 0;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
        ok = 1;
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && d >= -9.2e18 && d <= 9.2e18) x = (int64_t)d, ok = 1;
    }
    if (!ok || x < min || x > max) return 0;
    *out = x;
    return 1;
}

int dts__json_num(const json_t *v, double *out)
{
    if (!json_is_number(v) || !isfinite(json_number_value(v))) return 0;
    *out = json_number_value(v);
    return 1;
}

int dts__json_str_copy(const json_t *v, size_t min_len, char *out, size_t cap)
{
    if (!json_is_string(v) || json_string_length(v) < min_len || json_string_length(v) >= cap) return 0;
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return 1;
}

void dts__json_set(json_t *o, const char *key, json_t *v, int *bad)
{
    if (!v || json_object_set_new(o, key, v) != 0) *bad = 1;
}
