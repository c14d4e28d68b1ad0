-- srgeo.notebook: Markdown notebooks with ```lua blocks, run into reports.
--
--   local nb = srgeo.notebook.run("notebooks/trained_vs_init.md", {out = "out/notebooks/trained_vs_init"})
--   nb.html, nb.md          -- OUT/NAME.html (self-contained) and OUT/NAME.md (with outputs)
--   srgeo scripts/notebook.lua FILE.md [--out DIR]      -- the same from the command line
--
-- Every ```lua block runs, in order, in one Lua environment (globals persist
-- from block to block; OUT names the output folder).  What a block prints
-- (print, io.write) is captured as its output, the values it returns are
-- shown after it, and every figure srgeo.plot writes while it runs (PNG or
-- SVG) is embedded below it; figure(path) embeds any other image file.
-- A block fenced as ```lua norun is shown but not run.
--
-- The HTML report is one file: CSS inline, images as base64 data URIs, no
-- scripts and no external resources, so it opens anywhere and can be mailed.
-- The Markdown copy keeps the text and code and adds each block's output and
-- figures (copied next to it under OUT/figures/).
--
-- An error stops the run: the report is still written (the failing block
-- shows the error, later blocks are marked as not run) and run() raises
-- "notebook FILE: block K (line L: `first line`) failed: message".
local srgeo = require "srgeo"
local util = require "srgeo.util"

local N = {}

N.Error = util.Error

-- ---------------------------------------------------------------------------
-- Parsing: text cells and fenced code blocks

--- N.parse(text) -> cells: {kind = "text", text =} and {kind = "code", lang =,
--- info =, code =, line = (line of the opening fence), run = (a lua block to run),
--- index = (k-th runnable block)}.
function N.parse(text)
  local cells, buf = {}, {}
  local lines = {}
  text = text:gsub("\r\n", "\n")
  for l in (text:sub(-1) == "\n" and text or text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  local function flush()
    if #buf > 0 then cells[#cells + 1] = { kind = "text", text = table.concat(buf, "\n") } end
    buf = {}
  end
  local i, k = 1, 0
  while i <= #lines do
    local l = lines[i]
    local indent, fence, info = l:match("^( ? ? ?)(```+)%s*(.-)%s*$")
    if not fence then indent, fence, info = l:match("^( ? ? ?)(~~~+)%s*(.-)%s*$") end
    if fence then
      flush()
      local body, j = {}, i + 1
      local closed = false
      while j <= #lines do
        local c = lines[j]:match("^ ? ? ?(" .. fence:sub(1, 1):gsub("%p", "%%%0") .. "+)%s*$")
        if c and #c >= #fence then closed = true break end
        body[#body + 1] = lines[j]
        j = j + 1
      end
      local lang = info:match("^([%w_%-%+]+)") or ""
      local cell = { kind = "code", lang = lang:lower(), info = info, code = table.concat(body, "\n"), line = i,
                     first_line = i + 1, closed = closed }
      if cell.lang == "lua" and not info:find("norun", 1, true) then
        k = k + 1
        cell.run, cell.index = true, k
      end
      cells[#cells + 1] = cell
      i = j + 1
    else
      buf[#buf + 1] = l
      i = i + 1
    end
  end
  flush()
  return cells
end

-- ---------------------------------------------------------------------------
-- Running

local PLOT_FNS = { "profile", "multiples", "heatmap", "descriptors", "lines" }

local function fmt_value(v)
  if type(v) == "string" then return v end
  local mt = getmetatable(v)
  if (type(v) == "table" or type(v) == "userdata") and mt and mt.__tostring then return tostring(v) end
  if type(v) == "table" then
    local ok, json = pcall(require, "srgeo.json")
    if ok then
      local eok, s = pcall(json.encode, v, { indent = true })
      if eok then return s end
    end
  end
  return tostring(v)
end

local function first_code_line(code)
  for l in (code .. "\n"):gmatch("(.-)\n") do
    if l:match("%S") then return (l:gsub("^%s+", "")) end
  end
  return ""
end

--- N.run(path, opts) -> {html =, md =, cells =, seconds =, ok = true}.
--- opts: out (folder; default out/notebooks/NAME), quiet (no progress on
--- stderr), env (the environment blocks run in; default a fresh one over _G),
--- title.  Raises N.Error when a block fails (after writing the report).
function N.run(path, opts)
  opts = opts or {}
  local text = util.try_read(path)
  if not text then util.raise { msg = "notebook: cannot read " .. tostring(path) } end
  local name = (path:match("([^/]+)$") or path):gsub("%.md$", ""):gsub("%.markdown$", "")
  local out = opts.out or ("out/notebooks/" .. name)
  util.mkdir(out)
  util.mkdir(out .. "/figures")
  local cells = N.parse(text)
  local env = opts.env or setmetatable({}, { __index = _G })
  env.OUT = out
  local nfig = 0
  local current -- the cell running now

  local function add_figure(p)
    if type(p) ~= "string" then return end
    local ext = p:match("%.(%w+)$")
    ext = ext and ext:lower()
    if ext ~= "png" and ext ~= "svg" and ext ~= "jpg" and ext ~= "jpeg" and ext ~= "gif" then return end
    if not current then return end
    for _, f in ipairs(current.figures) do if f.path == p then return end end
    current.figures[#current.figures + 1] = { path = p, ext = ext }
  end
  env.figure = function(p)
    if not util.exists(p) then error("figure: no such file " .. tostring(p), 2) end
    add_figure(p)
    return p
  end

  local total = 0
  for _, c in ipairs(cells) do if c.run then total = total + 1 end end
  local t_start = srgeo._clock()
  local failed
  local plot = srgeo.plot
  for _, c in ipairs(cells) do
    if c.run and failed then c.skipped = true end
    if c.run and not failed then
      c.output, c.figures = {}, {}
      current = c
      -- Output capture and figure recording are installed only while a block
      -- runs, and always removed (even when the block fails).
      local saved_print, saved_write = _G.print, io.write
      local saved_plot = {}
      local outbuf = {}
      local function cap_write(...)
        for i = 1, select("#", ...) do
          local v = select(i, ...)
          outbuf[#outbuf + 1] = type(v) == "number" and tostring(v) or v
        end
        return io.stdout
      end
      local function cap_print(...)
        local n = select("#", ...)
        for i = 1, n do
          outbuf[#outbuf + 1] = tostring((select(i, ...)))
          if i < n then outbuf[#outbuf + 1] = "\t" end
        end
        outbuf[#outbuf + 1] = "\n"
      end
      for _, fname in ipairs(PLOT_FNS) do
        local orig = plot[fname]
        saved_plot[fname] = orig
        plot[fname] = function(...)
          local r = table.pack(orig(...))
          add_figure(r[1])
          return table.unpack(r, 1, r.n)
        end
      end
      _G.print, io.write = cap_print, cap_write
      if rawget(env, "print") == saved_print then env.print = cap_print end
      local t0 = srgeo._clock()
      -- Pad with newlines so error messages carry the line in the .md file.
      local chunk, err = load(string.rep("\n", c.first_line - 1) .. c.code, "@" .. path, "t", env)
      local ok, res
      if chunk then
        res = table.pack(xpcall(chunk, function(m)
          local s = type(m) == "string" and m or fmt_value(m)
          -- the traceback down to the block (the runner's own frames say nothing)
          local tb = debug.traceback(s, 2)
          tb = tb:gsub("\n%s*%[C%]: in function 'xpcall'.*$", "")
          return { msg = s, trace = tb }
        end))
        ok = res[1]
      else
        ok, res = false, { nil, { msg = err, trace = err } }
      end
      _G.print, io.write = saved_print, saved_write
      for fname, f in pairs(saved_plot) do plot[fname] = f end
      current = nil
      c.seconds = srgeo._clock() - t0
      c.output = table.concat(outbuf)
      if ok then
        local vals = {}
        for i = 2, res.n do vals[#vals + 1] = fmt_value(res[i]) end
        if #vals > 0 then
          c.output = c.output .. (c.output ~= "" and c.output:sub(-1) ~= "\n" and "\n" or "") .. table.concat(vals, "\t") .. "\n"
        end
      else
        local e = res[2]
        c.error = e.msg
        c.trace = e.trace
        failed = c
      end
      nfig = nfig + #c.figures
      if not opts.quiet then
        io.stderr:write(string.format("[notebook] block %d/%d (line %d) %s %.1f s%s\n", c.index, total, c.line,
          c.error and "FAILED after" or "done in", c.seconds, #c.figures > 0 and string.format(", %d figure(s)", #c.figures) or ""))
        io.stderr:flush()
      end
    end
  end
  local seconds = srgeo._clock() - t_start
  local meta = { name = name, path = path, out = out, seconds = seconds, title = opts.title, failed = failed,
                 blocks = total, figures = nfig }
  local html = out .. "/" .. name .. ".html"
  local md = out .. "/" .. name .. ".md"
  util.write_atomic(html, N.render_html(cells, meta))
  util.write_atomic(md, N.render_markdown(cells, meta))
  if failed then
    local msg = string.format("notebook %s: block %d (line %d: `%s`) failed: %s\n(report with the error: %s)",
      path, failed.index, failed.line, first_code_line(failed.code), failed.error, html)
    util.raise { msg = msg, block = failed.index, line = failed.line, html = html, md = md }
  end
  return { html = html, md = md, cells = cells, seconds = seconds, ok = true, figures = nfig }
end

-- ---------------------------------------------------------------------------
-- Markdown to HTML (the subset notebooks use: headings, paragraphs, lists,
-- quotes, code, pipe tables, rules, emphasis, code spans, links, images)

local function esc(s)
  return (s:gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end
N.escape = esc

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64T = {}
for i = 1, 64 do B64T[i - 1] = B64:sub(i, i) end

--- Base64 of a byte string.
function N.base64(s)
  local out = {}
  local n = #s
  for i = 1, n - 2, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = (a << 16) | (b << 8) | c
    out[#out + 1] = B64T[(v >> 18) & 63] .. B64T[(v >> 12) & 63] .. B64T[(v >> 6) & 63] .. B64T[v & 63]
  end
  local r = n % 3
  if r == 1 then
    local v = s:byte(n) << 16
    out[#out + 1] = B64T[(v >> 18) & 63] .. B64T[(v >> 12) & 63] .. "=="
  elseif r == 2 then
    local a, b = s:byte(n - 1, n)
    local v = (a << 16) | (b << 8)
    out[#out + 1] = B64T[(v >> 18) & 63] .. B64T[(v >> 12) & 63] .. B64T[(v >> 6) & 63] .. "="
  end
  return table.concat(out)
end

local MIME = { png = "image/png", svg = "image/svg+xml", jpg = "image/jpeg", jpeg = "image/jpeg", gif = "image/gif" }

local function data_uri(path)
  local ext = (path:match("%.(%w+)$") or ""):lower()
  local mime = MIME[ext]
  local bytes = mime and util.try_read(path)
  if not bytes then return nil end
  return "data:" .. mime .. ";base64," .. N.base64(bytes)
end

-- Inline markup of one (already joined) paragraph.  base: folder for
-- relative image paths.
local function inline(s, base)
  local keep = {}
  local function stash(h)
    keep[#keep + 1] = h
    return "\0" .. #keep .. "\0"
  end
  -- code spans first: nothing inside them is markup
  s = s:gsub("(`+)(.-)%1", function(_, code) return stash("<code>" .. esc(code) .. "</code>") end)
  -- images: local files are inlined; remote ones stay as links (no external loads)
  s = s:gsub("!%[([^%]]*)%]%(([^%)%s]+)[^%)]*%)", function(alt, src)
    if src:match("^%a+://") then
      return stash(string.format('<a href="%s">%s</a>', esc(src), esc(alt ~= "" and alt or src)))
    end
    local p = src:sub(1, 1) == "/" and src or (base .. "/" .. src)
    local uri = data_uri(p)
    if not uri then return stash(string.format('<span class="missing">[missing image %s]</span>', esc(src))) end
    return stash(string.format('<img alt="%s" src="%s">', esc(alt), uri))
  end)
  s = s:gsub("%[([^%]]+)%]%(([^%)%s]+)[^%)]*%)", function(txt, href)
    return stash(string.format('<a href="%s">', esc(href))) .. txt .. stash("</a>")
  end)
  s = esc(s)
  s = s:gsub("%*%*(.-)%*%*", "<strong>%1</strong>")
  s = s:gsub("__(.-)__", "<strong>%1</strong>")
  s = s:gsub("%f[%w%*]%*([^%*\n]+)%*", "<em>%1</em>")
  s = s:gsub("%f[%w_]_([^_\n]+)_%f[^%w_]", "<em>%1</em>")
  s = s:gsub("\0(%d+)\0", function(i) return keep[tonumber(i)] end)
  return s
end

local function table_row(l)
  l = l:gsub("^%s*|", ""):gsub("|%s*$", "")
  local cells = {}
  for c in (l .. "|"):gmatch("(.-)|") do cells[#cells + 1] = c:match("^%s*(.-)%s*$") end
  return cells
end

--- N.markdown(text, base) -> HTML of a Markdown text.
function N.markdown(text, base)
  base = base or "."
  local out, para, list, quote = {}, {}, nil, {}
  local lines = {}
  for l in (text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  local function close_para()
    if #para > 0 then out[#out + 1] = "<p>" .. inline(table.concat(para, "\n"), base) .. "</p>" end
    para = {}
  end
  local function close_list()
    if list then
      out[#out + 1] = "<" .. list.tag .. ">"
      for _, item in ipairs(list.items) do out[#out + 1] = "<li>" .. inline(table.concat(item, "\n"), base) .. "</li>" end
      out[#out + 1] = "</" .. list.tag .. ">"
      list = nil
    end
  end
  local function close_quote()
    if #quote > 0 then out[#out + 1] = "<blockquote>" .. N.markdown(table.concat(quote, "\n"), base) .. "</blockquote>" end
    quote = {}
  end
  local i = 1
  while i <= #lines do
    local l = lines[i]
    local h, htext = l:match("^(#+)%s+(.-)%s*#*%s*$")
    local q = l:match("^%s*>%s?(.*)$")
    if q then
      close_para(); close_list()
      quote[#quote + 1] = q
    else
      close_quote()
      if l:match("^%s*$") then
        close_para(); close_list()
      elseif h and #h <= 6 then
        close_para(); close_list()
        local id = htext:lower():gsub("[^%w]+", "-"):gsub("^%-+", ""):gsub("%-+$", "")
        out[#out + 1] = string.format('<h%d id="%s">%s</h%d>', #h, id, inline(htext, base), #h)
      elseif l:match("^%s*[-*_]%s*[-*_]%s*[-*_][-*_%s]*$") and #para == 0 then
        close_list()
        out[#out + 1] = "<hr>"
      elseif l:match("^%s*|") and lines[i + 1] and lines[i + 1]:match("^%s*|?%s*:?%-+:?%s*|") then
        close_para(); close_list()
        local head = table_row(l)
        local aligns = {}
        for j, c in ipairs(table_row(lines[i + 1])) do
          aligns[j] = (c:match("^:.*:$") and "center") or (c:match(":$") and "right") or nil
        end
        local t = { "<table>", "<thead><tr>" }
        for j, c in ipairs(head) do
          t[#t + 1] = string.format("<th%s>%s</th>", aligns[j] and ' style="text-align:' .. aligns[j] .. '"' or "", inline(c, base))
        end
        t[#t + 1] = "</tr></thead><tbody>"
        i = i + 2
        while lines[i] and lines[i]:match("^%s*|") do
          t[#t + 1] = "<tr>"
          for j, c in ipairs(table_row(lines[i])) do
            t[#t + 1] = string.format("<td%s>%s</td>", aligns[j] and ' style="text-align:' .. aligns[j] .. '"' or "", inline(c, base))
          end
          t[#t + 1] = "</tr>"
          i = i + 1
        end
        t[#t + 1] = "</tbody></table>"
        out[#out + 1] = table.concat(t)
        i = i - 1
      else
        local bullet = l:match("^%s*[-*+]%s+(.*)$")
        local num = not bullet and l:match("^%s*%d+[.)]%s+(.*)$")
        if bullet or num then
          close_para()
          local tag = bullet and "ul" or "ol"
          if list and list.tag ~= tag then close_list() end
          list = list or { tag = tag, items = {} }
          list.items[#list.items + 1] = { bullet or num }
        elseif list and l:match("^%s+%S") then
          local item = list.items[#list.items]
          item[#item + 1] = l:match("^%s*(.-)$")
        else
          close_list()
          para[#para + 1] = l
        end
      end
    end
    i = i + 1
  end
  close_para(); close_list(); close_quote()
  return table.concat(out, "\n")
end

local CSS = [[
:root { --fg: #1d232a; --muted: #5b6570; --line: #d8dee4; --code: #f5f7f9; --out: #fbfbf7; --accent: #0b6aa2; }
* { box-sizing: border-box; }
body { font: 16px/1.55 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; color: var(--fg);
       max-width: 920px; margin: 2.5em auto; padding: 0 1.2em; background: #fff; }
h1, h2, h3, h4 { line-height: 1.25; margin: 1.6em 0 0.5em; }
h1 { font-size: 1.9em; border-bottom: 1px solid var(--line); padding-bottom: 0.3em; }
h2 { font-size: 1.45em; border-bottom: 1px solid var(--line); padding-bottom: 0.2em; }
a { color: var(--accent); }
code { font: 0.9em/1.45 "DejaVu Sans Mono", Menlo, Consolas, monospace; background: var(--code); padding: 0.1em 0.3em;
       border-radius: 3px; }
pre { margin: 0; padding: 0.8em 1em; overflow-x: auto; font: 0.86em/1.45 "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre code { background: none; padding: 0; font: inherit; }
.cell { margin: 1.1em 0; border: 1px solid var(--line); border-radius: 6px; overflow: hidden; }
.cell .src { background: var(--code); }
.cell .bar { font-size: 0.78em; color: var(--muted); padding: 0.25em 1em; border-bottom: 1px solid var(--line);
             background: #eef2f5; display: flex; justify-content: space-between; }
.cell .out { background: var(--out); border-top: 1px solid var(--line); }
.cell .out pre { white-space: pre; }
.cell .fig { border-top: 1px solid var(--line); padding: 0.6em; text-align: center; background: #fff; }
.cell .fig img { max-width: 100%; height: auto; }
.cell.error { border-color: #c62828; }
.cell .err { background: #fdecea; color: #8e1b1b; border-top: 1px solid #c62828; }
.cell.skipped { opacity: 0.55; }
pre.plain { background: var(--code); border: 1px solid var(--line); border-radius: 6px; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid var(--line); padding: 0.3em 0.7em; }
th { background: var(--code); }
blockquote { margin: 1em 0; padding: 0.1em 1em; border-left: 4px solid var(--line); color: var(--muted); }
img { max-width: 100%; }
.meta { color: var(--muted); font-size: 0.85em; margin-top: 3em; border-top: 1px solid var(--line); padding-top: 0.8em; }
.banner { background: #fdecea; border: 1px solid #c62828; color: #8e1b1b; padding: 0.6em 1em; border-radius: 6px; }
.missing { color: #8e1b1b; }
]]

local function figure_html(f)
  local uri = data_uri(f.path)
  if not uri then return string.format('<div class="fig missing">[figure %s could not be read]</div>', esc(f.path)) end
  local name = f.path:match("([^/]+)$")
  return string.format('<div class="fig"><img alt="%s" src="%s"></div>', esc(name), uri)
end

-- A block's figures to embed: a PNG and an SVG of the same figure (stem)
-- show once, as the PNG.
local function shown_figures(c)
  local stems, out = {}, {}
  for _, f in ipairs(c.figures or {}) do
    if f.ext ~= "svg" then stems[f.path:gsub("%.%w+$", "")] = true end
  end
  for _, f in ipairs(c.figures or {}) do
    if not (f.ext == "svg" and stems[f.path:gsub("%.%w+$", "")]) then out[#out + 1] = f end
  end
  return out
end

--- N.render_html(cells, meta) -> a self-contained HTML document.
function N.render_html(cells, meta)
  local base = meta.path:match("^(.*)/[^/]*$") or "."
  local title = meta.title
  if not title then
    for _, c in ipairs(cells) do
      if c.kind == "text" then
        title = c.text:match("^#%s+([^\n]-)%s*\n") or c.text:match("\n#%s+([^\n]-)%s*\n") or c.text:match("^#%s+(.-)%s*$")
        if title then break end
      end
    end
  end
  title = title or meta.name
  local h = { "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
              '<meta name="viewport" content="width=device-width, initial-scale=1">',
              "<title>" .. esc(title) .. "</title>", "<style>" .. CSS .. "</style>", "</head>", "<body>" }
  if meta.failed then
    h[#h + 1] = string.format('<p class="banner">This notebook stopped at block %d (line %d) with an error; '
      .. "later blocks did not run.</p>", meta.failed.index, meta.failed.line)
  end
  for _, c in ipairs(cells) do
    if c.kind == "text" then
      h[#h + 1] = N.markdown(c.text, base)
    elseif not c.run then
      h[#h + 1] = string.format('<pre class="plain"><code>%s</code></pre>', esc(c.code))
    else
      local cls = "cell" .. (c.error and " error" or "") .. (c.skipped and " skipped" or "")
      local status = c.skipped and "not run" or c.error and string.format("failed after %.1f s", c.seconds)
        or string.format("%.2f s", c.seconds or 0)
      h[#h + 1] = string.format('<div class="%s" id="block-%d"><div class="bar"><span>block %d · line %d</span><span>%s</span></div>',
        cls, c.index, c.index, c.line, status)
      h[#h + 1] = '<div class="src"><pre><code>' .. esc(c.code) .. "</code></pre></div>"
      if c.output and c.output ~= "" then
        h[#h + 1] = '<div class="out"><pre>' .. esc(c.output) .. "</pre></div>"
      end
      for _, f in ipairs(shown_figures(c)) do h[#h + 1] = figure_html(f) end
      if c.error then h[#h + 1] = '<div class="err"><pre>' .. esc(c.trace or c.error) .. "</pre></div>" end
      h[#h + 1] = "</div>"
    end
  end
  h[#h + 1] = string.format('<p class="meta">Generated by srgeo %s from %s on %s; %d blocks, %d figures, %.1f s.</p>',
    esc(srgeo.version), esc(meta.path), os.date("!%Y-%m-%d %H:%M UTC"), meta.blocks, meta.figures, meta.seconds)
  h[#h + 1] = "</body>"
  h[#h + 1] = "</html>"
  return table.concat(h, "\n") .. "\n"
end

local function copy_file(src, dst)
  local bytes = util.try_read(src)
  if bytes then util.write_atomic(dst, bytes) end
  return bytes ~= nil
end

-- The figure's path relative to the notebook's out folder (copied under
-- figures/ when it lives elsewhere).
local function md_figure(f, out, c, k)
  local prefix = out .. "/"
  if f.path:sub(1, #prefix) == prefix then return f.path:sub(#prefix + 1) end
  local rel = string.format("figures/block%d_%d_%s", c.index, k, f.path:match("([^/]+)$"))
  copy_file(f.path, out .. "/" .. rel)
  return rel
end

local function fence_for(s)
  local n = 3
  for run in s:gmatch("`+") do n = math.max(n, #run + 1) end
  return string.rep("`", n)
end

--- N.render_markdown(cells, meta) -> the notebook with outputs and figures.
function N.render_markdown(cells, meta)
  local m = {}
  if meta.failed then
    m[#m + 1] = string.format("> **This notebook stopped at block %d (line %d) with an error; later blocks did not run.**\n",
      meta.failed.index, meta.failed.line)
  end
  for _, c in ipairs(cells) do
    if c.kind == "text" then
      local t = c.text:gsub("^%s*\n", ""):gsub("%s+$", "")
      if t ~= "" then m[#m + 1] = t end
    else
      local f = fence_for(c.code)
      m[#m + 1] = f .. c.info .. "\n" .. c.code .. "\n" .. f
      if c.run then
        if c.skipped then
          m[#m + 1] = "*(not run)*"
        else
          if c.output and c.output ~= "" then
            local o = c.output:gsub("\n$", "")
            local of = fence_for(o)
            m[#m + 1] = of .. "text\n" .. o .. "\n" .. of
          end
          for k, fig in ipairs(shown_figures(c)) do
            m[#m + 1] = string.format("![%s](%s)", fig.path:match("([^/]+)$"), md_figure(fig, meta.out, c, k))
          end
          if c.error then
            local e = c.trace or c.error
            local ef = fence_for(e)
            m[#m + 1] = "**Error in block " .. c.index .. ":**\n\n" .. ef .. "text\n" .. e .. "\n" .. ef
          end
        end
      end
    end
  end
  m[#m + 1] = string.format("\n---\n*Generated by srgeo %s from %s on %s; %d blocks, %d figures, %.1f s.*",
    srgeo.version, meta.path, os.date("!%Y-%m-%d %H:%M UTC"), meta.blocks, meta.figures, meta.seconds)
  return table.concat(m, "\n\n") .. "\n"
end

return N
