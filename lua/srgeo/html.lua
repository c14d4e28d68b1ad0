-- srgeo.html: what srgeo's HTML pages share (the notebook reports of
-- srgeo.notebook, the output-folder index of srgeo.index, the kernel's
-- rich forms): escaping, data URIs, Markdown through cmark-gfm
-- (srgeo.markdown, core/lua/markdown.c), one stylesheet, the page around a
-- body, and the HTML form of each srgeo object.
--
--   local H = require "srgeo.html"
--   H.escape("<a & b>")                  -- "&lt;a &amp; b&gt;"
--   H.markdown(text, base)               -- HTML; local images under base inlined as data URIs
--   H.page{title =, body =, css =}       -- a whole document: no scripts, nothing loaded from elsewhere
--   H.rich(v)                            -- a tensor, model, profile, comparison or report table as an
--                                        -- HTML fragment (Jupyter's text/html), or nil
local srgeo = require "srgeo"
local util = require "srgeo.util"

local H = {}

--- Text as HTML (for element content and double-quoted attributes).
function H.escape(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

--- Base64 of a byte string (util.base64).
H.base64 = util.base64

H.MIME = { png = "image/png", svg = "image/svg+xml", jpg = "image/jpeg", jpeg = "image/jpeg", gif = "image/gif" }

--- The image file at path as a data: URI, or nil (not an image type, or unreadable).
function H.data_uri(path)
  local mime = H.MIME[(path:match("%.(%w+)$") or ""):lower()]
  local bytes = mime and util.try_read(path)
  if not bytes then return nil end
  return "data:" .. mime .. ";base64," .. H.base64(bytes)
end

-- An id for a heading: its text without tags, lower case, dashes.
local function slug(s)
  s = s:gsub("<[^>]*>", ""):gsub("&%w+;", ""):lower():gsub("[^%w]+", "-"):gsub("^%-+", ""):gsub("%-+$", "")
  return s ~= "" and s or "section"
end

--- Markdown (GitHub-flavoured, cmark-gfm) to HTML, in srgeo.markdown's
--- safe mode (raw HTML omitted, script URLs emptied).  Images with a local
--- destination (relative to base) are inlined as data URIs; a remote or
--- missing one becomes a link to it, so the page loads nothing from
--- elsewhere.  Headings get ids (their text, slugged; repeats numbered).
function H.markdown(text, base)
  base = base or "."
  local html = srgeo.markdown.html(text, { image = function(src)
    if src:match("^%a[%w+.-]*:") then return src:match("^data:") and src or false end
    local uri = H.data_uri(src:sub(1, 1) == "/" and src or base .. "/" .. src)
    return uri or false
  end })
  local seen = {}
  return (html:gsub("<h([1-6])>(.-)</h%1>", function(level, inner)
    local id = slug(inner)
    seen[id] = (seen[id] or 0) + 1
    if seen[id] > 1 then id = id .. "-" .. seen[id] end
    return string.format('<h%s id="%s">%s</h%s>', level, id, inner, level)
  end))
end

-- Tables and preformatted text wider than the page scroll sideways inside
-- their box (with a visible scroll bar) instead of being cut off or
-- widening the page.
H.CSS = [[
:root { --fg: #1d232a; --muted: #5b6570; --line: #d8dee4; --code: #f5f7f9; --out: #fbfbf7; --accent: #0b6aa2; }
* { box-sizing: border-box; }
body { font: 16px/1.55 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; color: var(--fg);
       max-width: 960px; margin: 2.5em auto; padding: 0 1.2em; background: #fff; }
h1, h2, h3, h4 { line-height: 1.25; margin: 1.6em 0 0.5em; }
h1 { font-size: 1.9em; border-bottom: 1px solid var(--line); padding-bottom: 0.3em; }
h2 { font-size: 1.45em; border-bottom: 1px solid var(--line); padding-bottom: 0.2em; }
a { color: var(--accent); }
code { font: 0.9em/1.45 "DejaVu Sans Mono", Menlo, Consolas, monospace; background: var(--code); padding: 0.1em 0.3em;
       border-radius: 3px; }
pre { margin: 0; padding: 0.8em 1em; overflow-x: auto; max-width: 100%; font: 0.86em/1.45 "DejaVu Sans Mono", Menlo,
      Consolas, monospace; }
pre code { background: none; padding: 0; font: inherit; }
body > pre { background: var(--code); border: 1px solid var(--line); border-radius: 6px; margin: 1em 0; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid var(--line); padding: 0.3em 0.7em; white-space: nowrap; }
th { background: var(--code); }
pre::-webkit-scrollbar, table::-webkit-scrollbar { height: 9px; }
pre::-webkit-scrollbar-thumb, table::-webkit-scrollbar-thumb { background: #b8c0c8; border-radius: 5px; }
pre::-webkit-scrollbar-track, table::-webkit-scrollbar-track { background: #eef1f4; }
blockquote { margin: 1em 0; padding: 0.1em 1em; border-left: 4px solid var(--line); color: var(--muted); }
img { max-width: 100%; }
.meta { color: var(--muted); font-size: 0.85em; margin-top: 3em; border-top: 1px solid var(--line); padding-top: 0.8em; }
.banner { background: #fdecea; border: 1px solid #c62828; color: #8e1b1b; padding: 0.6em 1em; border-radius: 6px; }
]]

-- ---------------------------------------------------------------------------
-- Rich forms: srgeo's objects as HTML fragments, for Jupyter's text/html
-- (srgeo.kernel sends them beside the REPL's text/plain).  One renderer per
-- kind, chosen by the metatable's __name; every string from the object
-- (labels, reasons, a model's layer names) goes through H.escape.

local function num(v, p)
  if type(v) ~= "number" then return v == nil and "" or H.escape(v) end
  if v ~= v then return "nan" end
  return string.format("%." .. (p or 4) .. "g", v)
end

-- A <table> of a header row and rows of cells (already HTML), numbers
-- right-aligned.
local function html_table(head, rows, class)
  local out = { '<table class="' .. (class or "srgeo") .. '"><thead><tr>' }
  for _, h in ipairs(head) do out[#out + 1] = "<th>" .. H.escape(h) .. "</th>" end
  out[#out + 1] = "</tr></thead><tbody>"
  for _, r in ipairs(rows) do
    out[#out + 1] = "<tr>"
    for _, c in ipairs(r) do
      local numeric = type(c) == "number" or (type(c) == "string" and c:match("^[-+%d.eE%[%], naif]+$") ~= nil)
      out[#out + 1] = (numeric and '<td style="text-align:right">' or "<td>") .. (type(c) == "number" and num(c) or c) .. "</td>"
    end
    out[#out + 1] = "</tr>"
  end
  out[#out + 1] = "</tbody></table>"
  return table.concat(out)
end

local function caption(s) return "<p><b>" .. H.escape(s) .. "</b></p>" end

-- A value with its CI: "v [lo, hi]", or "–" when it is undefined.
local function ci(d)
  if type(d) ~= "table" then return num(d) end
  if d.value ~= d.value and d.reason then return "–" end
  if d.lo == nil or d.lo ~= d.lo then return num(d.value) end
  return string.format("%s [%s, %s]", num(d.value), num(d.lo), num(d.hi))
end

local rich = {}

-- A tensor: its shape and dtype, min/mean/max, and its values as a table
-- when it is 1-D or 2-D (the first and last rows and columns of a large
-- one, as its text form cuts it); otherwise the text form.
rich["srgeo.tensor"] = function(t)
  local shape = t:shape()
  local head = string.format("tensor(%s) %s, %d values", table.concat(shape, ","), t:dtype(), t:numel())
  if t:numel() > 0 then
    head = head .. string.format("; min %s, mean %s, max %s", num((t:min())), num((t:mean())), num((t:max())))
  end
  if #shape == 0 or #shape > 2 then return caption(head) .. "<pre>" .. H.escape(tostring(t)) .. "</pre>" end
  local nr, nc = #shape == 2 and shape[1] or 1, #shape == 2 and shape[2] or shape[1]
  local function pick(n) -- indices shown: all, or the first 5 and last 5 around a gap (0)
    local ix = {}
    if n <= 12 then for i = 1, n do ix[i] = i end return ix end
    for i = 1, 5 do ix[#ix + 1] = i end
    ix[#ix + 1] = 0
    for i = n - 4, n do ix[#ix + 1] = i end
    return ix
  end
  local ri, ci_ = pick(nr), pick(nc)
  local cols = { "" }
  for _, j in ipairs(ci_) do cols[#cols + 1] = j == 0 and "…" or tostring(j) end
  local rows = {}
  for _, i in ipairs(ri) do
    local r = { i == 0 and "⋮" or tostring(i) }
    for _, j in ipairs(ci_) do
      if i == 0 or j == 0 then r[#r + 1] = "…"
      else r[#r + 1] = num(#shape == 2 and t:get(i, j) or t:get(j)) end
    end
    rows[#rows + 1] = r
  end
  return caption(head) .. html_table(cols, rows)
end

-- A model: its tree (layers, parameter counts, the forward's tap) as text.
rich["srgeo.module"] = function(m) return '<pre class="srgeo-model">' .. H.escape(tostring(m)) .. "</pre>" end

-- A profile: its first summary line, the rungs, the shape test, the
-- descriptors with their CIs (or why each is undefined).
rich["srgeo.profile"] = function(p)
  local bump = require "srgeo.bump"
  local lines = {}
  for l in (tostring(p) .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  local out = { caption(lines[1] or "profile") }
  if p.identity then out[#out + 1] = "<p>" .. H.escape(require("srgeo.identity").describe(p.identity)) .. "</p>" end
  local rows = {}
  for s, eta in ipairs(p.scales or {}) do
    rows[s] = { num(eta), num(p.median[s]), num(p.lo[s]), num(p.hi[s]), num(p.mean[s]) }
  end
  out[#out + 1] = html_table({ "η", "median r", "lo", "hi", "mean r" }, rows)
  if p.shape then out[#out + 1] = "<p>shape: " .. H.escape(p.shape.text) .. "</p>" end
  local drows = {}
  for _, k in ipairs(bump.DESCRIPTORS) do
    local d = (p.descriptors or {})[k] or {}
    drows[#drows + 1] = { H.escape(k), ci(d), d.reason and d.value ~= d.value and H.escape(d.reason) or "" }
  end
  out[#out + 1] = html_table({ "descriptor", "value [CI]", "undefined because" }, drows)
  out[#out + 1] = "<p><small>" .. H.escape(bump.PEAK_NOTE) .. "</small></p>"
  return table.concat(out, "\n")
end

-- A comparison (srgeo.profile.compare): the observed differences and their
-- permutation p-values.
rich["srgeo.comparison"] = function(c)
  local bump = require "srgeo.bump"
  local first = tostring(c):match("^[^\n]*")
  local rows = {}
  local function row(k)
    local v = c.statistic and c.statistic[k]
    if v ~= nil and v ~= v then -- lacking in one profile (no decay after a rise): no difference to test
      rows[#rows + 1] = { H.escape(k), "undefined", "(in one profile or both)" }
      return
    end
    rows[#rows + 1] = { H.escape(k), num(v), num(c.p and c.p[k], 3) }
  end
  row("curve")
  for _, k in ipairs(bump.DESCRIPTORS) do row(k) end
  return caption(first) .. html_table({ "quantity", "observed difference", "p" }, rows)
end

-- A table of srgeo.report (descriptor_table, compare_table): its rows.
rich["srgeo.table"] = function(t)
  local rows = {}
  for i = 2, #t.rows do
    local r = {}
    for j, c in ipairs(t.rows[i]) do r[j] = H.escape(c) end
    rows[#rows + 1] = r
  end
  return html_table(t.rows[1] or {}, rows)
end

--- H.rich(v) -> an HTML fragment for v, or nil when v has no rich form:
--- tensors, models, profiles, comparisons, srgeo.report's tables.
function H.rich(v)
  local mt = getmetatable(v)
  local f = type(mt) == "table" and rich[rawget(mt, "__name")]
  if not f then return nil end
  local ok, html = pcall(f, v)
  return ok and html or nil
end

--- A whole HTML document: opts.title, opts.body (HTML), opts.css (added
--- after the shared stylesheet).  No scripts, nothing loaded from elsewhere.
function H.page(opts)
  return table.concat({ "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    "<title>" .. H.escape(opts.title or "srgeo") .. "</title>",
    "<style>" .. H.CSS .. (opts.css or "") .. "</style>", "</head>", "<body>", opts.body, "</body>", "</html>" }, "\n") .. "\n"
end

return H
