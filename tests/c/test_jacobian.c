/* test_jacobian.c - top singular vectors of a Jacobian we know exactly. */
#include <math.h>
#include <string.h>

#include "nn/layers.h"
#include "stats/jacobian.h"
#include "check.h"
#include "test.h"

TEST(jacobian_top_recovers_known_singular_vectors)
{
    /* W (3×6) = diag(5, 3, 1) · Q with orthonormal rows Q: right singular
     * vectors are the rows of Q, singular values 5, 3, 1. */
    sr_opts o;
    sr_opts_kv_data kd;
    const char *kv[] = {"in_features", "6", "out_features", "3", "bias", "false", NULL};
    sr_opts_kv(&o, &kd, "linear", kv);
    sr_module *m = sr_linear_create(&o);
    CHECK(m, "create");
    CHECK_OK(sr_module_to_dtype(m, SR_F64));
    double q[3][6] = {{1, 1, 0, 0, 0, 0}, {0, 0, 1, -1, 0, 0}, {0, 0, 0, 0, 1, 1}};
    double s[3] = {5, 3, 1};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++)
            sr_f64(&m->params[0].value)[i * 6 + j] = s[i] * q[i][j] / sqrt(2);
    sr_tensor x = SR_TENSOR_INIT, V = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 6}, 1));
    double sv[2];
    CHECK_OK(sr_jacobian_top(m, &x, NULL, 2, 30, 7, &V, sv));
    CHECK(fabs(sv[0] - 5) < 1e-9 && fabs(sv[1] - 3) < 1e-9, "sv %g %g", sv[0], sv[1]);
    for (int i = 0; i < 2; i++) {
        double dot = 0;
        for (int j = 0; j < 6; j++)
            dot += sr_f64(&V)[i * 6 + j] * q[i][j] / sqrt(2);
        CHECK(fabs(fabs(dot) - 1) < 1e-9, "vector %d alignment %g", i, dot);
    }
    CHECK_ERR(sr_jacobian_top(m, &x, NULL, 7, 3, 1, &V, sv), "k=7 must be in 1..6");
    sr_tensor_free(&x);
    sr_tensor_free(&V);
    sr_module_release(m);
}
