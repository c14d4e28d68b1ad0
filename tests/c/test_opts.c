/* test_opts.c - declared options (base/opts.h): defaults, every type, ranges
 * with open and closed bounds, NaN and infinities, unknown keys, the exact
 * messages, a struct filled in C checked against the same table, the help
 * text; and the profile engine's table read through the same reader. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "base/error.h"
#include "base/opts.h"
#include "nn/layers.h"
#include "stats/profile.h"
#include "test.h"

typedef struct {
    int64_t n;
    double x, sigma;
    int flag, mode;
    const char *name;
    int64_t crop;
} demo_opts;

static const char *const modes[] = {"fast", "exact", NULL};

#define F(f) offsetof(demo_opts, f)
static const sr_opt_spec demo_specs[] = {
    {.name = "n", .type = SR_OPT_INT, .lo = 1, .hi = 100, .def = 10, .offset = F(n), .help = "a count"},
    {.name = "x", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_OPEN_LO | SR_OPT_OPEN_HI, .def = 0,
     .def_text = "off", .offset = F(x)},
    {.name = "sigma", .type = SR_OPT_NUM, .lo = 0, .hi = INFINITY, .flags = SR_OPT_OPEN_HI, .def = 1,
     .offset = F(sigma)},
    {.name = "flag", .type = SR_OPT_BOOL, .def = 1, .offset = F(flag)},
    {.name = "mode", .type = SR_OPT_CHOICE, .choices = modes, .def = 1, .offset = F(mode)},
    {.name = "name", .type = SR_OPT_STR, .flags = SR_OPT_NONEMPTY, .offset = F(name)},
    {.name = "crop", .type = SR_OPT_INT, .lo = 1, .hi = 64, .flags = SR_OPT_FALSE_NONE, .def = 0, .offset = F(crop)},
    {.name = "extra", .type = SR_OPT_OTHER, .flags = SR_OPT_CALLER, .what = "a tensor"},
    {.name = NULL},
};
#undef F

static int read_kv(const char *const *kv, demo_opts *d)
{
    sr_opts o;
    sr_opts_kv_data data;
    sr_opts_kv(&o, &data, "demo", kv);
    memset(d, 0xff, sizeof *d); /* every field must be written */
    return sr_opts_read(&o, demo_specs, d);
}

TEST(opts_read_defaults_and_values)
{
    demo_opts d;
    CHECK_OK(read_kv((const char *[]){NULL}, &d));
    CHECK(d.n == 10 && d.x == 0 && d.sigma == 1 && d.flag == 1 && d.mode == 1 && d.name == NULL && d.crop == 0,
          "defaults: n %lld x %g sigma %g flag %d mode %d crop %lld", (long long)d.n, d.x, d.sigma, d.flag, d.mode,
          (long long)d.crop);
    CHECK_OK(read_kv((const char *[]){"n", "100", "x", "0.25", "sigma", "0", "flag", "false", "mode", "fast",
                                      "name", "abc", "crop", "false", "extra", "anything", NULL},
                     &d));
    CHECK(d.n == 100 && d.x == 0.25 && d.sigma == 0 && d.flag == 0 && d.mode == 0 && strcmp(d.name, "abc") == 0 &&
              d.crop == 0,
          "values: n %lld x %g sigma %g flag %d mode %d crop %lld", (long long)d.n, d.x, d.sigma, d.flag, d.mode,
          (long long)d.crop);
    /* a number reads as a boolean (!= 0), an integral float as an integer */
    CHECK_OK(read_kv((const char *[]){"flag", "2", "n", "1.0", "crop", "64", NULL}, &d));
    CHECK(d.flag == 1 && d.n == 1 && d.crop == 64, "flag %d n %lld crop %lld", d.flag, (long long)d.n,
          (long long)d.crop);
}

TEST(opts_read_rejects_bad_values_with_one_message_format)
{
    static const struct {
        const char *key, *value, *msg;
    } bad[] = {
        {"n", "0", "demo: n must be an integer in 1..100, got 0"},
        {"n", "101", "demo: n must be an integer in 1..100, got 101"},
        {"n", "2.5", "demo: n must be an integer in 1..100, got 2.5"},
        {"n", "abc", "demo: n must be an integer in 1..100, got 'abc'"},
        {"n", "true", "demo: n must be an integer in 1..100, got true"},
        {"x", "0", "demo: x must be a number in (0, 1), got 0"},
        {"x", "1", "demo: x must be a number in (0, 1), got 1"},
        {"x", "nan", "demo: x must be a number in (0, 1), got nan"},
        {"sigma", "-1", "demo: sigma must be a finite number >= 0, got -1"},
        {"sigma", "inf", "demo: sigma must be a finite number >= 0, got inf"},
        {"sigma", "nan", "demo: sigma must be a finite number >= 0, got nan"},
        {"flag", "yes", "demo: flag must be true or false, got 'yes'"},
        {"mode", "slow", "demo: mode must be \"fast\" or \"exact\", got 'slow'"},
        {"name", "", "demo: name must be a non-empty string, got ''"},
        {"crop", "0", "demo: crop must be an integer in 1..64 or false, got 0"},
        {"crop", "true", "demo: crop must be an integer in 1..64 or false, got true"},
        {"nn", "3", "demo: unknown option 'nn' (options: n, x, sigma, flag, mode, name, crop, extra)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        demo_opts d;
        const char *kv[] = {bad[i].key, bad[i].value, NULL};
        CHECK(read_kv(kv, &d) == -1, "%s=%s was accepted", bad[i].key, bad[i].value);
        CHECK(strcmp(sr_errmsg(), bad[i].msg) == 0, "%s=%s: '%s', expected '%s'", bad[i].key, bad[i].value,
              sr_errmsg(), bad[i].msg);
    }
}

TEST(opts_check_validates_a_struct_filled_in_c)
{
    demo_opts d;
    memset(&d, 0, sizeof d);
    sr_opts_defaults(demo_specs, &d);
    CHECK(d.n == 10 && d.flag == 1 && d.mode == 1 && d.sigma == 1, "defaults");
    CHECK_OK(sr_opts_check("demo", demo_specs, &d)); /* x = 0 is the default ("off"), out of range */
    d.x = 0.5;
    d.crop = 0; /* false: none */
    CHECK_OK(sr_opts_check("demo", demo_specs, &d));
    d.n = 0;
    CHECK_ERR(sr_opts_check("demo", demo_specs, &d), "demo: n must be an integer in 1..100, got 0");
    d.n = 5;
    d.x = NAN;
    CHECK_ERR(sr_opts_check("demo", demo_specs, &d), "demo: x must be a number in (0, 1), got nan");
    d.x = 0.5;
    d.mode = 2;
    CHECK_ERR(sr_opts_check("demo", demo_specs, &d), "demo: mode must be");
    d.mode = 0;
    d.name = "";
    CHECK_ERR(sr_opts_check("demo", demo_specs, &d), "demo: name must be a non-empty string, got ''");
}

TEST(opts_spec_help_text)
{
    char what[128], def[64];
    static const struct {
        const char *name, *what, *def;
    } want[] = {
        {"n", "an integer in 1..100", "10"},
        {"x", "a number in (0, 1)", "off"},
        {"sigma", "a finite number >= 0", "1"},
        {"flag", "true or false", "true"},
        {"mode", "\"fast\" or \"exact\"", "\"exact\""},
        {"name", "a non-empty string", "none"},
        {"extra", "a tensor", "none"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const sr_opt_spec *s = sr_opt_spec_find(demo_specs, want[i].name);
        CHECK(s, "no spec %s", want[i].name);
        CHECK(strcmp(sr_opt_spec_what(s, what, sizeof what), want[i].what) == 0, "%s: what '%s'", want[i].name, what);
        CHECK(strcmp(sr_opt_spec_default(s, def, sizeof def), want[i].def) == 0, "%s: default '%s'", want[i].name,
              def);
    }
    CHECK(sr_opt_spec_find(demo_specs, "nope") == NULL, "found an undeclared name");
}

TEST(opts_profile_engine_reads_and_checks_its_declared_options)
{
    sr_opts o;
    sr_opts_kv_data data;
    sr_profile_opts po;
    sr_opts_kv(&o, &data, "profile", (const char *[]){"directions", "8", "antipodal", "false", "jvp_batch", "4",
                                                     "lowpass_sigma", "1.5", "tap", "features", NULL});
    CHECK_OK(sr_profile_opts_read(&o, &po));
    CHECK(po.ndirs == 8 && !po.antipodal && po.jvp_k == 4 && po.njvp == 256 && po.noise_dirs == 16 &&
              po.family == SR_DIRS_LOWPASS && po.lowpass_sigma == 1.5 && po.tap == NULL && po.batch == 0,
          "read: ndirs %lld antipodal %d jvp_k %lld family %d", (long long)po.ndirs, po.antipodal,
          (long long)po.jvp_k, (int)po.family);
    static const char *const bad[][3] = {
        {"jvp_directions", "0", "profile: jvp_directions must be an integer in 1..2000000, got 0"},
        {"batch", "0", "profile: batch must be an integer in 1..1000000, got 0"},
        {"target_ci", "0", "profile: target_ci must be a number in (0, 1), got 0"},
        {"lowpass_sigma", "nan", "profile: lowpass_sigma must be a number in [0, 10000], got nan"},
        {"tap", "", "profile: tap must be a module path, got ''"},
        {"ci", "1", "profile: ci must be a number in (0, 1), got 1"},
        {"directons", "3", "profile: unknown option 'directons'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sr_opts_kv(&o, &data, "profile", (const char *[]){bad[i][0], bad[i][1], NULL});
        CHECK_ERR(sr_profile_opts_read(&o, &po), bad[i][2]);
    }
    /* a struct filled in C meets the same table in the engine */
    sr_opts_kv(&o, &data, "linear", (const char *[]){"in_features", "4", "out_features", "2", NULL});
    sr_module *m = sr_linear_create(&o);
    CHECK(m, "%s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){1, 4}));
    double scales[] = {0.1};
    sr_profile_opts_default(&po);
    po.scales = scales;
    po.nscales = 1;
    po.batch = -1;
    sr_profile_result r;
    CHECK_ERR(sr_profile_image(m, &x, &po, &r), "profile: batch must be an integer in 1..1000000, got -1");
    po.batch = 0;
    po.orthogonal = -1;
    CHECK_ERR(sr_profile_image(m, &x, &po, &r), "profile: orthogonal must be an integer in 0..1000000 or false, got -1");
    sr_tensor_free(&x);
    sr_module_release(m);
}
