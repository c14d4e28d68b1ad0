-- srgeo.index: an HTML index of an output folder tree (`srgeo report out/`,
-- scripts/report.lua): every run an experiment script wrote (a folder with a
-- results.json) with its command line, settings, figure thumbnails, the
-- identity and descriptors of every unit and links to all its files, and
-- every notebook report below the folder.
--
--   local r = srgeo.index.write("out")      -- out/index.html; r.path, r.runs, r.notebooks, r.skipped
--
-- The index sits in the folder it describes and links and shows the files
-- where they are (relative links; a thumbnail is the figure's own PNG), so
-- it stays small and the folder can be moved as a whole.  No scripts, nothing
-- loaded from elsewhere.  A results.json that cannot be read, or whose
-- fields have the wrong types, is listed as such with the reason, not
-- fatal; a folder with neither runs nor notebooks is an error.
--
-- The index reads and links only what lies in the tree: symbolic links to
-- folders are not followed (a link to "." multiplied the runs without end,
-- a link to / walked the whole file system), a file whose real path is
-- outside the folder (a summary.txt linked to /etc/shadow) or that is not a
-- regular file (a FIFO would block the read) is left out, and the walk is
-- bounded in depth, folders and entries.  Whatever is left out is listed
-- on the page and returned (r.notes) with the reason.
local srgeo = require "srgeo"
local util = require "srgeo.util"
local json = require "srgeo.json"
local H = require "srgeo.html"

local X = {}

local fail = util.failer("report: ")
local esc = H.escape

--- A relative path as a URL: every byte but unreserved characters and "/"
--- percent-encoded (spaces, #, ?, % and quotes in file names).
function X.url(path)
  return (path:gsub("[^%w%-%._~/]", function(c) return string.format("%%%02X", c:byte()) end))
end

local function join(a, b) return a == "." and b or a .. "/" .. b end

-- Bounds of the walk and of what is read into the page: depth and folders
-- searched, names listed (over all folders), bytes of a results.json or
-- summary.txt, notes listed one by one (the rest are counted).
X.LIMITS = { depth = 8, folders = 5000, entries = 200000, read = 16 << 20, notes = 50 }
local L = X.LIMITS

-- The tree an index describes: its folder, that folder's real path (the
-- boundary every file must stay inside), and the notes on what was left out.
local function new_tree(root)
  local real, err = srgeo._realpath(root)
  if not real then fail("%s", err) end
  return { root = root, real = real, notes = {}, more = 0, folders = 0, entries = 0 }
end

local function note(tree, rel, why)
  if #tree.notes < L.notes then tree.notes[#tree.notes + 1] = { rel = rel, why = why }
  else tree.more = tree.more + 1 end
end

local function inside(base, p) return base == "/" or p == base or p:sub(1, #base + 1) == base .. "/" end

-- Is the file at rel (relative to the tree) one the index may read or link:
-- a regular file whose real path is inside the tree (and, with max, no
-- larger)?  true, or nil and why not.
local function tree_file(tree, rel, max)
  local path = join(tree.root, rel)
  local real, err = srgeo._realpath(path)
  if not real then return nil, err end
  if not inside(tree.real, real) then return nil, "it leads outside " .. tree.root .. " (a link or ..)" end
  local st = srgeo._lstat(real)
  if not st then return nil, "cannot stat " .. real end
  if st.kind ~= "file" then return nil, "not a regular file (a " .. st.kind .. ")" end
  if max and st.size > max then return nil, string.format("%d bytes, more than the %d read", st.size, max) end
  return true
end

-- The contents of a tree file (tree_file's checks), or nil and why not.
local function tree_read(tree, rel)
  local ok, why = tree_file(tree, rel, L.read)
  if not ok then return nil, why end
  return util.try_read(join(tree.root, rel))
end

-- results.json as the index shows it: each field it reads has the type it
-- reads it as ("text": a string or number; "string"; "number"; "boolean";
-- "estimate": a number or an object; {array = spec}; {object = fields}:
-- other fields any type; {map = spec}: every value), or is absent.  A
-- hand-edited or foreign file (units: [1]) is listed with the reason
-- instead of stopping the index.
local ARRAY_MT = getmetatable(json.array {})
local ID = { object = { model = "text", path = "text", weights = "text", eval = "text", tap = "text" } }
local RESULTS = { object = {
  format = "string", name = "text", command = "text", version = "text", written = "text", seconds = "number",
  options = { object = { preset = "text", images = "text", seed = "text" } },
  units = { array = { object = { key = "text", label = "text", model = "text", eval = "text", tap = "text",
    json = "string", csv = "string", cached = "boolean", bump_kind = "text", jacobian_fro = "estimate",
    identity = ID, descriptors = { map = "estimate" } } } },
  figures = { array = { object = { name = "text", files = { array = "string" } } } },
} }

local function shape_error(v, spec, where)
  if v == nil then return nil end
  local t = type(v)
  local kind = t == "table" and (getmetatable(v) == ARRAY_MT and "array" or "object") or t
  local function bad(want) return string.format("%s is a%s %s, expected %s", where, kind:match("^[aeiou]") and "n" or "",
    kind, want) end
  if spec == "text" then
    if t ~= "string" and t ~= "number" then return bad("text") end
  elseif spec == "estimate" then
    if t ~= "number" and kind ~= "object" then return bad("a number or an object") end
  elseif type(spec) == "string" then
    if t ~= spec then return bad("a " .. spec) end
  elseif spec.array then
    if kind ~= "array" then return bad("an array") end
    for i = 1, #v do
      local e = shape_error(v[i], spec.array, string.format("%s[%d]", where, i))
      if e then return e end
    end
  else
    if kind ~= "object" then return bad("an object") end
    for k, sub in pairs(spec.object or {}) do
      local e = shape_error(v[k], sub, where .. "." .. k)
      if e then return e end
    end
    if spec.map then
      for k, x in pairs(v) do
        local e = shape_error(x, spec.map, where .. "." .. tostring(k))
        if e then return e end
      end
    end
  end
end
X.results_error = function(t) return shape_error(t, RESULTS, "results.json") end

-- The title of a notebook report srgeo wrote (its last lines say so), or nil.
local function notebook_title(tree, rel)
  if not tree_file(tree, rel) then return nil end
  local path = join(tree.root, rel)
  local f = io.open(path, "rb")
  if not f then return nil end
  local head = f:read(4096) or ""
  local size = f:seek("end")
  f:seek("set", math.max(0, size - 1024))
  local tail = f:read("a") or ""
  f:close()
  if not tail:find('<p class="meta">Generated by srgeo', 1, true) then return nil end
  local t = head:match("<title>(.-)</title>") or path:match("([^/]+)$")
  return (t:gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&quot;", '"'):gsub("&amp;", "&"))
end

-- A run's results.json: the table, or nil and why it cannot be shown.
local function read_results(tree, rel)
  local text, why = tree_read(tree, join(rel, "results.json"))
  if not text then return nil, "results.json left out: " .. tostring(why) end
  local ok, t = pcall(json.decode, text)
  if not ok then return nil, "results.json could not be read: " .. tostring(t) end
  if type(t) ~= "table" or t.format ~= "srgeo.experiment/1" then
    return nil, "results.json is not an srgeo experiment (format srgeo.experiment/1)"
  end
  local err = shape_error(t, RESULTS, "results.json")
  if err then return nil, err end
  return t
end

-- Runs and notebook reports under the tree: {rel =, results = | err =} and
-- {rel =, title =}, sorted by path (rel: relative to its folder); what the
-- walk left out goes to tree.notes.
local function find(tree)
  local runs, notebooks = {}, {}
  local stopped = false
  local function walk(rel, depth)
    if stopped then return end
    if tree.folders >= L.folders or tree.entries >= L.entries then
      stopped = true
      note(tree, rel, string.format("not searched, nor anything after it: the walk stops after %d folders or %d entries",
        L.folders, L.entries))
      return
    end
    tree.folders = tree.folders + 1
    local names = srgeo._listdir(join(tree.root, rel))
    if not names then return end
    tree.entries = tree.entries + #names
    table.sort(names)
    local has = {}
    for _, n in ipairs(names) do has[n] = true end
    if has["results.json"] then
      local run = { rel = rel }
      run.results, run.err = read_results(tree, rel)
      runs[#runs + 1] = run
    end
    for _, n in ipairs(names) do
      local sub = join(rel, n)
      if n:match("%.html$") and not (rel == "." and n == "index.html") then
        local title = notebook_title(tree, sub)
        if title then notebooks[#notebooks + 1] = { rel = sub, title = title } end
      elseif n:sub(1, 1) ~= "." and n ~= "units" and n ~= "figures" then
        local st = srgeo._lstat(join(tree.root, sub))
        local kind = st and st.kind
        if kind == "link" then
          local target = srgeo._stat(join(tree.root, sub))
          if target and target.dir then
            note(tree, sub, "a symbolic link to a folder (" .. tostring(srgeo._realpath(join(tree.root, sub)))
              .. "): not followed")
          end
        elseif kind == "dir" then
          if depth < L.depth then walk(sub, depth + 1)
          else note(tree, sub, string.format("not searched: deeper than %d levels", L.depth)) end
        end
      end
    end
  end
  walk(".", 0)
  return runs, notebooks
end

-- Numbers as the text tables print them; nil/NaN (JSON null) as a dash.
local function g(v)
  if type(v) ~= "number" or v ~= v then return "–" end
  return string.format("%.3g", v)
end

local function cell(d)
  if type(d) ~= "table" then return g(d) end
  local v = g(d.value)
  if type(d.lo) == "number" and type(d.hi) == "number" and d.lo == d.lo and d.hi == d.hi then
    return string.format('%s<span class="ci">[%s, %s]</span>', v, g(d.lo), g(d.hi))
  end
  return v
end

local DESCRIPTORS = { { "plateau", "plateau" }, { "onset", "onset η" }, { "peak_eta", "peak η (parabolic)" },
                      { "peak_height", "peak r" }, { "half_width", "half-width" }, { "decay_slope", "decay slope" },
                      { "area", "area" } }

local function link(href, text) return string.format('<a href="%s">%s</a>', X.url(href), esc(text)) end

local function units_table(tree, rel, units)
  local shown = {}
  for _, d in ipairs(DESCRIPTORS) do
    for _, u in ipairs(units) do
      if type(u.descriptors) == "table" and u.descriptors[d[1]] ~= nil then shown[#shown + 1] = d; break end
    end
  end
  local h = { '<table class="units"><thead><tr><th>unit</th><th>model</th><th>weights</th><th>evaluation set</th>'
    .. "<th>tap</th><th>bump</th>" }
  for _, d in ipairs(shown) do h[#h + 1] = "<th>" .. esc(d[2]) .. "</th>" end
  h[#h + 1] = "<th>‖J‖<sub>F</sub></th><th>files</th></tr></thead><tbody>"
  for _, u in ipairs(units) do
    local id = type(u.identity) == "table" and u.identity or {}
    local files = {}
    for _, k in ipairs { "json", "csv" } do
      if u[k] and tree_file(tree, join(rel, u[k])) then files[#files + 1] = link(join(rel, u[k]), k) end
    end
    local row = { "<tr><td>" .. esc(u.label or u.key or "?") .. "</td>",
      "<td>" .. esc(u.model or id.model or "?") .. (id.path and '<span class="ci">' .. esc(id.path) .. "</span>" or "")
        .. "</td>",
      "<td><code>" .. esc(id.weights and tostring(id.weights):sub(1, 8) or "–") .. "</code></td>",
      "<td>" .. esc(u.eval or id.eval or "?") .. "</td>", "<td>" .. esc(u.tap or id.tap or "features") .. "</td>",
      '<td class="bump-' .. esc(u.bump_kind or "?") .. '">' .. esc(u.bump_kind or "?") .. "</td>" }
    for _, d in ipairs(shown) do row[#row + 1] = "<td>" .. cell((u.descriptors or {})[d[1]]) .. "</td>" end
    row[#row + 1] = "<td>" .. cell(u.jacobian_fro) .. "</td><td>" .. table.concat(files, " ") .. "</td></tr>"
    h[#h + 1] = table.concat(row)
  end
  h[#h + 1] = "</tbody></table>"
  return table.concat(h, "\n")
end

-- A figure's thumbnail (its PNG, else its SVG) linking to the full file,
-- and links to its other files (the SVG, the gnuplot script and data).
local function figure_html(tree, rel, f)
  local files = type(f.files) == "table" and f.files or {}
  local thumb
  for _, p in ipairs(files) do if p:match("%.png$") then thumb = p end end
  if not thumb then for _, p in ipairs(files) do if p:match("%.svg$") then thumb = p end end end
  local name = tostring(f.name or (thumb or "figure"):gsub("%.%w+$", ""))
  local links = {}
  for _, p in ipairs(files) do
    if tree_file(tree, join(rel, p)) then links[#links + 1] = link(join(rel, p), p:match("%.(%w+)$") or p) end
  end
  local stem = thumb and thumb:gsub("%.%w+$", "")
  for _, ext in ipairs { "gp", "dat" } do
    if stem and tree_file(tree, join(rel, stem .. "." .. ext)) then
      links[#links + 1] = link(join(rel, stem .. "." .. ext), ext)
    end
  end
  local img
  if thumb and tree_file(tree, join(rel, thumb)) then
    img = string.format('<a href="%s"><img src="%s" alt="%s"></a>', X.url(join(rel, thumb)), X.url(join(rel, thumb)),
      esc(name))
  else
    img = '<div class="missing">figure file missing</div>'
  end
  return string.format('<figure>%s<figcaption>%s · %s</figcaption></figure>', img, esc(name), table.concat(links, " "))
end

local function slug(rel) return "run-" .. (rel:gsub("[^%w]+", "-"):gsub("^%-+", ""):gsub("%-+$", "")) end

local function run_html(tree, run)
  local rel, t = run.rel, run.results
  local h = { string.format('<section class="run" id="%s">', slug(rel)),
              string.format('<h2>%s <span class="name">%s</span></h2>', link(rel .. "/", rel == "." and "./" or rel),
                esc(t and t.name or "")) }
  if not t then
    h[#h + 1] = '<p class="banner">skipped: ' .. esc(run.err) .. "</p></section>"
    return table.concat(h, "\n")
  end
  local o = type(t.options) == "table" and t.options or {}
  local units = type(t.units) == "table" and t.units or {}
  local cached = 0
  for _, u in ipairs(units) do if u.cached then cached = cached + 1 end end
  local facts = { "srgeo " .. esc(t.version or "?") }
  if t.written then facts[#facts + 1] = "written " .. esc(t.written) end
  if type(t.seconds) == "number" then facts[#facts + 1] = string.format("%.1f s", t.seconds) end
  if o.preset then facts[#facts + 1] = "preset " .. esc(o.preset) end
  -- the images each unit's profile holds (not the count asked for: a folder may hold fewer)
  local images = require("srgeo.report").images_text(units)
  if images then facts[#facts + 1] = images .. " per set" end
  if o.seed then facts[#facts + 1] = "seed " .. esc(o.seed) end
  facts[#facts + 1] = string.format("%d units (%d cached)", #units, cached)
  h[#h + 1] = '<p class="facts">' .. table.concat(facts, " · ") .. "</p>"
  if t.command then h[#h + 1] = '<pre class="cmd">' .. esc(t.command) .. "</pre>" end
  local figs = type(t.figures) == "table" and t.figures or {}
  if #figs > 0 then
    h[#h + 1] = '<div class="figs">'
    for _, f in ipairs(figs) do h[#h + 1] = figure_html(tree, rel, f) end
    h[#h + 1] = "</div>"
  end
  if #units > 0 then h[#h + 1] = units_table(tree, rel, units) end
  local files = {}
  for _, f in ipairs { "summary.txt", "results.json", "profiles.csv", "descriptors.csv" } do
    if tree_file(tree, join(rel, f)) then files[#files + 1] = link(join(rel, f), f) end
  end
  h[#h + 1] = '<p class="files">' .. table.concat(files, " · ") .. "</p>"
  local summary, why = tree_read(tree, join(rel, "summary.txt"))
  if summary then
    h[#h + 1] = "<details><summary>summary.txt</summary><pre>" .. esc(summary) .. "</pre></details>"
  elseif srgeo._lstat(join(tree.root, join(rel, "summary.txt"))) then
    h[#h + 1] = '<p class="files">summary.txt left out: ' .. esc(why) .. "</p>"
  end
  h[#h + 1] = "</section>"
  return table.concat(h, "\n")
end

local CSS = [[
body { max-width: 1280px; }
.toc td, .toc th { white-space: normal; }
.run { border-top: 1px solid var(--line); margin-top: 2em; }
.run h2 { border: none; }
.run h2 .name { color: var(--muted); font-weight: normal; font-size: 0.75em; }
.facts, .files { color: var(--muted); font-size: 0.9em; }
pre.cmd { background: var(--code); border: 1px solid var(--line); border-radius: 6px; white-space: pre; }
.figs { display: flex; flex-wrap: wrap; gap: 1em; margin: 1em 0; }
figure { margin: 0; width: 300px; border: 1px solid var(--line); border-radius: 6px; padding: 0.4em; background: #fff; }
figure img { width: 100%; height: auto; display: block; }
figcaption { font-size: 0.82em; color: var(--muted); margin-top: 0.3em; }
.ci { display: block; color: var(--muted); font-size: 0.85em; }
td.bump-bump { color: #1b5e20; font-weight: bold; } td.bump-edge, td.bump-undetermined { color: #8a6d00; }
td.bump-rise, td.bump-fall, td.bump-flat { color: var(--muted); }
details pre { background: var(--code); border: 1px solid var(--line); border-radius: 6px; }
.missing { color: #8e1b1b; font-size: 0.9em; padding: 2em 0; text-align: center; }
]]

--- X.render(tree, runs, notebooks, opts) -> the index page (opts.title);
--- tree, runs and notebooks from X.find.
function X.render(tree, runs, notebooks, opts)
  opts = opts or {}
  local root = tree.root
  local title = opts.title or ("srgeo results in " .. root)
  local h = { "<h1>" .. esc(title) .. "</h1>",
              string.format('<p class="facts">%d run%s, %d notebook report%s under <code>%s</code>; '
                .. "written by srgeo %s on %s.</p>", #runs, #runs == 1 and "" or "s", #notebooks,
                #notebooks == 1 and "" or "s", esc(root), esc(srgeo.version), os.date("!%Y-%m-%d %H:%M UTC")) }
  if #runs > 0 then
    h[#h + 1] = '<table class="toc"><thead><tr><th>run</th><th>script</th><th>units</th><th>bump</th><th>figures</th>'
      .. "<th>written</th></tr></thead><tbody>"
    for _, r in ipairs(runs) do
      local t = r.results or {}
      local verdicts = {}
      for _, u in ipairs(type(t.units) == "table" and t.units or {}) do
        verdicts[#verdicts + 1] = esc(u.label or "?") .. ": " .. esc(u.bump_kind or "?")
      end
      h[#h + 1] = string.format('<tr><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>',
        slug(r.rel), esc(r.rel), esc(t.name or (r.err and "skipped") or ""), type(t.units) == "table" and #t.units or "–",
        table.concat(verdicts, "<br>"), type(t.figures) == "table" and #t.figures or "–", esc(t.written or ""))
    end
    h[#h + 1] = "</tbody></table>"
  end
  if #notebooks > 0 then
    h[#h + 1] = "<h2>Notebook reports</h2><ul>"
    for _, n in ipairs(notebooks) do
      h[#h + 1] = string.format('<li>%s — %s</li>', link(n.rel, n.rel), esc(n.title))
    end
    h[#h + 1] = "</ul>"
  end
  local notes = X.notes(tree, runs)
  if #notes > 0 then
    h[#h + 1] = '<h2>Left out</h2><ul class="notes">'
    for _, n in ipairs(notes) do h[#h + 1] = "<li>" .. esc(n) .. "</li>" end
    h[#h + 1] = "</ul>"
  end
  for _, r in ipairs(runs) do h[#h + 1] = run_html(tree, r) end
  return H.page { title = title, body = table.concat(h, "\n"), css = CSS }
end

--- X.notes(tree, runs) -> lines: each run skipped and each thing the walk
--- left out, with the reason (the console and the page list them).
function X.notes(tree, runs)
  local out = {}
  for _, r in ipairs(runs) do
    if r.err then out[#out + 1] = string.format("run %s skipped: %s", r.rel, r.err) end
  end
  for _, n in ipairs(tree.notes) do out[#out + 1] = string.format("%s: %s", n.rel, n.why) end
  if tree.more > 0 then out[#out + 1] = string.format("and %d more left out", tree.more) end
  return out
end

--- X.find(root) -> runs, notebooks, tree: what an index of root shows.
function X.find(root)
  local tree = new_tree(root)
  local runs, notebooks = find(tree)
  return runs, notebooks, tree
end

--- X.write(root [, {title =}]) -> {path =, runs =, notebooks =, skipped =, notes =}.
--- Writes root/index.html atomically (there, so its relative links hold).
--- skipped: runs whose results.json cannot be shown; notes: a line for each
--- of those and for each thing the walk left out, with the reason.
function X.write(root, opts)
  opts = opts or {}
  if type(root) ~= "string" or root == "" then fail("give the output folder to index (e.g. out/)") end
  root = root:gsub("/+$", "")
  if root == "" then root = "/" end
  local st = srgeo._stat(root)
  if not st then fail("no such folder %s", root) end
  if not st.dir then fail("%s is not a folder", root) end
  local runs, notebooks, tree = X.find(root)
  if #runs == 0 and #notebooks == 0 then
    fail("no runs (folders with a results.json) and no notebook reports under %s", root)
  end
  local skipped = 0
  for _, r in ipairs(runs) do if not r.results then skipped = skipped + 1 end end
  local path = root .. "/index.html"
  util.write_atomic(path, X.render(tree, runs, notebooks, opts))
  return { path = path, runs = #runs, notebooks = #notebooks, skipped = skipped, notes = X.notes(tree, runs) }
end

return X
