/* json.c - srgeo.json: JSON for results, caches and checkpoint metadata.
 *
 *   s = srgeo.json.encode(v [, {indent = true}])    v = srgeo.json.decode(s)
 *   srgeo.json.array(t), srgeo.json.object(t)      how an empty table encodes
 *
 * Reading is cJSON's (RFC 8259 strings, \u escapes with surrogate pairs;
 * a lone surrogate is an error), after a scan of our own that holds numbers
 * to RFC 8259's grammar (cJSON hands any prefix strtod accepts to strtod:
 * "1.", "01", "+1" would pass) and converts them exactly, and decodes the
 * strings holding \u0000 (cJSON's C strings end at the NUL; Lua strings
 * hold it, and encode writes it so: "a\u0000b" round-trips).  Writing is done
 * here, to keep integers exact and the layout of srgeo's files.
 *
 * How Lua values map:
 *  - nil -> null; booleans as they are;
 *  - integers exactly (64 bits); floats in the shortest form that reads back
 *    to the same double, with ".0" when integral, so a float stays a float;
 *    NaN and infinities -> null (JSON has no such numbers);
 *  - a table whose keys are exactly 1..n (n >= 1) -> an array; a table of
 *    string keys -> an object (keys in byte order, function values left
 *    out); other keys are an error.  An empty table is an object, {},
 *    unless json.array(t) marked it; decode marks every array it makes, so
 *    [] and {} both round-trip;
 *  - decode: numbers without fraction or exponent that fit 64 bits become
 *    integers, others floats; null becomes NaN in an array (a discarded
 *    rung keeps its place), an absent key in an object, nil at the top.
 * Every failure raises "json.decode: WHAT at byte N" or "json.encode: WHAT
 * at PATH"; nothing returns nil for bad input. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "lua/aux.h"
#include "lua/open.h"

#define ARRAY_MT "srgeo.json.array"
#define TREE_MT "srgeo.json.tree"
#define MAX_DEPTH 1000

/* ------------------------------------------------------------------------
 * UTF-8
 * ---------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || c > 0xF4 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return len;
}

/* ------------------------------------------------------------------------
 * Decoding
 * ---------------------------------------------------------------------- */

/* RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? spanning s[0..n). */
static int number_ok(const char *s, size_t n, int *integral)
{
    size_t i = 0;
    *integral = 1;
    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0')
        i++;
    else if (i < n && s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    else
        return 0;
    if (i < n && s[i] == '.') {
        *integral = 0;
        size_t d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        *integral = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return 0;
    }
    return i == n;
}

static int decode_error(lua_State *L, const char *what, const char *s, const char *at)
{
    return luaL_error(L, "json.decode: %s at byte %d", what, (int)(at - s) + 1);
}

static int hex4(const char *s, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return 0;
        *v = *v << 4 | (unsigned)d;
    }
    return 1;
}

/* Push the string literal body s[0..n) (between its quotes) decoded, NULs
 * and all; 0 (nothing pushed) when an escape is malformed: cJSON's parse
 * then fails and names the error. */
static int push_decoded(lua_State *L, const char *s, size_t n)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            luaL_addchar(&b, s[i]);
            continue;
        }
        if (++i >= n)
            goto bad;
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *simple = s[i] ? strchr(from, s[i]) : NULL;
        if (simple) {
            luaL_addchar(&b, to[simple - from]);
            continue;
        }
        unsigned cp, lo;
        if (s[i] != 'u' || i + 4 >= n || !hex4(s + i + 1, &cp))
            goto bad;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair */
            if (i + 6 >= n || s[i + 1] != '\\' || s[i + 2] != 'u' || !hex4(s + i + 3, &lo) || lo < 0xDC00 ||
                lo > 0xDFFF)
                goto bad;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            goto bad;
        }
        char u[4];
        int k = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        static const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
        for (int j = k - 1; j > 0; j--, cp >>= 6)
            u[j] = (char)(0x80 | (cp & 0x3F));
        u[0] = (char)(lead[k] | cp);
        luaL_addlstring(&b, u, (size_t)k);
    }
    luaL_pushresult(&b);
    return 1;
bad:
    luaL_pushresult(&b);
    lua_pop(L, 1);
    return 0;
}

/* Check the text's numbers and UTF-8, and push a table of the numbers'
 * values in document order (cJSON's tree lists them in the same order),
 * then a table of the strings (keys and values) in document order: false,
 * or the decoded string when it holds \u0000. */
static void scan(lua_State *L, const char *s, size_t len)
{
    lua_newtable(L);
    lua_newtable(L);
    lua_Integer k = 0, ks = 0;
    char tok[512];
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') {
            size_t start = i + 1;
            int nul = 0;
            for (i++; i < len && s[i] != '"'; i++) {
                if (s[i] == '\\') {
                    if (i + 5 < len && memcmp(s + i, "\\u0000", 6) == 0)
                        nul = 1;
                    i++;
                } else if ((unsigned char)s[i] < 0x20) {
                    decode_error(L, "a control character in a string (RFC 8259 wants it escaped)", s, s + i);
                } else if ((unsigned char)s[i] >= 0x80) {
                    size_t n = utf8_seq((const unsigned char *)s + i, len - i);
                    if (n == 0)
                        decode_error(L, "invalid UTF-8", s, s + i);
                    i += n - 1;
                }
            }
            if (!(nul && i <= len && push_decoded(L, s + start, i - start)))
                lua_pushboolean(L, 0);
            lua_rawseti(L, -2, ++ks);
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9') || c == '+' || c == '.') {
            size_t j = i;
            while (j < len && strchr("+-0123456789.eE", s[j]) && s[j])
                j++;
            int integral;
            if (!number_ok(s + i, j - i, &integral) || j - i >= sizeof tok) {
                snprintf(tok, sizeof tok, "bad number '%.*s'", (int)(j - i < 40 ? j - i : 40), s + i);
                decode_error(L, tok, s, s + i);
            }
            memcpy(tok, s + i, j - i);
            tok[j - i] = '\0';
            char *end;
            errno = 0;
            long long v = integral ? strtoll(tok, &end, 10) : 0;
            if (integral && errno == 0 && !(v == 0 && tok[0] == '-')) /* -0 stays a float */
                lua_pushinteger(L, (lua_Integer)v);
            else
                lua_pushnumber(L, strtod(tok, &end)); /* past int64: a float, as JSON readers do */
            lua_rawseti(L, -3, ++k);
            i = j;
        } else if (c >= 0x80) {
            decode_error(L, "invalid character outside a string", s, s + i);
        } else {
            i++;
        }
    }
}

static int tree_gc(lua_State *L)
{
    cJSON **box = luaL_checkudata(L, 1, TREE_MT);
    if (*box) {
        cJSON_Delete(*box);
        *box = NULL;
    }
    return 0;
}

/* Push string number *ks + 1 of the document: the one scan decoded, else
 * cJSON's. */
static void push_string(lua_State *L, int strs, lua_Integer *ks, const char *cjson)
{
    if (lua_rawgeti(L, strs, ++*ks) != LUA_TSTRING) {
        lua_pop(L, 1);
        lua_pushstring(L, cjson);
    }
}

/* Push the Lua value of item; nums (an absolute index) holds the numbers,
 * *k counts those used; strs the strings scan decoded (nums + 1), *ks
 * counts the strings passed. */
static void push_item(lua_State *L, const cJSON *item, int nums, lua_Integer *k, int depth)
{
    lua_Integer *ks = k + 1;
    luaL_checkstack(L, 4, "json.decode: nested too deep");
    if (depth > MAX_DEPTH)
        luaL_error(L, "json.decode: nested deeper than %d", MAX_DEPTH);
    if (cJSON_IsNumber(item)) {
        lua_rawgeti(L, nums, ++*k);
    } else if (cJSON_IsString(item)) {
        push_string(L, nums + 1, ks, item->valuestring);
    } else if (cJSON_IsTrue(item) || cJSON_IsFalse(item)) {
        lua_pushboolean(L, cJSON_IsTrue(item));
    } else if (cJSON_IsArray(item)) {
        lua_createtable(L, cJSON_GetArraySize(item), 0);
        luaL_setmetatable(L, ARRAY_MT);
        lua_Integer i = 0;
        for (const cJSON *c = item->child; c; c = c->next) {
            if (cJSON_IsNull(c))
                lua_pushnumber(L, NAN);
            else
                push_item(L, c, nums, k, depth + 1);
            lua_rawseti(L, -2, ++i);
        }
    } else if (cJSON_IsObject(item)) {
        lua_createtable(L, 0, cJSON_GetArraySize(item));
        for (const cJSON *c = item->child; c; c = c->next) {
            push_string(L, nums + 1, ks, c->string); /* the key, before its value in the text */
            if (cJSON_IsNull(c)) {
                lua_pop(L, 1);
                continue;
            }
            push_item(L, c, nums, k, depth + 1);
            lua_rawset(L, -3);
        }
    } else {
        lua_pushnil(L); /* null */
    }
}

/* Whether at lies inside a string literal of s (at its opening quote too). */
static int in_string(const char *s, const char *at)
{
    int in = 0;
    for (const char *p = s; p < at; p++) {
        if (in && *p == '\\')
            p++;
        else if (*p == '"')
            in = !in;
    }
    return in || *at == '"';
}

static int l_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    if (memchr(s, '\0', len))
        return decode_error(L, "NUL byte", s, memchr(s, '\0', len));
    scan(L, s, len);
    int nums = lua_gettop(L) - 1; /* the numbers, then the strings */
    cJSON **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    luaL_setmetatable(L, TREE_MT);
    const char *end = NULL;
    *box = cJSON_ParseWithOpts(s, &end, 1);
    if (!*box) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        if (!at || at < s || at > s + len)
            at = s + len;
        const char *what = "invalid JSON";
        if (at == s + len)
            what = strspn(s, " \t\r\n") == len ? "no value" : "invalid JSON (truncated?)";
        else if (in_string(s, at))
            what = "invalid string (a bad escape, a lone UTF-16 surrogate or a control character)";
        return decode_error(L, what, s, at);
    }
    lua_Integer k[2] = {0, 0}; /* numbers, strings passed */
    push_item(L, *box, nums, k, 0);
    cJSON_Delete(*box);
    *box = NULL;
    return 1;
}

/* ------------------------------------------------------------------------
 * Encoding
 * ---------------------------------------------------------------------- */

/* The text grows in a userdata at a fixed stack slot (buf), replaced by a
 * larger copy when full: Lua's luaL_Buffer wants the stack top to itself,
 * and the encoder pushes values while it writes; a Lua error (a bad value,
 * out of memory) leaves nothing to free. */
typedef struct {
    lua_State *L;
    int buf;
    char *data;
    size_t len, cap;
    int indent;
    char path[256]; /* where we are, for errors: .a.b[3] */
} enc;

typedef struct {
    const char *s;
    size_t n;
} key;

static int encode_error(enc *e, const char *what)
{
    return luaL_error(e->L, "json.encode: %s at %s", what, e->path[0] ? e->path : "the top");
}

static void put(enc *e, const char *s, size_t n)
{
    if (e->len + n > e->cap) {
        size_t cap = e->cap * 2 > e->len + n ? e->cap * 2 : e->len + n + 256;
        char *d = lua_newuserdatauv(e->L, cap, 0);
        memcpy(d, e->data, e->len);
        lua_replace(e->L, e->buf);
        e->data = d;
        e->cap = cap;
    }
    memcpy(e->data + e->len, s, n);
    e->len += n;
}

static void puts_(enc *e, const char *s) { put(e, s, strlen(s)); }

static void add_string(enc *e, const char *s, size_t n)
{
    put(e, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            put(e, esc, 2);
        } else if (c < 0x20) {
            static const char short_esc[] = "btn\0fr"; /* \b \t \n, \f \r */
            char u[8];
            if (c >= 8 && c <= 13 && c != 11)
                snprintf(u, sizeof u, "\\%c", short_esc[c - 8]);
            else
                snprintf(u, sizeof u, "\\u%04x", c);
            puts_(e, u);
        } else if (c < 0x80) {
            put(e, s + i, 1);
        } else {
            size_t k = utf8_seq((const unsigned char *)s + i, n - i);
            if (k == 0)
                encode_error(e, "a string is not valid UTF-8");
            put(e, s + i, k);
            i += k - 1;
        }
    }
    put(e, "\"", 1);
}

static void add_number(enc *e, int idx)
{
    lua_State *L = e->L;
    char s[48];
    if (lua_isinteger(L, idx)) {
        snprintf(s, sizeof s, LUA_INTEGER_FMT, lua_tointeger(L, idx));
    } else {
        double v = lua_tonumber(L, idx);
        if (!isfinite(v)) {
            puts_(e, "null");
            return;
        }
        for (int prec = 15; prec <= 17; prec++) { /* the shortest that reads back exactly */
            snprintf(s, sizeof s, "%.*g", prec, v);
            if (strtod(s, NULL) == v)
                break;
        }
        if (!strpbrk(s, ".eE"))
            strcat(s, ".0");
    }
    puts_(e, s);
}

static void newline(enc *e, int depth)
{
    if (!e->indent)
        return;
    put(e, "\n", 1);
    for (int i = 0; i < depth; i++)
        put(e, "  ", 2);
}

static int cmp_keys(const void *a, const void *b)
{
    const key *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static void add_value(enc *e, int idx, int depth);

/* The table at idx: n >= 0 when it is an array 1..n, -1 when an object;
 * an error for any other key. */
static lua_Integer table_kind(enc *e, int idx)
{
    lua_State *L = e->L;
    lua_Integer count = 0, max = 0;
    int strings = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) {
            strings = 1;
        } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
            count++;
            if (lua_tointeger(L, -1) > max)
                max = lua_tointeger(L, -1);
        } else {
            encode_error(e, lua_pushfstring(L, "a table key that is neither a string nor an index 1..n (a %s)",
                                            luaL_typename(L, -1)));
        }
    }
    if (strings && count > 0)
        encode_error(e, "a table with both string keys and an array part");
    if (count > 0 && count != max)
        encode_error(e, "an array with holes (nil inside; use NaN to keep a place)");
    if (strings)
        return -1;
    if (count > 0)
        return count;
    int marked = 0; /* empty: an object unless marked json.array */
    if (lua_getmetatable(L, idx)) {
        luaL_getmetatable(L, ARRAY_MT);
        marked = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    return marked ? 0 : -1;
}

static void add_array(enc *e, int idx, lua_Integer n, int depth, size_t plen)
{
    lua_State *L = e->L;
    int flat = 1; /* arrays of plain values stay on one line */
    for (lua_Integer i = 1; i <= n && flat; i++) {
        flat = lua_rawgeti(L, idx, i) != LUA_TTABLE;
        lua_pop(L, 1);
    }
    put(e, "[", 1);
    for (lua_Integer i = 1; i <= n; i++) {
        if (i > 1)
            put(e, ",", 1);
        if (!flat)
            newline(e, depth + 1);
        snprintf(e->path + plen, sizeof e->path - plen, "[%lld]", (long long)i);
        lua_rawgeti(L, idx, i);
        add_value(e, lua_gettop(L), depth + 1);
        lua_pop(L, 1);
    }
    if (!flat && n > 0)
        newline(e, depth);
    put(e, "]", 1);
}

static void add_object(enc *e, int idx, int depth, size_t plen)
{
    lua_State *L = e->L;
    /* keys sorted; the strings stay alive as keys of the table */
    size_t nk = 0, cap = 16;
    key *keys = lua_newuserdatauv(L, cap * sizeof *keys, 0);
    int keys_idx = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int skip = lua_type(L, -1) == LUA_TFUNCTION; /* methods are not data */
        lua_pop(L, 1);
        if (skip)
            continue;
        if (nk == cap) {
            key *bigger = lua_newuserdatauv(L, 2 * cap * sizeof *keys, 0);
            memcpy(bigger, keys, cap * sizeof *keys);
            lua_replace(L, keys_idx);
            keys = bigger;
            cap *= 2;
        }
        keys[nk].s = lua_tolstring(L, -1, &keys[nk].n);
        nk++;
    }
    qsort(keys, nk, sizeof *keys, cmp_keys);
    put(e, "{", 1);
    for (size_t i = 0; i < nk; i++) {
        if (i > 0)
            put(e, ",", 1);
        newline(e, depth + 1);
        add_string(e, keys[i].s, keys[i].n);
        puts_(e, e->indent ? ": " : ":");
        snprintf(e->path + plen, sizeof e->path - plen, ".%.*s", (int)keys[i].n, keys[i].s);
        lua_pushlstring(L, keys[i].s, keys[i].n);
        lua_rawget(L, idx);
        add_value(e, lua_gettop(L), depth + 1);
        lua_pop(L, 1);
    }
    if (nk > 0)
        newline(e, depth);
    put(e, "}", 1);
    lua_pop(L, 1); /* keys */
}

static void add_value(enc *e, int idx, int depth)
{
    lua_State *L = e->L;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        puts_(e, "null");
        break;
    case LUA_TBOOLEAN:
        puts_(e, lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TNUMBER:
        add_number(e, idx);
        break;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        add_string(e, s, n);
        break;
    }
    case LUA_TTABLE: {
        if (depth >= MAX_DEPTH)
            encode_error(e, "tables nested too deep (a cycle?)");
        luaL_checkstack(L, 8, "json.encode: nested too deep");
        size_t plen = strlen(e->path);
        lua_Integer n = table_kind(e, idx);
        if (n >= 0)
            add_array(e, idx, n, depth, plen);
        else
            add_object(e, idx, depth, plen);
        e->path[plen] = '\0';
        break;
    }
    default: {
        const char *name = luaL_typename(L, idx);
        if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) /* a tensor, a file: say which */
            name = lua_tostring(L, -1);
        encode_error(e, lua_pushfstring(L, "cannot encode a %s", name));
    }
    }
}

static int l_encode(lua_State *L)
{
    luaL_checkany(L, 1);
    enc e = {.L = L, .cap = 256};
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        static const char *const keys[] = {"indent", NULL};
        sr_lua_check_keys(L, 2, "json.encode", keys);
        lua_getfield(L, 2, "indent");
        e.indent = lua_toboolean(L, -1);
    }
    lua_settop(L, 1);
    e.data = lua_newuserdatauv(L, e.cap, 0);
    e.buf = lua_gettop(L);
    add_value(&e, 1, 0);
    lua_pushlstring(L, e.data, e.len);
    return 1;
}

/* json.array(t) / json.object(t) -> t, marked (or unmarked) as an array. */
static int l_array(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    luaL_setmetatable(L, ARRAY_MT);
    return 1;
}

static int l_object(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_pushnil(L);
    lua_setmetatable(L, 1);
    return 1;
}

static const luaL_Reg json_funcs[] = {
    {"encode", l_encode}, {"decode", l_decode}, {"array", l_array}, {"object", l_object}, {NULL, NULL},
};

void sr_lua_open_json(lua_State *L)
{
    luaL_newmetatable(L, ARRAY_MT);
    lua_pushliteral(L, "json.array");
    lua_setfield(L, -2, "__name");
    lua_pop(L, 1);
    luaL_newmetatable(L, TREE_MT);
    lua_pushcfunction(L, tree_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    luaL_newlib(L, json_funcs);
    /* require "srgeo.json" finds it too */
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, "srgeo.json");
    lua_pop(L, 1);
    lua_setfield(L, -2, "json");
}
