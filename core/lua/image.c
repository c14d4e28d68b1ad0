/* lua/image.c - srgeo.image: load / load_batch / save / blur / info / check.
 *
 *   x = srgeo.image.load(path [, {size=224, resize=256, channels=3, max_pixels=1e8, dtype="float32"}])
 *   X, bad, msg = srgeo.image.load_batch(paths [, {..., on_error="fail"|"skip"}])
 *   srgeo.image.save(path, t [, {rescale=false, quality=nil}])
 *   y = srgeo.image.blur(t, sigma [, {ksize=2*ceil(3*sigma)+1}])
 *   info = srgeo.image.info(path)      -- width, height, bands, has_alpha, bits, loader
 *   ok, msg = srgeo.image.check(path)  -- full decode
 *
 * Option semantics are in core/io/image.h.  size: a number (square crop),
 * {h, w}, or false/0 (no crop).  resize: the shorter side before the crop;
 * by default round(size * 256/224), i.e. 256 for 224 (torchvision's ImageNet
 * evaluation ratio), and no resize when size is false.  channels: 3 (the
 * default), 1, or false/0 = as stored.  max_pixels: the decode bound
 * (core/io/image.h: an image with more pixels is refused undecoded).
 */
#include <math.h>
#include <stdlib.h>

#include "io/image.h"
#include "kernels/blur.h"
#include "lua/aux.h"
#include "lua/open.h"

static const char *const load_keys[] = {"size", "resize", "channels", "max_pixels", "dtype", "on_error", NULL};

static void read_load_opts(lua_State *L, int t, sr_image_opts *o, const char *fn)
{
    *o = (sr_image_opts)SR_IMAGE_OPTS_INIT;
    if (lua_isnoneornil(L, t))
        return;
    sr_lua_check_keys(L, t, fn, load_keys);
    int ty = lua_getfield(L, t, "size");
    int side = 224;
    if (ty == LUA_TTABLE) {
        lua_geti(L, -1, 1);
        lua_geti(L, -2, 2);
        int ok1, ok2;
        lua_Integer h = lua_tointegerx(L, -2, &ok1), w = lua_tointegerx(L, -1, &ok2);
        if (!ok1 || !ok2 || h < 1 || w < 1 || h > 65536 || w > 65536)
            luaL_error(L, "%s: size must be a number, {h, w} or false", fn);
        o->crop_h = (int)h, o->crop_w = (int)w;
        side = (int)(h < w ? h : w);
        lua_pop(L, 2);
    } else if (ty == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        o->crop_h = o->crop_w = side = 0;
    } else if (ty != LUA_TNIL) {
        int ok;
        lua_Integer s = lua_tointegerx(L, -1, &ok);
        if (!ok || s < 0 || s > 65536)
            luaL_error(L, "%s: size must be a number, {h, w} or false", fn);
        o->crop_h = o->crop_w = side = (int)s;
    }
    lua_pop(L, 1);
    o->resize = (int)sr_lua_opt_integer_in(L, t, fn, "resize", lround(side * 256.0 / 224.0), 0, 65536);
    o->channels = (int)sr_lua_opt_integer_in(L, t, fn, "channels", 3, 0, 3);
    o->max_pixels = sr_lua_opt_integer_in(L, t, fn, "max_pixels", SR_IMAGE_MAX_PIXELS, 1, (lua_Integer)1 << 40);
    if (o->channels == 2)
        luaL_error(L, "%s: channels must be 1, 3 or false (as stored)", fn);
    lua_getfield(L, t, "dtype");
    o->dtype = sr_lua_opt_dtype(L, -1, SR_F32);
    lua_pop(L, 1);
}

static int l_load(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "image.load");
    sr_image_opts o;
    read_load_opts(L, 2, &o, "image.load");
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_image_load(t, path, &o))
        return sr_lua_fail(L);
    return 1;
}

/* Paths from a list; the strings stay alive on the Lua stack in the table. */
static const char **check_paths(lua_State *L, int idx, int64_t *n)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    *n = (int64_t)luaL_len(L, idx);
    luaL_argcheck(L, *n > 0, idx, "empty list of paths");
    const char **p = lua_newuserdatauv(L, sizeof *p * (size_t)*n, 0); /* freed by the GC */
    for (int64_t i = 0; i < *n; i++) {
        lua_geti(L, idx, i + 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "image.load_batch: paths[%d] is not a string", (int)(i + 1));
        p[i] = sr_lua_to_cstring(L, -1, "image.load_batch", "a path");
        lua_pop(L, 1); /* the table keeps the string alive */
    }
    return p;
}

static int l_load_batch(lua_State *L)
{
    lua_settop(L, 2); /* check_paths pushes its buffer above the arguments */
    int64_t n;
    const char **paths = check_paths(L, 1, &n);
    sr_image_opts o;
    read_load_opts(L, 2, &o, "image.load_batch");
    static const char *const modes[] = {"fail", "skip", NULL};
    int skip = sr_lua_opt_choice(L, 2, "image.load_batch", "on_error", 0, modes) == 1;
    unsigned char *bad = skip ? lua_newuserdatauv(L, (size_t)n, 0) : NULL;
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_image_load_batch(t, paths, n, &o, bad))
        return sr_lua_fail(L);
    lua_newtable(L);
    int nbad = 0;
    for (int64_t i = 0; bad && i < n; i++)
        if (bad[i]) {
            lua_pushinteger(L, i + 1);
            lua_rawseti(L, -2, ++nbad);
        }
    if (nbad)
        lua_pushstring(L, sr_errmsg());
    else
        lua_pushnil(L);
    return 3;
}

static int l_save(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "image.save");
    sr_tensor *t = sr_lua_check_tensor(L, 2);
    sr_image_save_opts o = SR_IMAGE_SAVE_OPTS_INIT;
    static const char *const keys[] = {"rescale", "quality", NULL};
    sr_lua_check_keys(L, 3, "image.save", keys);
    o.rescale = sr_lua_opt_boolean(L, 3, "image.save", "rescale", 0);
    o.quality = (int)sr_lua_opt_integer_in(L, 3, "image.save", "quality", 0, 1, 100);
    sr_lua_clean_tmp(L, path);
    if (sr_image_save(path, t, &o))
        return sr_lua_fail(L);
    return 0;
}

static int l_blur(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    double sigma = luaL_checknumber(L, 2); /* sr_blur checks its range */
    static const char *const keys[] = {"ksize", NULL};
    sr_lua_check_keys(L, 3, "image.blur", keys);
    int ksize = (int)sr_lua_opt_integer_in(L, 3, "image.blur", "ksize", 0, 1, 100001);
    sr_tensor *y = sr_lua_new_tensor(L);
    if (sr_blur(y, t, sigma, ksize))
        return sr_lua_fail(L);
    return 1;
}

static int l_info(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "image.info");
    sr_image_info in;
    if (sr_image_info_read(path, &in))
        return sr_lua_fail(L);
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, in.width);
    lua_setfield(L, -2, "width");
    lua_pushinteger(L, in.height);
    lua_setfield(L, -2, "height");
    lua_pushinteger(L, in.bands);
    lua_setfield(L, -2, "bands");
    lua_pushboolean(L, in.has_alpha);
    lua_setfield(L, -2, "has_alpha");
    lua_pushinteger(L, in.bits);
    lua_setfield(L, -2, "bits");
    lua_pushstring(L, in.loader);
    lua_setfield(L, -2, "loader");
    return 1;
}

static int l_check(lua_State *L)
{
    if (sr_image_check(sr_lua_check_cstring(L, 1, "image.check")) == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushboolean(L, 0);
    lua_pushstring(L, sr_errmsg());
    return 2;
}

/* The kernel blur uses, for tests and documentation. */
static int l_gaussian_kernel(lua_State *L)
{
    double sigma = luaL_checknumber(L, 1);
    int ksize = (int)luaL_optinteger(L, 2, 0);
    luaL_argcheck(L, sigma > 0 && sigma <= 1e4, 1, "sigma must be in (0, 1e4]");
    if (ksize == 0)
        ksize = sr_blur_ksize(sigma);
    luaL_argcheck(L, ksize > 0 && ksize % 2 == 1 && ksize <= 100001, 2, "kernel size must be odd");
    double *k = lua_newuserdatauv(L, sizeof *k * (size_t)ksize, 0);
    if (sr_blur_kernel(k, ksize, sigma))
        return sr_lua_fail(L);
    sr_lua_push_numbers(L, k, ksize);
    return 1;
}

static const luaL_Reg image_funcs[] = {
    {"load", l_load},
    {"load_batch", l_load_batch},
    {"save", l_save},
    {"blur", l_blur},
    {"info", l_info},
    {"check", l_check},
    {"gaussian_kernel", l_gaussian_kernel},
    {NULL, NULL},
};

void sr_lua_open_image(lua_State *L)
{
    luaL_newlib(L, image_funcs);
    lua_setfield(L, -2, "image");
}
