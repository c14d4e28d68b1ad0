-- notebook_spec.lua: srgeo's HTML pages: srgeo.markdown (cmark-gfm), the
-- notebook runner and its reports, and the output-folder index (srgeo
-- report), checked as files and in headless Chromium (console errors, a
-- screenshot, and a layout probe: wide tables and outputs scroll inside the
-- page instead of being cut, every image decodes).
local T = ...
local srgeo = require "srgeo"
local util = require "srgeo.util"
local json = require "srgeo.json"
local N = require "srgeo.notebook"

local ROOT = "build/test-notebooks"
local read = T.read
local function exists(path) return read(path) ~= nil end

local sh = T.sh

local function exe() return T.shell() or "build/srgeo" end

local function write_nb(name, text)
  util.mkdir(ROOT)
  local path = ROOT .. "/" .. name .. ".md"
  util.write_atomic(path, text)
  return path
end

-- ---------------------------------------------------------------------------
-- Headless Chromium (installed by scripts/install-deps.sh --test)

local browser = dofile("tests/lua/chromium.lua")(T, ROOT)
local CHROMIUM, chromium_or_skip, chromium = browser.PATH, browser.or_skip, browser.run
local screenshot, layout, abspath = browser.screenshot, browser.layout, browser.abspath

-- ---------------------------------------------------------------------------
-- srgeo.markdown

T.test("markdown: cmark-gfm renders indented code, nested lists, ~~~ fences, raw HTML, entities, tables", function()
  local text = [[
# Title &amp; more

    srgeo scripts/notebook.lua notebooks/x.md

- a
  - nested b
  - nested c
- d

~~~sh
make test
~~~

raw <b>bold</b>, &amp; once, &copy; &#x2192; <script>alert(1)</script> ~~gone~~

| model | peak |
|---|--:|
| a | 1.2 |

- [x] done
]]
  local html = srgeo.markdown.html(text, { raw_html = true })
  T.truthy(html:find("<pre><code>srgeo scripts/notebook.lua notebooks/x.md\n</code></pre>", 1, true), "indented code block:\n" .. html)
  T.truthy(html:find("<li>a\n<ul>\n<li>nested b</li>\n<li>nested c</li>\n</ul>\n</li>", 1, true), "nested list:\n" .. html)
  T.truthy(html:find('<pre><code class="language-sh">make test\n</code></pre>', 1, true), "~~~ fence")
  T.truthy(html:find("<h1>Title &amp; more</h1>", 1, true), "an entity is not escaped twice")
  T.truthy(html:find("raw <b>bold</b>, &amp; once, © →", 1, true), "raw HTML passes, entities decode:\n" .. html)
  T.truthy(html:find("&lt;script>alert(1)&lt;/script>", 1, true), "GitHub's tag filter disarms <script>")
  T.truthy(html:find("<del>gone</del>", 1, true) and html:find('<td align="right">1.2</td>', 1, true), "strikethrough, table")
  T.truthy(html:find('<input type="checkbox" checked="" disabled="" />', 1, true), "task list")
  T.eq(srgeo.markdown.html("a <b>x</b>", { raw_html = false }), "<p>a <!-- raw HTML omitted -->x<!-- raw HTML omitted --></p>\n")
  T.eq(srgeo.markdown.html("a <b>x</b>"), "<p>a <!-- raw HTML omitted -->x<!-- raw HTML omitted --></p>\n", "safe by default")
  T.truthy(srgeo.markdown.html(text):find("raw <!-- raw HTML omitted -->bold<!-- raw HTML omitted -->, &amp; once, © →", 1, true))
  -- images: the callback rewrites each destination (string), makes a link (false) or keeps it (nil)
  local seen = {}
  html = srgeo.markdown.html("![one](a.png) ![two *x*](http://h/b.png) ![three](c.png)", { image = function(u)
    seen[#seen + 1] = u
    if u == "a.png" then return "data:a" elseif u:find("^http") then return false end
  end })
  T.eq(table.concat(seen, " "), "a.png http://h/b.png c.png")
  T.truthy(html:find('<img src="data:a" alt="one" />', 1, true) and html:find('<img src="c.png" alt="three" />', 1, true), html)
  T.truthy(html:find('<a href="http://h/b.png">two <em>x</em></a>', 1, true), "false: a link instead:\n" .. html)
  T.raises(function() srgeo.markdown.html("![a](b)", { image = function() error("no image here") end }) end, "no image here")
  T.raises(function() srgeo.markdown.html("![a](b)", { image = function() return 3 end }) end,
    "markdown.html: opts.image must return a string, false or nil, got a number")
  T.raises(function() srgeo.markdown.html("x", { imag = 1 }) end, "markdown.html: unknown option 'imag'")
  T.raises(function() srgeo.markdown.html(nil) end, "markdown.html: the text must be a string, got a nil")
  T.eq(srgeo.markdown.html("\255x"), "<p>\239\191\189x</p>\n", "invalid UTF-8 becomes U+FFFD")
end)

T.test("html: Markdown with local images inlined, remote and missing ones as links, headings with ids", function()
  local H = require "srgeo.html"
  util.mkdir(ROOT .. "/md")
  srgeo.image.save(ROOT .. "/md/dot.png", srgeo.rand({ 1, 3, 8, 8 }, 1))
  local html = H.markdown("# Same\n\n## Same\n\n![dot](dot.png) ![far](https://example.com/x.png) ![gone](nope.png)",
    ROOT .. "/md")
  T.truthy(html:find('<h1 id="same">Same</h1>', 1, true) and html:find('<h2 id="same-2">Same</h2>', 1, true), html)
  T.truthy(html:find('<img src="data:image/png;base64,iVBORw0KGgo', 1, true), "local image inlined")
  T.truthy(html:find('<a href="https://example.com/x.png">far</a>', 1, true), "remote image: a link, nothing loaded")
  T.truthy(html:find('<a href="nope.png">gone</a>', 1, true), "missing image: a link")
  T.eq(H.escape([[<a href="x">&</a>]]), "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;")
  T.eq(H.base64("Man"), "TWFu"); T.eq(H.base64("Ma"), "TWE="); T.eq(H.base64("M"), "TQ==")
  T.eq(H.base64(""), "")
end)

T.test("markdown: code_blocks lists the top-level code blocks with their lines, as CommonMark reads them", function()
  local text = "# T\n\n```lua\nx = 1\n```\n\n- item\n\n  ```lua\n  nested()\n  ```\n\n    indented\n\n~~~lua norun\ny\n~~~\n\n"
    .. "````lua\n```\nz\n````\n\n```lua\nunclosed\n"
  local b = srgeo.markdown.code_blocks(text)
  local got = {}
  for i, x in ipairs(b) do got[i] = string.format("%s|%s|%d-%d|%s", x.info, tostring(x.fenced), x.line, x.last_line, x.code) end
  T.eq(table.concat(got, "\n"), table.concat({ "lua|true|3-5|x = 1", "lua norun|true|15-17|y", "lua|true|19-22|```\nz",
    "lua|true|24-25|unclosed" }, "\n"))
  T.eq(#srgeo.markdown.code_blocks("    indented only\n"), 1)
  T.eq(srgeo.markdown.code_blocks("    indented only\n")[1].fenced, false)
end)

-- ---------------------------------------------------------------------------
-- notebooks

local FIG_NB = [[
# Figure notebook

Text with *emphasis*, `code` and a table:

| model | peak |
|---|---:|
| a | 1.2 |

```lua
X = srgeo.data.noise{n = 3, shape = {1, 8, 8}, seed = 1}
m = srgeo.models.mlp{hidden = {8}, input = {1, 8, 8}, seed = 1}
p = srgeo.profile(m, X, {preset = "quick", directions = 8, nscales = 5, bootstrap = 20, progress = false})
print("images:", p.n_images)
io.write("written <b>not html</b>\n")
```

```lua
srgeo.plot.profile(p, {out = OUT .. "/fig.png"})
return p.n_images * 2
```

```lua norun
error("shown, not run")
```
]]

T.test("notebook: blocks share a state, output captured, figure inlined as a PNG data URI", function()
  local path = write_nb("fig", FIG_NB)
  local out = ROOT .. "/fig_out"
  local print0, write0, plot0 = print, io.write, srgeo.plot.profile
  local r = N.run(path, { out = out, quiet = true })
  T.eq(r.ok, true); T.eq(r.figures, 1)
  T.eq(print, print0, "print restored"); T.eq(io.write, write0, "io.write restored")
  T.eq(srgeo.plot.profile, plot0, "srgeo.plot.profile restored")
  local html = read(r.html)
  T.truthy(html:find('<img alt="fig.png" src="data:image/png;base64,iVBORw0KGgo', 1, true), "inlined PNG")
  T.truthy(html:find("images:\t3", 1, true), "print output")
  T.truthy(html:find("written &lt;b&gt;not html&lt;/b&gt;", 1, true), "io.write output, escaped")
  T.truthy(html:find('<td align="right">1.2</td>', 1, true), "pipe table")
  T.truthy(html:find("<em>emphasis</em>", 1, true))
  T.truthy(not html:find('src="http', 1, true) and not html:find('href="http', 1, true) and not html:find("<script", 1, true),
    "no external resources, no scripts")
  T.truthy(html:find('<pre><code class="language-lua">error(&quot;shown, not run&quot;)', 1, true), "norun block shown as code")
  T.eq(select(2, html:gsub('class="cell', "")), 2, "two cells ran")
  T.truthy(html:find("<title>Figure notebook</title>", 1, true), "title from the first heading")
  local md = read(r.md)
  T.truthy(md:find("```text\n6\n```", 1, true), "returned value in the Markdown copy:\n" .. md)
  T.truthy(md:find("![fig.png](fig.png)", 1, true), "figure linked in the Markdown copy")
end)

T.test("notebook: like Jupyter: a final expression shows its value, plots without out appear inline", function()
  local path = write_nb("jup", [==[
# Values

```lua
x = 21
x * 2
```

```lua
t = {1, 2, a = "b"}
t
```

```lua
tostring(x + 1);
```

```lua
local function f() return nil end
f()
```

```lua
io.write("written\n")
```

```lua
srgeo.tensor{{1, 2}, {3, 4}}:size()
```

```lua
string.format("%d-%s",
  x,
  "multi")
```

```lua
p = srgeo.profile(srgeo.models.mlp{hidden = {8}, input = {1, 8, 8}, seed = 1},
  srgeo.data.noise{n = 3, shape = {1, 8, 8}, seed = 1},
  {preset = "quick", directions = 8, nscales = 5, bootstrap = 20, progress = false, label = "tiny"})
srgeo.plot.profile(p)
```

```lua
srgeo.plot.profile({p, p}, {labels = {"a", "b"}})
srgeo.plot.lines({1, 2, 3}, {1, 4, 9})
for i = 1, 2 do print(i) end
```

```lua
-- a comment after the value
srgeo.nn.linear{in_features = 2, out_features = 3}
-- and here
```
]==])
  local out = ROOT .. "/jup_out"
  os.execute("rm -rf " .. out)
  local r = N.run(path, { out = out, quiet = true })
  local c = {}
  for _, cell in ipairs(r.cells) do if cell.run then c[cell.index] = cell end end
  T.eq(c[1].value, "42")
  T.eq(c[2].value, '{1, 2, a="b"}', "a table as the REPL prints it")
  T.eq(c[3].value, nil, "a final ; keeps the value quiet")
  T.eq(c[4].value, nil, "nil shows nothing")
  T.eq(c[5].output, "written\n"); T.eq(c[5].value, nil, "io.write's file is not a value to show")
  table.remove(c, 5)
  T.eq(c[5].value, "(2,2)", "a size")
  T.eq(c[6].value, "21-multi", "an expression over several lines")
  T.eq(c[7].value, nil, "the figure's path is not repeated as a value")
  T.eq(#c[7].figures, 1, "plot.profile without opts.out draws a figure of the block")
  T.eq(c[7].figures[1].path, out .. "/figures/block8_1.png")
  T.truthy(read(c[7].figures[1].path):sub(1, 8) == "\137PNG\r\n\26\n", "a PNG")
  T.eq(#c[8].figures, 2, "two figures in one block")
  T.eq(c[8].output, "1\n2\n")
  T.eq(c[9].value, "linear(2 -> 3)  9", "a module prints its tree")
  local html = read(r.html)
  T.truthy(html:find('<div class="out val"><span class="tag">=</span><pre>42</pre></div>', 1, true), "value shown")
  T.eq(select(2, html:gsub('<div class="fig"><img alt="block', "")), 3, "the three inline figures embedded")
  local md = read(r.md)
  T.truthy(md:find("x * 2\n```\n\n```text\n42\n```", 1, true), md)
  T.truthy(md:find("![block8_1.png](figures/block8_1.png)", 1, true), md)
end)

T.test("notebook: only top-level lua fences run, ~~~ fences too; a fence inside a list is text", function()
  local path = write_nb("fences", "# F\n\n~~~lua\nran = (ran or 0) + 1\n~~~\n\n- a list item with code:\n\n  ```lua\n"
    .. "  error('inside a list: not a block to run')\n  ```\n\nA paragraph.\n\n    -- an indented code block: text\n    error('no')\n\n"
    .. "````lua\nran = ran + 1\nprint('```')\n````\n")
  local r = N.run(path, { out = ROOT .. "/fences_out", quiet = true })
  local runs = {}
  for _, c in ipairs(r.cells) do if c.run then runs[#runs + 1] = c end end
  T.eq(#runs, 2)
  T.eq(runs[2].output, "```\n")
  T.eq(runs[2].line, 18)
  local html = read(r.html)
  T.truthy(html:find("<li>\n<p>a list item with code:</p>\n<pre><code class=\"language-lua\">error('inside a list", 1, true), html)
  T.truthy(html:find("<pre><code>-- an indented code block: text\nerror('no')\n</code></pre>", 1, true), html)
end)

T.test("notebook: an error stops the run, names the block and its first line", function()
  local path = write_nb("bad", "# Bad\n\n```lua\nx = 1\n```\n\nText.\n\n```lua\nlocal y = x + 1\nerror('boom here')\n```\n\n```lua\nprint('never')\n```\n")
  local out = ROOT .. "/bad_out"
  local print0 = print
  local err = T.raises(function() N.run(path, { out = out, quiet = true }) end, "block 2 (line 9: `local y = x + 1`) failed")
  T.eq(print, print0, "print restored after a failing block")
  T.truthy(tostring(err):find("bad.md:11: boom here", 1, true), "message carries the .md line: " .. tostring(err))
  local html = read(out .. "/bad.html")
  T.truthy(html and html:find("stopped at <a href=\"#block-2\">block 2 (line 9)</a>", 1, true) and html:find("not run", 1, true),
    "report shows the error")
  local log, code = sh(exe() .. " scripts/notebook.lua " .. path .. " --out " .. out .. " --quiet")
  T.eq(code, 1, "notebook.lua exit status on error")
  T.truthy(log:find("block 2 (line 9", 1, true), log)
  local syn = write_nb("syn", "```lua\nlocal = 3\n```\n")
  T.raises(function() N.run(syn, { out = ROOT .. "/syn_out", quiet = true }) end, "block 1 (line 1: `local = 3`) failed")
  T.raises(function() N.run(syn, { out = ROOT .. "/syn_out", quiet = true }) end, "syn.md:2: <name> expected near '='")
  -- an error in a block that ends with an expression still names the block and the line
  local ex = write_nb("exprerr", "```lua\nx = 1\n```\n\n```lua\nlocal t = nil\nt.field\n```\n")
  T.raises(function() N.run(ex, { out = ROOT .. "/exprerr_out", quiet = true }) end,
    "block 2 (line 5: `local t = nil`) failed: " .. ROOT .. "/exprerr.md:7: attempt to index a nil value (local 't')")
end)

-- ---------------------------------------------------------------------------
-- Jupyter: .ipynb generated from the Markdown source; parameters; expected time

local function shipped_notebooks()
  local out = {}
  for _, f in ipairs(srgeo._listdir("notebooks") or {}) do
    if f:match("%.md$") then out[#out + 1] = "notebooks/" .. f end
  end
  table.sort(out)
  return out
end

local NBFORMAT_PY = "/usr/bin/python3"
local function nbformat_available()
  local _, code = sh(NBFORMAT_PY .. " -c 'import nbformat' >/dev/null")
  return code == 0
end

T.test("ipynb: every shipped notebook converts md -> ipynb -> md byte-identical, and odd layouts too", function()
  local I = require "srgeo.ipynb"
  local nbs = shipped_notebooks()
  T.truthy(#nbs >= 5, "shipped notebooks: " .. #nbs)
  for _, p in ipairs(nbs) do
    local md = read(p)
    local back = N.from_ipynb(N.to_ipynb(md))
    T.truthy(back == md, p .. ": the round trip changed the file")
  end
  -- leading and trailing empty lines, adjacent blocks, an empty block, an unclosed fence,
  -- CRLF, ~~~ and longer fences with trailing spaces, an indented fence, no final newline
  for _, md in ipairs { "", "x", "\n\n# a\n\n\n```lua\n```\n```lua\nx\n\n```\n\n\n", "```lua\nunclosed\n",
                        "a\r\n\r\n```lua\r\nx\r\n```\r\n", "~~~~lua {parameters}\na = 1\n~~~~~  \ntext",
                        "  ```lua\n  x\n  ```\n", "````lua\nprint('```')\n````\n\n```lua norun\nnot a cell\n```\n" } do
    local back = I.to_markdown(I.from_markdown(md))
    T.truthy(back == md, string.format("%q came back as %q", md, back))
  end
end)

T.test("ipynb: nbformat 4.5 structure: kernelspec srgeo, cell ids, line lists, the parameters cell tagged", function()
  for _, p in ipairs(shipped_notebooks()) do
    local text = N.to_ipynb(read(p))
    local nb = json.decode(text)
    T.eq(nb.nbformat, 4, p); T.eq(nb.nbformat_minor, 5, p)
    T.same(nb.metadata.kernelspec, { name = "srgeo", display_name = "srgeo (Lua 5.4)", language = "lua" })
    T.same(nb.metadata.language_info, { name = "lua", version = "5.4", file_extension = ".lua", mimetype = "text/x-lua" })
    local ids, kinds, tagged = {}, { markdown = 0, code = 0 }, 0
    for i, c in ipairs(nb.cells) do
      T.truthy(kinds[c.cell_type], p .. ": cell type " .. tostring(c.cell_type))
      kinds[c.cell_type] = kinds[c.cell_type] + 1
      T.truthy(type(c.id) == "string" and c.id:match("^[%w_-]+$") and #c.id <= 64 and not ids[c.id], p .. ": cell id " .. tostring(c.id))
      ids[c.id] = true
      T.eq(type(c.source), "table", p .. ": source as a list of lines")
      for j, l in ipairs(c.source) do
        T.truthy(j == #c.source or l:sub(-1) == "\n", p .. ": every line but the last ends in a newline")
        T.truthy(not l:sub(1, -2):find("\n", 1, true), p .. ": one line per item")
      end
      if c.cell_type == "code" then
        T.same(c.outputs, {}, p .. " outputs")
        for _, t in ipairs(c.metadata.tags or {}) do if t == "parameters" then tagged = tagged + 1 end end
      end
      T.truthy(i == 1 or c.cell_type ~= nb.cells[i - 1].cell_type or c.cell_type == "code", "cells alternate")
    end
    T.eq(tagged, 1, p .. ": one cell tagged parameters")
    T.truthy(kinds.code >= 4 and kinds.markdown >= 3, p)
    T.eq(select(2, text:gsub('"execution_count": null', "")), kinds.code, "execution_count null on every code cell")
  end
end)

T.test("ipynb: valid by nbformat's schema (Debian python3-nbformat)", function()
  if not nbformat_available() then T.skip("python3-nbformat not installed for " .. NBFORMAT_PY .. " (install-deps.sh --test)") end
  util.mkdir(ROOT .. "/ipynb")
  local files = {}
  for _, p in ipairs(shipped_notebooks()) do
    local out = ROOT .. "/ipynb/" .. p:match("([^/]+)%.md$") .. ".ipynb"
    util.write_atomic(out, N.to_ipynb(read(p)))
    files[#files + 1] = out
  end
  local log, code = sh(NBFORMAT_PY .. " -c 'import sys, nbformat\nfor f in sys.argv[1:]:\n"
    .. "    nb = nbformat.read(f, as_version=nbformat.NO_CONVERT); nbformat.validate(nb)\n"
    .. "    print(f, nb.nbformat, nb.nbformat_minor, len(nb.cells), \"valid\")' " .. table.concat(files, " "))
  T.eq(code, 0, log)
  T.eq(select(2, log:gsub(" 4 5 %d+ valid", "")), #files, log)
end)

T.test("ipynb: srgeo notebook --to ipynb / --to md from the command line; the Markdown source is not overwritten", function()
  local src = write_nb("conv", "# Conv\n\n```lua {parameters}\nn = 2 -- count\n```\n\nText.\n\n```lua\nprint(n)\n```\n")
  local nbfile, back = ROOT .. "/conv_out.ipynb", ROOT .. "/conv_back.md"
  os.remove(nbfile); os.remove(back)
  local log, code = sh(exe() .. " notebook --to ipynb " .. src .. " -o " .. nbfile)
  T.eq(code, 0, log)
  T.truthy(json.decode(read(nbfile)).nbformat == 4, "an .ipynb written")
  log, code = sh(exe() .. " notebook --to md " .. nbfile .. " -o " .. back)
  T.eq(code, 0, log)
  T.eq(read(back), read(src), "md -> ipynb -> md through the command line")
  -- the default output of --to md is the .md beside it: replaced only when equal or with --force
  local nb2 = ROOT .. "/conv.ipynb"
  util.write_atomic(nb2, read(nbfile):gsub("Text%.", "Edited in Jupyter."))
  log, code = sh(exe() .. " notebook --to md " .. nb2)
  T.eq(code, 1, log)
  T.truthy(log:find("exists and differs", 1, true), log)
  T.truthy(read(src):find("Text.", 1, true), "source kept")
  log, code = sh(exe() .. " notebook --to md " .. nb2 .. " --force")
  T.eq(code, 0, log)
  T.truthy(read(src):find("Edited in Jupyter.", 1, true), "--force replaces it")
  -- an .ipynb runs as its Markdown
  local r = N.run(nbfile, { out = ROOT .. "/conv_run", quiet = true })
  T.eq(r.cells[#r.cells - (r.cells[#r.cells].kind == "text" and 1 or 0)].output, "2\n")
  T.raises(function() N.from_ipynb('{"nbformat": 3, "worksheets": []}') end, "nbformat 3; srgeo reads nbformat 4")
  T.raises(function() N.from_ipynb("[1,") end, "ipynb: not JSON")
end)

local PARAM_NB = "# Params\n\n```lua {parameters}\nn = 2            -- how many\nname = \"a -- b\" -- a string holding --\n"
  .. "scale = 0.5\nloud = false\n```\n\n```lua\nfor i = 1, n do io.write(name, \" \") end\nprint(scale, loud)\n```\n"

T.test("notebook parameters: the block's values are defaults, overrides change what runs, unknown ones are errors", function()
  local path = write_nb("params", PARAM_NB)
  local ps = N.parameters(N.parse(read(path)), path)
  T.eq(#ps, 4)
  T.eq(ps.n.default, 2); T.eq(ps.name.default, "a -- b"); T.eq(ps.name.help, "a string holding --"); T.eq(ps.n.help, "how many")
  T.eq(ps.scale.default, 0.5); T.eq(ps.loud.default, false); T.eq(ps.n.line, 4)
  local function last_output(r) for i = #r.cells, 1, -1 do if r.cells[i].kind == "code" then return r.cells[i].output end end end
  local r = N.run(path, { out = ROOT .. "/params_out", quiet = true })
  T.eq(last_output(r), "a -- b a -- b 0.5\tfalse\n")
  r = N.run(path, { out = ROOT .. "/params_out", quiet = true, params = { n = 3, name = "z", scale = 2, loud = true } })
  T.eq(last_output(r), "z z z 2\ttrue\n")
  T.truthy(read(r.md):find('parameters given: loud = true, n = 3, name = "z", scale = 2', 1, true), "the report says what was given")
  T.raises(function() N.run(path, { quiet = true, params = { images = 4 } }) end,
    "unknown parameter 'images'; its parameters are --n, --name, --scale, --loud")
  T.raises(function() N.run(path, { quiet = true, params = { n = "many" } }) end, "parameter n takes an integer (default 2), got many")
  T.raises(function() N.run(path, { quiet = true, params = { n = 1.5 } }) end, "parameter n takes an integer")
  T.raises(function() N.parameters(N.parse("```lua {parameters}\nx = {1, 2}\n```\n"), "t.md") end,
    "t.md: parameters block, line 2: `x = {1, 2}` is not `name = value -- help`")
  T.raises(function() N.parameters(N.parse("```lua {parameters}\nx = 1\n```\n\n```lua {parameters}\ny = 1\n```\n"), "t.md") end,
    "two parameters blocks (lines 1 and 5)")
  -- from the command line: --NAME VALUE, --help lists them with defaults, an unknown one exits 2 naming them
  local out = ROOT .. "/params_cli"
  local log, code = sh(exe() .. " notebook " .. path .. " --n 4 --name=q --out " .. out)
  T.eq(code, 0, log)
  T.truthy(read(out .. "/params.md"):find("q q q q 0.5\tfalse", 1, true), read(out .. "/params.md"))
  log, code = sh(exe() .. " notebook " .. path .. " --help")
  T.eq(code, 0, log)
  T.truthy(log:find("%-%-n N +how many %[2%]") and log:find("--name VALUE", 1, true) and log:find("[a -- b]", 1, true)
    and log:find("--loud", 1, true), log)
  log, code = sh(exe() .. " notebook " .. path .. " --images 4 --preset quick")
  T.eq(code, 2, log)
  T.truthy(log:find("unknown parameter '--images'; its parameters are --n, --name, --scale, --loud", 1, true), log)
  log, code = sh(exe() .. " notebook " .. path .. " --n lots")
  T.eq(code, 2, log)
  T.truthy(log:find("--n expects a number (got 'lots')", 1, true), log)
end)

T.test("notebook expected run time: printed from the cost model, drives the per-cell time left", function()
  local path = write_nb("expect", "```lua {parameters}\nimages = 4\npreset = \"quick\"\n```\n\n```lua\n"
    .. "srgeo.notebook.expect { profiles = 3, images = images, preset = preset, seconds = { quick = 10 }, measured = \"a test box\" }\n"
    .. "```\n\n```lua\nx = 1\n```\n")
  local out = ROOT .. "/expect_out"
  local r = N.run(path, { out = out, quiet = true })
  T.eq(r.cells[3].output, "expected run time: ~2 min (3 profiles × 4 images × 10 s per image and profile with the quick preset, "
    .. "measured on a test box; profiles already in OUT/units are not recomputed)\n")
  r = N.run(path, { out = out, quiet = true, params = { preset = "paper" } })
  T.truthy(r.cells[3].output:find("expected run time: unknown (3 profiles × 4 images; no recorded cost for the paper preset", 1, true),
    r.cells[3].output)
  local log, code = sh(exe() .. " notebook " .. path .. " --out " .. out .. " --images 1")
  T.eq(code, 0, log)
  T.truthy(log:find("[notebook] expected run time: ~30 s", 1, true), log)
  T.truthy(log:find("[notebook] cell 3/3 (line 10), 0 s so far, ~30 s left", 1, true), log)
  -- every shipped notebook: images and preset parameters, and its expected time printed before the first heavy cell
  for _, p in ipairs(shipped_notebooks()) do
    local cells = N.parse(read(p))
    local ps = N.parameters(cells, p)
    T.truthy(ps.images and ps.preset, p .. ": --images and --preset")
    local expect_at, heavy_at
    for _, c in ipairs(cells) do
      if c.run then
        if not expect_at and c.code:find("srgeo.notebook.expect", 1, true) then expect_at = c.index end
        if not heavy_at and c.code:find("E.new", 1, true) then heavy_at = c.index end
      end
    end
    T.truthy(expect_at and heavy_at and expect_at < heavy_at, p .. ": expect in cell " .. tostring(expect_at)
      .. ", first heavy cell " .. tostring(heavy_at))
    local code = cells[1].code
    for _, c in ipairs(cells) do if c.index == expect_at then code = c.code end end
    T.truthy(code:find("sequential = %d") and code:find("quick = %d"), p .. ": costs recorded for sequential and quick")
  end
end)

T.test("notebook: the report renders in headless Chromium: no console errors, wide tables and outputs scroll", function()
  chromium_or_skip()
  local cols = {}
  for i = 1, 14 do cols[i] = "column " .. i .. " (wide heading)" end
  local path = write_nb("shot", FIG_NB .. "\nA wide table:\n\n| " .. table.concat(cols, " | ") .. " |\n|"
    .. string.rep("---|", #cols) .. "\n| " .. string.rep("1.234 [1.1, 1.3] | ", #cols) .. "\n\n"
    .. "```lua\nprint(string.rep('a wide printed table cell ', 12))\nsrgeo.plot.profile(p)\n```\n")
  local out = ROOT .. "/shot_out"
  local r = N.run(path, { out = out, quiet = true })
  screenshot(r.html, ROOT .. "/shot.png")
  local lay = layout(r.html, 800)
  T.eq(lay.page_wide, false, "the page is no wider than the window")
  local wide = 0
  for _, e in ipairs(lay.els) do
    T.truthy(e.inside, e.tag .. " '" .. e.text .. "' sticks out of the page")
    if e.wide then
      wide = wide + 1
      T.truthy(e.scrolls, e.tag .. " '" .. e.text .. "' is wider than its box and does not scroll (cut off)")
    end
  end
  T.truthy(wide >= 2, "the wide table and the wide output overflow their boxes (and scroll): " .. wide)
  T.eq(#lay.imgs, 2, "two figures")
  for _, w in ipairs(lay.imgs) do T.truthy(w > 100, "every figure decodes (natural width " .. w .. ")") end
end)

-- ---------------------------------------------------------------------------
-- hostile Markdown: the report runs no script and loads nothing

local BAD_TAGS = { script = 1, iframe = 1, object = 1, embed = 1, svg = 1, math = 1, form = 1, base = 1, link = 1,
  frame = 1, frameset = 1, applet = 1, audio = 1, video = 1, source = 1, animate = 1, set = 1, textarea = 1, style = 1 }

local function entities(v)
  return (v:gsub("&#[xX](%x+);?", function(h) return utf8.char(tonumber(h, 16)) end)
    :gsub("&#(%d+);?", function(d) return utf8.char(tonumber(d)) end)
    :gsub("&quot;", '"'):gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&amp;", "&"))
end

-- What in a page could run a script or load from elsewhere: a tag that
-- can, an on* attribute, a script URL, an image or resource not inlined.
-- The page's own <style> in its head is the one style allowed.
local function unsafe_html(html)
  local bad = {}
  local body = html:gsub("^.-</head>", "")
  for tag, attrs in body:gmatch("<(%a[%w:-]*)([^>]*)>") do
    local t = tag:lower()
    local where = "<" .. tag .. attrs:sub(1, 60) .. ">"
    if BAD_TAGS[t] then bad[#bad + 1] = "tag " .. where end
    if t == "meta" or (t == "input" and not attrs:find('type="checkbox"', 1, true)) then bad[#bad + 1] = "tag " .. where end
    -- the attributes as a browser reads them: name, name=value, "value" or 'value'
    local list, i = {}, 1
    while true do
      local s, e, name = attrs:find("^[%s/]*([^%s/>=\"']+)", i)
      if not s then break end
      i = e + 1
      local v = ""
      local s2, e2, q = attrs:find("^%s*=%s*([\"']?)", i)
      if s2 then
        local close = q ~= "" and q or "[%s>]"
        local e3 = q ~= "" and attrs:find(q, e2 + 1, true) or attrs:find(close, e2 + 1) or #attrs + 1
        v = attrs:sub(e2 + 1, e3 - 1)
        i = e3 + (q ~= "" and 1 or 0)
      end
      list[#list + 1] = { name, v }
    end
    for _, a in ipairs(list) do
      local name, v = a[1]:lower(), a[2]
      if name:find("^on") then bad[#bad + 1] = "event handler " .. where end
      local u = entities(v):gsub("[%z\1-\32]", ""):lower()
      local scheme = u:match("^(%a[%w+.-]*):")
      if name == "href" then
        if scheme and scheme ~= "http" and scheme ~= "https" and scheme ~= "mailto" then bad[#bad + 1] = "href " .. where end
      elseif name == "src" then
        if u:find("^//") or (scheme and not u:find("^data:image/")) then bad[#bad + 1] = "src " .. where end
      elseif name == "action" or name == "formaction" or name == "data" or name == "srcdoc" or name == "xlink:href"
        or name == "style" then
        bad[#bad + 1] = name .. " " .. where
      end
    end
  end
  return bad
end

-- 42 payloads of tests/lua/hostile_files.lua (img onerror, svg onbegin,
-- details ontoggle, script and iframe tags, javascript: links in every
-- spelling, remote images ...): each through srgeo.markdown.html (safe by
-- default) and srgeo.html.markdown, then all of them in one notebook whose
-- blocks also print HTML; the report holds no script, no handler, no script
-- URL and nothing remote, and in headless Chromium no script runs.
T.test("notebook: hostile Markdown (raw HTML, event handlers, javascript: and remote URLs) runs no script", function()
  local hostile = dofile("tests/lua/hostile_files.lua")
  local H = require "srgeo.html"
  local cases = hostile.markdown()
  T.truthy(#cases >= 40, "payloads: " .. #cases)
  local parts = { "# Hostile `<notebook>` & co\n" }
  for _, c in ipairs(cases) do
    for _, html in ipairs { srgeo.markdown.html(c[2]), H.markdown(c[2], ROOT) } do
      local bad = unsafe_html(html)
      T.truthy(#bad == 0, c[1] .. ": " .. table.concat(bad, "; ") .. "\n" .. html)
    end
    parts[#parts + 1] = "## " .. c[1] .. "\n\n" .. c[2] .. "\n"
  end
  -- trusted text may keep raw HTML (raw_html = true); GitHub's tag filter still disarms <script>
  T.truthy(srgeo.markdown.html("<b>x</b><script>y</script>", { raw_html = true }):find("<b>x</b>&lt;script>y&lt;/script>", 1, true))
  parts[#parts + 1] = "```lua\nprint('<img src=x onerror=\"document.documentElement.className=1\">')\n"
    .. "return '<script>document.documentElement.className=2</script>'\n```\n"
  parts[#parts + 1] = "After the block.\n\n```lua\nprint(1)\n```\n\n<!-- an unclosed comment swallows the rest\n\n```lua\nprint('last block')\n```\n"
  local path = write_nb("hostile", table.concat(parts, "\n"))
  local r = N.run(path, { out = ROOT .. "/hostile_out", quiet = true })
  local html = read(r.html)
  local bad = unsafe_html(html)
  T.truthy(#bad == 0, table.concat(bad, "\n"))
  T.truthy(html:find("&lt;img src=x onerror=", 1, true), "printed HTML is shown as text")
  T.truthy(html:find("<title>Hostile &lt;notebook&gt; &amp; co</title>", 1, true), "title escaped")
  T.eq(select(2, html:gsub('<div class="cell"', "")), 2, "every block is placed (the fence in the unclosed comment is not one)")
  T.truthy(html:find("<pre>1\n</pre>", 1, true) and not html:find("last block", 1, true), "the comment swallows the rest")
  T.truthy(not html:find("srgeocell", 1, true), "no placeholder left")
  if not exists(CHROMIUM) then return end
  local dom = chromium("--virtual-time-budget=3000 --dump-dom file://" .. abspath(r.html))
  T.truthy(dom:find("Hostile", 1, true), "Chromium loaded the report:\n" .. dom:sub(1, 500))
  T.truthy(not dom:find('class="pwned"', 1, true) and not dom:find('<html lang="en" class=', 1, true), "a script ran")
end)

-- ---------------------------------------------------------------------------
-- the output-folder index (srgeo report DIR, scripts/report.lua)

local index = require "srgeo.index"

-- A tree of two runs (one in a folder whose name needs URL-encoding), a
-- notebook report, a broken results.json and a stray folder.
local function index_tree()
  local root = ROOT .. "/tree"
  os.execute("rm -rf " .. root)
  local E = require "srgeo.experiment"
  local function run(out, models)
    local ex = E.new { out = out, preset = "quick", images = 3, directions = 8, nscales = 5, bootstrap = 20, quiet = true }
    ex.argv = { "--out", out }
    local ps = {}
    for i, m in ipairs(models) do ps[i] = ex:profile(m, "noise:3") end
    ex:figure("bump", srgeo.plot.profile, ps, { title = E.title("noise:3", ex) })
    ex:figure("bump_peak", srgeo.plot.descriptors, ps, { field = "plateau", min_points = 1 }) -- a chart even of one value
    ex:finish()
  end
  run(root .. "/first", { "mlp{hidden={8},input={1,8,8}}@init" })
  run(root .. "/sweeps/odd name #2", { "a=mlp{hidden={8},input={1,8,8}}@init", "b=mlp{hidden={8},input={1,8,8}}@init:3" })
  util.mkdir(root .. "/broken")
  util.write_atomic(root .. "/broken/results.json", '{"format": "srgeo.experiment/1", "units": [')
  util.mkdir(root .. "/empty/deeper")
  N.run(write_nb("tree_nb", "# A `<notebook>` & more\n\n```lua\n1 + 1\n```\n"), { out = root .. "/notebooks/tree_nb", quiet = true })
  return root
end

local function url_decode(s) return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)) end

T.test("report: an index of every run, its figures, units' identity and descriptors, linking to its files", function()
  local root = index_tree()
  local r = index.write(root)
  T.eq(r.path, root .. "/index.html"); T.eq(r.runs, 3); T.eq(r.skipped, 1); T.eq(r.notebooks, 1)
  local html = read(r.path)
  -- every link and image points at a file of the tree (relative, percent-encoded)
  local n = 0
  for attr, target in html:gmatch('(%a+)="([^"#][^"]*)"') do
    if attr == "href" or attr == "src" then
      T.truthy(not target:match("^/") and not target:match("^%a+:"), "relative: " .. target)
      local path = root .. "/" .. url_decode(target):gsub("&amp;", "&")
      T.truthy(exists(path) or srgeo._stat(path), "links to an existing file: " .. target)
      n = n + 1
    end
  end
  T.truthy(n > 20, "links: " .. n)
  T.truthy(html:find('src="sweeps/odd%20name%20%232/bump.png"', 1, true), "thumbnail, URL-encoded")
  T.truthy(html:find('<a href="sweeps/odd%20name%20%232/bump.png"><img', 1, true), "thumbnail links to the figure")
  T.truthy(html:find('href="sweeps/odd%20name%20%232/bump.svg">svg</a>', 1, true), "and to its SVG")
  T.truthy(html:find("srgeo scripts/experiment.lua --out " .. root .. "/first", 1, true), "the command line")
  -- the units: identity and descriptors with their CIs
  local res = require("srgeo.report").load_results(root .. "/first")
  local u = res.units[1]
  T.truthy(html:find("<code>" .. u.identity.weights:sub(1, 8) .. "</code>", 1, true), "the weights hash")
  T.truthy(html:find("<td>noise:3@0</td>", 1, true), "the evaluation set")
  T.truthy(html:find(string.format("%.3g", u.descriptors.plateau.value) .. '<span class="ci">[', 1, true), "descriptors, CIs")
  T.truthy(html:find('class="bump-' .. u.bump_kind .. '"', 1, true), "the bump verdict")
  T.truthy(html:find("skipped: results.json could not be read", 1, true), "a broken run is listed as such")
  T.truthy(html:find('<a href="notebooks/tree_nb/tree_nb.html">notebooks/tree_nb/tree_nb.html</a> — A &lt;notebook&gt; &amp; more',
    1, true), "the notebook report, its title escaped once")
  T.truthy(not html:find("<script", 1, true) and not html:find("http", 1, true), "no scripts, nothing from elsewhere")
  -- bad folders: clear errors, from the script with exit status 1
  for _, c in ipairs { { ROOT .. "/no/such", "report: no such folder " .. ROOT .. "/no/such" },
                       { root .. "/first/results.json", "is not a folder" },
                       { root .. "/empty", "report: no runs (folders with a results.json) and no notebook reports under " } } do
    T.raises(function() index.write(c[1]) end, c[2])
    local log, code = sh(exe() .. " scripts/report.lua " .. util.shell_quote(c[1]))
    T.eq(code, 1, log); T.truthy(log:find(c[2], 1, true), log)
  end
  local log, code = sh(exe() .. " scripts/report.lua " .. root)
  T.eq(code, 0, log)
  T.truthy(log:find("3 runs (1 skipped), 1 notebook report", 1, true), log)
  T.truthy(log:find("left out: run broken skipped: results.json could not be read", 1, true), log)
end)

T.test("report: the index renders in headless Chromium: no console errors, every thumbnail loads, tables scroll", function()
  chromium_or_skip()
  local root = index_tree()
  local r = index.write(root)
  screenshot(r.path, ROOT .. "/index.png", "1300,2400")
  local lay = layout(r.path, 900)
  T.eq(lay.page_wide, false, "the page is no wider than the window")
  for _, e in ipairs(lay.els) do
    T.truthy(e.inside, e.tag .. " '" .. e.text .. "' sticks out of the page")
    if e.wide then T.truthy(e.scrolls, e.tag .. " '" .. e.text .. "' is cut off") end
  end
  T.eq(#lay.imgs, 4, "two figures of two runs")
  for _, w in ipairs(lay.imgs) do T.truthy(w > 100, "every thumbnail loads (natural width " .. w .. ")") end
end)
