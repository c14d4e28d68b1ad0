-- srgeo.html: what srgeo's HTML pages share (the notebook reports of
-- srgeo.notebook and the output-folder index of srgeo.index): escaping,
-- data URIs, Markdown through cmark-gfm (srgeo.markdown, core/lua/markdown.c),
-- one stylesheet and the page around a body.
--
--   local H = require "srgeo.html"
--   H.escape("<a & b>")                  -- "&lt;a &amp; b&gt;"
--   H.markdown(text, base)               -- HTML; local images under base inlined as data URIs
--   H.page{title =, body =, css =}       -- a whole document: no scripts, nothing loaded from elsewhere
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

--- A whole HTML document: opts.title, opts.body (HTML), opts.css (added
--- after the shared stylesheet).  No scripts, nothing loaded from elsewhere.
function H.page(opts)
  return table.concat({ "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    "<title>" .. H.escape(opts.title or "srgeo") .. "</title>",
    "<style>" .. H.CSS .. (opts.css or "") .. "</style>", "</head>", "<body>", opts.body, "</body>", "</html>" }, "\n") .. "\n"
end

return H
