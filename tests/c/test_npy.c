/* test_npy.c - .npy round trips and malformed files. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/rng.h"
#include "io/npy.h"
#include "check.h"
#include "test.h"

TEST(npy_roundtrip_f32_f64)
{
    for (int d = 0; d < 2; d++) {
        sr_tensor t = SR_TENSOR_INIT, u = SR_TENSOR_INIT;
        sr_rng r;
        sr_rng_seed(&r, 3);
        CHECK_OK(sr_tensor_alloc(&t, d ? SR_F64 : SR_F32, 3, (int64_t[]){2, 3, 5}));
        sr_tensor_fill_normal(&t, &r, 0, 1);
        CHECK_OK(sr_npy_save("build/test_npy.npy", &t));
        CHECK_OK(sr_npy_load(&u, "build/test_npy.npy"));
        CHECK(sr_same_shape(&t, &u) && t.dtype == u.dtype, "shape/dtype");
        CHECK(memcmp(sr_data(&t), sr_data(&u), (size_t)sr_numel(&t) * sr_dtype_size(t.dtype)) == 0, "data");
        sr_tensor_free(&t);
        sr_tensor_free(&u);
    }
    remove("build/test_npy.npy");
}

TEST(npy_malformed_files_are_errors)
{
    sr_tensor t = SR_TENSOR_INIT;
    CHECK_ERR(sr_npy_load(&t, "build/does-not-exist.npy"), "No such file");
    FILE *f = fopen("build/bad.npy", "wb");
    fputs("hello world, not numpy", f);
    fclose(f);
    CHECK_ERR(sr_npy_load(&t, "build/bad.npy"), "bad magic");
    /* valid header, truncated data */
    sr_tensor a = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&a, SR_F32, 2, (int64_t[]){4, 4}));
    CHECK_OK(sr_npy_save("build/bad.npy", &a));
    CHECK(truncate("build/bad.npy", 128 + 10) == 0, "truncate");
    CHECK_ERR(sr_npy_load(&t, "build/bad.npy"), "truncated data");
    sr_tensor_free(&a);
    remove("build/bad.npy");
}
