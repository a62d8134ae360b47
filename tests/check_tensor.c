/* check_tensor.c: status messages, buffers and views, flat parameter
 * layouts, the RNG, and backend creation. */
#include <string.h>

#include "testutil.h"

START_TEST(test_status)
{
    dt_clear_error();
    ck_assert_str_eq(dt_last_error(), "");
    dt_status st = DT_FAIL(DT_ERR_INVALID, "--flag '%s': expected\nsomething", "x");
    ck_assert_int_eq(st, DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--flag 'x': expected something"); /* one line */
    ck_assert_ptr_nonnull(strstr(dt_last_error_site(), "check_tensor.c:"));
    ck_assert_str_eq(dt_status_str(DT_ERR_IO), "I/O error");
}
END_TEST

START_TEST(test_views)
{
    dt_backend *be;
    ck_dt(dt_backend_cpu_create(1, &be));
    dt_buffer buf;
    ck_dt(dt_buffer_alloc(&buf, be, 64 * sizeof(float)));
    ck_assert_int_eq((uintptr_t)buf.data % 64, 0);
    for (int i = 0; i < 64; i++) ck_assert_float_eq(((float *)buf.data)[i], 0.0f);
    dt_tensor t;
    ck_dt(dt_tensor_view(&t, &buf, 8, DT_F32, 3, (int64_t[]){2, 3, 4}));
    ck_assert_int_eq(dt_tensor_numel(&t), 24);
    ck_assert_int_eq(t.strides[0], 12);
    ck_assert_int_eq(t.strides[2], 1);
    ck_assert(dt_tensor_is_contiguous(&t));
    ck_assert_ptr_eq(dt_tensor_data(&t), (float *)buf.data + 8);
    t.strides[0] = 13;
    ck_assert(!dt_tensor_is_contiguous(&t));
    /* a view past the end of its buffer is refused */
    ck_assert_int_eq(dt_tensor_view(&t, &buf, 50, DT_F32, 2, (int64_t[]){4, 4}), DT_ERR_INVALID);
    ck_assert_int_eq(dt_tensor_view(&t, &buf, 0, DT_F32, 5, (int64_t[]){1, 1, 1, 1, 1}), DT_ERR_INVALID);
    ck_assert_uint_eq(dt_dtype_size(DT_BF16), 2);
    dt_buffer_free(&buf);
    ck_assert_ptr_null(buf.data);
    dt_backend_destroy(be);
}
END_TEST

START_TEST(test_paramset)
{
    dt_paramset ps;
    dt_paramset_init(&ps);
    ck_dt(dt_paramset_add(&ps, "a", 2, (int64_t[]){3, 5}, 1));
    ck_dt(dt_paramset_add(&ps, "b", 1, (int64_t[]){7}, 0));
    for (int i = 0; i < 40; i++) { /* growth past the initial capacity */
        char n[16];
        snprintf(n, sizeof n, "c%d", i);
        ck_dt(dt_paramset_add(&ps, n, 1, (int64_t[]){1}, 0));
    }
    ck_assert_int_eq(ps.count, 42);
    ck_assert_uint_eq(ps.info[0].offset, 0);
    ck_assert_uint_eq(ps.info[1].offset, 16); /* 15 rounded up to 16 */
    ck_assert_uint_eq(ps.info[1].numel, 7);
    ck_assert_int_eq(dt_paramset_find(&ps, "b"), 1);
    ck_assert_int_eq(dt_paramset_find(&ps, "zz"), -1);
    ck_assert_int_eq(dt_paramset_add(&ps, "a", 1, (int64_t[]){1}, 0), DT_ERR_INVALID);
    ck_assert_int_eq(dt_paramset_add(&ps, "neg", 1, (int64_t[]){0}, 0), DT_ERR_INVALID);
    char longname[80];
    memset(longname, 'x', sizeof longname - 1);
    longname[79] = 0;
    ck_assert_int_eq(dt_paramset_add(&ps, longname, 1, (int64_t[]){1}, 0), DT_ERR_INVALID);
    dt_paramset_free(&ps);
}
END_TEST

START_TEST(test_rng)
{
    dt_rng a, b;
    dt_rng_seed(&a, 1234);
    dt_rng_seed(&b, 1234);
    for (int i = 0; i < 100; i++) ck_assert_uint_eq(dt_rng_u64(&a), dt_rng_u64(&b));
    dt_rng_seed(&b, 1235);
    ck_assert_uint_ne(dt_rng_u64(&a), dt_rng_u64(&b));
    /* uniform in [0,1), below in range, normal has mean 0 and variance 1 */
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        float u = dt_rng_uniform(&a);
        ck_assert(u >= 0.0f && u < 1.0f);
        ck_assert_uint_lt(dt_rng_below(&a, 7), 7);
        double z = dt_rng_normal(&a);
        s += z, s2 += z * z;
    }
    /* standard errors: mean 1/sqrt(n) = 0.0022, variance sqrt(2/n) = 0.0032; 5 sigma */
    ck_assert_msg(fabs(s / n) < 0.012, "normal mean %g", s / n);
    ck_assert_msg(fabs(s2 / n - 1) < 0.016, "normal variance %g", s2 / n);
    dt_rng_seed3(&a, 1, 2, 3);
    dt_rng_seed3(&b, 1, 2, 4);
    ck_assert_uint_ne(dt_rng_u64(&a), dt_rng_u64(&b));
}
END_TEST

START_TEST(test_backend_create)
{
    dt_backend *be;
    ck_dt(dt_backend_create("cpu", 2, &be));
    ck_assert_str_eq(be->name, "cpu");
    ck_assert_int_eq(be->threads, 2);
    dt_backend_destroy(be);
    ck_assert_int_eq(dt_backend_create("tpu", 1, &be), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--device 'tpu'"));
    ck_assert_int_eq(dt_backend_create("cpu", 5000, &be), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--threads"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_status);
    tcase_add_test(tc, test_views);
    tcase_add_test(tc, test_paramset);
    tcase_add_test(tc, test_rng);
    tcase_add_test(tc, test_backend_create);
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
