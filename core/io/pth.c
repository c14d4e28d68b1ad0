/* pth.c - PyTorch zip checkpoints through a restricted unpickler (see pth.h). */
#include "io/pth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/error.h"
#include "base/fsutil.h"

static const size_t elem_size[SR_ST_NDTYPES] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};

/* The globals a state_dict pickle may name; nothing else resolves. */
enum { G_ODICT, G_REBUILD_TENSOR, G_REBUILD_PARAM, G_STORAGE };
static const struct {
    const char *module, *name;
    int role;
    sr_st_dtype dtype;
} allowed[] = {
    {"collections", "OrderedDict", G_ODICT, 0},
    {"torch._utils", "_rebuild_tensor_v2", G_REBUILD_TENSOR, 0},
    {"torch._utils", "_rebuild_parameter", G_REBUILD_PARAM, 0},
    {"torch", "DoubleStorage", G_STORAGE, SR_ST_F64},
    {"torch", "FloatStorage", G_STORAGE, SR_ST_F32},
    {"torch", "HalfStorage", G_STORAGE, SR_ST_F16},
    {"torch", "BFloat16Storage", G_STORAGE, SR_ST_BF16},
    {"torch", "LongStorage", G_STORAGE, SR_ST_I64},
    {"torch", "IntStorage", G_STORAGE, SR_ST_I32},
    {"torch", "ShortStorage", G_STORAGE, SR_ST_I16},
    {"torch", "CharStorage", G_STORAGE, SR_ST_I8},
    {"torch", "ByteStorage", G_STORAGE, SR_ST_U8},
    {"torch", "BoolStorage", G_STORAGE, SR_ST_BOOL},
};
#define N_ALLOWED ((int)(sizeof allowed / sizeof allowed[0]))

void sr_pth_close(sr_pth_file *f)
{
    for (int64_t i = 0; i < f->nvalues; i++) {
        sr_pv *v = f->values[i];
        free(v->items);
        free(v->s);
        free(v->t);
        free(v);
    }
    free(f->values);
    free(f->storages);
    free(f->archive);
    sr_zip_close(&f->zip);
    memset(f, 0, sizeof *f);
}

/* --- the unpickler ------------------------------------------------------- */

typedef struct up {
    sr_pth_file *f;
    const unsigned char *p;
    size_t n, pos, op_pos;
    sr_pv **stack;
    int sp;
    int marks[SR_PTH_MAX_MARKS];
    int nmarks;
    sr_pv **memo;
    int64_t nmemo, memo_len; /* slots allocated; entries put */
} up;

static int up_fail(up *u, const char *what)
{
    return sr_fail("pth %s: data.pkl offset %zu: %s", u->f->zip.path, u->op_pos, what);
}

static sr_pv *new_value(up *u, sr_pv_kind kind)
{
    sr_pth_file *f = u->f;
    if (f->nvalues >= SR_PTH_MAX_VALUES) {
        up_fail(u, "more than SR_PTH_MAX_VALUES values");
        return NULL;
    }
    if (f->nvalues == f->cap_values) {
        int64_t cap = f->cap_values ? 2 * f->cap_values : 256;
        sr_pv **nv = realloc(f->values, sizeof *nv * (size_t)cap);
        if (!nv) {
            up_fail(u, "out of memory");
            return NULL;
        }
        f->values = nv;
        f->cap_values = cap;
    }
    sr_pv *v = calloc(1, sizeof *v);
    if (!v) {
        up_fail(u, "out of memory");
        return NULL;
    }
    v->kind = kind;
    f->values[f->nvalues++] = v;
    return v;
}

static int add_item(up *u, sr_pv *c, sr_pv *x)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        if (cap > (1 << 28))
            return up_fail(u, "container too large");
        sr_pv **ni = realloc(c->items, sizeof *ni * (size_t)cap);
        if (!ni)
            return up_fail(u, "out of memory");
        c->items = ni;
        c->cap = cap;
    }
    c->items[c->n++] = x;
    return 0;
}

static int push(up *u, sr_pv *v)
{
    if (!v)
        return -1;
    if (u->sp >= SR_PTH_MAX_STACK)
        return up_fail(u, "stack deeper than SR_PTH_MAX_STACK (4096): refused");
    u->stack[u->sp++] = v;
    return 0;
}

static sr_pv *pop(up *u)
{
    int floor = u->nmarks ? u->marks[u->nmarks - 1] : 0;
    if (u->sp <= floor) {
        up_fail(u, "stack underflow");
        return NULL;
    }
    return u->stack[--u->sp];
}

static sr_pv *top(up *u)
{
    int floor = u->nmarks ? u->marks[u->nmarks - 1] : 0;
    if (u->sp <= floor) {
        up_fail(u, "stack underflow");
        return NULL;
    }
    return u->stack[u->sp - 1];
}

/* Items since the last mark: [*first, sp); pops the mark. */
static int pop_mark(up *u, int *first)
{
    if (u->nmarks == 0)
        return up_fail(u, "no MARK to pop to");
    *first = u->marks[--u->nmarks];
    return 0;
}

static int need(up *u, size_t k)
{
    if (u->n - u->pos < k)
        return up_fail(u, "truncated pickle");
    return 0;
}

static uint64_t le(const unsigned char *p, int k)
{
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static sr_pv *make_tuple(up *u, int first)
{
    sr_pv *t = new_value(u, SR_PV_TUPLE);
    if (!t)
        return NULL;
    for (int i = first; i < u->sp; i++)
        if (add_item(u, t, u->stack[i]))
            return NULL;
    u->sp = first;
    return t;
}

static int make_str(up *u, size_t len)
{
    if (need(u, len))
        return -1;
    sr_pv *v = new_value(u, SR_PV_STR);
    if (!v || !(v->s = malloc(len + 1)))
        return up_fail(u, "out of memory");
    memcpy(v->s, u->p + u->pos, len);
    v->s[len] = 0;
    v->len = len;
    u->pos += len;
    return push(u, v);
}

static int make_int(up *u, int64_t i)
{
    sr_pv *v = new_value(u, SR_PV_INT);
    if (!v)
        return -1;
    v->i = i;
    return push(u, v);
}

static int resolve_global(up *u, const char *module, size_t mlen, const char *name, size_t nlen)
{
    for (int g = 0; g < N_ALLOWED; g++)
        if (strlen(allowed[g].module) == mlen && strlen(allowed[g].name) == nlen &&
            memcmp(allowed[g].module, module, mlen) == 0 && memcmp(allowed[g].name, name, nlen) == 0) {
            sr_pv *v = new_value(u, SR_PV_GLOBAL);
            if (!v)
                return -1;
            v->i = g;
            return push(u, v);
        }
    return sr_fail("pth %s: data.pkl offset %zu: global %.*s.%.*s is not allowed (a state_dict needs only "
                   "collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter and "
                   "torch.*Storage; nothing is ever called or imported)", u->f->zip.path, u->op_pos,
                   (int)(mlen > 200 ? 200 : mlen), module, (int)(nlen > 200 ? 200 : nlen), name);
}

static int is_global(const sr_pv *v, int role) { return v->kind == SR_PV_GLOBAL && allowed[v->i].role == role; }

/* BINPERSID: ('storage', torch.XStorage, 'KEY', 'LOCATION', NUMEL). */
static int persistent_load(up *u)
{
    sr_pv *pid = pop(u);
    if (!pid)
        return -1;
    sr_pth_file *f = u->f;
    if (pid->kind != SR_PV_TUPLE || pid->n != 5 || pid->items[0]->kind != SR_PV_STR ||
        strcmp(pid->items[0]->s, "storage") != 0 || !is_global(pid->items[1], G_STORAGE) ||
        pid->items[2]->kind != SR_PV_STR || pid->items[3]->kind != SR_PV_STR || pid->items[4]->kind != SR_PV_INT)
        return up_fail(u, "BINPERSID: the persistent id is not ('storage', torch.XStorage, 'KEY', 'LOCATION', "
                          "NUMEL)");
    const char *key = pid->items[2]->s;
    sr_st_dtype dt = allowed[pid->items[1]->i].dtype;
    int64_t numel = pid->items[4]->i;
    if (numel < 0 || numel > SR_MAX_ELEMS)
        return sr_fail("pth %s: storage '%s' has %lld elements (0 to 2^40)", f->zip.path, key, (long long)numel);
    if (pid->items[2]->len == 0 || pid->items[2]->len > 64 || strlen(key) != pid->items[2]->len ||
        strchr(key, '/'))
        return up_fail(u, "BINPERSID: storage key must be 1 to 64 bytes without '/' or NUL");
    sr_pv *v = new_value(u, SR_PV_STORAGE);
    if (!v)
        return -1;
    for (int s = 0; s < f->nstorages; s++) /* the same storage again (not memoised) */
        if (strcmp(f->storages[s].entry->name + strlen(f->archive) + 6, key) == 0) {
            if (f->storages[s].dtype != dt || f->storages[s].numel != numel)
                return sr_fail("pth %s: storage '%s' appears with two types or sizes", f->zip.path, key);
            v->i = s;
            return push(u, v);
        }
    char name[SR_ZIP_MAX_NAME + 80];
    snprintf(name, sizeof name, "%s/data/%s", f->archive, key);
    const sr_zip_entry *e = sr_zip_find(&f->zip, name);
    if (!e)
        return sr_fail("pth %s: storage '%s' has no entry %s in the archive", f->zip.path, key, name);
    if (e->usize != (uint64_t)numel * elem_size[dt])
        return sr_fail("pth %s: storage '%s' holds %lld %s elements (%llu bytes) but its entry %s has %llu bytes",
                       f->zip.path, key, (long long)numel, sr_st_dtype_name(dt),
                       (unsigned long long)numel * elem_size[dt], name, (unsigned long long)e->usize);
    if (f->nstorages == f->cap_storages) {
        int cap = f->cap_storages ? 2 * f->cap_storages : 64;
        sr_pth_storage *ns = realloc(f->storages, sizeof *ns * (size_t)cap);
        if (!ns)
            return up_fail(u, "out of memory");
        f->storages = ns;
        f->cap_storages = cap;
    }
    f->storages[f->nstorages] = (sr_pth_storage){.entry = e, .dtype = dt, .numel = numel};
    v->i = f->nstorages++;
    return push(u, v);
}

static int int_tuple(const sr_pv *t, int64_t *out, int *n)
{
    if (t->kind != SR_PV_TUPLE || t->n > SR_MAXDIM)
        return -1;
    for (int i = 0; i < t->n; i++) {
        if (t->items[i]->kind != SR_PV_INT)
            return -1;
        out[i] = t->items[i]->i;
    }
    *n = t->n;
    return 0;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks [, metadata]) */
static sr_pv *rebuild_tensor(up *u, const sr_pv *a)
{
    sr_pth_file *f = u->f;
    sr_pth_tensor t = {0};
    int ns = -1, nt = -2;
    if (a->n < 6 || a->n > 7 || a->items[0]->kind != SR_PV_STORAGE || a->items[1]->kind != SR_PV_INT ||
        int_tuple(a->items[2], t.shape, &ns) || int_tuple(a->items[3], t.stride, &nt) || ns != nt ||
        a->items[4]->kind != SR_PV_BOOL) {
        up_fail(u, "_rebuild_tensor_v2 takes (storage, offset, size tuple, stride tuple of the same length, "
                   "requires_grad, hooks) here");
        return NULL;
    }
    const sr_pth_storage *st = &f->storages[a->items[0]->i];
    t.storage = (int)a->items[0]->i;
    t.ndim = ns;
    t.offset = a->items[1]->i;
    int64_t count;
    for (int d = 0; d < ns; d++)
        if (t.shape[d] < 0 || t.stride[d] < 0) {
            up_fail(u, "_rebuild_tensor_v2: negative size or stride");
            return NULL;
        }
    if (sr_shape_count("pth tensor", ns, t.shape, &count)) {
        sr_fail_context("pth %s: data.pkl offset %zu", f->zip.path, u->op_pos);
        return NULL;
    }
    /* offset + Σ (size_i − 1)·stride_i < numel, without overflow. */
    if (count > 0) {
        uint64_t numel = (uint64_t)st->numel, last = (uint64_t)t.offset;
        int ok = t.offset >= 0 && last < numel;
        for (int d = 0; ok && d < ns; d++)
            if (t.shape[d] > 1 && t.stride[d] > 0) {
                uint64_t k = (uint64_t)t.shape[d] - 1, s = (uint64_t)t.stride[d];
                if (k > (numel - 1 - last) / s)
                    ok = 0;
                else
                    last += k * s;
            }
        if (!ok) {
            sr_fail("pth %s: data.pkl offset %zu: a tensor (offset %lld, %d dims) reaches past its storage of %lld "
                    "elements", f->zip.path, u->op_pos, (long long)t.offset, ns, (long long)st->numel);
            return NULL;
        }
    } else if (t.offset < 0 || t.offset > st->numel) {
        up_fail(u, "_rebuild_tensor_v2: offset outside the storage");
        return NULL;
    }
    sr_pv *v = new_value(u, SR_PV_TENSOR);
    if (!v || !(v->t = malloc(sizeof *v->t))) {
        up_fail(u, "out of memory");
        return NULL;
    }
    *v->t = t;
    return v;
}

static int reduce(up *u)
{
    sr_pv *args = pop(u), *fn = args ? pop(u) : NULL;
    if (!fn)
        return -1;
    if (fn->kind != SR_PV_GLOBAL)
        return up_fail(u, "REDUCE of a value that is not an allowed global");
    if (args->kind != SR_PV_TUPLE)
        return up_fail(u, "REDUCE arguments are not a tuple");
    switch (allowed[fn->i].role) {
    case G_ODICT:
        if (args->n != 0)
            return up_fail(u, "REDUCE collections.OrderedDict takes () here");
        return push(u, new_value(u, SR_PV_DICT));
    case G_REBUILD_TENSOR:
        return push(u, rebuild_tensor(u, args));
    case G_REBUILD_PARAM: /* (tensor, requires_grad, hooks): the tensor */
        if (args->n != 3 || args->items[0]->kind != SR_PV_TENSOR || args->items[1]->kind != SR_PV_BOOL)
            return up_fail(u, "_rebuild_parameter takes (tensor, requires_grad, hooks)");
        return push(u, args->items[0]);
    default:
        return sr_fail("pth %s: data.pkl offset %zu: REDUCE of %s.%s is not allowed", u->f->zip.path, u->op_pos,
                       allowed[fn->i].module, allowed[fn->i].name);
    }
}

static int memo_put(up *u, int64_t idx)
{
    sr_pv *v = top(u);
    if (!v)
        return -1;
    if (idx < 0 || idx >= SR_PTH_MAX_MEMO)
        return up_fail(u, "memo index beyond SR_PTH_MAX_MEMO");
    if (idx >= u->nmemo) {
        int64_t cap = u->nmemo ? u->nmemo : 64;
        while (cap <= idx)
            cap *= 2;
        sr_pv **nm = realloc(u->memo, sizeof *nm * (size_t)cap);
        if (!nm)
            return up_fail(u, "out of memory");
        memset(nm + u->nmemo, 0, sizeof *nm * (size_t)(cap - u->nmemo));
        u->memo = nm;
        u->nmemo = cap;
    }
    if (!u->memo[idx])
        u->memo_len++;
    u->memo[idx] = v;
    return 0;
}

static int memo_get(up *u, int64_t idx)
{
    if (idx < 0 || idx >= u->nmemo || !u->memo[idx])
        return up_fail(u, "memo get of an index never put");
    return push(u, u->memo[idx]);
}

static int set_items(up *u, int first)
{
    if (first < 1 || (u->sp - first) % 2)
        return up_fail(u, "SETITEMS needs a dict below the mark and key/value pairs");
    sr_pv *d = u->stack[first - 1];
    if (d->kind != SR_PV_DICT)
        return up_fail(u, "SETITEM(S) on a value that is not a dict");
    for (int i = first; i < u->sp; i += 2) {
        sr_pv_kind k = u->stack[i]->kind;
        if (k != SR_PV_STR && k != SR_PV_INT && k != SR_PV_BOOL && k != SR_PV_NONE && k != SR_PV_FLOAT &&
            k != SR_PV_TUPLE)
            return up_fail(u, "dict key of an unhashable kind");
        if (add_item(u, d, u->stack[i]) || add_item(u, d, u->stack[i + 1]))
            return -1;
    }
    u->sp = first;
    return 0;
}

static int append_items(up *u, int first)
{
    if (first < 1)
        return up_fail(u, "APPENDS needs a list below the mark");
    sr_pv *l = u->stack[first - 1];
    if (l->kind != SR_PV_LIST)
        return up_fail(u, "APPEND(S) on a value that is not a list");
    for (int i = first; i < u->sp; i++)
        if (add_item(u, l, u->stack[i]))
            return -1;
    u->sp = first;
    return 0;
}

static int run(up *u)
{
    char msg[96];
    while (u->pos < u->n) {
        if ((u->pos & 0xffff) == 0 && sr_interrupted())
            return -1;
        u->op_pos = u->pos;
        unsigned char op = u->p[u->pos++];
        const unsigned char *a = u->p + u->pos;
        int first = 0;
        sr_pv *v, *w;
        switch (op) {
        case 0x80: /* PROTO */
            if (need(u, 1))
                return -1;
            if (a[0] < 2 || a[0] > 5)
                return up_fail(u, "pickle protocol outside 2..5");
            u->pos++;
            break;
        case 0x95: /* FRAME: a length hint */
            if (need(u, 8))
                return -1;
            u->pos += 8;
            break;
        case '.': /* STOP */
            if (u->sp != 1 || u->nmarks != 0)
                return up_fail(u, "STOP with other than one value on the stack");
            u->f->root = u->stack[0];
            return 0;
        case '(':
            if (u->nmarks >= SR_PTH_MAX_MARKS)
                return up_fail(u, "MARKs nested deeper than SR_PTH_MAX_MARKS (1024): refused");
            u->marks[u->nmarks++] = u->sp;
            break;
        case '0': /* POP */
            if (!pop(u))
                return -1;
            break;
        case '}':
            if (push(u, new_value(u, SR_PV_DICT)))
                return -1;
            break;
        case ']':
            if (push(u, new_value(u, SR_PV_LIST)))
                return -1;
            break;
        case ')':
            if (push(u, new_value(u, SR_PV_TUPLE)))
                return -1;
            break;
        case 't':
            if (pop_mark(u, &first) || push(u, make_tuple(u, first)))
                return -1;
            break;
        case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
            int k = op - 0x84, floor = u->nmarks ? u->marks[u->nmarks - 1] : 0;
            if (u->sp - floor < k)
                return up_fail(u, "TUPLEn: stack underflow");
            if (push(u, make_tuple(u, u->sp - k)))
                return -1;
            break;
        }
        case 'X':
            if (need(u, 4) || make_str(u, (u->pos += 4, (size_t)le(a, 4))))
                return -1;
            break;
        case 0x8c:
            if (need(u, 1) || make_str(u, (u->pos += 1, (size_t)a[0])))
                return -1;
            break;
        case 'J':
            if (need(u, 4) || make_int(u, (int32_t)(uint32_t)le(a, 4)))
                return -1;
            u->pos += 4;
            break;
        case 'K':
            if (need(u, 1) || make_int(u, a[0]))
                return -1;
            u->pos += 1;
            break;
        case 'M':
            if (need(u, 2) || make_int(u, (int64_t)le(a, 2)))
                return -1;
            u->pos += 2;
            break;
        case 0x8a: { /* LONG1 */
            if (need(u, 1))
                return -1;
            int k = a[0];
            if (k > 8)
                return up_fail(u, "LONG1 of more than 8 bytes");
            if (need(u, 1 + (size_t)k))
                return -1;
            uint64_t x = le(a + 1, k);
            if (k > 0 && k < 8 && (a[k] & 0x80))
                x |= ~(uint64_t)0 << (8 * k); /* sign-extend */
            if (make_int(u, (int64_t)x))
                return -1;
            u->pos += 1 + (size_t)k;
            break;
        }
        case 'G': {
            if (need(u, 8))
                return -1;
            uint64_t bits = 0;
            for (int i = 0; i < 8; i++)
                bits = bits << 8 | a[i];
            if (!(v = new_value(u, SR_PV_FLOAT)))
                return -1;
            memcpy(&v->f, &bits, 8);
            if (push(u, v))
                return -1;
            u->pos += 8;
            break;
        }
        case 0x88: case 0x89:
            if (!(v = new_value(u, SR_PV_BOOL)))
                return -1;
            v->i = op == 0x88;
            if (push(u, v))
                return -1;
            break;
        case 'N':
            if (push(u, new_value(u, SR_PV_NONE)))
                return -1;
            break;
        case 'q':
            if (need(u, 1) || memo_put(u, a[0]))
                return -1;
            u->pos += 1;
            break;
        case 'r':
            if (need(u, 4) || memo_put(u, (int64_t)le(a, 4)))
                return -1;
            u->pos += 4;
            break;
        case 'h':
            if (need(u, 1) || memo_get(u, a[0]))
                return -1;
            u->pos += 1;
            break;
        case 'j':
            if (need(u, 4) || memo_get(u, (int64_t)le(a, 4)))
                return -1;
            u->pos += 4;
            break;
        case 0x94: /* MEMOIZE: at the memo's length, as pickle does */
            if (memo_put(u, u->memo_len))
                return -1;
            break;
        case 's':
            if (u->sp - (u->nmarks ? u->marks[u->nmarks - 1] : 0) < 3)
                return up_fail(u, "SETITEM: stack underflow");
            if (set_items(u, u->sp - 2))
                return -1;
            break;
        case 'u':
            if (pop_mark(u, &first) || set_items(u, first))
                return -1;
            break;
        case 'a':
            if (u->sp - (u->nmarks ? u->marks[u->nmarks - 1] : 0) < 2)
                return up_fail(u, "APPEND: stack underflow");
            if (append_items(u, u->sp - 1))
                return -1;
            break;
        case 'e':
            if (pop_mark(u, &first) || append_items(u, first))
                return -1;
            break;
        case 'c': { /* GLOBAL module\nname\n */
            const unsigned char *nl1 = memchr(a, '\n', u->n - u->pos);
            const unsigned char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(u->p + u->n - nl1 - 1)) : NULL;
            if (!nl2)
                return up_fail(u, "GLOBAL without two lines");
            if (resolve_global(u, (const char *)a, (size_t)(nl1 - a), (const char *)nl1 + 1,
                               (size_t)(nl2 - nl1 - 1)))
                return -1;
            u->pos = (size_t)(nl2 + 1 - u->p);
            break;
        }
        case 0x93: /* STACK_GLOBAL */
            if (!(w = pop(u)) || !(v = pop(u)))
                return -1;
            if (v->kind != SR_PV_STR || w->kind != SR_PV_STR)
                return up_fail(u, "STACK_GLOBAL of values that are not strings");
            if (resolve_global(u, v->s, v->len, w->s, w->len))
                return -1;
            break;
        case 'R':
            if (reduce(u))
                return -1;
            break;
        case 'b': /* BUILD: a dict's attributes (state_dict._metadata): dropped */
            if (!(w = pop(u)) || !(v = top(u)))
                return -1;
            if (v->kind != SR_PV_DICT || (w->kind != SR_PV_DICT && w->kind != SR_PV_NONE))
                return up_fail(u, "BUILD only sets a dict's attributes from a dict here");
            break;
        case 'Q':
            if (persistent_load(u))
                return -1;
            break;
        default:
            snprintf(msg, sizeof msg, "opcode 0x%02x%s%c%s is not allowed (restricted unpickler)", op,
                     op >= 32 && op < 127 ? " ('" : "", op >= 32 && op < 127 ? op : ' ',
                     op >= 32 && op < 127 ? "')" : "");
            return up_fail(u, msg);
        }
    }
    return up_fail(u, "no STOP: truncated pickle");
}

/* --- the archive ---------------------------------------------------------- */

static int load(sr_pth_file *f)
{
    sr_zip *z = &f->zip;
    const sr_zip_entry *pkl = NULL;
    for (int i = 0; i < z->n; i++) {
        const char *nm = z->entries[i].name, *slash = strchr(nm, '/');
        if (slash && strcmp(slash, "/data.pkl") == 0) {
            if (pkl)
                return sr_fail("pth %s: two data.pkl entries (%s, %s)", z->path, pkl->name, nm);
            pkl = &z->entries[i];
        }
    }
    if (!pkl)
        return sr_fail("pth %s: no ARCHIVE/data.pkl entry: not a torch.save file (TorchScript and the legacy "
                       "pre-1.6 format are not read)", z->path);
    size_t alen = strlen(pkl->name) - strlen("/data.pkl");
    if (!(f->archive = strndup(pkl->name, alen)))
        return sr_fail("pth %s: out of memory", z->path);
    char name[SR_ZIP_MAX_NAME + 16];
    snprintf(name, sizeof name, "%s/byteorder", f->archive);
    const sr_zip_entry *bo = sr_zip_find(z, name);
    const unsigned char *d;
    void *owned;
    if (bo) {
        if (sr_zip_read(z, bo, &d, &owned))
            return -1;
        int little = bo->usize == 6 && memcmp(d, "little", 6) == 0;
        free(owned);
        if (!little)
            return sr_fail("pth %s: byteorder is not 'little' (big-endian checkpoints are not read)", z->path);
    }
    if (sr_zip_read(z, pkl, &d, &owned))
        return -1;
    up u = {.f = f, .p = d, .n = (size_t)pkl->usize};
    u.stack = malloc(sizeof *u.stack * SR_PTH_MAX_STACK);
    int rc = u.stack ? run(&u) : sr_fail("pth %s: out of memory", z->path);
    free(u.stack);
    free(u.memo);
    free(owned);
    return rc;
}

int sr_pth_open(sr_pth_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    if (sr_zip_open(&f->zip, path)) {
        /* A bare pickle (PROTO 2, then LONG1's magic number) is the pre-1.6
         * torch.save format: say so.  Peeked through sr_fs_open_regular (a
         * FIFO never waits for a writer); the zip reader's message is kept
         * for anything else. */
        char why[512];
        snprintf(why, sizeof why, "%s", sr_errmsg());
        unsigned char head[3] = {0};
        FILE *fp = sr_fs_open_regular(path, "pth");
        int legacy = fp && fread(head, 1, 3, fp) == 3 && head[0] == 0x80 && head[1] == 2 && head[2] == 0x8a;
        if (fp)
            fclose(fp);
        sr_fail("%s", why);
        if (legacy)
            return sr_fail("pth %s: a bare pickle, the legacy (PyTorch < 1.6) torch.save format: not read (its "
                           "storages follow the pickle in a layout only torch.load knows); convert it once with "
                           "scripts/convert_torch.py where PyTorch is installed", path);
        return sr_fail_context("pth %s", path);
    }
    if (load(f)) {
        sr_pth_close(f);
        return -1;
    }
    return 0;
}

int sr_pth_open_memory(sr_pth_file *f, const void *buf, size_t size, const char *label)
{
    memset(f, 0, sizeof *f);
    if (sr_zip_open_memory(&f->zip, buf, size, label))
        return -1;
    if (load(f)) {
        sr_pth_close(f);
        return -1;
    }
    return 0;
}

sr_st_dtype sr_pth_tensor_dtype(const sr_pth_file *f, const sr_pth_tensor *t) { return f->storages[t->storage].dtype; }

int sr_pth_read(const sr_pth_file *f, const sr_pth_tensor *t, sr_tensor *out, sr_dtype dtype)
{
    const sr_pth_storage *st = &f->storages[t->storage];
    if (sr_tensor_alloc(out, dtype, t->ndim, t->shape))
        return sr_fail_context("pth %s", f->zip.path);
    const unsigned char *d;
    void *owned;
    if (sr_zip_read(&f->zip, st->entry, &d, &owned))
        return -1;
    int64_t n = sr_numel(out), idx[SR_MAXDIM] = {0}, at = t->offset;
    float *o32 = dtype == SR_F32 ? sr_f32(out) : NULL;
    double *o64 = dtype == SR_F64 ? sr_f64(out) : NULL;
    /* Row-major walk of the (possibly strided) view: contiguous output. */
    for (int64_t i = 0; i < n; i++) {
        double x = sr_st_load(d, st->dtype, at);
        if (o32)
            o32[i] = (float)x;
        else
            o64[i] = x;
        for (int dd = t->ndim - 1; dd >= 0; dd--) {
            at += t->stride[dd];
            if (++idx[dd] < t->shape[dd])
                break;
            at -= t->stride[dd] * t->shape[dd];
            idx[dd] = 0;
        }
    }
    free(owned);
    return 0;
}
