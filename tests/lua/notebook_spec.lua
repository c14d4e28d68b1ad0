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

local CHROMIUM = "/usr/bin/chromium"

local function chromium_or_skip()
  if not exists(CHROMIUM) then
    print("skipped: " .. CHROMIUM .. " not installed")
    T.skip("skipped: " .. CHROMIUM .. " not installed")
  end
end

local CWD = sh("pwd"):gsub("%s+$", "")
local function abspath(p) return p:sub(1, 1) == "/" and p or CWD .. "/" .. p end

-- Run Chromium headless on a fresh profile with args; returns its log.
local function chromium(args)
  local profile_dir = sh("mktemp -d"):gsub("%s+$", "")
  local log = sh(string.format("timeout 90 %s --headless --no-sandbox --disable-gpu --disable-background-networking "
    .. "--disable-component-update --disable-sync --no-first-run --user-data-dir=%s %s", CHROMIUM, profile_dir, args))
  os.execute("rm -rf " .. util.shell_quote(profile_dir))
  return log
end

--- A screenshot of the page (a PNG at shot), checked for console errors and
--- failed loads.
local function screenshot(html, shot, size)
  os.remove(shot)
  local log = chromium(string.format("--enable-logging=stderr --v=0 --window-size=%s --screenshot=%s file://%s",
    size or "1000,1400", abspath(shot), abspath(html)))
  local png = read(shot)
  T.truthy(png and png:sub(1, 8) == "\137PNG\r\n\26\n" and #png > 10000, "screenshot written:\n" .. log)
  for _, bad in ipairs { ":CONSOLE(", "Failed to load resource", "net::ERR_", "Uncaught" } do
    T.truthy(not log:find(bad, 1, true), "console error in " .. html .. ": " .. bad .. "\n" .. log)
  end
  return log
end

-- The layout of a page as Chromium lays it out in a frame `width` pixels
-- wide: a probe page (scripted; the report itself has no scripts) loads it
-- in an iframe and records, for every pre and table, whether its content
-- is wider than its box, whether the box scrolls, and whether the box stays
-- inside the page's body; and whether the page itself got wider than the
-- frame.  Also every image's natural width (0: it did not decode).
local function layout(html, width)
  local dir = ROOT .. "/probe"
  util.mkdir(dir)
  local probe = dir .. "/probe.html"
  util.write_atomic(probe, string.format([[<!DOCTYPE html><html><body>
<iframe id="f" src="file://%s" style="width:%dpx;height:1200px"></iframe>
<script>
document.getElementById('f').onload = function () {
  var d = this.contentDocument, right = d.body.getBoundingClientRect().right, els = [], imgs = [];
  d.querySelectorAll('pre, table').forEach(function (el) {
    var cs = getComputedStyle(el);
    els.push({ tag: el.tagName.toLowerCase(), text: el.textContent.slice(0, 40), wide: el.scrollWidth > el.clientWidth + 1,
               scrolls: cs.overflowX == 'auto' || cs.overflowX == 'scroll',
               inside: el.getBoundingClientRect().right <= right + 1 });
  });
  d.querySelectorAll('img').forEach(function (im) { imgs.push(im.naturalWidth); });
  document.body.setAttribute('data-probe', JSON.stringify({ els: els, imgs: imgs,
    page_wide: d.documentElement.scrollWidth > d.documentElement.clientWidth + 1 }));
};
</script></body></html>]], abspath(html), width))
  local dom = chromium("--allow-file-access-from-files --virtual-time-budget=10000 --dump-dom file://" .. abspath(probe))
  local attr = dom:match('data%-probe="([^"]*)"')
  T.truthy(attr, "the layout probe ran:\n" .. dom:sub(1, 2000))
  attr = attr:gsub("&quot;", '"'):gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&amp;", "&")
  return json.decode(attr)
end

-- ---------------------------------------------------------------------------
-- srgeo.markdown

T.test("markdown: cmark-gfm renders indented code, nested lists, ~~~ fences, raw HTML, entities, tables", function()
  local html = srgeo.markdown.html([[
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
]])
  T.truthy(html:find("<pre><code>srgeo scripts/notebook.lua notebooks/x.md\n</code></pre>", 1, true), "indented code block:\n" .. html)
  T.truthy(html:find("<li>a\n<ul>\n<li>nested b</li>\n<li>nested c</li>\n</ul>\n</li>", 1, true), "nested list:\n" .. html)
  T.truthy(html:find('<pre><code class="language-sh">make test\n</code></pre>', 1, true), "~~~ fence")
  T.truthy(html:find("<h1>Title &amp; more</h1>", 1, true), "an entity is not escaped twice")
  T.truthy(html:find("raw <b>bold</b>, &amp; once, © →", 1, true), "raw HTML passes, entities decode:\n" .. html)
  T.truthy(html:find("&lt;script>alert(1)&lt;/script>", 1, true), "GitHub's tag filter disarms <script>")
  T.truthy(html:find("<del>gone</del>", 1, true) and html:find('<td align="right">1.2</td>', 1, true), "strikethrough, table")
  T.truthy(html:find('<input type="checkbox" checked="" disabled="" />', 1, true), "task list")
  T.eq(srgeo.markdown.html("a <b>x</b>", { raw_html = false }), "<p>a <!-- raw HTML omitted -->x<!-- raw HTML omitted --></p>\n")
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
  T.truthy(html:find("results.json could not be read", 1, true), "a broken run is listed as such")
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
  T.truthy(log:find("3 runs (1 with an unreadable results.json), 1 notebook report", 1, true), log)
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
