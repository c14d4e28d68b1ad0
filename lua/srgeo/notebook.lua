-- srgeo.notebook: Markdown notebooks with ```lua blocks, run into reports.
--
--   local nb = srgeo.notebook.run("notebooks/trained_vs_init.md", {out = "out/notebooks/trained_vs_init"})
--   nb.html, nb.md          -- OUT/NAME.html (self-contained) and OUT/NAME.md (with outputs)
--   srgeo scripts/notebook.lua FILE.md [--out DIR]      -- the same from the command line
--
-- Every top-level ```lua (or ~~~lua) block runs, in order, in one Lua
-- environment (globals persist from block to block; OUT names the output
-- folder), as a Jupyter cell does:
--   - what it prints (print, io.write) is its output;
--   - a block that ends with an expression displays its value, as the REPL
--     prints it (`p` shows the profile's summary, `m` the model's tree); a
--     call ending in `;` keeps it quiet, and so do nil and files (what
--     io.write returns); `return a, b` shows both;
--   - every figure srgeo.plot draws while it runs is embedded below it; a
--     plot call without opts.out draws into OUT/figures/ (plot.profile(ps)
--     just works); figure(path) embeds any other image file.
-- A block fenced as ```lua norun is shown but not run.  The Markdown is
-- CommonMark with GitHub's tables (cmark-gfm: srgeo.markdown).
--
-- The HTML report is one file: CSS inline, images as base64 data URIs, no
-- scripts and no external resources, so it opens anywhere and can be mailed.
-- That holds for a notebook someone else wrote: its Markdown is rendered in
-- srgeo.markdown's safe mode (raw HTML omitted, script URLs emptied, remote
-- images as links), and outputs are escaped.
-- Wide tables and outputs scroll sideways in their box.  The Markdown copy
-- keeps the text and code and adds each block's output, value and figures
-- (copied next to it under OUT/figures/).
--
-- An error stops the run: the report is still written (the failing block
-- shows the error, later blocks are marked as not run) and run() raises
-- "notebook FILE: block K (line L: `first line`) failed: message".
--
-- Parameters: the block fenced ```lua {parameters} holds `name = value --
-- help` lines, the notebook's defaults; opts.params (srgeo notebook FILE
-- --name VALUE) sets them after it runs.  N.expect prints the expected run
-- time from the notebook's recorded cost, and the runner counts it down per
-- cell on stderr.  N.to_ipynb / N.from_ipynb / N.convert: the Jupyter form
-- (srgeo.ipynb; the Markdown is the source).
local srgeo = require "srgeo"
local util = require "srgeo.util"
local H = require "srgeo.html"
local ipynb = require "srgeo.ipynb"

local N = {}

N.Error = util.Error
N.escape, N.base64 = H.escape, H.base64

-- ---------------------------------------------------------------------------
-- Parsing: text cells and the blocks to run

local function lines_of(text)
  local lines = {}
  for l in (text:sub(-1) == "\n" and text or text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  return lines
end

local runnable = ipynb.runnable

--- N.parse(text) -> cells: {kind = "text", text =, line =} and {kind =
--- "code", info =, code =, line = (line of the opening fence), first_line
--- = (of the code), last_line =, run = true, index = (k-th block),
--- parameters = true for the ```lua {parameters} block}.  The
--- blocks are the top-level fenced code blocks whose info string starts
--- with lua (not norun), found by CommonMark's rules (cmark-gfm); the rest,
--- other code blocks included, is text.
function N.parse(text)
  text = text:gsub("\r\n", "\n")
  local lines = lines_of(text)
  local cells, at, k = {}, 1, 0
  local function text_cell(a, b)
    if b >= a then cells[#cells + 1] = { kind = "text", text = table.concat(lines, "\n", a, b), line = a } end
  end
  for _, b in ipairs(srgeo.markdown.code_blocks(text)) do
    if b.fenced and runnable(b.info) then
      text_cell(at, b.line - 1)
      k = k + 1
      cells[#cells + 1] = { kind = "code", lang = "lua", info = b.info, code = b.code, line = b.line,
                            first_line = b.line + 1, last_line = b.last_line, run = true, index = k,
                            parameters = ipynb.is_parameters(b.info) or nil }
      at = b.last_line + 1
    end
  end
  text_cell(at, #lines)
  return cells
end

-- ---------------------------------------------------------------------------
-- Parameters: the ```lua {parameters} block

-- A parameter's value: a Lua literal (number, string, boolean), then an
-- optional `-- help` comment.  The first "--" after which the value parses
-- ends it (a string may hold "--").
local function param_value(rest)
  local at = 1
  while true do
    local p = rest:find("--", at, true)
    local expr = p and rest:sub(1, p - 1) or rest
    local f = load("return " .. expr, "=parameter", "t", {})
    if f then
      local ok, v = pcall(f)
      local t = type(v)
      if ok and (t == "number" or t == "string" or t == "boolean") then
        return v, p and rest:sub(p + 2):match("^%s*(.-)%s*$") or ""
      end
    end
    if not p then return nil end
    at = p + 2
  end
end

--- N.parameters(cells, path) -> list of {name =, default =, help =, line =}
--- (also keyed by name), from the notebook's parameters block: one
--- `name = value -- help` per line, value a number, string or boolean
--- literal (papermill's "parameters" cell).  No block: an empty list.
function N.parameters(cells, path)
  local list, block = {}, nil
  for _, c in ipairs(cells) do
    if c.parameters then
      if block then
        util.raise { msg = string.format("notebook %s: two parameters blocks (lines %d and %d); one holds them all",
          tostring(path), block.line, c.line) }
      end
      block = c
    end
  end
  if not block then return list end
  local lines = lines_of(block.code)
  for i, l in ipairs(lines) do
    if l:match("%S") and not l:match("^%s*%-%-") then
      local name, rest = l:match("^%s*([%a_][%w_]*)%s*=%s*(.-)%s*$")
      local v, help
      if name then v, help = param_value(rest) end
      if v == nil then
        util.raise { msg = string.format("notebook %s: parameters block, line %d: `%s` is not `name = value -- help` "
          .. "with a number, string or boolean value", tostring(path), block.first_line + i - 1, l) }
      end
      local p = { name = name, default = v, help = help, line = block.first_line + i - 1 }
      list[#list + 1] = p
      list[name] = p
    end
  end
  return list
end

-- The command-line spelling of parameters: --images, --preset.
local function names_of(params)
  local t = {}
  for _, p in ipairs(params) do t[#t + 1] = "--" .. p.name:gsub("_", "-") end
  return #t > 0 and table.concat(t, ", ") or "none"
end
N.parameter_names = names_of

-- Overrides checked against the notebook's parameters: known names, and the
-- type of the default (an integer default takes integers).
local function check_overrides(params, given, path)
  local out, names = {}, {}
  for k in pairs(given or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local v, p = given[k], params[k]
    if not p then
      util.raise { msg = string.format("notebook %s: unknown parameter '%s'; its parameters are %s (srgeo notebook %s --help)",
        tostring(path), k, names_of(params), tostring(path)) }
    end
    local want = math.type(p.default) == "integer" and "integer" or type(p.default)
    if want == "integer" and math.type(v) == "float" and v == math.floor(v) then v = math.tointeger(v) end
    local got = math.type(v) == "integer" and "integer" or type(v)
    if got ~= want and not (want == "number" and got == "integer") then
      util.raise { msg = string.format("notebook %s: parameter %s takes %s %s (default %s), got %s", tostring(path), k,
        want == "integer" and "an" or "a", want, tostring(p.default), tostring(v)) }
    end
    out[#out + 1] = { name = k, value = v }
  end
  return out
end

-- ---------------------------------------------------------------------------
-- Expected run time

local function duration(s)
  if s < 90 then return string.format("%.0f s", s) end
  if s < 90 * 60 then return string.format("%.0f min", s / 60) end
  return string.format("%.1f h", s / 3600)
end
N.duration = duration

-- The run in progress (set by N.run), which N.expect tells the total.
local running

--- N.expect{seconds = {PRESET = s, ...}, profiles =, images =, preset =,
--- measured = "machine, date"} -> seconds or nil: prints the notebook's
--- expected run time from its recorded cost (seconds per image and profile
--- for each preset, measured on the stated machine), scaled by the number
--- of profiles and images; a preset without a recorded cost says so.  Under
--- `srgeo notebook` the estimate also drives the per-cell "~N min left".
function N.expect(o)
  local per = o.seconds and o.seconds[o.preset]
  local line, total
  if per then
    total = per * o.profiles * o.images
    line = string.format("expected run time: ~%s (%d profiles × %d images × %.3g s per image and profile with the %s preset, "
      .. "measured on %s; profiles already in OUT/units are not recomputed)", duration(total), o.profiles, o.images, per,
      o.preset, o.measured or "an unstated machine")
  else
    local known = {}
    for k in pairs(o.seconds or {}) do known[#known + 1] = k end
    table.sort(known)
    line = string.format("expected run time: unknown (%d profiles × %d images; no recorded cost for the %s preset%s)",
      o.profiles, o.images, tostring(o.preset), #known > 0 and ", only for " .. table.concat(known, ", ") or "")
  end
  print(line)
  if running then
    running.expected = total
    if not running.quiet then io.stderr:write("[notebook] ", line, "\n") end
  end
  return total
end

-- ---------------------------------------------------------------------------
-- Running

-- srgeo.plot's figure functions and where each takes its options table.
local PLOT_FNS = { profile = 2, multiples = 2, heatmap = 2, descriptors = 2, lines = 3 }

local function first_code_line(code)
  for l in (code .. "\n"):gmatch("(.-)\n") do
    if l:match("%S") then return (l:gsub("^%s+", "")) end
  end
  return ""
end

--- N.compile(code, chunkname, env, first_line) -> function, shows_value, tail_line | nil, error.
--- The block as a chunk whose line numbers are those of the notebook.  When
--- its last statement is an expression (a name, a call, anything `return`
--- can take) and does not end with ";", the chunk returns its value, as a
--- Jupyter cell displays its last expression; tail_line is the line that
--- expression starts on (an error in a call there unwinds no frame of the
--- chunk: srgeo kernel names that line).
function N.compile(code, chunkname, env, first_line)
  local pad = string.rep("\n", (first_line or 1) - 1)
  local plain, err = load(pad .. code, chunkname, "t", env)
  local lines = lines_of(code)
  local last = #lines
  while last > 0 and (lines[last]:match("^%s*$") or lines[last]:match("^%s*%-%-")) do last = last - 1 end
  if last == 0 or lines[last]:match(";%s*$") or lines[last]:match("^%s*return[%s(]") or lines[last]:match("^%s*return$") then
    return plain, plain and false or err
  end
  -- The shortest tail of lines that is an expression on its own and leaves
  -- a chunk that compiles: "return" must end a block, so a cut inside a
  -- statement does not compile.
  for k = last, 1, -1 do
    local tail = table.concat(lines, "\n", k)
    if load("return " .. tail, "=expression", "t") then
      local head = k > 1 and table.concat(lines, "\n", 1, k - 1) .. "\n" or ""
      local f = load(pad .. head .. "return " .. tail, chunkname, "t", env)
      if f then return f, true, k + (first_line or 1) - 1 end
    end
  end
  return plain, plain and false or err
end

--- N.read(path) -> the notebook's Markdown text (an .ipynb converted).
function N.read(path)
  local text = util.try_read(path)
  if not text then util.raise { msg = "notebook: cannot read " .. tostring(path) } end
  if path:match("%.ipynb$") then text = ipynb.to_markdown(text) end
  return text
end

--- N.run(path, opts) -> {html =, md =, cells =, seconds =, ok = true}.
--- opts: out (folder; default out/notebooks/NAME), quiet (no progress on
--- stderr), env (the environment blocks run in; default a fresh one over _G),
--- title, params ({name = value}: set after the parameters block runs; an
--- unknown name or a value of another type than the default is an error
--- before anything runs).  Raises N.Error when a block fails (after writing
--- the report).  PATH may be an .ipynb (run as its Markdown form).
function N.run(path, opts)
  opts = opts or {}
  local text = N.read(path)
  local name = (path:match("([^/]+)$") or path):gsub("%.md$", ""):gsub("%.markdown$", ""):gsub("%.ipynb$", "")
  local cells = N.parse(text)
  local overrides = check_overrides(N.parameters(cells, path), opts.params, path)
  local out = opts.out or ("out/notebooks/" .. name)
  util.mkdir(out)
  util.mkdir(out .. "/figures")
  local env = opts.env or setmetatable({}, { __index = _G })
  env.OUT = out
  local nfig = 0
  local current -- the cell running now

  local function add_figure(p)
    if type(p) ~= "string" then return end
    local ext = p:match("%.(%w+)$")
    ext = ext and ext:lower()
    if not H.MIME[ext] then return end
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
  local outer = running
  running = { quiet = opts.quiet }
  local plot = srgeo.plot
  local repr = require("srgeo.repl").repr
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
      local drawn = 0
      for fname, at in pairs(PLOT_FNS) do
        local orig = plot[fname]
        saved_plot[fname] = orig
        plot[fname] = function(...)
          local args = table.pack(...)
          local o = args[at]
          -- no opts.out: a figure of this block under OUT/figures/
          if (o == nil or (type(o) == "table" and o.out == nil and o.terminal ~= "dumb")) and args.n <= at then
            drawn = drawn + 1
            local copy = {}
            for k, v in pairs(o or {}) do copy[k] = v end
            copy.out = string.format("%s/figures/block%d_%d.png", out, c.index, drawn)
            args[at], args.n = copy, at
          end
          local r = table.pack(orig(table.unpack(args, 1, args.n)))
          add_figure(r[1])
          return table.unpack(r, 1, r.n)
        end
      end
      if not opts.quiet then
        local so_far = srgeo._clock() - t_start
        local left = ""
        if running.expected then
          left = running.expected >= so_far and string.format(", ~%s left", duration(running.expected - so_far))
            or string.format(", over the expected ~%s", duration(running.expected))
        end
        io.stderr:write(string.format("[notebook] cell %d/%d (line %d), %s so far%s\n", c.index, total, c.line,
          duration(so_far), left))
        io.stderr:flush()
      end
      _G.print, io.write = cap_print, cap_write
      if rawget(env, "print") == saved_print then env.print = cap_print end
      local t0 = srgeo._clock()
      local chunk, shows = N.compile(c.code, "@" .. path, env, c.first_line)
      local ok, res
      if chunk then
        res = table.pack(xpcall(chunk, function(m)
          local s = type(m) == "string" and m or repr(m)
          -- the traceback down to the block (the runner's own frames say nothing)
          local tb = debug.traceback(s, 2)
          tb = tb:gsub("\n%s*%[C%]: in function 'xpcall'.*$", "")
          return { msg = s, trace = tb }
        end))
        ok = res[1]
      else
        ok, res = false, { nil, { msg = shows, trace = shows } }
      end
      _G.print, io.write = saved_print, saved_write
      for fname, f in pairs(saved_plot) do plot[fname] = f end
      current = nil
      c.seconds = srgeo._clock() - t0
      c.output = table.concat(outbuf)
      if ok then
        -- The block's value: what it returns, less nils, the paths of
        -- figures it drew (those show as figures) and files (io.write's
        -- result when it ends the block).
        local vals, any = {}, false
        for i = 2, res.n do
          local v = res[i]
          local skip = io.type(v) ~= nil
          for _, f in ipairs(c.figures) do if v == f.path then skip = true end end
          if not skip then vals[#vals + 1] = v; any = any or v ~= nil end
        end
        if any then c.value = repr(table.unpack(vals)) end
        if c.parameters and #overrides > 0 then
          local set = {}
          for _, o in ipairs(overrides) do
            env[o.name] = o.value
            set[#set + 1] = o.name .. " = " .. (type(o.value) == "string" and string.format("%q", o.value) or tostring(o.value))
          end
          c.output = c.output .. "parameters given: " .. table.concat(set, ", ") .. "\n"
        end
      else
        local e = res[2]
        c.error = e.msg
        c.trace = e.trace
        failed = c
      end
      nfig = nfig + #c.figures
      if not opts.quiet then
        io.stderr:write(string.format("[notebook] cell %d/%d (line %d) %s %.1f s%s\n", c.index, total, c.line,
          c.error and "FAILED after" or "done in", c.seconds, #c.figures > 0 and string.format(", %d figure(s)", #c.figures) or ""))
        io.stderr:flush()
      end
    end
  end
  running = outer
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
-- Jupyter: the Markdown notebook is the source, an .ipynb is generated

N.to_ipynb, N.from_ipynb = ipynb.from_markdown, ipynb.to_markdown

--- N.convert(path, to, out, force) -> out: FILE.md to an .ipynb (to =
--- "ipynb") or FILE.ipynb to Markdown (to = "md", outputs dropped), written
--- atomically; out defaults to PATH with the other extension.  A Markdown
--- file that exists and differs is replaced only with force (it is the
--- source; an .ipynb is generated and always replaced).
function N.convert(path, to, out, force)
  local text = util.try_read(path)
  if not text then util.raise { msg = "notebook: cannot read " .. tostring(path) } end
  local stem = path:gsub("%.ipynb$", ""):gsub("%.markdown$", ""):gsub("%.md$", "")
  local result
  if to == "ipynb" then
    if path:match("%.ipynb$") then util.raise { msg = "notebook --to ipynb: " .. path .. " is already an .ipynb" } end
    result = ipynb.from_markdown(text)
  elseif to == "md" then
    result = path:match("%.ipynb$") and ipynb.to_markdown(text) or text
  else
    util.raise { msg = "notebook: --to " .. tostring(to) .. ": the formats are ipynb and md" }
  end
  out = out or (stem .. "." .. to)
  if out == path then util.raise { msg = "notebook: converting " .. path .. " onto itself" } end
  if to == "md" and not force then
    local have = util.try_read(out)
    if have and have ~= result then
      util.raise { msg = "notebook: " .. out .. " exists and differs from " .. path .. "'s Markdown; "
        .. "pass --force to replace it, or -o OTHER.md" }
    end
  end
  util.write_atomic(out, result)
  return out
end

-- ---------------------------------------------------------------------------
-- The HTML report

local esc = H.escape

local CSS = [[
.cell { margin: 1.1em 0; border: 1px solid var(--line); border-radius: 6px; overflow: hidden; }
.cell .src { background: var(--code); }
.cell .bar { font-size: 0.78em; color: var(--muted); padding: 0.25em 1em; border-bottom: 1px solid var(--line);
             background: #eef2f5; display: flex; justify-content: space-between; }
.cell .bar a { color: inherit; text-decoration: none; }
.cell .out { background: var(--out); border-top: 1px solid var(--line); }
.cell .out pre { white-space: pre; }
.cell .val { display: flex; }
.cell .val .tag { color: var(--muted); font: 0.8em/1.45 "DejaVu Sans Mono", monospace; padding: 0.95em 0 0 0.8em; }
.cell .val pre { flex: 1; min-width: 0; }
.cell .fig { border-top: 1px solid var(--line); padding: 0.6em; text-align: center; background: #fff; }
.cell .fig img { max-width: 100%; height: auto; }
.cell.error { border-color: #c62828; }
.cell .err { background: #fdecea; color: #8e1b1b; border-top: 1px solid #c62828; }
.cell.skipped { opacity: 0.55; }
.missing { color: #8e1b1b; }
]]

local function figure_html(f)
  local uri = H.data_uri(f.path)
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

local function cell_html(c)
  local h = {}
  local cls = "cell" .. (c.error and " error" or "") .. (c.skipped and " skipped" or "")
  local status = c.skipped and "not run" or c.error and string.format("failed after %.1f s", c.seconds)
    or string.format("%.2f s", c.seconds or 0)
  h[#h + 1] = string.format('<div class="%s" id="block-%d"><div class="bar"><a href="#block-%d">block %d · line %d</a>'
    .. "<span>%s</span></div>", cls, c.index, c.index, c.index, c.line, status)
  h[#h + 1] = '<div class="src"><pre><code class="language-lua">' .. esc(c.code) .. "</code></pre></div>"
  if c.output and c.output ~= "" then h[#h + 1] = '<div class="out"><pre>' .. esc(c.output) .. "</pre></div>" end
  if c.value then
    h[#h + 1] = '<div class="out val"><span class="tag">=</span><pre>' .. esc(c.value) .. "</pre></div>"
  end
  for _, f in ipairs(shown_figures(c)) do h[#h + 1] = figure_html(f) end
  if c.error then h[#h + 1] = '<div class="err"><pre>' .. esc(c.trace or c.error) .. "</pre></div>" end
  h[#h + 1] = "</div>"
  return table.concat(h, "\n")
end

--- N.render_html(cells, meta) -> a self-contained HTML document.  The
--- Markdown is rendered as one document (so reference links and footnotes
--- work across blocks), each block standing in as a paragraph of one word
--- (a token no text holds: raw HTML, an HTML comment included, is omitted
--- in the safe mode) that its cell then replaces.
function N.render_html(cells, meta)
  local base = meta.path:match("^(.*)/[^/]*$") or "."
  local md, by_index = {}, {}
  local token = string.format("srgeocell%08x%08xn", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
  for _, c in ipairs(cells) do
    if c.kind == "text" then
      md[#md + 1] = c.text
    else
      md[#md + 1] = "\n" .. token .. c.index .. "\n"
      by_index[c.index] = c
    end
  end
  local body = H.markdown(table.concat(md, "\n"), base)
  local title = meta.title or body:match("<h1[^>]*>(.-)</h1>")
  title = title and title:gsub("<[^>]*>", ""):gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&quot;", '"'):gsub("&amp;", "&")
    or meta.name
  body = body:gsub("<p>" .. token .. "(%d+)</p>", function(k) return cell_html(by_index[tonumber(k)]) end)
  local h = {}
  if meta.failed then
    h[#h + 1] = string.format('<p class="banner">This notebook stopped at <a href="#block-%d">block %d (line %d)</a> '
      .. "with an error; later blocks did not run.</p>", meta.failed.index, meta.failed.index, meta.failed.line)
  end
  h[#h + 1] = body
  h[#h + 1] = string.format('<p class="meta">Generated by srgeo %s from %s on %s; %d blocks, %d figures, %.1f s.</p>',
    esc(srgeo.version), esc(meta.path), os.date("!%Y-%m-%d %H:%M UTC"), meta.blocks, meta.figures, meta.seconds)
  return H.page { title = title, body = table.concat(h, "\n"), css = CSS }
end

-- ---------------------------------------------------------------------------
-- The Markdown copy

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

local fence_for = ipynb.fence_for

local function text_block(s)
  local f = fence_for(s)
  return f .. "text\n" .. s .. "\n" .. f
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
      if c.skipped then
        m[#m + 1] = "*(not run)*"
      else
        local o = (c.output or ""):gsub("\n$", "")
        if c.value then o = o .. (o ~= "" and "\n" or "") .. c.value end
        if o ~= "" then m[#m + 1] = text_block(o) end
        for k, fig in ipairs(shown_figures(c)) do
          m[#m + 1] = string.format("![%s](%s)", fig.path:match("([^/]+)$"), md_figure(fig, meta.out, c, k))
        end
        if c.error then m[#m + 1] = "**Error in block " .. c.index .. ":**\n\n" .. text_block(c.trace or c.error) end
      end
    end
  end
  m[#m + 1] = string.format("\n---\n*Generated by srgeo %s from %s on %s; %d blocks, %d figures, %.1f s.*",
    srgeo.version, meta.path, os.date("!%Y-%m-%d %H:%M UTC"), meta.blocks, meta.figures, meta.seconds)
  return table.concat(m, "\n\n") .. "\n"
end

return N
