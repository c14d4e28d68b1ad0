-- srgeo.plot: figures through gnuplot, one process per figure, with the data file and .gp
-- script beside each figure so a user can restyle it.
--
--   srgeo.plot.profile({p1, p2}, {out = "out/bump.png", labels = {"trained", "random"}})
--   srgeo.plot.show(p)                      -- text rendering in the REPL
--
-- Every figure is one gnuplot process.  Beside OUT (out/bump.png) go its data
-- (out/bump.dat: whitespace-separated, "#" comments naming the columns of each
-- index block, NaN for a missing value) and its script (out/bump.gp, which
-- reads the data by relative name), so `cd out && gnuplot bump.gp` redraws the
-- figure after a restyle.  The terminal follows OUT's extension: .png
-- (pngcairo), .svg, .pdf (pdfcairo), .txt (dumb text); or opts.terminal.
-- With terminal "dumb" and no OUT nothing is kept and the text is returned.
-- Without OUT a figure is shown: in Jupyter inline (plot.display), in the
-- shell in a window, else as a terminal image, else written to a temporary
-- file whose path is printed (plot.view_mode says which).
--
-- Each function but show returns OUT (nil when nothing was written or the
-- figure was shown) and, for text output, the text; show prints the text
-- and returns nothing.  Every write is atomic: data and script go through a
-- temporary file and a rename, and gnuplot draws into a temporary name that
-- the script takes from the variable OUT (`gnuplot -e "OUT='x'" bump.gp`).
--
-- Pure Lua: nothing here needs the C core, so it runs from stock lua5.4.
local util = require "srgeo.util"

local M = {}

local NAN = 0 / 0
local HUGE = math.huge

-- Okabe-Ito colours (colour-blind safe), then Tol's wine and olive.
local COLORS = { "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
                 "#882255", "#999933" }
local function color(i) return COLORS[(i - 1) % #COLORS + 1] end

-- An ordered palette for series that form a sequence (checkpoints by
-- step): viridis from dark violet to green, stopping at 0.85 so the last
-- curve stays visible on white.
local VIRIDIS = { { 0, 0x44, 0x01, 0x54 }, { 0.25, 0x3b, 0x52, 0x8b }, { 0.5, 0x21, 0x91, 0x8c },
                  { 0.75, 0x5e, 0xc9, 0x62 }, { 1, 0xfd, 0xe7, 0x25 } }
local function ordered_color(i, n)
  local t = n > 1 and 0.85 * (i - 1) / (n - 1) or 0
  for k = 2, #VIRIDIS do
    local a, b = VIRIDIS[k - 1], VIRIDIS[k]
    if t <= b[1] then
      local f = (t - a[1]) / (b[1] - a[1])
      local function mix(j) return math.floor(a[j] + f * (b[j] - a[j]) + 0.5) end
      return string.format("#%02X%02X%02X", mix(2), mix(3), mix(4))
    end
  end
end
M._ordered_color = ordered_color

local ETA_LABEL = "η (L2 perturbation norm)"
local R_LABEL = "r_η"

---------------------------------------------------------------------------
-- Errors and input checks.  Messages start "srgeo.plot.FN:" so a failing
-- script says which figure it was drawing.
---------------------------------------------------------------------------

local function fail(fn, fmt, ...) error("srgeo.plot." .. fn .. ": " .. string.format(fmt, ...), 0) end

-- Text on one line (comments in the script and data files): a newline in a
-- file name must not end the comment and start a command.
local function one_line(s) return (tostring(s):gsub("[%z\1-\31\127]", " ")) end

local function finite(v) return type(v) == "number" and v == v and v ~= HUGE and v ~= -HUGE end

-- The largest positive integer key of t (the length of an array with holes).
local function max_index(t)
  local n = 0
  for k in pairs(t) do
    if math.type(k) == "integer" and k > n then n = k end
  end
  return n
end

-- An array of n values, each a number or nil; NaN/±inf/nil become NaN (a
-- missing value).  n = nil takes the array's own length.  Anything else is an
-- error naming the function and `what`.
local function values(fn, what, t, n)
  if type(t) ~= "table" then fail(fn, "%s is a %s, expected an array of numbers", what, type(t)) end
  local len = max_index(t)
  n = n or len
  if len ~= n then
    fail(fn, "%s has %d entries, expected %d (mark a discarded rung with NaN, not a trailing nil)", what, len, n)
  end
  local out = {}
  for i = 1, n do
    local v = t[i]
    if v ~= nil and type(v) ~= "number" then
      fail(fn, "%s[%d] is a %s, expected a number", what, i, type(v))
    end
    out[i] = finite(v) and v or NAN
  end
  return out
end

-- Coordinates: every entry a finite number (positive on a log axis).
local function coords(fn, what, t, n, log)
  local v = values(fn, what, t, n)
  if #v == 0 then fail(fn, "%s is empty", what) end
  for i = 1, #v do
    if v[i] ~= v[i] then fail(fn, "%s[%d] must be a finite number", what, i) end
    if log and v[i] <= 0 then fail(fn, "%s[%d] = %g is not positive (log axis)", what, i, v[i]) end
  end
  return v
end

local function any_finite(a)
  for i = 1, #a do if a[i] == a[i] then return true end end
  return false
end

-- Does the band lo..hi have any width (no bootstrap leaves lo = hi)?
local function has_width(lo, hi)
  for i = 1, #lo do if lo[i] < hi[i] then return true end end
  return false
end

-- Option tables: every key known, every value of the expected type.
local COMMON_OPTS = {
  out = "string", terminal = "string", title = "string", size = "table", font = "string",
  gnuplot = "string", key = "string", about = "boolean",
}

local function check_opts(fn, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(fn, "options must be a table, got a %s", type(opts)) end
  for k, v in pairs(opts) do
    local want = known[k] or COMMON_OPTS[k]
    if not want then fail(fn, "unknown option '%s'", tostring(k)) end
    if want ~= "any" and type(v) ~= want then
      fail(fn, "option %s must be a %s, got a %s", k, want, type(v))
    end
  end
  -- opts.key is gnuplot syntax ("top left", "at 0.5,0.9"), the one option
  -- written into a script unquoted: keywords and numbers only, so it cannot
  -- carry a string, a backquote, a macro or a second command.
  if opts.key and not opts.key:find("^[%w _,.+%-]*$") then
    fail(fn, "option key must be gnuplot key words and numbers (letters, digits, spaces, _ , . + -), got '%s'",
      one_line(opts.key))
  end
  return opts
end

-- opts.labels: one string per series.
local function check_labels(fn, labels, n, what)
  if labels == nil then return nil end
  local len = max_index(labels)
  if len ~= n then fail(fn, "labels has %d entries for %d %s", len, n, what) end
  local out = {}
  for i = 1, n do
    local l = labels[i]
    if type(l) ~= "string" and type(l) ~= "number" then
      fail(fn, "labels[%d] is a %s, expected a string", i, type(l))
    end
    out[i] = tostring(l)
  end
  return out
end

-- A {lo, hi} range; either end nil or "*" for automatic.
local function check_range(fn, name, r, log)
  if r == nil then return nil end
  local out = {}
  for i = 1, 2 do
    local v = r[i]
    if v == "*" then v = nil end
    if v ~= nil and not finite(v) then fail(fn, "%s[%d] must be a finite number or \"*\"", name, i) end
    if v ~= nil and log and v <= 0 then fail(fn, "%s[%d] = %g is not positive (log axis)", name, i, v) end
    out[i] = v
  end
  if out[1] and out[2] and out[1] >= out[2] then fail(fn, "%s must have lo < hi", name) end
  return out
end

---------------------------------------------------------------------------
-- Profiles: the engine's result objects (srgeo.profile), checked once.
---------------------------------------------------------------------------

-- A profile or a list of profiles -> list.
local function profile_list(fn, x)
  if type(x) ~= "table" then fail(fn, "expected a profile or a list of profiles, got a %s", type(x)) end
  if x.scales ~= nil then return { x } end
  if max_index(x) == 0 then fail(fn, "no profiles given (empty list)") end
  return x
end

-- Check a profile and copy what a figure needs into plain arrays of n values.
local function norm_profile(fn, p, where)
  if type(p) ~= "table" then fail(fn, "%s is a %s, expected a profile (a table with scales and median)", where, type(p)) end
  if p.scales == nil then fail(fn, "%s has no scales", where) end
  local scales = coords(fn, where .. " scales", p.scales, nil, true)
  local n = #scales
  if p.median == nil then fail(fn, "%s has no median", where) end
  local q = { scales = scales, median = values(fn, where .. " median", p.median, n) }
  if not any_finite(q.median) then fail(fn, "%s has no valid rung (every median entry is NaN or nil)", where) end
  if (p.lo == nil) ~= (p.hi == nil) then fail(fn, "%s has only one of lo and hi", where) end
  if p.lo ~= nil then
    q.lo = values(fn, where .. " lo", p.lo, n)
    q.hi = values(fn, where .. " hi", p.hi, n)
  end
  if p.mean ~= nil then q.mean = values(fn, where .. " mean", p.mean, n) end
  if p.per_image ~= nil then
    if type(p.per_image) ~= "table" then fail(fn, "%s per_image is a %s, expected an array of arrays", where, type(p.per_image)) end
    q.per_image = {}
    for i = 1, max_index(p.per_image) do
      q.per_image[i] = values(fn, string.format("%s per_image[%d]", where, i), p.per_image[i], n)
    end
  end
  local label = p.label or p.model
  q.label = label ~= nil and tostring(label) or nil
  q.identity = type(p.identity) == "table" and p.identity or nil
  q.ci = type(p.options) == "table" and finite(p.options.ci) and p.options.ci or nil
  return q
end

-- Key entries for curves nobody named: each profile's label, and where two
-- curves would share one, what tells them apart in their identities (the
-- evaluation set, then the preset, the tap, the weights), else "#i".
local IDENTITY_KEYS = { { "eval" }, { "preset", "preset " }, { "tap", "tap " }, { "weights", "weights ", 8 } }
local function distinct_titles(qs)
  local titles = {}
  for i, q in ipairs(qs) do titles[i] = q.label end
  local function clashes()
    local seen, any = {}, false
    for i, t in ipairs(titles) do
      if t then
        if seen[t] then any = true; seen[t][#seen[t] + 1] = i else seen[t] = { i } end
      end
    end
    return any and seen or nil
  end
  for _, k in ipairs(IDENTITY_KEYS) do
    local seen = clashes()
    if not seen then return titles end
    for _, group in pairs(seen) do
      if #group > 1 then
        local values, differ = {}, false
        for j, i in ipairs(group) do
          local id = qs[i].identity
          values[j] = id and id[k[1]] ~= nil and tostring(id[k[1]]) or nil
          if values[j] ~= values[1] then differ = true end
        end
        if differ then
          for j, i in ipairs(group) do
            local v = values[j]
            if v and k[3] then v = v:sub(1, k[3]) end
            titles[i] = titles[i] .. " · " .. (k[2] or "") .. (v or "?")
          end
        end
      end
    end
  end
  if clashes() then
    for i, t in ipairs(titles) do if t then titles[i] = t .. " #" .. i end end
  end
  return titles
end

---------------------------------------------------------------------------
-- Titles name what the data were measured on.
---------------------------------------------------------------------------

-- An evaluation set as a title names it: srgeo.experiment's identities say
-- "fmnist-test:32@0", whose count and seed the rest of the title gives.
local function eval_name(e)
  e = tostring(e)
  return e:match("^(.-):%d+@%-?%d+$") or e
end

--- plot.about(profiles [, title]) -> "small_resnet, vit_tiny on fmnist-test,
--- 32 images" or nil: the models (identity.model, else p.model), evaluation
--- sets (identity.eval) and image counts (n_images, else the per-image rows)
--- of the profiles (nested lists: panels, groups), each part left out when
--- the title already names it.  Every figure's title ends with it (lines
--- and heatmap: of opts.from), so a figure says what it was measured on.
function M.about(list, title)
  local models, evals, archs, counts, seen = {}, {}, {}, {}, {}
  local function once(t, v)
    if v == nil or v == "" or seen[t] and seen[t][v] then return end
    seen[t] = seen[t] or {}
    seen[t][v] = true
    t[#t + 1] = v
  end
  local function walk(x, depth)
    if type(x) ~= "table" or depth > 4 then return end
    if x.scales == nil and x.descriptors == nil and x.median == nil then -- a list
      for i = 1, max_index(x) do walk(x[i], depth + 1) end
      return
    end
    local id = type(x.identity) == "table" and x.identity or {}
    local m = id.model or x.model
    -- a model file by its name, as legends name it (identity keeps the path)
    if m ~= nil then once(models, (tostring(m):gsub("^.*/", ""))) end
    if id.eval ~= nil then once(evals, eval_name(id.eval)) end
    once(archs, id.arch and tostring(id.arch) or "?")
    local n = math.tointeger(x.n_images) or (type(x.per_image) == "table" and max_index(x.per_image) > 0
      and max_index(x.per_image)) or math.tointeger(id.n_images)
    if n then counts[#counts + 1] = { n_images = n } end
  end
  walk(list, 0)
  -- v in the title as a name of its own ("tiny" is not in "tiny_net",
  -- "fmnist-test" not in "fmnist-test-blur")
  local function has(v)
    local from = 1
    while title do
      local i, j = title:find(v, from, true)
      if not i then return false end
      if not title:sub(i - 1, i - 1):find("[%w_%-]") and not title:sub(j + 1, j + 1):find("[%w_%-]") then return true end
      from = i + 1
    end
    return false
  end
  local function named(t)
    for _, v in ipairs(t) do if not has(v) then return false end end
    return true
  end
  local s = ""
  if #models > 0 and not named(models) then
    s = #models <= 3 and table.concat(models, ", ")
      or string.format("%d models%s", #models, #archs == 1 and archs[1] ~= "?" and " (" .. archs[1] .. ")" or "")
  end
  if #evals > 0 and not named(evals) then
    s = (s ~= "" and s .. " " or "") .. "on " .. (#evals <= 3 and table.concat(evals, ", ")
      or string.format("%d evaluation sets", #evals))
  end
  local ntext = util.images_text(counts)
  if ntext and not has(ntext) then s = (s ~= "" and s .. ", " or "") .. ntext end
  return s ~= "" and s or nil
end

-- A figure's title: the caller's (or default) title, then on its own line
-- what plot.about says the title does not (opts.about = false: the title
-- alone).
local function titled(opts, title, list)
  local a = list and opts.about ~= false and M.about(list, title)
  if title and a then return title .. "\n" .. a end
  return title or a
end

---------------------------------------------------------------------------
-- Output: terminals, paths, the data file, the script, running gnuplot.
---------------------------------------------------------------------------

-- size: default {w, h} in the terminal's unit (pixels, inches, characters).
local TERMINALS = {
  png = { size = { 800, 500 }, font = "Sans,11",
          set = 'set terminal pngcairo enhanced size %d,%d font %s linewidth 1.2 rounded' },
  svg = { size = { 800, 500 }, font = "Sans,11",
          set = 'set terminal svg enhanced size %d,%d dynamic font %s linewidth 1.2 rounded background rgb "white"' },
  pdf = { size = { 5, 3.125 }, font = "Sans,9",
          set = 'set terminal pdfcairo enhanced size %gin,%gin font %s linewidth 1.0 rounded' },
  dumb = { size = { 100, 32 }, set = "set terminal dumb size %d,%d" },
}
local BY_EXTENSION = { png = "png", svg = "svg", pdf = "pdf", txt = "dumb" }

local function split_path(path)
  local dir, base = path:match("^(.*)/([^/]*)$")
  if not dir then return ".", path end
  if dir == "" then dir = "/" end
  return dir, base
end

-- Every string srgeo writes into a gnuplot script (titles, labels, key
-- entries, tic names, file names, the font) goes through gpstr, and nothing
-- else puts text there: gnuplot runs `cmd` inside a double-quoted string
-- (a checkpoint named m`touch X`.safetensors ran touch on every redraw), while
-- a single-quoted string is inert: no backquote substitution, no @macros, no
-- backslash escapes, and '' is its only escape.  A newline cannot appear
-- inside one (it ends the command), so a line break becomes the string
-- expression 'a'."\n".'b' (accepted wherever gnuplot reads text); other
-- control characters (NUL, CR, tab, ESC, ...) become spaces.
local function gpstr(s)
  s = tostring(s):gsub("[%z\1-\9\11-\31\127]", " ")
  local parts = {}
  for line in (s .. "\n"):gmatch("(.-)\n") do parts[#parts + 1] = "'" .. line:gsub("'", "''") .. "'" end
  return table.concat(parts, '."\\n".')
end
M._gpstr = gpstr

--- plot.display: nil, or function(files, kept) that shows a figure, files
--- {TERMINAL = path} (png and svg, or the one format asked for);
--- `srgeo kernel` sets it, so in Jupyter a plot without out is a
--- display_data in the notebook (image/png and image/svg+xml; its files are
--- removed after), and a figure written to opts.out is shown too (kept =
--- true: a notebook shows the figures its cells draw, as srgeo notebook's
--- report does).  Without it, a plot without out writes a temporary file.
M.display = nil

-- Text a user gave (a title, a label, a key entry): literal, so `_` and `^`
-- in "small_resnet" stay characters rather than enhanced-text subscripts.
local function literal(s) return gpstr(s) .. " noenhanced" end

-- A tic's name: gnuplot reads an explicit tic label as a format for the
-- tic's value ("low %g"), so a % in a name is doubled (a name "%s" was
-- "Bad format character" and no figure).
local function tic_label(s) return gpstr((tostring(s):gsub("%%", "%%%%"))) end

-- The library's own axis labels, written as enhanced text on purpose
-- (r_η: r with a subscript η); FIELD_LABELS below adds the descriptors'.
local ENHANCED = { [ETA_LABEL] = true, [R_LABEL] = true }

-- An axis label: enhanced when it is one of the library's own, else literal.
local function label_text(s) return ENHANCED[s] and gpstr(s) or literal(s) end

-- A value in a data file: numbers in full precision, NaN when missing,
-- strings quoted (gnuplot reads "a b" as one column).
local function datum(v)
  if type(v) == "string" then return '"' .. one_line(v):gsub('"', "'") .. '"' end
  if not finite(v) then return "NaN" end
  if math.type(v) == "integer" then return tostring(v) end
  return string.format("%.10g", v)
end

-- An axis bound: 6 significant digits keep the script readable.
local function bound(v) return v == nil and "*" or string.format("%.6g", v) end

local gnuplot_found = {} -- binaries known to exist (failures are re-checked)

local function gnuplot_binary(fn, opts)
  local bin = opts.gnuplot or os.getenv("SRGEO_GNUPLOT") or "gnuplot"
  if not gnuplot_found[bin] then
    if os.execute("command -v " .. util.shell_quote(bin) .. " >/dev/null 2>&1") ~= true then
      return nil, bin
    end
    gnuplot_found[bin] = true
  end
  return bin
end

-- The terminals a gnuplot binary has (`gnuplot -e 'set terminal'` lists
-- them, one a line after its header), cached per binary.
local terminals_of = {}
local function gnuplot_terminals(bin)
  if terminals_of[bin] then return terminals_of[bin] end
  local set = {}
  local p = io.popen(util.shell_quote(bin) .. " -e 'set terminal' 2>&1 </dev/null")
  if p then
    for line in p:lines() do
      local name = line:match("^%s+([%w_]+)%s")
      if name then set[name] = true end
    end
    p:close()
  end
  terminals_of[bin] = set
  return set
end

--- plot.VIEWS: how a figure drawn without opts.out is shown outside Jupyter,
--- in the order plot.view_mode tries them.
M.VIEWS = { "window", "kitty", "iterm", "sixel", "file" }
local WINDOW_TERMINALS = { "qt", "wxt", "x11" }

--- plot.view_mode([gnuplot]) -> mode, detail: how srgeo.plot.* without out
--- shows a figure in the shell (Jupyter: plot.display).  $SRGEO_PLOT_VIEW
--- names one of plot.VIEWS to force it; else, in order:
---   "window"  $DISPLAY or $WAYLAND_DISPLAY is set and gnuplot has an
---             interactive terminal (qt, wxt or x11; detail names it:
---             Debian's gnuplot-qt or gnuplot-x11, not gnuplot-nox);
---   "kitty"   the kitty graphics protocol: $KITTY_WINDOW_ID set, or
---             $TERM xterm-kitty or xterm-ghostty;
---   "iterm"   iTerm2's inline images: $TERM_PROGRAM iTerm.app or WezTerm,
---             or $LC_TERMINAL iTerm2;
---   "sixel"   $TERM foot*, mlterm*, yaft*, contour* or *sixel*, and gnuplot
---             has its sixelgd terminal;
---   "file"    a PNG in a private folder under $TMPDIR (default /tmp), its
---             path printed.
--- The terminal image formats need stdout to be a terminal and no tmux or
--- screen between (they drop the escape sequences unless configured to pass
--- them: force the mode there).
function M.view_mode(bin)
  bin = bin or os.getenv("SRGEO_GNUPLOT") or "gnuplot"
  local function env(k) local v = os.getenv(k); return v ~= nil and v ~= "" and v or nil end
  local forced = env("SRGEO_PLOT_VIEW")
  if forced then
    for _, v in ipairs(M.VIEWS) do
      if v == forced then
        local have = (v == "window" or v == "sixel") and gnuplot_terminals(bin) or {}
        if v == "sixel" and not have.sixelgd then
          error(string.format("srgeo.plot: SRGEO_PLOT_VIEW=sixel, but %s has no sixelgd terminal", bin), 0)
        elseif v ~= "window" then
          return v
        end
        for _, t in ipairs(WINDOW_TERMINALS) do if have[t] then return v, t end end
        error(string.format("srgeo.plot: SRGEO_PLOT_VIEW=window, but %s has no interactive terminal (qt, wxt or x11: "
          .. "install gnuplot-qt or gnuplot-x11)", bin), 0)
      end
    end
    error(string.format("srgeo.plot: SRGEO_PLOT_VIEW=%s is not one of %s", forced, table.concat(M.VIEWS, ", ")), 0)
  end
  local why -- said with a file's path: why there was no window
  if env("DISPLAY") or env("WAYLAND_DISPLAY") then
    local have = gnuplot_terminals(bin)
    for _, t in ipairs(WINDOW_TERMINALS) do if have[t] then return "window", t end end
    why = "no window: this gnuplot has no qt, wxt or x11 terminal (Debian: gnuplot-qt instead of gnuplot-nox)"
  end
  if env("TMUX") or (env("TERM") or ""):find("^screen") or os.execute("test -t 1") ~= true then return "file", why end
  local term = env("TERM") or ""
  if env("KITTY_WINDOW_ID") or term == "xterm-kitty" or term == "xterm-ghostty" then return "kitty" end
  local prog = env("TERM_PROGRAM")
  if prog == "iTerm.app" or prog == "WezTerm" or env("LC_TERMINAL") == "iTerm2" then return "iterm" end
  for _, pat in ipairs { "^foot", "^mlterm", "^yaft", "^contour", "sixel" } do
    if term:find(pat) and gnuplot_terminals(bin).sixelgd then return "sixel" end
  end
  return "file", why
end

-- The figures shown without opts.out go in one private folder per process
-- ($TMPDIR/srgeo-plot.XXXXXX, mode 700), numbered: NAME-K.png (.dat and .gp
-- beside, so a shown figure can be restyled and redrawn like a kept one).
local view_dir, view_count, said_why = nil, 0, false
local function view_path(fn, ext)
  if not view_dir then
    local base = os.getenv("TMPDIR")
    if not base or base == "" then base = "/tmp" end
    local p = io.popen("mktemp -d " .. util.shell_quote(base .. "/srgeo-plot.XXXXXX") .. " 2>&1")
    local dir = p and p:read("l")
    local ok = p and p:close()
    if not (ok and dir and dir ~= "") then
      fail(fn, "cannot create a temporary folder under %s: %s", base, tostring(dir))
    end
    view_dir = dir
  end
  view_count = view_count + 1
  return string.format("%s/%s-%d.%s", view_dir, fn, view_count, ext)
end

-- Whether the shell's REPL is running (core/shell/shell.c marks srgeo.repl
-- as it starts): there it echoes a returned path, so it is not said twice.
local function in_repl()
  local r = package.loaded["srgeo.repl"]
  return type(r) == "table" and r.interactive == true
end

-- A figure drawn without opts.out onto a terminal: the escape sequence of
-- its image format around the bytes (kitty: base64 PNG in chunks of 4096,
-- q=2 so the terminal sends no reply into the REPL's input; iTerm2: one
-- OSC 1337 with the PNG's size; sixel: gnuplot's sixelgd output as it is).
local function terminal_image(mode, bytes)
  if mode == "sixel" then return bytes .. "\n" end
  local b64 = util.base64(bytes)
  if mode == "iterm" then
    return string.format("\27]1337;File=inline=1;size=%d;preserveAspectRatio=1:%s\7\n", #bytes, b64)
  end
  local out = {}
  for i = 1, #b64, 4096 do
    local more = i + 4096 <= #b64 and 1 or 0
    out[#out + 1] = (i == 1 and "\27_Ga=T,f=100,q=2,m=%d;" or "\27_Gm=%d;"):format(more) .. b64:sub(i, i + 4095) .. "\27\\"
  end
  return table.concat(out) .. "\n"
end
M._terminal_image = terminal_image

-- A figure under construction: data blocks, script lines, then render().
local Figure = {}
Figure.__index = Figure

-- Choose the terminal and output path from the common options.
-- size_for(term, default_size) -> {w, h}: a figure's own default size.
local function new_figure(fn, opts, size_for)
  local term, out, display, announce, view, window, why = opts.terminal, opts.out, nil, false, nil, nil, nil
  if term ~= nil and not TERMINALS[term] then
    fail(fn, "unknown terminal '%s' (png, svg, pdf or dumb)", term)
  end
  if out ~= nil then
    if out == "" then fail(fn, "opts.out is an empty path") end
    -- The script names its files in gnuplot strings, which hold no control
    -- characters (see gpstr): such a name is refused, not silently changed.
    local cc = out:find("[%z\1-\31\127]")
    if cc then fail(fn, "opts.out has a control character (byte %d at position %d)", out:byte(cc), cc) end
    local ext = out:match("%.(%w+)$")
    local by_ext = ext and BY_EXTENSION[ext:lower()]
    if term == nil then
      if not by_ext then fail(fn, "cannot choose a terminal for '%s': use .png, .svg, .pdf or .txt, or set opts.terminal", out) end
      term = by_ext
    elseif by_ext and by_ext ~= term then
      fail(fn, "terminal '%s' does not match the extension of '%s'", term, out)
    end
  elseif term ~= "dumb" and M.display then
    -- no out where figures can be shown (Jupyter): drawn in a temporary folder
    term = term or "png"
    display = os.tmpname()
    os.remove(display)
    if os.execute("mkdir -m 700 " .. util.shell_quote(display)) ~= true then fail(fn, "cannot create a temporary folder") end
    out = display .. "/" .. fn .. "." .. (term == "pdf" and "pdf" or term)
  elseif term ~= "dumb" then
    -- no out (the shell): shown as plot.view_mode says (a PNG figure; any
    -- other terminal is a file), else a file whose path is printed
    if term == nil or term == "png" then view, window = M.view_mode(opts.gnuplot) end
    if view == "file" then view, why = nil, window end
    if view ~= "window" then window = nil end
    term = term or "png"
    out = view_path(fn, view == "sixel" and "six" or term)
    announce = view == nil
  end
  local size = TERMINALS[term].size
  if size_for then size = size_for(term, size) end
  if opts.size ~= nil then
    local w, h = opts.size[1], opts.size[2]
    if not (finite(w) and finite(h) and w > 0 and h > 0) then fail(fn, "size must be {width, height} with positive numbers") end
    size = { w, h }
  end
  if term ~= "pdf" then size = { math.floor(size[1] + 0.5), math.floor(size[2] + 0.5) } end
  return setmetatable({ fn = fn, opts = opts, term = term, out = out, size = size, display = display, announce = announce,
                        view = view, window = window, why = why, dumb = term == "dumb", blocks = {}, lines = {} }, Figure)
end

-- Add a data block: comment (one line), column names, rows (arrays of
-- values).  Returns its gnuplot index (0-based).
function Figure:block(comment, columns, rows)
  assert(#rows > 0, "srgeo.plot: empty data block")
  local b = { string.format("# [index %d] %s", #self.blocks, one_line(comment)), "# " .. one_line(table.concat(columns, " ")) }
  for _, row in ipairs(rows) do
    local cells = {}
    for j = 1, #columns do cells[j] = datum(row[j]) end
    b[#b + 1] = table.concat(cells, " ")
  end
  self.blocks[#self.blocks + 1] = table.concat(b, "\n")
  return #self.blocks - 1
end

-- A script line; fmt is a format string only when arguments follow.
function Figure:cmd(fmt, ...) self.lines[#self.lines + 1] = select("#", ...) > 0 and fmt:format(...) or fmt end

-- Styling every figure shares: tics, grid, border.  Missing values are written as NaN.  By default gnuplot treats NaN as an
-- undefined point, which breaks a line and a band there: a discarded rung
-- shows as a gap rather than an interpolation across it.  connect = true
-- declares NaN "missing" instead, and lines join the neighbouring rungs.
function Figure:base_style(connect)
  if connect then self:cmd('set datafile missing "NaN"') end
  if self.dumb then
    self:cmd("set tics nomirror")
  else
    self:cmd('set border 3 lw 1.0 lc rgb "#222222"')
    self:cmd("set tics out nomirror scale 0.8,0.4")
    self:cmd('set grid xtics ytics back lt 1 lw 0.6 lc rgb "#E3E3E3"')
  end
end

function Figure:title(title)
  if title then self:cmd("set title %s", literal(title)) end
end

function Figure:labels(xlabel, ylabel)
  if xlabel and xlabel ~= "" then self:cmd("set xlabel %s", label_text(xlabel)) end
  if ylabel and ylabel ~= "" then
    if self.dumb and (utf8.len(ylabel) or #ylabel) > 6 then
      -- Text cannot rotate: a long y label would fall off the left edge, so
      -- it goes above the axis instead.
      self:cmd("set label 99 %s at graph 0, graph 1 offset -3, 1.5 left", label_text(ylabel))
    else
      self:cmd("set ylabel %s", label_text(ylabel))
    end
  end
end

-- Log axis with decade tics: 10^{-2} in enhanced text, 10^-2 in dumb.
function Figure:log_axis(axis)
  self:cmd("set logscale %s 10", axis)
  self:cmd('set format %s "%s"', axis, self.dumb and "10^%L" or "10^{%L}")
end

-- A log axis spanning under two decades gets too few 10^k tics: label it
-- with 1-2-5 values, or with plain linear steps when even those are sparse.
function Figure:log_tics(axis, lo, hi)
  if not (lo > 0 and hi > lo) or math.log(hi / lo, 10) >= 2 then return end
  local t = {}
  for k = math.floor(math.log(lo, 10)), math.ceil(math.log(hi, 10)) do
    for _, m in ipairs { 1, 2, 5 } do
      local v = m * 10 ^ k
      if v >= lo * (1 - 1e-9) and v <= hi * (1 + 1e-9) then t[#t + 1] = v end
    end
  end
  if #t < 3 then
    local raw = (hi - lo) / 5
    local mag = 10 ^ math.floor(math.log(raw, 10))
    local step = mag * (raw / mag < 1.5 and 1 or raw / mag < 3.5 and 2 or raw / mag < 7.5 and 5 or 10)
    t = {}
    for i = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) do t[#t + 1] = i * step end
  end
  local parts = {}
  for i, v in ipairs(t) do parts[i] = string.format("%.6g", v) end
  self:cmd('set format %s "%%g"', axis)
  self:cmd("set %stics (%s)", axis, table.concat(parts, ", "))
end

--- srgeo.plot.figure_complete(terminal, bytes): whether a figure file ends
--- as its format ends (PNG: the IEND chunk; SVG: </svg>; PDF: %%EOF; sixel:
--- ESC P .. ESC \); text (dumb) always does.
function M.figure_complete(term, s)
  if type(s) ~= "string" or #s == 0 then return false end
  if term == "png" then return s:sub(1, 8) == "\137PNG\r\n\26\n" and s:sub(-12) == "\0\0\0\0IEND\174B`\130" end
  if term == "svg" then return s:find("</svg>%s*$") ~= nil end
  if term == "pdf" then return s:sub(1, 5) == "%PDF-" and s:find("%%%%EOF%s*$") ~= nil end
  if term == "sixel" then return s:sub(1, 2) == "\27P" and s:find("\27\\%s*$") ~= nil end
  return true
end

-- Write data and script beside OUT, run gnuplot, rename the figure into
-- place.  Returns OUT (or nil) and, for dumb, the text.
function Figure:render()
  local fn, opts = self.fn, self.opts
  local out, keep = self.out, self.out ~= nil
  -- Under mpirun rank 0 draws (util.write_atomic: rank 0 writes).
  if require("srgeo")._mpi.rank() ~= 0 then return out, "" end
  local dir, base, tmpbase
  if keep then
    dir, base = split_path(out)
    if base == "" then fail(fn, "opts.out '%s' names a directory", out) end
    if dir ~= "." then util.mkdir(dir) end
  else
    tmpbase = os.tmpname() -- an empty file we own: its name prefixes ours
    dir, base = split_path(tmpbase)
  end
  local stem = keep and (base:match("^(.+)%.[^.]*$") or base) or base
  local datname, gpname = stem .. ".dat", stem .. ".gp"
  local datpath, gppath = dir .. "/" .. datname, dir .. "/" .. gpname

  local t = TERMINALS[self.term]
  local font = gpstr(opts.font or t.font)
  local term_line = t.set:format(self.size[1], self.size[2], font) -- dumb ignores the font
  local window = self.view == "window"
  if window then
    term_line = string.format("set terminal %s enhanced persist size %d,%d font %s title %s", self.window, self.size[1],
      self.size[2], font, gpstr("srgeo.plot." .. fn))
  elseif self.view == "sixel" then
    term_line = string.format("set terminal sixelgd enhanced truecolor size %d,%d font %s", self.size[1], self.size[2], font)
  end
  local head = {
    one_line(string.format("# %s: written by srgeo.plot.%s.  Redraw with `gnuplot %s./%s` in this folder", gpname, fn,
      window and "-persist " or "", gpname)),
    window and "# (a window: opts.out draws a file)" or
      one_line(string.format("# (data: %s; `gnuplot -e \"OUT='other.png'\" ./%s` draws elsewhere).", datname, gpname)),
    "set encoding utf8",
    term_line,
  }
  if keep and not window then
    head[#head + 1] = string.format("if (!exists(\"OUT\")) OUT = %s", gpstr("./" .. base))
    head[#head + 1] = "set output OUT"
  end
  head[#head + 1] = string.format("if (!exists(\"DATA\")) DATA = %s", gpstr("./" .. datname))
  local script = table.concat(head, "\n") .. "\n" .. table.concat(self.lines, "\n") .. "\n"
    .. ((keep and not window) and "unset output\n" or "")
  local data = one_line(string.format("# %s: data of %s, written by srgeo.plot.%s (NaN: missing value)",
    datname, keep and base or "a text figure", fn)) .. "\n" .. table.concat(self.blocks, "\n\n\n") .. "\n"

  -- With an output file, the data, the script and the figure are written
  -- under temporary names (PATH.tmp.PID, util.tmp_name) and renamed into
  -- place only once gnuplot has drawn a complete figure: a failure (a full
  -- disk, a gnuplot error) leaves the previous files as they were and no
  -- temporary behind.  gnuplot reads the temporaries through the -e
  -- variables DATA and OUT, which the saved script defaults to the final
  -- names.
  local function write_file(path, content)
    local f, err = io.open(path, "wb")
    if not f then return nil, tostring(err) end
    local ok, werr = f:write(content)
    local cok, cerr = f:close()
    if not (ok and cok) then
      os.remove(path)
      return nil, tostring(werr or cerr)
    end
    return true
  end
  local dattmp = keep and util.tmp_name(datpath) or datpath
  local gptmp = keep and util.tmp_name(gppath) or gppath
  local tmpname = keep and select(2, split_path(util.tmp_name(out))) or nil
  local tmppath = tmpname and dir .. "/" .. tmpname
  local function cleanup_tmp()
    if keep then
      os.remove(dattmp); os.remove(gptmp); os.remove(tmppath)
    else
      os.remove(tmpbase); os.remove(datpath); os.remove(gppath)
    end
  end
  local wok, werr = write_file(dattmp, data)
  if wok then wok, werr = write_file(gptmp, script) end
  if not wok then
    cleanup_tmp()
    fail(fn, "cannot write %s: %s", keep and out or "a text figure", werr)
  end

  local bin, wanted = gnuplot_binary(fn, opts)
  if not bin then
    -- the data and script still go in place: with gnuplot installed, they draw the figure
    local kept = keep and os.rename(dattmp, datpath) and os.rename(gptmp, gppath)
    cleanup_tmp()
    fail(fn, "gnuplot not found%s; install gnuplot-nox (make deps)%s",
      wanted ~= "gnuplot" and " ('" .. wanted .. "')" or "",
      kept and string.format(" — the data and script are in %s and %s", datpath, gppath) or "")
  end

  local function move_into_place(moves)
    for _, mv in ipairs(moves) do
      local rok, rerr = os.rename(mv[1], mv[2])
      if not rok then
        cleanup_tmp()
        fail(fn, "cannot move %s into place: %s", mv[2], tostring(rerr))
      end
    end
  end
  local q = util.shell_quote
  if window then
    -- a window: the files in place, then gnuplot in the background (the
    -- REPL goes on; -persist keeps the window after gnuplot's script ends;
    -- its complaints go to NAME.err beside the script)
    move_into_place { { dattmp, datpath }, { gptmp, gppath } }
    os.execute(string.format("cd %s && %s -persist %s </dev/null >/dev/null 2>%s &", q(dir), q(bin), q("./" .. gpname),
      q("./" .. stem .. ".err")))
    return
  end
  local errfile = os.tmpname()
  -- The scripts say `set encoding utf8`; under a locale that is not UTF-8
  -- (a fresh machine, cron: LANG unset) gnuplot warns on every figure that
  -- iconv cannot convert, so it runs in glibc's built-in C.UTF-8 then.
  local loc = os.getenv("LC_ALL") or ""
  if loc == "" then loc = os.getenv("LC_CTYPE") or "" end
  if loc == "" then loc = os.getenv("LANG") or "" end
  local utf8_env = loc:lower():gsub("-", ""):find("utf8", 1, true) and "" or "LC_ALL=C.UTF-8 "
  -- "./" before every file name: gnuplot reads a data file or script named
  -- "<cmd" as the output of cmd and writes an output named "|cmd" into
  -- cmd's input ("+", "-" and "" are special files too)
  local vars = keep and " -e " .. q(string.format("OUT=%s; DATA=%s", gpstr("./" .. tmpname),
    gpstr("./" .. select(2, split_path(dattmp))))) or ""
  local cmd = string.format("cd %s && %s%s%s %s 2>%s", q(dir), utf8_env, q(bin), vars, q("./" .. select(2, split_path(gptmp))),
    q(errfile))
  local p = io.popen(cmd, "r")
  local stdout = p:read("a")
  local ok, how, code = p:close()
  local stderr = (util.try_read(errfile) or ""):gsub("%s+$", "")
  os.remove(errfile)
  if not ok then
    cleanup_tmp()
    fail(fn, "gnuplot failed (%s %s) running %s:\n%s", how, tostring(code), gppath,
      stderr ~= "" and stderr or "(no message)")
  end
  -- gnuplot exits 0 after a failed write (a full disk left a 4 KB PNG that
  -- was renamed into place): its complaints about the output, and a figure
  -- that does not end as its format ends, are failures.
  if stderr:find("No space left", 1, true) or stderr:find("[Ii]/[Oo] error") or stderr:find("cannot %a+ output")
    or stderr:find("[Ww]rite error") then
    cleanup_tmp()
    fail(fn, "gnuplot could not write %s: %s", out or "the figure", stderr)
  end
  if stderr ~= "" then io.stderr:write("srgeo.plot." .. fn .. ": gnuplot: " .. stderr .. "\n") end
  local text
  if keep then
    local fig = util.try_read(tmppath)
    if not fig then
      cleanup_tmp()
      fail(fn, "gnuplot wrote no figure (running %s)", gppath)
    end
    if not M.figure_complete(self.view == "sixel" and "sixel" or self.term, fig) then
      cleanup_tmp()
      local ok_free, free = pcall(function() return require("srgeo")._disk_free(dir) end)
      fail(fn, "gnuplot wrote an incomplete %s figure (%d bytes) for %s%s", self.term, #fig, out,
        ok_free and free and free < 1 << 20 and string.format(": No space left on device (%d bytes free)", free)
        or " (a full disk, or gnuplot stopped)")
    end
    move_into_place { { dattmp, datpath }, { gptmp, gppath }, { tmppath, out } }
    if self.dumb then text = util.try_read(out) end
  else
    text = stdout
    cleanup_tmp()
  end
  if self.display then -- shown, then removed: the figure was never the user's file
    local files, ok, err = { [self.term] = out }, true, nil
    if self.term == "png" and opts.terminal == nil then
      -- the same script on the svg terminal (same size, same pixel units):
      -- Jupyter shows the SVG where it can, nbconvert's HTML the one it prefers
      local svg = setmetatable({ term = "svg", out = self.display .. "/" .. fn .. ".svg", display = false }, { __index = self })
      ok, err = pcall(Figure.render, svg)
      files.svg = svg.out
    end
    if ok then ok, err = pcall(M.display, files, false) end
    os.execute("rm -rf " .. q(self.display))
    if not ok then error(err, 0) end
    return
  end
  if self.view then -- kitty, iterm, sixel: the figure on the terminal
    io.stdout:write(terminal_image(self.view, util.try_read(out) or ""))
    io.stdout:flush()
    return
  end
  -- a figure written to opts.out shows in Jupyter too; the file is the result
  if M.display and not self.dumb and self.display == nil then pcall(M.display, { [self.term] = out }, true) end
  -- a file: its path said once (the REPL echoes the value returned)
  if self.announce and self.why and not said_why then
    said_why = true
    io.stderr:write(string.format("srgeo.plot.%s: %s\n", fn, self.why))
  end
  if self.announce and not in_repl() then
    io.stderr:write(string.format("srgeo.plot.%s: no opts.out given; the figure is %s\n", fn, out))
  end
  -- a figure file: its path alone (the REPL echoes one value, not "PATH  nil")
  if not self.dumb then return out end
  return out, text
end

---------------------------------------------------------------------------
-- Axis extents, key placement and headroom.
---------------------------------------------------------------------------

-- Extents of plotted points in axis coordinates (log10 on log axes): overall
-- y range, and the highest y in the left and right 40% of the x range (where
-- a top-corner key would sit).
local function new_extent(logy)
  return { logy = logy, ymin = HUGE, ymax = -HUGE, left = -HUGE, right = -HUGE, pts = {} }
end

local function extent_add(e, x, y)
  if not finite(y) or (e.logy and y <= 0) then return end
  local ty = e.logy and math.log(y, 10) or y
  e.ymin, e.ymax = math.min(e.ymin, ty), math.max(e.ymax, ty)
  e.pts[#e.pts + 1] = { x, ty }
end

-- xlo, xhi: the x span in the same (possibly log10) coordinates as the
-- points; sorts the points into the two top corners.
local function extent_finish(e, xlo, xhi)
  local span = xhi - xlo
  for _, pt in ipairs(e.pts) do
    local f = span > 0 and (pt[1] - xlo) / span or 0.5
    if f <= 0.4 then e.left = math.max(e.left, pt[2]) end
    if f >= 0.6 then e.right = math.max(e.right, pt[2]) end
  end
  e.pts = nil
  return e
end

local function extent_merge(a, b)
  a.ymin, a.ymax = math.min(a.ymin, b.ymin), math.max(a.ymax, b.ymax)
  a.left, a.right = math.max(a.left, b.left), math.max(a.right, b.right)
  return a
end

-- Choose the top corner with less data under it and a y range that leaves
-- room for `entries` key lines above the data there.  yrange: the user's
-- {lo, hi} (either may be nil).  Sets key and yrange on the figure.
function Figure:key_and_yrange(e, entries, yrange, key)
  local lo, hi = yrange and yrange[1], yrange and yrange[2]
  local tlo = lo and (e.logy and math.log(lo, 10) or lo)
  local thi = hi and (e.logy and math.log(hi, 10) or hi)
  local corner = e.left <= e.right and "left" or "right"
  if key then
    self:cmd("set key %s", key)
  elseif entries == 0 then
    self:cmd("unset key")
  else
    local just = corner == "left" and "Left reverse" or "Right noreverse"
    self:cmd("set key inside top %s %s samplen 2.5 spacing 1.15 %s", corner, just,
      self.dumb and "" or "opaque nobox")
  end
  if e.ymin > e.ymax then -- nothing finite to place: leave it to gnuplot
    self:cmd("set yrange [%s:%s]", bound(lo), bound(hi))
    return
  end
  local span = e.ymax - e.ymin
  local pad = span > 0 and 0.06 * span or (e.logy and 0.05 or math.max(0.05 * math.abs(e.ymax), 0.05))
  local bottom = tlo or (e.ymin - pad)
  local top = thi
  if not top then
    top = e.ymax + pad
    if entries > 0 and not key then
      -- Key lines as a fraction of the plot height (rough, per terminal).
      local h = self.size[2] / (self.panel_rows or 1)
      local per = self.dumb and 1 / math.max(h - 6, 8) or 0.055 * (self.term == "pdf" and 3.125 or 500) / h
      local f = math.min(0.6, (entries + 0.7) * per)
      local cmax = corner == "left" and e.left or e.right
      if cmax > -HUGE then top = math.max(top, (cmax - f * bottom) / (1 - f) + 0.02 * (top - bottom)) end
    end
  end
  local function back(v) return e.logy and 10 ^ v or v end
  if top <= bottom then -- a user's lower bound above all the data
    self:cmd("set yrange [%s:*]", bound(back(bottom)))
    return
  end
  self:cmd("set yrange [%s:%s]", bound(back(bottom)), bound(back(top)))
  if e.logy then self:log_tics("y", back(bottom), back(top)) end
end

-- x range of log-spaced scales with a small margin so edge points show whole.
function Figure:log_xrange(xmin, xmax, user)
  local a, b = math.log(xmin, 10), math.log(xmax, 10)
  local m = math.max(b - a, 0.5) * 0.02
  local lo = user and user[1] or 10 ^ (a - m)
  local hi = user and user[2] or 10 ^ (b + m)
  self:cmd("set xrange [%s:%s]", bound(lo), bound(hi))
  self:log_tics("x", lo, hi)
end

-- Points of series i: filled discs on graphics terminals; on text ones a
-- distinct character per series (dumb would draw every disc as 'G').
local DUMB_POINTS = { "o", "x", "+", "@", "&", "%", "=", "~", "^" }
local function point_style(fig, i)
  if fig.dumb then return string.format('pt "%s"', DUMB_POINTS[(i - 1) % #DUMB_POINTS + 1]) end
  return "pt 7 ps 0.6"
end

---------------------------------------------------------------------------
-- Profiles on a log-η axis: bands, per-image lines, medians, r = 1.
---------------------------------------------------------------------------

local PROFILE_OPTS = {
  labels = "table", xlabel = "string", ylabel = "string", logy = "boolean", yrange = "table",
  xrange = "table", per_image = "boolean", band = "boolean", connect = "boolean", palette = "string",
}

-- Check a list of profiles (and labels) for one panel.
local function panel_profiles(fn, x, labels, where)
  local list = profile_list(fn, x)
  local ps = {}
  for i = 1, max_index(list) do
    ps[i] = norm_profile(fn, list[i], (where and where .. " " or "") .. "profile " .. i)
  end
  labels = check_labels(fn, labels, #ps, "profiles") or distinct_titles(ps)
  for i, q in ipairs(ps) do q.title = labels[i] end
  return ps
end

-- Extent of a panel's curves, and the number of key entries.
local function profiles_extent(ps, o)
  local e = new_extent(o.logy)
  local xmin, xmax, entries = HUGE, -HUGE, 0
  for _, q in ipairs(ps) do
    for k, x in ipairs(q.scales) do
      xmin, xmax = math.min(xmin, x), math.max(xmax, x)
      local tx = math.log(x, 10)
      extent_add(e, tx, q.median[k])
      if q.lo and o.band ~= false then extent_add(e, tx, q.lo[k]); extent_add(e, tx, q.hi[k]) end
      if q.per_image and o.per_image then
        for _, row in ipairs(q.per_image) do extent_add(e, tx, row[k]) end
      end
    end
    if q.title then entries = entries + 1 end
  end
  extent_add(e, math.log(xmin, 10), 1) -- the r = 1 reference is always in view
  if #ps == 1 and ps[1].lo and ps[1].ci and o.band ~= false and has_width(ps[1].lo, ps[1].hi) then entries = entries + 1 end
  e.xmin, e.xmax = xmin, xmax
  return extent_finish(e, math.log(xmin, 10), math.log(xmax, 10)), entries
end

-- Emit the data blocks and the plot command for one panel.  e: the extent
-- to size the y range from (multiples may share one); show_key: whether
-- this panel's curves get key entries.
function Figure:profile_panel(ps, o, e, entries, show_key)
  local dumb = self.dumb
  self:log_axis("x")
  if o.logy then self:log_axis("y") end
  self:log_xrange(e.xmin, e.xmax, o.xrange)
  self:key_and_yrange(e, show_key and entries or 0, o.yrange, o.key)

  local bands, refs, images, medians = {}, {}, {}, {}
  for i, q in ipairs(ps) do
    local rows = {}
    for k, x in ipairs(q.scales) do
      rows[k] = { x, q.median[k], q.lo and q.lo[k] or NAN, q.hi and q.hi[k] or NAN, q.mean and q.mean[k] or NAN }
    end
    local idx = self:block(string.format("profile %d%s", i, q.label and ": " .. q.label or ""),
      { "eta", "median", "lo", "hi", "mean" }, rows)
    local c = q.color or color(i)
    -- Translucent bands; text terminals cannot blend, so they get none.
    if q.lo and o.band ~= false and not dumb and has_width(q.lo, q.hi) then
      local title = "notitle"
      if #ps == 1 and q.ci and show_key then title = string.format("title '%g%% CI'", q.ci * 100) end
      bands[#bands + 1] = string.format('DATA index %d using 1:3:4 with filledcurves fc rgb "%s" fs transparent solid 0.2 noborder %s',
        idx, c, title)
    end
    if o.per_image and q.per_image and #q.per_image > 0 then
      local cols, prow = { "eta" }, {}
      for j = 1, #q.per_image do cols[j + 1] = "r_img" .. j end
      for k, x in ipairs(q.scales) do
        local row = { x }
        for j = 1, #q.per_image do row[j + 1] = q.per_image[j][k] end
        prow[k] = row
      end
      local pidx = self:block(string.format("per-image r of profile %d (one column per image)", i), cols, prow)
      -- #AARRGGBB: AA is transparency (00 opaque).
      images[#images + 1] = string.format('for [j=2:%d] DATA index %d using 1:j with lines lw 0.5 lc rgb "%s" notitle',
        #q.per_image + 1, pidx, dumb and c or "#A0" .. c:sub(2))
    end
    local title = (show_key and q.title) and "title " .. literal(q.title) or "notitle"
    medians[#medians + 1] = string.format('DATA index %d using 1:2 with linespoints lw 2 %s lc rgb "%s" %s',
      idx, point_style(self, i), c, title)
  end
  refs[1] = '1 with lines dt 2 lw 1.2 lc rgb "#555555" notitle'
  local parts = {}
  for _, group in ipairs { bands, refs, images, medians } do
    for _, s in ipairs(group) do parts[#parts + 1] = s end
  end
  self:cmd("plot " .. table.concat(parts, ", \\\n     "))
end

-- Overlays go on a log y axis unless the caller says (opts.logy): when
-- the curves' highest medians differ by more than LOGY_RATIO (a bump of
-- r = 6 under a rise to 50 is flat on a linear axis), all of them > 0.
local LOGY_RATIO = 3
local function auto_logy(panels)
  local lo, hi = HUGE, -HUGE
  for _, ps in ipairs(panels) do
    for _, q in ipairs(ps) do
      local m = -HUGE
      for _, v in ipairs(q.median) do
        if finite(v) then
          if v <= 0 then return false end
          m = math.max(m, v)
        end
      end
      if m > -HUGE then lo, hi = math.min(lo, m), math.max(hi, m) end
    end
  end
  return lo < HUGE and hi / lo > LOGY_RATIO
end
M.LOGY_RATIO = LOGY_RATIO

-- Defaults for profile-like options.
local function profile_opts(fn, opts)
  return {
    logy = opts.logy, yrange = check_range(fn, "yrange", opts.yrange, opts.logy),
    xrange = check_range(fn, "xrange", opts.xrange, true), per_image = opts.per_image,
    band = opts.band, key = opts.key,
  }
end

-- opts.palette: the colour of curve i of n.
local function palette_of(fn, opts)
  local palette = opts.palette or "categorical"
  if palette == "categorical" then return color end
  if palette == "ordered" then return ordered_color end
  fail(fn, "palette must be \"categorical\" or \"ordered\", got '%s'", palette)
end

-- One figure of profiles: plot.profile and plot.show (fn names the caller).
local function draw_profiles(fn, p, opts)
  local fig = new_figure(fn, opts)
  local ps = panel_profiles(fn, p, opts.labels)
  local pick = palette_of(fn, opts)
  for i, q in ipairs(ps) do q.color = pick(i, #ps) end
  local o = profile_opts(fn, opts)
  if o.logy == nil and not o.yrange then o.logy = auto_logy { ps } end
  fig:base_style(opts.connect)
  fig:title(titled(opts, opts.title, p))
  fig:labels(opts.xlabel or ETA_LABEL, opts.ylabel or R_LABEL)
  local e, entries = profiles_extent(ps, o)
  fig:profile_panel(ps, o, e, entries, true)
  return fig:render()
end

--- plot.profile(p_or_list, opts) -> out[, text]
--- r_η against η on a log axis: CI bands, median lines with points, dashed
--- r = 1.  opts: out, terminal, title (followed by what plot.about says:
--- the models, evaluation set and image count; about = false leaves it
--- out), labels (default: the profiles'
--- labels, told apart by their identities), xlabel, ylabel, logy (default:
--- a log y axis when the curves' highest medians differ by more than 3x,
--- plot.LOGY_RATIO, so a small bump is not flattened under a large rise), yrange
--- {lo, hi}, xrange, per_image (thin line per image), band (false: no CI
--- band), connect (join lines across discarded rungs; default: a gap), key
--- (a gnuplot `set key` argument: words and numbers), palette ("categorical", the default, or
--- "ordered": a sequential palette for curves in order, e.g. checkpoints by
--- step), size {w, h}, font.
function M.profile(p, opts)
  return draw_profiles("profile", p, check_opts("profile", opts, PROFILE_OPTS))
end

--- plot.show(p, opts): prints a text rendering to stdout (for the REPL) and
--- returns nothing, so the REPL does not print the figure a second time
--- (plot.profile with terminal = "dumb" returns the text instead).  Same
--- options as plot.profile (opts.out also keeps a .txt); the width follows
--- $COLUMNS.
function M.show(p, opts)
  local fn = "show"
  opts = check_opts(fn, opts, PROFILE_OPTS)
  if opts.terminal and opts.terminal ~= "dumb" then fail(fn, "prints text: terminal must be dumb") end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.terminal = "dumb"
  if not o.size then
    local cols = tonumber(os.getenv("COLUMNS") or "") or 100
    o.size = { math.max(60, math.min(160, cols - 1)), 30 }
  end
  local _, text = draw_profiles(fn, p, o)
  io.write(text)
  io.flush()
end

--- plot.multiples(entries, opts) -> out[, text]
--- Small multiples: one panel per entry (a profile or a list of profiles).
--- opts: as plot.profile, plus titles (one per panel; default the first
--- profile's label), layout {rows, cols} (default near-square), shared_y
--- (default true: one y range for all panels).  labels apply within every
--- panel; a panel shows a key when its labels differ from the previous one's.
function M.multiples(entries, opts)
  local fn = "multiples"
  opts = check_opts(fn, opts, setmetatable({ titles = "table", layout = "table", shared_y = "boolean" },
    { __index = PROFILE_OPTS }))
  if type(entries) ~= "table" or max_index(entries) == 0 then fail(fn, "expected a non-empty list of panels") end
  local n = max_index(entries)
  local titles = opts.titles and check_labels(fn, opts.titles, n, "panels")
  local rows, cols
  if opts.layout then
    rows, cols = opts.layout[1], opts.layout[2]
    if math.type(rows) ~= "integer" or math.type(cols) ~= "integer" or rows < 1 or cols < 1 then
      fail(fn, "layout must be {rows, cols} with positive integers")
    end
    if rows * cols < n then fail(fn, "layout %dx%d has room for %d panels, got %d", rows, cols, rows * cols, n) end
  else
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
  end
  local o = profile_opts(fn, opts)
  local panels, shared, lists = {}, nil, {}
  for i = 1, n do
    if entries[i] == nil then fail(fn, "panel %d is nil", i) end
    lists[i] = panel_profiles(fn, entries[i], opts.labels, "panel " .. i)
  end
  if o.logy == nil and not o.yrange then o.logy = auto_logy(lists) end
  for i = 1, n do
    local ps = lists[i]
    local e, k = profiles_extent(ps, o)
    panels[i] = { ps = ps, e = e, entries = k }
    shared = shared and extent_merge(shared, e) or extent_merge(new_extent(o.logy), e)
  end
  local fig = new_figure(fn, opts, function(term)
    if term == "dumb" then return { math.min(200, 60 * cols), 22 * rows } end
    if term == "pdf" then return { cols == 1 and 5 or 2.9 * cols, rows == 1 and 3.125 or 2.2 * rows } end
    return { cols == 1 and 800 or 430 * cols, rows == 1 and 500 or 330 * rows }
  end)
  fig.panel_rows = rows
  fig:base_style(opts.connect)
  -- Fixed margins and spacing (converted from pixels or characters to screen
  -- fractions) give every panel the same plot area, labelled or not.
  local ux, uy = 1, 1 -- terminal units per pixel
  local title = titled(opts, opts.title, entries)
  local tlines = title and select(2, title:gsub("\n", "")) + 1 or 0
  local px = { left = 80, right = 20, bottom = 58, top = 44 + 28 * tlines, dx = 76, dy = 96 }
  if fig.dumb then
    px = { left = 10, right = 2, bottom = 4, top = 3 + tlines, dx = 10, dy = 6 }
  elseif fig.term == "pdf" then
    ux, uy = 1 / 160, 1 / 160
  end
  local W, H = fig.size[1], fig.size[2]
  fig:cmd("set multiplot layout %d,%d%s margins %.4f,%.4f,%.4f,%.4f spacing %.4f,%.4f", rows, cols,
    title and " title " .. literal(title) or "",
    px.left * ux / W, 1 - px.right * ux / W, px.bottom * uy / H, 1 - px.top * uy / H, px.dx * ux / W, px.dy * uy / H)
  -- Colours by position, except that a label seen in an earlier panel keeps
  -- its colour (unless that would repeat a colour within the panel).
  local label_color = {}
  local pick = palette_of(fn, opts)
  for _, pn in ipairs(panels) do
    local used, want = {}, {}
    for j, q in ipairs(pn.ps) do
      want[j] = q.title and label_color[q.title] or pick(j, #pn.ps)
      used[want[j]] = (used[want[j]] or 0) + 1
    end
    for j, q in ipairs(pn.ps) do
      q.color = used[want[j]] > 1 and pick(j, #pn.ps) or want[j]
      if q.title and not label_color[q.title] then label_color[q.title] = q.color end
    end
  end
  local prev
  for i, pn in ipairs(panels) do
    local sig = {}
    for j, q in ipairs(pn.ps) do sig[j] = q.title or "" end
    sig = table.concat(sig, "\0")
    local show_key = #pn.ps > 1 and sig ~= prev
    prev = sig
    local e = pn.e
    if opts.shared_y ~= false then
      e = { logy = o.logy, ymin = shared.ymin, ymax = shared.ymax, left = shared.left, right = shared.right,
            xmin = pn.e.xmin, xmax = pn.e.xmax }
    end
    local title = titles and titles[i] or pn.ps[1].label or ("panel " .. i)
    fig:cmd("set title %s", literal(title))
    local row, col = (i - 1) // cols + 1, (i - 1) % cols + 1
    local bottom = row == rows or i + cols > n
    fig:cmd("unset xlabel; unset ylabel; unset label 99")
    fig:labels(bottom and (opts.xlabel or ETA_LABEL) or nil, col == 1 and (opts.ylabel or R_LABEL) or nil)
    fig:profile_panel(pn.ps, o, e, pn.entries, show_key)
  end
  fig:cmd("unset multiplot")
  return fig:render()
end

---------------------------------------------------------------------------
-- Heatmap: rows (e.g. checkpoint steps) × columns (η), colour r.
---------------------------------------------------------------------------

-- Cell edges of an axis: numeric centres (midpoints, geometric on log
-- axes), or categories (strings) at 1..n.  Returns centres, lo, hi edges,
-- and tic labels for categories.
local function cell_edges(fn, name, v, n, log)
  if v == nil then
    v = {}
    for i = 1, n do v[i] = i end
  end
  if type(v) ~= "table" or max_index(v) ~= n then
    fail(fn, "%s must have %d entries (one per %s)", name, n, name == "rows" and "matrix row" or "matrix column")
  end
  if type(v[1]) == "string" then
    local c, lo, hi, tics = {}, {}, {}, {}
    for i = 1, n do
      if type(v[i]) ~= "string" then fail(fn, "%s mixes strings and numbers", name) end
      c[i], lo[i], hi[i], tics[i] = i, i - 0.5, i + 0.5, v[i]
    end
    return c, lo, hi, tics
  end
  local c = coords(fn, name, v, n, log)
  for i = 2, n do
    if c[i] <= c[i - 1] then fail(fn, "%s must be strictly increasing", name) end
  end
  local t = {}
  for i = 1, n do t[i] = log and math.log(c[i], 10) or c[i] end
  local lo, hi = {}, {}
  for i = 1, n do
    local left = i > 1 and (t[i - 1] + t[i]) / 2 or (n > 1 and t[1] - (t[2] - t[1]) / 2 or t[1] - 0.5)
    local right = i < n and (t[i] + t[i + 1]) / 2 or (n > 1 and t[n] + (t[n] - t[n - 1]) / 2 or t[n] + 0.5)
    lo[i], hi[i] = log and 10 ^ left or left, log and 10 ^ right or right
  end
  return c, lo, hi, nil
end

local function category_tics(fig, axis, tics)
  local parts = {}
  for i, s in ipairs(tics) do parts[i] = string.format("%s %d", tic_label(s), i) end
  fig:cmd("set %stics (%s) noenhanced", axis, table.concat(parts, ", "))
end

--- plot.heatmap(matrix, opts) -> out[, text]
--- matrix[i][j]: r at row i (opts.rows[i], e.g. a checkpoint step) and
--- column j (opts.cols[j], e.g. η).  Rows/cols may be strings (categories).
--- Colour: a diverging palette centred at opts.center (default 1), symmetric
--- range (opts.cbrange overrides; opts.logcb for ratios spanning decades);
--- grey cells are missing values.  opts: logx (default true when numeric cols
--- are given), logy, xlabel (default η), ylabel, cblabel (default r_η), from
--- (the profiles the matrix comes from: the title names them, plot.about).
function M.heatmap(matrix, opts)
  local fn = "heatmap"
  opts = check_opts(fn, opts, { rows = "table", cols = "table", logx = "boolean", logy = "boolean",
    xlabel = "string", ylabel = "string", cblabel = "string", center = "number", cbrange = "table",
    logcb = "boolean", from = "table" })
  if type(matrix) ~= "table" or max_index(matrix) == 0 then fail(fn, "expected a non-empty matrix (array of rows)") end
  local nr = max_index(matrix)
  if type(matrix[1]) ~= "table" then fail(fn, "matrix row 1 is a %s, expected an array of numbers", type(matrix[1])) end
  local nc = max_index(matrix[1])
  if nc == 0 then fail(fn, "matrix row 1 is empty") end
  local m = {}
  for i = 1, nr do m[i] = values(fn, "matrix row " .. i, matrix[i], nc) end
  local numeric_cols = opts.cols ~= nil and type(opts.cols[1]) == "number"
  local logx = opts.logx
  if logx == nil then logx = numeric_cols end
  local logy = opts.logy or false
  if logx and opts.cols ~= nil and not numeric_cols then fail(fn, "logx needs numeric cols") end
  if logy and opts.rows ~= nil and type(opts.rows[1]) ~= "number" then fail(fn, "logy needs numeric rows") end
  local xc, xlo, xhi, xtics = cell_edges(fn, "cols", opts.cols, nc, logx and opts.cols ~= nil)
  local yc, ylo, yhi, ytics = cell_edges(fn, "rows", opts.rows, nr, logy and opts.rows ~= nil)
  logx, logy = logx and xtics == nil and opts.cols ~= nil, logy and ytics == nil and opts.rows ~= nil

  local center = opts.center or 1
  if opts.logcb and not (center > 0) then fail(fn, "logcb needs a positive center") end
  local dev, any = 0, false
  for i = 1, nr do
    for j = 1, nc do
      local v = m[i][j]
      if v == v and (not opts.logcb or v > 0) then
        any = true
        dev = math.max(dev, opts.logcb and math.abs(math.log(v / center)) or math.abs(v - center))
      end
    end
  end
  if not any then fail(fn, "the matrix has no finite value") end
  local cblo, cbhi
  if opts.cbrange then
    local r = check_range(fn, "cbrange", opts.cbrange, opts.logcb)
    cblo, cbhi = r[1], r[2]
  end
  if dev == 0 then dev = opts.logcb and math.log(1.05) or math.max(0.05 * math.abs(center), 0.05) end
  cblo = cblo or (opts.logcb and center * math.exp(-dev) or center - dev)
  cbhi = cbhi or (opts.logcb and center * math.exp(dev) or center + dev)

  local fig = new_figure(fn, opts)
  fig:base_style(true) -- no lines to break: NaN cells are simply skipped
  fig:cmd("set grid noxtics noytics")
  fig:title(titled(opts, opts.title, opts.from))
  fig:labels(opts.xlabel or (numeric_cols and ETA_LABEL or nil), opts.ylabel)
  fig:cmd("set cblabel %s", label_text(opts.cblabel or R_LABEL))
  if logx then fig:log_axis("x") end
  if logy then fig:log_axis("y") end
  if xtics then category_tics(fig, "x", xtics) end
  if ytics then category_tics(fig, "y", ytics) end
  fig:cmd("set xrange [%s:%s]", datum(xlo[1]), datum(xhi[nc]))
  fig:cmd("set yrange [%s:%s]", datum(ylo[1]), datum(yhi[nr]))
  if logx then fig:log_tics("x", xlo[1], xhi[nc]) end
  if logy then fig:log_tics("y", ylo[1], yhi[nr]) end
  if not fig.dumb then fig:cmd("set tics out") end
  if opts.logcb then fig:cmd("set logscale cb") end
  fig:cmd("set cbrange [%s:%s]", datum(cblo), datum(cbhi))
  -- ColorBrewer RdBu, reversed: blue below the centre, white at it, red above.
  fig:cmd('set palette defined (0 "#2166AC", 0.25 "#67A9CF", 0.5 "#F7F7F7", 0.75 "#EF8A62", 1 "#B2182B")')
  fig:cmd("set palette maxcolors 0")
  if opts.logcb then
    -- On a log cb axis the palette runs over log(cb); the centre stays mid-range.
    fig:cmd("set cbtics format '%g'")
  end
  fig:cmd("unset key")
  if not fig.dumb then
    fig:cmd('set object 1 rectangle from graph 0,0 to graph 1,1 behind fc rgb "#BDBDBD" fs solid 1.0 noborder')
  end
  local rows = {}
  for i = 1, nr do
    for j = 1, nc do
      rows[#rows + 1] = { xc[j], yc[i], xlo[j], xhi[j], ylo[i], yhi[i], m[i][j] }
    end
  end
  fig:block("cells: centre x, y, edges x_lo x_hi y_lo y_hi, value r (one row per cell)",
    { "x", "y", "x_lo", "x_hi", "y_lo", "y_hi", "r" }, rows)
  if fig.dumb then
    -- Text cannot show colour: print each cell's value at its place.
    fig:cmd("unset colorbox")
    fig:cmd('plot DATA index 0 using 1:2:(abs($7) < 10 ? sprintf("%.2f", $7) : sprintf("%.3g", $7)) with labels notitle')
  else
    fig:cmd("plot DATA index 0 using 1:2:3:4:5:6:7 with boxxyerror fs solid 1.0 noborder fc palette notitle")
  end
  return fig:render()
end

---------------------------------------------------------------------------
-- Descriptor bar charts.
---------------------------------------------------------------------------

local FIELD_LABELS = {
  plateau = "plateau level of r_η",
  onset = "onset η (r leaves the plateau by 5%)",
  peak_eta = "peak η (parabolic vertex of the median profile)",
  peak_height = "peak height (max r_η)",
  half_width = "half-width (decades of η)",
  decay_slope = "decay slope (d log r / d log η)",
  area = "area above r = 1 (decades)",
  -- enhanced text: F typeset as a subscript (pngcairo, svg, pdf)
  jacobian_fro = "‖J‖_F (median over images)",
}
--- plot.field_label(field) -> the library's axis label of a descriptor
--- (enhanced text: pass it as ylabel to keep its subscripts).
function M.field_label(field) return FIELD_LABELS[field] end
-- ‖J‖_F in literal text (titles, key entries), where an underscore would
-- print as itself: the F follows the bars.
M.JF = "‖J‖F"
local LOG_FIELDS = { onset = true, peak_eta = true }
-- Ratios whose baseline is 1 (r = 1: locally linear): their bars grow from 1.
local RATIO_FIELDS = { plateau = true, peak_height = true }
-- Names for a chart's title (literal text, no subscripts).
local FIELD_TITLES = {
  plateau = "Plateau", onset = "Onset η", peak_eta = "Peak η (parabolic)", peak_height = "Peak height", half_width = "Half-width",
  decay_slope = "Decay slope", area = "Area above r = 1", jacobian_fro = "‖J‖F",
}

-- A descriptor chart's default title: the descriptor, and the evaluation
-- set(s) and preset the profiles' identities name.
local function descriptor_title(field, groups)
  local evals, seen, presets = {}, {}, {}
  for _, grp in ipairs(groups) do
    for _, p in pairs(grp) do
      local id = type(p) == "table" and type(p.identity) == "table" and p.identity
      if id and id.eval and not seen[eval_name(id.eval)] then
        seen[eval_name(id.eval)] = true
        evals[#evals + 1] = eval_name(id.eval)
      end
      if id and id.preset then presets[tostring(id.preset)] = true end
    end
  end
  local t = FIELD_TITLES[field] or field
  if #evals == 1 then t = t .. " on " .. evals[1]
  elseif #evals > 1 and #evals <= 3 then t = t .. " on " .. table.concat(evals, ", ")
  elseif #evals > 3 then t = t .. " on " .. #evals .. " evaluation sets" end
  local ps = {}
  for k in pairs(presets) do ps[#ps + 1] = k end
  table.sort(ps)
  if #ps > 0 then t = t .. " (preset " .. table.concat(ps, ", ") .. ")" end
  return t
end
for _, l in pairs(FIELD_LABELS) do ENHANCED[l] = true end

-- {value, lo, hi} of a descriptor: a number or a table {value=, lo=, hi=}
-- (or {v, lo, hi}); missing parts are NaN.
local function descriptor(fn, d, where)
  if d == nil then return NAN, NAN, NAN end
  if type(d) == "number" then return finite(d) and d or NAN, NAN, NAN end
  if type(d) ~= "table" then fail(fn, "%s is a %s, expected a number or {value=, lo=, hi=}", where, type(d)) end
  local v, lo, hi = d.value or d[1], d.lo or d[2], d.hi or d[3]
  for name, x in pairs { value = v, lo = lo, hi = hi } do
    if x ~= nil and type(x) ~= "number" then fail(fn, "%s.%s is a %s, expected a number", where, name, type(x)) end
  end
  local function f(x) return finite(x) and x or NAN end
  return f(v), f(lo), f(hi)
end

--- plot.descriptors(profiles, opts) -> out[, text]
--- A bar chart of one descriptor (opts.field, default "peak_eta") with error
--- bars from {value, lo, hi}.  profiles: a list (one bar each, labelled by
--- opts.labels or the profiles' labels) or a list of groups, each a list of
--- profiles (grouped bars: opts.groups names the groups, opts.labels the bars
--- within a group, which share colours and a key).  opts: style ("bars" or
--- "points"; points suit η-valued fields), logy (default for onset and
--- peak_eta), ylabel, yrange, title (default: the descriptor and the
--- evaluation set(s) and preset of the profiles' identities; then the
--- models and image count, plot.about).  A descriptor
--- a profile's shape leaves undefined (NaN with a reason: an edge, a rise,
--- ...) is never drawn: the figure lists it under the chart as left out,
--- with the reason.  Bars of a ratio (plateau, peak_height: r, whose
--- baseline is 1) span 1 .. value.  opts.min_points: fewer defined values
--- raise an error whose .rows hold the values (srgeo.experiment's figures
--- ask for 2 and put the table in the summary instead).
function M.descriptors(profiles, opts)
  local fn = "descriptors"
  opts = check_opts(fn, opts, { field = "string", labels = "table", groups = "table", style = "string",
    logy = "boolean", ylabel = "string", xlabel = "string", yrange = "table", min_points = "number" })
  local field = opts.field or "peak_eta"
  local style = opts.style or (LOG_FIELDS[field] and "points" or "bars")
  if style ~= "bars" and style ~= "points" then fail(fn, "style must be \"bars\" or \"points\", got '%s'", style) end
  if type(profiles) ~= "table" or max_index(profiles) == 0 then fail(fn, "expected a non-empty list of profiles") end
  if profiles.scales ~= nil or profiles.descriptors ~= nil then profiles = { profiles } end
  local grouped = type(profiles[1]) == "table" and profiles[1].descriptors == nil and profiles[1].scales == nil
  local groups = {}
  for g = 1, max_index(profiles) do
    local entry = profiles[g]
    if grouped then
      if type(entry) ~= "table" or max_index(entry) == 0 then fail(fn, "group %d must be a non-empty list of profiles", g) end
      groups[g] = entry
    else
      groups[g] = { entry }
    end
  end
  local G, S = #groups, 0
  for _, grp in ipairs(groups) do S = math.max(S, max_index(grp)) end
  local logy = opts.logy
  if logy == nil then logy = LOG_FIELDS[field] or false end

  -- cell[g][s] = {v, lo, hi}
  local cells, seen, left_out = {}, false, {}
  local labels_from = {}
  for g, grp in ipairs(groups) do
    cells[g] = {}
    for s = 1, S do
      local p = grp[s]
      local where = grouped and string.format("group %d profile %d", g, s) or string.format("profile %d", g)
      if p == nil then
        cells[g][s] = { NAN, NAN, NAN }
      else
        if type(p) ~= "table" then fail(fn, "%s is a %s, expected a profile", where, type(p)) end
        if type(p.descriptors) ~= "table" then fail(fn, "%s has no descriptors", where) end
        if p.descriptors[field] ~= nil then seen = true end
        local v, lo, hi = descriptor(fn, p.descriptors[field], where .. " descriptor " .. field)
        local why = type(p.descriptors[field]) == "table" and p.descriptors[field].reason
        if v ~= v and type(why) == "string" then left_out[#left_out + 1] = { g = g, s = s, why = why } end
        if logy then
          if not (v > 0) then v = NAN end
          if not (lo > 0) then lo = NAN end
          if not (hi > 0) then hi = NAN end
        end
        cells[g][s] = { v, lo, hi }
        local l = p.label or p.model
        if l ~= nil then
          if grouped then labels_from[s] = labels_from[s] or tostring(l) else labels_from[g] = tostring(l) end
        end
      end
    end
  end
  if not seen then fail(fn, "no profile has a descriptor '%s'", field) end
  local ratio = RATIO_FIELDS[field] and not logy

  local labels = check_labels(fn, opts.labels, grouped and S or G, grouped and "bars per group" or "profiles")
  local group_names = opts.groups and check_labels(fn, opts.groups, G, "groups")
  local tic_names = {}
  for g = 1, G do
    tic_names[g] = grouped and (group_names and group_names[g] or "group " .. g)
      or (labels and labels[g] or labels_from[g] or "profile " .. g)
  end

  local fig = new_figure(fn, opts)
  fig:base_style(true) -- no lines to break: NaN cells are simply skipped
  if not fig.dumb then fig:cmd("set grid noxtics ytics") end
  fig:title(titled(opts, opts.title or descriptor_title(field, groups), groups))
  fig:labels(opts.xlabel, opts.ylabel or FIELD_LABELS[field] or field)
  if logy then fig:log_axis("y") end
  local parts = {}
  for g = 1, G do parts[g] = string.format("%s %d", tic_label(tic_names[g]), g - 1) end
  fig:cmd("set xtics (%s) noenhanced", table.concat(parts, ", "))
  fig:cmd("set xtics scale 0")
  fig:cmd("set xrange [-0.6:%g]", G - 0.4)
  local width = 0.8 / S

  local e = new_extent(logy)
  local plots, bars, errs = {}, {}, {}
  for s = 1, S do
    local rows, any, any_ci = {}, false, false
    for g = 1, G do
      local c = cells[g][s]
      local x = (g - 1) + (s - (S + 1) / 2) * width
      local col = tonumber((grouped and color(s) or color(g)):sub(2), 16)
      rows[g] = { x, c[1], c[2], c[3], col, tic_names[g] }
      if c[1] == c[1] then any = true end
      if c[2] == c[2] and c[3] == c[3] then any_ci = true end
      extent_add(e, x, c[1]); extent_add(e, x, c[2]); extent_add(e, x, c[3])
    end
    local name = grouped and (labels and labels[s] or labels_from[s]) or nil
    local idx = fig:block(string.format("%s%s", field, name and " of " .. name or ""),
      { "x", "value", "lo", "hi", "colour", "group" }, rows)
    local title = name and "title " .. literal(name) or "notitle"
    if any then
      if style == "bars" and ratio then
        -- a ratio's bar spans 1 .. value (below 1 it hangs down)
        bars[#bars + 1] = string.format("DATA index %d using 1:(($2+1)/2):(%g):(abs($2-1)/2):5 with boxxyerror fs solid 0.85 noborder lc rgb variable %s",
          idx, width * 0.46, title)
      elseif style == "bars" then
        bars[#bars + 1] = string.format("DATA index %d using 1:2:(%g):5 with boxes fs solid 0.85 noborder lc rgb variable %s",
          idx, width * 0.92, title)
      else
        bars[#bars + 1] = string.format("DATA index %d using 1:2:5 with points pt 7 ps 1.3 lc rgb variable %s", idx, title)
      end
      -- Error bars as capped vectors lo -> hi (yerrorbars leave a gap at the value).
      if any_ci then errs[#errs + 1] = string.format('DATA index %d using 1:3:(0):($4-$3) with vectors heads size screen 0.006,90 lw 1.2 lc rgb "#333333" notitle', idx) end
    end
  end
  if #bars == 0 and #left_out == 0 then
    fail(fn, "no profile has a finite '%s'%s", field, logy and " (positive, for a log axis)" or "")
  end
  -- opts.min_points: with fewer defined values a chart is mostly its note;
  -- the error carries the values as rows (srgeo.experiment puts them in the
  -- summary as a table instead)
  local defined, rows_out = 0, { { "", field, "lo", "hi", "why not" } }
  for g = 1, G do
    for s = 1, S do
      local c = cells[g][s]
      if c[1] == c[1] then defined = defined + 1 end
      local why = ""
      for _, l in ipairs(left_out) do if l.g == g and l.s == s then why = l.why end end
      local name = grouped and string.format("%s / %s", tic_names[g], labels and labels[s] or labels_from[s] or ("bar " .. s))
        or tic_names[g]
      local function num(v) return v == v and string.format("%.4g", v) or "–" end
      rows_out[#rows_out + 1] = { name, num(c[1]), num(c[2]), num(c[3]), why }
    end
  end
  if opts.min_points and defined < opts.min_points then
    util.raise { msg = string.format("srgeo.plot.%s: %d of %d %s defined (fewer than %d: a table, not a chart)", fn,
      defined, G * S, field, opts.min_points), too_few = true, rows = rows_out }
  end
  if #left_out > 0 then
    -- under the chart: which bars are missing and why (the shape test's reason)
    local lines = { "left out (no value):" }
    for _, l in ipairs(left_out) do
      local name = grouped and string.format("%s / %s", tic_names[l.g], labels and labels[l.s] or labels_from[l.s] or
        ("bar " .. l.s)) or tic_names[l.g]
      lines[#lines + 1] = string.format("%s: %s", name, l.why)
    end
    if fig.dumb then
      fig:cmd("set label 98 %s at screen 0, screen 0 left front", literal(table.concat(lines, " ")))
    else
      fig:cmd("set bmargin %d", 4 + #left_out)
      fig:cmd('set label 98 %s at screen 0.01, screen %g left front font ",9"', literal(table.concat(lines, "\n")),
        0.015 + 0.03 * #left_out)
    end
    if #bars == 0 then
      -- nothing to draw: an empty frame that still carries the note
      bars[1] = "1/0 notitle"
      extent_add(e, 0, logy and 1 or 0)
      extent_add(e, 0, logy and 10 or 1)
    end
  end
  if style == "bars" and not logy then extent_add(e, 0, ratio and 1 or 0) end -- bars start at their baseline
  extent_finish(e, -0.6, G - 0.4)
  local entries = (grouped and (labels or next(labels_from))) and S or 0
  fig:key_and_yrange(e, entries, check_range(fn, "yrange", opts.yrange, logy), opts.key)
  if style == "bars" and ratio then
    fig:cmd("set arrow 97 from graph 0, first 1 to graph 1, first 1 nohead lt 1 lw 1 lc rgb '#222222' back")
  elseif style == "bars" and not logy then
    fig:cmd("set xzeroaxis lt 1 lw 1 lc rgb '#222222'")
  end
  -- Bars under their error bars; points over theirs.
  local first, second = bars, errs
  if style == "points" then first, second = errs, bars end
  for _, s in ipairs(first) do plots[#plots + 1] = s end
  for _, s in ipairs(second) do plots[#plots + 1] = s end
  fig:cmd("plot " .. table.concat(plots, ", \\\n     "))
  return fig:render()
end

---------------------------------------------------------------------------
-- Generic lines.
---------------------------------------------------------------------------

--- plot.lines(xs, ys_list, opts) -> out[, text]
--- One or more series: xs an array (shared) or an array of arrays (one per
--- series); ys_list an array of numbers (one series) or of arrays.  Missing
--- y values (nil/NaN) leave a gap (opts.connect joins across them).  opts:
--- labels, xlabel, ylabel, logx, logy, xrange, yrange, points (default true),
--- hline (a dashed reference y), lo and hi (intervals, shaped as ys_list:
--- drawn as capped bars, written as the .dat's lo and hi columns), from
--- (the profiles the values come from: the title names them, plot.about).
function M.lines(xs, ys_list, opts)
  local fn = "lines"
  opts = check_opts(fn, opts, { labels = "table", xlabel = "string", ylabel = "string", logx = "boolean",
    logy = "boolean", xrange = "table", yrange = "table", points = "boolean", hline = "number",
    connect = "boolean", lo = "table", hi = "table", from = "table" })
  if type(ys_list) ~= "table" or max_index(ys_list) == 0 then fail(fn, "ys_list must be a non-empty array") end
  if type(xs) ~= "table" or max_index(xs) == 0 then fail(fn, "xs must be a non-empty array") end
  local single = type(ys_list[1]) ~= "table"
  if single then ys_list = { ys_list } end
  local ns = max_index(ys_list)
  -- intervals: lo and hi shaped as ys_list (an array per series)
  if (opts.lo == nil) ~= (opts.hi == nil) then fail(fn, "give both lo and hi, or neither") end
  local los, his = opts.lo, opts.hi
  if los and single then los, his = { los }, { his } end
  local per_series_x = type(xs[1]) == "table"
  if per_series_x and max_index(xs) ~= ns then fail(fn, "xs has %d arrays for %d series", max_index(xs), ns) end
  local labels = check_labels(fn, opts.labels, ns, "series")
  local fig = new_figure(fn, opts)
  fig:base_style(opts.connect)
  fig:title(titled(opts, opts.title, opts.from))
  fig:labels(opts.xlabel, opts.ylabel)
  if opts.logx then fig:log_axis("x") end
  if opts.logy then fig:log_axis("y") end
  local e = new_extent(opts.logy)
  local xmin, xmax = HUGE, -HUGE
  local parts, any = {}, false
  local series = {}
  for s = 1, ns do
    local x = coords(fn, per_series_x and ("xs[" .. s .. "]") or "xs", per_series_x and xs[s] or xs, nil, opts.logx)
    local y = values(fn, "ys_list[" .. s .. "]", ys_list[s], #x)
    series[s] = { x, y }
    if los then
      series[s][3] = values(fn, "lo[" .. s .. "]", los[s], #x)
      series[s][4] = values(fn, "hi[" .. s .. "]", his[s], #x)
    end
    for k = 1, #x do
      local tx = opts.logx and math.log(x[k], 10) or x[k]
      xmin, xmax = math.min(xmin, tx), math.max(xmax, tx)
      if y[k] == y[k] then any = true end
    end
  end
  if not any then fail(fn, "no finite y value to plot") end
  for s = 1, ns do
    local x, y, lo, hi = series[s][1], series[s][2], series[s][3], series[s][4]
    local rows = {}
    for k = 1, #x do
      local tx = opts.logx and math.log(x[k], 10) or x[k]
      rows[k] = lo and { x[k], y[k], lo[k], hi[k] } or { x[k], y[k] }
      extent_add(e, tx, y[k])
      if lo then extent_add(e, tx, lo[k]); extent_add(e, tx, hi[k]) end
    end
    local name = labels and labels[s]
    local idx = fig:block("series " .. s .. (name and ": " .. name or ""), lo and { "x", "y", "lo", "hi" } or { "x", "y" },
      rows)
    parts[#parts + 1] = string.format('DATA index %d using 1:2 with %s lw 2 lc rgb "%s" %s', idx,
      opts.points == false and "lines" or "linespoints " .. point_style(fig, s),
      color(s), name and "title " .. literal(name) or "notitle")
    -- intervals as capped vectors lo -> hi, as the descriptor charts draw them
    if lo then
      parts[#parts + 1] = string.format('DATA index %d using 1:3:(0):($4-$3) with vectors heads size screen 0.006,90 lw 1.2 lc rgb "%s" notitle',
        idx, color(s))
    end
  end
  if opts.hline then
    if not finite(opts.hline) then fail(fn, "hline must be a finite number") end
    extent_add(e, xmin, opts.hline)
    parts[#parts + 1] = string.format('%s with lines dt 2 lw 1.2 lc rgb "#555555" notitle', datum(opts.hline))
    table.insert(parts, 1, table.remove(parts)) -- drawn first, under the data
  end
  extent_finish(e, xmin, xmax)
  local xr = check_range(fn, "xrange", opts.xrange, opts.logx)
  if xr then fig:cmd("set xrange [%s:%s]", bound(xr[1]), bound(xr[2])) end
  if opts.logx then fig:log_tics("x", xr and xr[1] or 10 ^ xmin, xr and xr[2] or 10 ^ xmax) end
  fig:key_and_yrange(e, labels and ns or 0, check_range(fn, "yrange", opts.yrange, opts.logy), opts.key)
  fig:cmd("plot " .. table.concat(parts, ", \\\n     "))
  return fig:render()
end

return M
