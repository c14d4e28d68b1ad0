/* lua/markdown.c - srgeo.markdown: GitHub-flavoured Markdown through
 * cmark-gfm (the notebook reports and the output-folder index).
 *
 *   html = srgeo.markdown.html(text [, {image = function(url) -> url, raw_html = true}])
 *   blocks = srgeo.markdown.code_blocks(text)
 *
 * CommonMark with GitHub's extensions: pipe tables, ~~strikethrough~~,
 * autolinks, task lists and footnotes.  The HTML is safe by default: raw
 * HTML in the text becomes the comment <!-- raw HTML omitted --> (an
 * <img onerror>, <svg onbegin> or <details ontoggle> in a notebook ran its
 * script in the reader's browser), a link or image whose destination has a
 * scheme other than http, https or mailto (javascript:, vbscript:, file:,
 * data: but for PNG, GIF, JPEG and WebP images) gets an empty one, and an
 * image from elsewhere (http:, //host) becomes a link to it unless image
 * decides.  raw_html = true, for text you trust, passes raw HTML and every
 * destination through, but for the tags GitHub's tag filter disarms
 * (<script>, <style>, <iframe>, <textarea>, <title>, ...).  image, when
 * given, is called with the destination of every image (after the checks)
 * and returns the one to use (a data: URI of a local file, say), false to
 * show a link to it instead (a remote image in a report that loads
 * nothing), or nil to keep it.  Invalid UTF-8 becomes U+FFFD.
 *
 * code_blocks lists the document's top-level code blocks, as CommonMark
 * reads them (``` and ~~~ fences, indented blocks; a fence inside a list
 * item or a quote is not top-level), each {info =, code =, fenced =,
 * line =, last_line =}: the info string ("lua norun"), the code without
 * its fences and indentation, and the 1-based lines the block spans
 * (fences included).  The notebook runner splits a notebook with it.
 */
#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <ctype.h>
#include <string.h>

#include "lua/aux.h"
#include "lua/open.h"

#define DOC_MT "srgeo.markdown_doc"

/* What one call allocates, owned by a userdata on the stack, so an error at
 * any point (a failing image callback, a memory error) frees it through
 * __gc. */
typedef struct {
    cmark_parser *parser;
    cmark_node *doc;
    char *html;
} md_doc;

static void md_free(md_doc *d)
{
    if (d->html)
        cmark_get_default_mem_allocator()->free(d->html);
    if (d->doc)
        cmark_node_free(d->doc);
    if (d->parser)
        cmark_parser_free(d->parser);
    d->html = NULL;
    d->doc = NULL;
    d->parser = NULL;
}

static int md_gc(lua_State *L)
{
    md_free(luaL_checkudata(L, 1, DOC_MT));
    return 0;
}

static const char *const EXTENSIONS[] = {"table", "strikethrough", "autolink", "tagfilter", "tasklist", NULL};

/* An image node as a link to the same destination around its alt text. */
static int image_to_link(cmark_node *img)
{
    cmark_node *link = cmark_node_new(CMARK_NODE_LINK);
    if (!link || !cmark_node_set_url(link, cmark_node_get_url(img)))
        return -1;
    cmark_node *c;
    while ((c = cmark_node_first_child(img)))
        cmark_node_append_child(link, c);
    cmark_node_replace(img, link);
    cmark_node_free(img);
    return 0;
}

/* What a link or image destination is, for the safe mode.  Bytes up to
 * space are skipped first, as browsers skip them ("java\tscript:"). */
enum { URL_LOCAL, URL_REMOTE, URL_IMAGE_DATA, URL_BAD };

static int url_kind(const char *url)
{
    char head[32];
    size_t n = 0;
    for (const char *p = url ? url : ""; *p && n < sizeof head - 1; p++)
        if ((unsigned char)*p > ' ')
            head[n++] = (char)tolower((unsigned char)*p);
    head[n] = 0;
    if (head[0] == '/' && head[1] == '/')
        return URL_REMOTE; /* //host/x: another site, by the page's scheme */
    size_t k = 0;
    while (k < n && (isalnum((unsigned char)head[k]) || head[k] == '+' || head[k] == '-' || head[k] == '.'))
        k++;
    if (k == 0 || k == n || head[k] != ':' || !isalpha((unsigned char)head[0]))
        return URL_LOCAL; /* no scheme: a path relative to the page */
    head[k] = 0;
    if (!strcmp(head, "http") || !strcmp(head, "https") || !strcmp(head, "mailto"))
        return URL_REMOTE;
    if (!strcmp(head, "data")) {
        static const char *const ok[] = {"image/png", "image/gif", "image/jpeg", "image/webp"};
        for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
            if (!strncmp(head + k + 1, ok[i], strlen(ok[i])))
                return URL_IMAGE_DATA;
    }
    return URL_BAD;
}

/* The safe mode on a parsed document: raw HTML nodes become a comment, a
 * destination of a bad kind an empty one.  Only literals and URLs change,
 * so the walk can go on over the nodes it changes. */
static void disarm(lua_State *L, cmark_node *doc)
{
    cmark_iter *it = cmark_iter_new(doc);
    cmark_event_type ev;
    int oom = 0;
    while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
        cmark_node *node = cmark_iter_get_node(it);
        if (ev != CMARK_EVENT_ENTER)
            continue;
        cmark_node_type t = cmark_node_get_type(node);
        if (t == CMARK_NODE_HTML_BLOCK)
            oom |= !cmark_node_set_literal(node, "<!-- raw HTML omitted -->\n");
        else if (t == CMARK_NODE_HTML_INLINE)
            oom |= !cmark_node_set_literal(node, "<!-- raw HTML omitted -->");
        else if ((t == CMARK_NODE_LINK || t == CMARK_NODE_IMAGE) && url_kind(cmark_node_get_url(node)) == URL_BAD)
            oom |= !cmark_node_set_url(node, "");
    }
    cmark_iter_free(it);
    if (oom)
        luaL_error(L, "markdown: out of memory");
}

/* The document's images (only those from elsewhere when remote_only) as a
 * Lua list of light userdata pushed on the stack; their count.  Collected
 * first because replacing nodes during a walk would derail the iterator. */
static int collect_images(lua_State *L, cmark_node *doc, int remote_only)
{
    lua_newtable(L);
    int list = lua_gettop(L), n = 0;
    cmark_iter *it = cmark_iter_new(doc);
    cmark_event_type ev;
    while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
        cmark_node *node = cmark_iter_get_node(it);
        if (ev == CMARK_EVENT_ENTER && cmark_node_get_type(node) == CMARK_NODE_IMAGE &&
            (!remote_only || url_kind(cmark_node_get_url(node)) == URL_REMOTE)) {
            lua_pushlightuserdata(L, node);
            lua_rawseti(L, list, ++n);
        }
    }
    cmark_iter_free(it);
    return n;
}

/* Safe mode without an image function: an image from elsewhere becomes a
 * link to it, so the page loads nothing (collected first, as replacing a
 * node would derail the walk). */
static void remote_images_to_links(lua_State *L, cmark_node *doc)
{
    int list = lua_gettop(L) + 1, n = collect_images(L, doc, 1);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, list, i);
        cmark_node *img = lua_touserdata(L, -1);
        lua_pop(L, 1);
        if (image_to_link(img))
            luaL_error(L, "markdown: out of memory");
    }
    lua_pop(L, 1);
}

/* Call the function at fn with each image's destination: a string result
 * replaces it, false makes the image a link to it, nil keeps it.  The images
 * are collected first (a Lua list of light userdata at the top of the
 * stack), since replacing nodes during a walk would derail the iterator. */
static void rewrite_images(lua_State *L, cmark_node *doc, int fn)
{
    int list = lua_gettop(L) + 1, n = collect_images(L, doc, 0);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, list, i);
        cmark_node *img = lua_touserdata(L, -1);
        lua_pop(L, 1);
        const char *url = cmark_node_get_url(img);
        lua_pushvalue(L, fn);
        lua_pushstring(L, url ? url : "");
        lua_call(L, 1, 1); /* an error unwinds; the document is freed by its owner's __gc */
        int t = lua_type(L, -1);
        if (t == LUA_TSTRING) {
            if (!cmark_node_set_url(img, lua_tostring(L, -1)))
                luaL_error(L, "markdown: out of memory");
        } else if (t == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
            if (image_to_link(img))
                luaL_error(L, "markdown: out of memory");
        } else if (t != LUA_TNIL) {
            luaL_error(L, "markdown.html: opts.image must return a string, false or nil, got a %s", luaL_typename(L, -1));
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* A new parser with the extensions attached, owned by a new doc userdata
 * (pushed). */
static md_doc *new_doc(lua_State *L, int options)
{
    md_doc *d = lua_newuserdatauv(L, sizeof *d, 0);
    *d = (md_doc){0};
    luaL_setmetatable(L, DOC_MT);
    cmark_gfm_core_extensions_ensure_registered();
    d->parser = cmark_parser_new(options);
    if (!d->parser)
        luaL_error(L, "markdown: out of memory");
    for (const char *const *e = EXTENSIONS; *e; e++) {
        cmark_syntax_extension *ext = cmark_find_syntax_extension(*e);
        if (!ext || !cmark_parser_attach_syntax_extension(d->parser, ext))
            luaL_error(L, "markdown: cmark-gfm has no '%s' extension", *e);
    }
    return d;
}

static const char *check_text(lua_State *L, const char *op, size_t *len)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        luaL_error(L, "%s: the text must be a string, got a %s", op, luaL_typename(L, 1));
    return lua_tolstring(L, 1, len);
}

static void parse(lua_State *L, md_doc *d, const char *text, size_t len)
{
    cmark_parser_feed(d->parser, text, len);
    d->doc = cmark_parser_finish(d->parser);
    if (!d->doc)
        luaL_error(L, "markdown: cmark-gfm could not parse the text (%zu bytes)", len);
}

static int l_html(lua_State *L)
{
    size_t len;
    const char *text = check_text(L, "markdown.html", &len);
    static const char *const keys[] = {"image", "raw_html", NULL};
    sr_lua_check_keys(L, 2, "markdown.html", keys);
    int raw = sr_lua_opt_boolean(L, 2, "markdown.html", "raw_html", 0);
    int fn = 0;
    if (lua_istable(L, 2)) {
        lua_getfield(L, 2, "image");
        if (!lua_isnil(L, -1) && !lua_isfunction(L, -1))
            return luaL_error(L, "markdown.html: image must be a function(url) -> url, got a %s", luaL_typename(L, -1));
        fn = lua_isnil(L, -1) ? 0 : lua_gettop(L);
    }
    /* cmark-gfm's own safe mode would also blank the data:image/svg+xml URI
     * of a local SVG figure: the safe mode is done on the tree instead
     * (disarm), and the renderer prints what is left. */
    int options = CMARK_OPT_FOOTNOTES | CMARK_OPT_VALIDATE_UTF8 | CMARK_OPT_UNSAFE;

    md_doc *d = new_doc(L, options);
    parse(L, d, text, len);
    if (!raw)
        disarm(L, d->doc);
    if (fn)
        rewrite_images(L, d->doc, fn);
    else if (!raw)
        remote_images_to_links(L, d->doc);
    d->html = cmark_render_html(d->doc, options, cmark_parser_get_syntax_extensions(d->parser));
    if (!d->html)
        return luaL_error(L, "markdown: out of memory");
    lua_pushstring(L, d->html);
    md_free(d);
    return 1;
}

static int l_code_blocks(lua_State *L)
{
    size_t len;
    const char *text = check_text(L, "markdown.code_blocks", &len);
    md_doc *d = new_doc(L, CMARK_OPT_SOURCEPOS);
    parse(L, d, text, len);
    lua_newtable(L);
    int k = 0;
    for (cmark_node *n = cmark_node_first_child(d->doc); n; n = cmark_node_next(n)) {
        if (cmark_node_get_type(n) != CMARK_NODE_CODE_BLOCK)
            continue;
        lua_createtable(L, 0, 5);
        const char *info = cmark_node_get_fence_info(n), *code = cmark_node_get_literal(n);
        lua_pushstring(L, info ? info : "");
        lua_setfield(L, -2, "info");
        size_t clen = code ? strlen(code) : 0;
        lua_pushlstring(L, code ? code : "", clen && code[clen - 1] == '\n' ? clen - 1 : clen);
        lua_setfield(L, -2, "code");
        int flen, foff;
        char fch;
        lua_pushboolean(L, cmark_node_get_fenced(n, &flen, &foff, &fch));
        lua_setfield(L, -2, "fenced");
        lua_pushinteger(L, cmark_node_get_start_line(n));
        lua_setfield(L, -2, "line");
        lua_pushinteger(L, cmark_node_get_end_line(n));
        lua_setfield(L, -2, "last_line");
        lua_rawseti(L, -2, ++k);
    }
    return 1;
}

void sr_lua_open_markdown(lua_State *L)
{
    static const luaL_Reg meta[] = {{"__gc", md_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"html", l_html}, {"code_blocks", l_code_blocks}, {NULL, NULL}};
    sr_lua_new_class(L, DOC_MT, meta, NULL);
    luaL_newlib(L, funcs);
    lua_setfield(L, -2, "markdown");
}
