-- plot_spec.lua: srgeo.plot draws real figures with gnuplot under
-- build/test-plot/: every terminal, the data and script beside each figure,
-- re-running the script, text output, missing values, and bad input.
local T = ...
package.path = "./lua/?.lua;" .. package.path -- also when the shell's root is elsewhere
local plot = require "srgeo.plot"

local DIR = "build/test-plot"
os.execute("mkdir -p " .. DIR)

local NAN = 0 / 0

local read = T.read

local function logspace(a, b, n)
  local t = {}
  for i = 1, n do t[i] = 10 ^ (a + (b - a) * (i - 1) / (n - 1)) end
  return t
end

-- A synthetic bump profile: plateau at 1, a peak of height 1 + h near
-- 10^c, decay below 1 after it; per-image curves scattered around it.
local function bump(label, h, c, nimg)
  local s = logspace(-2, 2, 17)
  local p = { scales = s, median = {}, lo = {}, hi = {}, mean = {}, per_image = {}, label = label,
              options = { ci = 0.95 } }
  for k, x in ipairs(s) do
    local lx = math.log(x, 10)
    local r = 1 + h * math.exp(-(lx - c) ^ 2 / 0.5) - 0.2 * math.max(0, lx - c - 0.7)
    p.median[k], p.mean[k] = r, r * 1.01
    p.lo[k], p.hi[k] = r - 0.05 * h - 0.01, r + 0.06 * h + 0.01
  end
  for i = 1, nimg or 4 do
    local row = {}
    for k = 1, #s do row[k] = p.median[k] * (1 + 0.02 * math.sin(i * k)) end
    p.per_image[i] = row
  end
  p.descriptors = { peak_eta = { value = 10 ^ c, lo = 10 ^ (c - 0.2), hi = 10 ^ (c + 0.2) },
                    peak_height = { value = 1 + h, lo = 1 + 0.9 * h, hi = 1 + 1.1 * h }, area = 0.4 * h }
  return p
end

local trained, random = bump("trained_net", 0.8, 0.3), bump("random init", 0.03, 0.5)

local MAGIC = { png = "\137PNG\r\n\26\n", pdf = "%PDF" }

-- out exists, is non-empty, starts right; its .dat and .gp sit beside it,
-- the script reads the data by relative name; no temporaries are left.
local function check_figure(out, ext)
  local body = T.truthy(read(out), out .. " was not written")
  T.truthy(#body > 0, out .. " is empty")
  if ext == "svg" then
    T.truthy(body:find("<svg", 1, true), out .. " has no <svg")
  elseif MAGIC[ext] then
    T.eq(body:sub(1, #MAGIC[ext]), MAGIC[ext], out .. " magic")
  end
  local stem = out:gsub("%.%w+$", "")
  local name = stem:match("[^/]+$")
  local dat = T.truthy(read(stem .. ".dat"), stem .. ".dat missing")
  local gp = T.truthy(read(stem .. ".gp"), stem .. ".gp missing")
  T.truthy(dat:find("^# "), "data file starts with a comment")
  T.truthy(gp:find("DATA = " .. plot._gpstr("./" .. name .. ".dat") .. "\n", 1, true), "script reads the data by relative name")
  local p = io.popen("ls -a " .. DIR)
  for f in p:lines() do T.truthy(not f:find("%.tmp"), "temporary left behind: " .. f) end
  p:close()
  return body, dat, gp
end

-- Re-run the script in the figure's folder (as a user would) and return the
-- figure it draws.
local function rerun(out)
  local dir, base = out:match("^(.*)/([^/]+)$")
  local gp = base:gsub("%.%w+$", "") .. ".gp"
  local q = require("srgeo.util").shell_quote
  local ok = os.execute("cd " .. q(dir) .. " && gnuplot " .. q("./" .. gp) .. " 2>/dev/null")
  T.truthy(ok, "gnuplot " .. gp .. " failed when re-run")
  return read(out)
end

T.test("plot.profile png: figure, data, script; re-running the script redraws it", function()
  local out = DIR .. "/profile.png"
  os.remove(out)
  T.eq(plot.profile({ trained, random }, { out = out, title = "trained vs random" }), out)
  local body, dat, gp = check_figure(out, "png")
  T.truthy(dat:find("# eta median lo hi mean", 1, true), "data columns are named")
  T.truthy(dat:find("profile 2: random init", 1, true), "blocks are labelled")
  T.truthy(gp:find("set logscale x", 1, true) and gp:find("filledcurves", 1, true), "log axis and bands")
  T.truthy(gp:find("1 with lines dt 2", 1, true), "dashed r = 1 line")
  T.truthy(gp:find("title 'trained_net' noenhanced", 1, true), "labels are literal (no subscripts)")
  T.eq(rerun(out), body, "re-running the script reproduces the figure")
end)

T.test("plot.profile svg and pdf by extension", function()
  for _, ext in ipairs { "svg", "pdf" } do
    local out = DIR .. "/profile_" .. ext .. "." .. ext
    T.eq(plot.profile({ trained, random }, { out = out, labels = { "A", "B" }, logy = true }), out)
    check_figure(out, ext)
    T.truthy(#rerun(out) > 0, ext .. " re-run")
  end
end)

T.test("plot.profile text: .txt file and terminal dumb return the text with axes and legend", function()
  local out = DIR .. "/profile_text.txt"
  local path, text = plot.profile({ trained, random }, { out = out })
  T.eq(path, out)
  T.eq(text, read(out), "returned text is the file's")
  check_figure(out, "txt")
  for _, s in ipairs { "η (L2 perturbation norm)", "r_η", "10^-2", "10^2", "trained_net", "random init" } do
    T.truthy(text:find(s, 1, true), "text figure lacks '" .. s .. "'")
  end
  local none, text2 = plot.profile(trained, { terminal = "dumb", xlabel = "eta here" })
  T.eq(none, nil, "no file without out")
  T.truthy(text2:find("eta here", 1, true) and text2:find("10^0", 1, true), "dumb text to a string")
end)

T.test("plot.profile: NaN and nil rungs are skipped, per-image lines drawn", function()
  local p = bump("gappy", 0.5, 0, 3)
  p.median[3], p.median[9] = NAN, nil
  p.lo[3], p.hi[3] = nil, NAN
  p.per_image[2][5] = NAN
  p.mean = nil
  local out = DIR .. "/profile_nan.png"
  T.eq(plot.profile(p, { out = out, per_image = true, yrange = { 0.5, "*" } }), out)
  local _, dat, gp = check_figure(out, "png")
  T.truthy(dat:find("NaN", 1, true), "missing values written as NaN")
  T.truthy(not gp:find("datafile missing", 1, true), "by default a NaN rung breaks the line (a gap)")
  T.truthy(dat:find("r_img3", 1, true), "per-image block")
  T.truthy(gp:find("for [j=2:4]", 1, true), "one thin line per image")
  local _, text = plot.profile(p, { terminal = "dumb", per_image = true })
  T.truthy(text:find("gappy", 1, true))
  local joined = DIR .. "/profile_nan_connect.png"
  T.eq(plot.profile(p, { out = joined, connect = true }), joined)
  local _, _, gpc = check_figure(joined, "png")
  T.truthy(gpc:find('set datafile missing "NaN"', 1, true), "connect: lines join across a NaN rung")
  -- A profile without bands or label still draws (no key).
  T.truthy(plot.profile({ scales = { 0.1, 1, 10 }, median = { 1, 1.2, NAN } }, { out = DIR .. "/profile_bare.png" }))
end)

T.test("plot.show prints the text rendering once and returns nothing (so the REPL shows it once)", function()
  local printed = {}
  local write = io.write
  io.write = function(...) for _, s in ipairs { ... } do printed[#printed + 1] = s end end
  local r = table.pack(pcall(plot.show, { trained, random }, { size = { 90, 26 } }))
  io.write = write
  T.truthy(r[1], tostring(r[2]))
  T.eq(r.n, 1, "plot.show returns no value")
  local text = table.concat(printed)
  T.truthy(text:find("trained_net", 1, true) and text:find("10^1", 1, true))
  local _, drawn = plot.profile({ trained, random }, { terminal = "dumb", size = { 90, 26 } })
  T.eq(text, drawn, "prints the figure plot.profile draws as text")
  T.raises(function() plot.show({}) end, "srgeo.plot.show: no profiles given")
  T.raises(function() plot.show(trained, { terminal = "png" }) end, "srgeo.plot.show: prints text")
end)

-- The REPL auto-prints results: the figure must appear once, not twice.  Run
-- when this spec runs in the srgeo shell (build/X/srgeo tests/run.lua ...).
T.test("plot.show in the REPL: typing srgeo.plot.show(p) shows the figure once", function()
  local shell = os.getenv("SRGEO_SHELL") or T.shell()
  if not shell then T.skip("not run by the srgeo shell") end
  local input, output = DIR .. "/repl_in.lua", DIR .. "/repl_out.txt"
  T.write(input, "srgeo.plot.show({scales = {0.1, 1, 10}, median = {1, 1.2, 1}, label = 'solo_net'}, {size = {70, 20}})\n")
  T.truthy(os.execute(string.format("SRGEO_HISTORY='%s/repl_hist' '%s' -i < '%s' > '%s' 2>&1", DIR, shell, input,
    output)))
  local out = read(output)
  local n = select(2, out:gsub("solo_net", ""))
  T.eq(n, 1, "the key entry solo_net appears once in the REPL output:\n" .. out)
end)

T.test("plot: no gnuplot warning under a locale that is not UTF-8 (LANG unset, as on a fresh machine)", function()
  local shell = os.getenv("SRGEO_SHELL") or T.shell()
  if not shell then T.skip("not run by the srgeo shell") end
  local err = DIR .. "/c_locale_err.txt"
  T.truthy(os.execute(string.format("env -u LC_ALL -u LC_CTYPE -u LANG '%s' -e %s 2>'%s' >/dev/null", shell,
    "'srgeo.plot.profile({scales = {0.1, 1, 10}, median = {1, 1.2, 1}, label = \"c\"}, {out = \"" .. DIR
    .. "/c_locale.png\"})'", err)))
  T.eq(read(err), "", "stderr")
  check_figure(DIR .. "/c_locale.png", "png")
end)

-- gnuplot's enhanced text would make "resnet" a subscript of "small_resnet"
-- and eat the braces of "x_{init}": user text is literal in every figure;
-- the library's own r_η label keeps its subscript.
T.test("plot: user titles, labels, key entries and tics are literal text; r_η stays a subscript", function()
  local net, other = bump("small_resnet", 0.5, 0.3), bump("vit_s^16", 0.2, 0.5)
  local svgs = {}
  local function draw(name, fn, ...)
    local out = DIR .. "/literal_" .. name .. ".svg"
    T.eq(fn(...), out)
    local body, _, gp = check_figure(out, "svg")
    svgs[name] = body
    return body, gp
  end
  local function literal(name, strings)
    for _, s in ipairs(strings) do
      T.truthy(svgs[name]:find(s, 1, true), name .. ": '" .. s .. "' is not drawn literally")
    end
  end
  local _, gp = draw("profile", plot.profile, { net, other }, { out = DIR .. "/literal_profile.svg",
    title = "small_resnet vs x_{init}", xlabel = "eta_pixel" })
  literal("profile", { "small_resnet vs x_{init}", "eta_pixel", "small_resnet", "vit_s^16" })
  T.truthy(gp:find("set ylabel 'r_η'\n", 1, true), "the default y label is enhanced text")
  T.truthy(svgs.profile:find('>r</tspan><tspan[^>]*dy="[%d.]+px">η<'), "r_η is drawn with a subscript η")
  draw("multiples", plot.multiples, { net, other }, { out = DIR .. "/literal_multiples.svg",
    title = "all_models", titles = { "panel_a", "panel_b" }, ylabel = "ratio_r" })
  literal("multiples", { "all_models", "panel_a", "panel_b", "ratio_r" })
  draw("heatmap", plot.heatmap, { net.median, other.median }, { out = DIR .. "/literal_heatmap.svg",
    cols = net.scales, rows = { "step_1", "step_2" }, title = "heat_map", ylabel = "ckpt_step", cblabel = "r_at_eta" })
  literal("heatmap", { "heat_map", "step_1", "ckpt_step", "r_at_eta" })
  draw("descriptors", plot.descriptors, { net, other }, { out = DIR .. "/literal_descriptors.svg",
    title = "peak_eta by model", ylabel = "peak_eta_value" })
  literal("descriptors", { "peak_eta by model", "peak_eta_value", "small_resnet", "vit_s^16" })
  draw("lines", plot.lines, { 1, 2, 3 }, { { 0.5, 0.7, 0.8 } }, { out = DIR .. "/literal_lines.svg",
    labels = { "acc_top1" }, title = "train_curve", xlabel = "opt_step", ylabel = "test_acc" })
  literal("lines", { "acc_top1", "train_curve", "opt_step", "test_acc" })
end)

T.test("plot.heatmap: step × η with a diverging palette; categories, NaN cells, text values", function()
  local steps, m = { 1, 10, 100, 1000, 10000 }, {}
  for i = 1, #steps do
    m[i] = bump("s", 0.2 * i, 0.3, 1).median
  end
  m[2][4] = NAN
  local out = DIR .. "/heatmap.png"
  T.eq(plot.heatmap(m, { out = out, rows = steps, cols = trained.scales, logy = true, ylabel = "step" }), out)
  local _, dat, gp = check_figure(out, "png")
  T.truthy(dat:find("# x y x_lo x_hi y_lo y_hi r", 1, true), "cell columns named")
  T.truthy(gp:find("palette defined", 1, true) and gp:find("boxxyerror", 1, true), "palette cells")
  T.truthy(gp:find("set cblabel 'r_η'", 1, true), "colour-bar label")
  T.truthy(gp:find('set datafile missing "NaN"', 1, true), "a NaN cell is skipped (grey), not painted")
  -- Symmetric about 1: cbrange [1 - d : 1 + d].
  local lo, hi = gp:match("set cbrange %[([^:]+):([^%]]+)%]")
  T.close(tonumber(lo) + tonumber(hi), 2, 1e-9, "colour range centred at 1")
  T.truthy(#rerun(out) > 0)
  local svg = DIR .. "/heatmap_cat.svg"
  T.eq(plot.heatmap(m, { out = svg, rows = { "init", "a", "b", "c", "final" }, cols = trained.scales, logcb = true }), svg)
  check_figure(svg, "svg")
  local _, text = plot.heatmap(m, { terminal = "dumb", rows = steps, cols = trained.scales, logy = true })
  T.truthy(text:find("1.00", 1, true), "text heatmap prints cell values")
end)

T.test("plot.multiples: one panel per entry, shared y, titles, layout", function()
  local out = DIR .. "/multiples.png"
  local entries = { { trained, random }, { bump("l2", 0.4, 0, 2), bump("r", 0.01, 0, 2) }, { bump("l3", 0.6, 0.6, 2) } }
  T.eq(plot.multiples(entries, { out = out, labels = nil, titles = { "layer1", "layer2", "layer3" } }), out)
  local _, _, gp = check_figure(out, "png")
  T.truthy(gp:find("set multiplot layout 2,2", 1, true), "near-square layout")
  T.truthy(gp:find("set title 'layer3' noenhanced", 1, true), "panel titles")
  local ys = {}
  for r in gp:gmatch("set yrange (%b[])") do ys[#ys + 1] = r end
  T.eq(#ys, 3)
  T.truthy(ys[1] == ys[2] and ys[2] == ys[3], "shared y range")
  T.truthy(#rerun(out) > 0)
  local pdf = DIR .. "/multiples_2.pdf"
  plot.multiples({ trained, random }, { out = pdf, layout = { 1, 2 }, shared_y = false })
  check_figure(pdf, "pdf")
  local _, text = plot.multiples({ { trained, random }, { trained, random } },
    { terminal = "dumb", labels = { "T", "R" }, titles = { "tap one", "tap two" } })
  T.truthy(text:find("tap one", 1, true) and text:find("tap two", 1, true))
  T.raises(function() plot.multiples({ trained, random }, { out = pdf, layout = { 1, 1 } }) end,
    "layout 1x1 has room for 1 panels, got 2")
end)

T.test("plot.descriptors: bars with error bars, grouped points, numbers and {value,lo,hi}", function()
  local out = DIR .. "/descriptors.png"
  T.eq(plot.descriptors({ trained, random }, { out = out, field = "peak_height" }), out)
  local _, dat, gp = check_figure(out, "png")
  T.truthy(dat:find("# x value lo hi colour group", 1, true), "columns named")
  T.truthy(gp:find("with boxxyerror", 1, true) and gp:find("with vectors heads", 1, true), "bars (from 1: a ratio) and error bars")
  T.truthy(#rerun(out) > 0)
  local out2 = DIR .. "/descriptors_grouped.svg"
  local undecided = bump("no peak", 0, 0)
  undecided.descriptors.peak_eta = { value = NAN, lo = NAN, hi = NAN }
  T.eq(plot.descriptors({ { trained, random }, { undecided, trained } },
    { out = out2, field = "peak_eta", groups = { "tap1", "tap2" }, labels = { "trained", "random" } }), out2)
  local _, _, gp2 = check_figure(out2, "svg")
  T.truthy(gp2:find("set logscale y", 1, true) and gp2:find("with points", 1, true), "η field: log axis, points")
  T.truthy(gp2:find("'tap2' 1", 1, true), "group tics")
  local _, text = plot.descriptors({ trained, random }, { terminal = "dumb", field = "area" })
  T.truthy(text:find("trained_net", 1, true) and text:find("area above", 1, true))
end)

T.test("plot.lines: generic series (accuracy vs step)", function()
  local out = DIR .. "/lines.png"
  local steps = { 1, 10, 100, 1000, 10000 }
  T.eq(plot.lines(steps, { { 0.1, 0.3, 0.6, 0.8, 0.9 }, { 0.1, 0.1, NAN, 0.12, 0.1 } },
    { out = out, logx = true, labels = { "train", "test" }, xlabel = "step", ylabel = "accuracy", hline = 0.1 }), out)
  check_figure(out, "png")
  T.truthy(#rerun(out) > 0)
  local _, text = plot.lines({ 1, 2, 3 }, { 3, 1, 2 }, { terminal = "dumb", xlabel = "xx", ylabel = "yy" })
  T.truthy(text:find("xx", 1, true) and text:find("yy", 1, true))
  local _, text2 = plot.lines({ { 1, 2 }, { 1, 2, 3 } }, { { 1, 2 }, { 2, 3, 1 } },
    { terminal = "dumb", labels = { "short", "long" }, points = false })
  T.truthy(text2:find("short", 1, true) and text2:find("long", 1, true))
end)

T.test("plot: bad input is a clear error naming the function", function()
  local out = DIR .. "/bad.png"
  T.raises(function() plot.profile({}, { out = out }) end, "srgeo.plot.profile: no profiles given")
  -- no out (and no window or terminal image here): a temporary PNG, its
  -- path returned alone (no "PATH  nil" in the REPL)
  if plot.view_mode() == "file" then
    local r = table.pack(plot.profile(trained, {}))
    local tmpfig = r[1]
    T.eq(r.n, 1, "a figure file returns its path alone")
    T.truthy(tmpfig:match("%.png$") and (T.read(tmpfig) or ""):sub(2, 4) == "PNG", tostring(tmpfig))
    os.execute("rm -rf '" .. tmpfig:match("^(.*)/") .. "'") -- the private folder (srgeo-plot.XXXXXX) too
  end
  T.raises(function() plot.profile(trained, { out = DIR .. "/x.jpg" }) end, "cannot choose a terminal for")
  T.raises(function() plot.profile(trained, { out = out, terminal = "dumb" }) end, "does not match the extension")
  T.raises(function() plot.profile(trained, { out = out, colour = "red" }) end, "unknown option 'colour'")
  T.raises(function() plot.profile(trained, { out = out, logy = "yes" }) end, "option logy must be a boolean")
  T.raises(function() plot.profile(trained, { out = out, labels = { "a", "b" } }) end, "labels has 2 entries for 1 profiles")
  T.raises(function() plot.profile({ scales = { 1, 2, 3 }, median = { 1, 1 } }, { out = out }) end,
    "srgeo.plot.profile: profile 1 median has 2 entries, expected 3")
  T.raises(function() plot.profile({ scales = { 1, 2 }, median = { 1, "x" } }, { out = out }) end,
    "profile 1 median[2] is a string, expected a number")
  T.raises(function() plot.profile({ scales = { 0, 2 }, median = { 1, 1 } }, { out = out }) end, "is not positive")
  T.raises(function() plot.profile({ scales = {}, median = {} }, { out = out }) end, "profile 1 scales is empty")
  T.raises(function() plot.profile({ scales = { 1, 2 }, median = { NAN, NAN } }, { out = out }) end, "has no valid rung")
  T.raises(function() plot.profile({ scales = { 1, 2 }, median = { 1, 1 }, lo = { 1, 1 } }, { out = out }) end,
    "only one of lo and hi")
  T.raises(function() plot.profile({ trained, 42 }, { out = out }) end, "profile 2 is a number")
  T.raises(function() plot.profile(trained, { out = out, yrange = { 2, 1 } }) end, "yrange must have lo < hi")
  T.raises(function() plot.heatmap({ { 1, 2 }, { 1 } }, { out = out }) end,
    "srgeo.plot.heatmap: matrix row 2 has 1 entries, expected 2")
  T.raises(function() plot.heatmap({ { 1, 2 } }, { out = out, cols = { 1, 2, 3 } }) end, "cols must have 2 entries")
  T.raises(function() plot.heatmap({ { 1, 2 } }, { out = out, cols = { 2, 1 } }) end, "strictly increasing")
  T.raises(function() plot.heatmap({ { NAN } }, { out = out }) end, "no finite value")
  T.raises(function() plot.heatmap({}, { out = out }) end, "non-empty matrix")
  T.raises(function() plot.multiples({}, { out = out }) end, "srgeo.plot.multiples: expected a non-empty list")
  T.raises(function() plot.multiples({ trained, { scales = { 1 }, median = { 1, 2 } } }, { out = out }) end,
    "panel 2 profile 1 median has 2 entries")
  T.raises(function() plot.descriptors({ trained }, { out = out, field = "nope" }) end,
    "srgeo.plot.descriptors: no profile has a descriptor 'nope'")
  T.raises(function() plot.descriptors({ { scales = { 1 }, median = { 1 } } }, { out = out }) end, "has no descriptors")
  T.raises(function() plot.descriptors({ trained }, { out = out, style = "pie" }) end, "style must be")
  T.raises(function() plot.lines({ 1, 2 }, { { 1, 2, 3 } }, { out = out }) end,
    "srgeo.plot.lines: ys_list[1] has 3 entries, expected 2")
  T.raises(function() plot.lines({ 1, "b" }, { 1, 2 }, { out = out }) end, "xs[2] is a string")
  T.raises(function() plot.lines({}, { 1 }, { out = out }) end, "xs must be a non-empty array")
  T.eq(read(out), nil, "no figure written by a failed call")
end)

T.test("plot: a missing gnuplot and a failing script are clear errors", function()
  local out = DIR .. "/nognuplot.png"
  os.remove(out)
  T.raises(function() plot.profile(trained, { out = out, gnuplot = "/nonexistent/gnuplot" }) end,
    "srgeo.plot.profile: gnuplot not found")
  T.raises(function() plot.profile(trained, { out = out, gnuplot = "/nonexistent/gnuplot" }) end,
    "install gnuplot-nox (make deps)")
  T.eq(read(out), nil, "no figure")
  T.truthy(read(DIR .. "/nognuplot.gp"), "the script is kept, ready to run")
  local bad = DIR .. "/gpfail.png"
  os.remove(bad)
  local err = T.raises(function() plot.profile(trained, { out = bad, key = "no_such_key_option" }) end,
    "srgeo.plot.profile: gnuplot failed")
  T.truthy(err:find("gpfail.gp", 1, true), "names the script")
  T.eq(read(bad), nil, "no partial figure")
  check_figure(DIR .. "/profile.png", "png") -- and no temporaries left in the folder
end)

-- Text never becomes a gnuplot command.  A checkpoint named
-- m`touch PWNED`.safetensors became a curve's key entry, written into the
-- script as "m`touch PWNED`.safetensors": gnuplot runs backquotes inside
-- double quotes, so drawing the figure, and every redraw of the kept .gp,
-- ran touch.  Every hostile string of tests/lua/hostile_files.lua goes into
-- every text field of every figure (title, key entries, axis labels, tics,
-- panel titles, colour-bar label, a left-out reason, the font, the output
-- and data file names); gnuplot draws each for real and redraws each kept
-- script, and no canary appears.
T.test("plot: hostile text in every field (backquotes, system(), quotes, newlines, \\, @) runs no command", function()
  local hostile = dofile("tests/lua/hostile_files.lua")
  local hd = DIR .. "/hostile"
  os.execute("rm -rf '" .. hd .. "' && mkdir -p '" .. hd .. "'")
  local function canaries()
    local found = {}
    for _, d in ipairs { hd, ".", DIR } do
      local p = io.popen("ls -a '" .. d .. "'")
      for f in p:lines() do if f:find("PWNED", 1, true) and not f:find("%.") then found[#found + 1] = d .. "/" .. f end end
      p:close()
    end
    return table.concat(found, " ")
  end
  local names = hostile.text("PWNED", false)
  local figures = 0
  for i, s in ipairs(hostile.text("PWNED")) do
    -- a file name: the same text without control characters or slashes
    local fname = names[(i - 1) % #names + 1]:gsub("/", "_")
    local p1, p2 = bump(s, 0.5, 0, 2), bump("b" .. s, 0.2, 0.5, 2)
    local left = bump(s, 0.1, 0)
    left.descriptors.peak_eta = { value = NAN, reason = s }
    local figs = {
      { "png", function(out) return plot.profile({ p1, p2 }, { out = out, title = s, xlabel = s, ylabel = s, font = s }) end },
      { "svg", function(out) return plot.profile(p1, { out = out, labels = { s } }) end },
      { "pdf", function(out) return plot.multiples({ p1, { p1, p2 } }, { out = out, title = s, titles = { s, s } }) end },
      { "svg", function(out) return plot.heatmap({ { 1, 2 }, { 2, 1 } }, { out = out, rows = { s, "r2" }, cols = { "c1", s },
        title = s, ylabel = s, cblabel = s }) end },
      { "svg", function(out) return plot.descriptors({ { p1, p2 }, { left, p2 } }, { out = out, groups = { s, "g2" },
        labels = { s, "l2" }, title = s }) end },
      { "txt", function(out) return plot.lines({ 1, 2, 3 }, { { 1, 2, 3 } }, { out = out, labels = { s }, ylabel = s .. s }) end },
    }
    for j, f in ipairs(figs) do
      local out = string.format("%s/%d_%d %s.%s", hd, i, j, fname, f[1])
      T.eq(f[2](out), out, "figure " .. j .. " of payload " .. i)
      figures = figures + 1
      check_figure(out, f[1])
      T.eq(canaries(), "", "payload " .. i .. " figure " .. j .. " ran a command")
      T.truthy(#rerun(out) > 0, "redraw of figure " .. j .. " of payload " .. i)
      T.eq(canaries(), "", "redrawing payload " .. i .. " figure " .. j .. " ran a command")
    end
  end
  T.eq(figures, 6 * #hostile.text("PWNED"))
  -- file names gnuplot reads as commands or special files: "<cmd" (data from
  -- a pipe), "|cmd" (output into a pipe), "+", "-"
  for _, name in ipairs { "<touch PWNED", "|touch PWNED", "+", "-", "++", "$DATA", "~" } do
    for _, ext in ipairs { "png", "txt" } do
      local out = hd .. "/" .. name .. "." .. ext
      T.eq(plot.lines({ 1, 2, 3 }, { { 1, 3, 2 } }, { out = out, labels = { name } }), out)
      check_figure(out, ext)
      T.truthy(#rerun(out) > 0, "redraw of " .. out)
      T.eq(canaries(), "", out .. " ran a command")
    end
  end
  -- a control character in a file name is refused (it cannot be written in a
  -- gnuplot string), and so is a key option that is more than key words
  T.raises(function() plot.profile(trained, { out = hd .. "/a\nb.png" }) end, "opts.out has a control character (byte 10")
  T.raises(function() plot.profile(trained, { out = hd .. "/x.png", key = "top'.system('touch PWNED').'" }) end,
    "option key must be gnuplot key words")
  T.raises(function() plot.profile(trained, { out = hd .. "/x.png", key = "top\n!touch PWNED" }) end,
    "option key must be gnuplot key words")
  T.eq(canaries(), "")
end)

-- Figures a paper can use (issue 36): each rule read back from the .gp / .dat written.
T.test("plot: overlays whose highest medians differ by more than 3x go on a log y axis; closer ones stay linear", function()
  local function flat(label, top)
    return { label = label, scales = { 0.1, 1, 10, 100 }, median = { 1, 1.2, top, top * 0.9 } }
  end
  local out = DIR .. "/logy_auto.png"
  plot.profile({ flat("bump", 6), flat("rise", 40) }, { out = out })
  T.truthy(read(DIR .. "/logy_auto.gp"):find("set logscale y", 1, true), "6 vs 40: log y")
  plot.profile({ flat("a", 2), flat("b", 5) }, { out = out })
  T.truthy(not read(DIR .. "/logy_auto.gp"):find("set logscale y", 1, true), "2 vs 5: linear")
  plot.profile({ flat("bump", 6), flat("rise", 40) }, { out = out, logy = false })
  T.truthy(not read(DIR .. "/logy_auto.gp"):find("set logscale y", 1, true), "logy = false is kept")
  plot.multiples({ { flat("bump", 6) }, { flat("rise", 40) } }, { out = out })
  T.truthy(read(DIR .. "/logy_auto.gp"):find("set logscale y", 1, true), "multiples share the rule")
  T.eq(plot.LOGY_RATIO, 3)
end)

T.test("plot: ‖J‖_F typeset: a subscript in the enhanced axis label, no literal underscore in titles and keys", function()
  local ps = {}
  for i = 1, 3 do
    ps[i] = { label = "m" .. i, descriptors = { jacobian_fro = { value = i, lo = i - 0.1, hi = i + 0.1 } } }
  end
  plot.descriptors(ps, { field = "jacobian_fro", out = DIR .. "/jf.svg" })
  local gp = read(DIR .. "/jf.gp")
  for line in gp:gmatch("[^\n]+") do
    if line:find("‖J‖_F", 1, true) then
      T.truthy(line:find("^set ylabel") and not line:find("noenhanced", 1, true), "‖J‖_F only as enhanced text: " .. line)
    end
  end
  T.truthy(gp:find("‖J‖_F (median over images)", 1, true), "the axis label")
  T.truthy(gp:find("‖J‖F", 1, true), "the title without the underscore")
  T.truthy(read(DIR .. "/jf.svg"):find("<svg", 1, true))
  plot.lines({ 1, 2, 3 }, { 1, 2, 3 }, { out = DIR .. "/jf_lines.png", labels = { plot.JF }, ylabel = plot.field_label("jacobian_fro") })
  local gl = read(DIR .. "/jf_lines.gp")
  T.truthy(gl:find("‖J‖_F (median over images)", 1, true) and not gl:find("‖J‖_F[^\n]*noenhanced"), gl)
end)

T.test("plot: one quantity per axis with its intervals (plot.lines lo/hi); ratio bars from 1; too few points raise a table", function()
  plot.lines({ 0, 0.5, 1 }, { 2, 3, 4 }, { lo = { 1.5, 2.5, 3.5 }, hi = { 2.5, 3.5, 4.5 }, out = DIR .. "/ci_lines.png",
    ylabel = "peak η" })
  T.truthy(read(DIR .. "/ci_lines.dat"):find("# x y lo hi\n0 2 1.5 2.5\n", 1, true), read(DIR .. "/ci_lines.dat"))
  T.truthy(read(DIR .. "/ci_lines.gp"):find("using 1:3:(0):($4-$3) with vectors", 1, true), "intervals drawn")
  T.raises(function() plot.lines({ 1, 2 }, { 1, 2 }, { lo = { 1, 2 }, out = DIR .. "/x.png" }) end, "give both lo and hi")
  -- a ratio (peak height: r, baseline 1) grows from 1; a non-ratio (area) from 0
  plot.descriptors({ trained, random }, { field = "peak_height", out = DIR .. "/ratio.png" })
  local gp = read(DIR .. "/ratio.gp")
  T.truthy(gp:find("using 1:(($2+1)/2):", 1, true) and gp:find("boxxyerror", 1, true), "bars span 1 .. value:\n" .. gp)
  T.truthy(gp:find("first 1 to graph 1, first 1", 1, true), "the baseline r = 1 drawn")
  T.truthy(not gp:find("xzeroaxis", 1, true), "no zero axis for a ratio")
  plot.descriptors({ trained, random }, { field = "area", out = DIR .. "/area.png" })
  T.truthy(read(DIR .. "/area.gp"):find("with boxes", 1, true) and read(DIR .. "/area.gp"):find("xzeroaxis", 1, true))
  -- fewer defined values than min_points: an error carrying the table
  local nan = { value = 0 / 0, lo = 0 / 0, hi = 0 / 0, reason = "an edge: r still rising at the top rung" }
  local few = { { label = "a", descriptors = { peak_eta = { value = 3, lo = 2, hi = 4 } } },
                { label = "b", descriptors = { peak_eta = nan } }, { label = "c", descriptors = { peak_eta = nan } } }
  local ok, err = pcall(plot.descriptors, few, { field = "peak_eta", out = DIR .. "/few.png", min_points = 2 })
  T.truthy(not ok and type(err) == "table" and err.too_few, tostring(err))
  T.eq(#err.rows, 4)
  T.eq(err.rows[2][1], "a"); T.eq(err.rows[2][2], "3"); T.eq(err.rows[3][5], "an edge: r still rising at the top rung")
  -- srgeo.experiment's figures ask for two: the table goes in the summary, no figure
  local E = require "srgeo.experiment"
  local ex = E.new { out = DIR .. "/ex_few", quiet = true }
  T.eq(ex:figure("few", plot.descriptors, few, { field = "peak_eta" }), nil)
  T.truthy(not io.open(DIR .. "/ex_few/few.png"), "no figure")
  local note = ex.notes[#ex.notes]
  T.truthy(note and note.text:find("an edge: r still rising", 1, true) and note.title:find("few: 1 of 3 peak_eta defined", 1, true),
    note and note.title .. "\n" .. note.text)
end)

---------------------------------------------------------------------------
-- A figure without opts.out in the shell (plot.view_mode): a window, a
-- terminal image, or a file whose path is printed.  Each branch runs the
-- shell as a user would, its environment set as a terminal sets it; the
-- terminal images are read back from a pseudo-terminal (script(1)).
---------------------------------------------------------------------------

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local VIEW_DIR = io.popen("pwd -P"):read("l") .. "/" .. DIR .. "/view"
local DEMO = "p = srgeo.profile.adopt{scales = {0.1, 1, 10}, median = {1, 2, 1.5}, label = 'demo', n_images = 4}"

-- Run `srgeo -e CODE` (or -i with stdin) in a fresh $TMPDIR under env words
-- (env(1) syntax; the display and terminal variables of this session are
-- unset first); pty = true runs it on a pseudo-terminal.  Returns stdout,
-- stderr (merged on a pty), the $TMPDIR and the seconds it took.
local function view_run(envw, code, o)
  o = o or {}
  local shell = os.getenv("SRGEO_SHELL") or T.shell()
  if not shell then T.skip("not run by the srgeo shell") end
  local tmp = VIEW_DIR .. "/" .. (o.name or "t")
  os.execute("rm -rf " .. q(tmp) .. " && mkdir -p " .. q(tmp))
  local clean = "env -u DISPLAY -u WAYLAND_DISPLAY -u TMUX -u KITTY_WINDOW_ID -u TERM_PROGRAM -u LC_TERMINAL "
    .. "-u SRGEO_PLOT_VIEW -u SRGEO_GNUPLOT TERM=xterm-256color TMPDIR=" .. q(tmp) .. " SRGEO_HISTORY=" .. q(tmp .. "/hist") .. " " .. envw
  local args = o.stdin and "-i" or "-e " .. q(code)
  local cmd = clean .. " " .. q(shell) .. " " .. args
  if o.stdin then T.write(tmp .. "/in", o.stdin); cmd = cmd .. " <" .. q(tmp .. "/in") end
  if o.pty then cmd = "script -qec " .. q(cmd) .. " /dev/null </dev/null" end
  local clock = io.popen("date +%s.%N"):read("l")
  os.execute(cmd .. " >" .. q(tmp .. "/out") .. " 2>" .. q(tmp .. "/err"))
  local dt = tonumber(io.popen("date +%s.%N"):read("l")) - tonumber(clock)
  return read(tmp .. "/out") or "", read(tmp .. "/err") or "", tmp, dt
end

local B64 = {}
for i = 1, 64 do B64[("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):byte(i)] = i - 1 end
local function unbase64(s)
  local out, bits, n = {}, 0, 0
  for c in s:gmatch("[%w+/]") do
    bits, n = (bits << 6) | B64[c:byte()], n + 6
    if n >= 8 then
      n = n - 8
      out[#out + 1] = string.char((bits >> n) & 255)
    end
  end
  return table.concat(out)
end

T.test("plot without out in the shell: a file under $TMPDIR, its path printed once (a script: on stderr; the REPL: echoed)", function()
  local out, err, tmp = view_run("", DEMO .. " print(srgeo.plot.profile(p))", { name = "file" })
  local path = err:match("srgeo%.plot%.profile: no opts%.out given; the figure is (%S+)\n")
  T.truthy(path, "stderr names the figure:\n" .. err)
  T.eq(out, path .. "\n", "and the call returns its path")
  T.truthy(path:find("^" .. tmp:gsub("%p", "%%%0") .. "/srgeo%-plot%.[%w]+/profile%-1%.png$"), path)
  T.truthy(plot.figure_complete("png", read(path)), "a complete PNG")
  T.truthy(read(path:gsub("%.png$", ".gp")):find("set terminal pngcairo", 1, true), "its .gp beside it")
  T.eq(io.popen("stat -c %a " .. q(path:match("^(.*)/"))):read("l"), "700", "a private folder")
  T.eq(#T.sh("ls " .. q(path:match("^(.*)/")) .. " | grep tmp"), 0, "no temporary left")
  -- the REPL echoes the returned path: printed once, no "nil", no note
  out, err = view_run("", nil, { name = "file_repl", stdin = DEMO .. "\nsrgeo.plot.profile(p)\n" })
  local paths = {}
  for pth in out:gmatch("(/%S+%.png)") do paths[#paths + 1] = pth end
  T.eq(#paths, 1, "the path once in the REPL:\n" .. out)
  T.truthy(not out:find("nil", 1, true) and not err:find("the figure is", 1, true), out .. err)
  -- a display without a window terminal in this gnuplot: a file, and why
  local have = T.sh("gnuplot -e 'set terminal'")
  if not (have:find("\n%s+qt%s") or have:find("\n%s+wxt%s") or have:find("\n%s+x11%s")) then
    out, err = view_run("DISPLAY=:97", DEMO .. " srgeo.plot.profile(p) srgeo.plot.profile(p)", { name = "nowin" })
    T.truthy(err:find("no window: this gnuplot has no qt, wxt or x11 terminal", 1, true), err)
    T.eq(select(2, err:gsub("no window", "")), 1, "said once")
    T.eq(select(2, err:gsub("the figure is", "")), 2, "two figures")
  end
end)

T.test("plot without out on a terminal with an image protocol: kitty, iTerm2 and sixel escape sequences carry the figure", function()
  if os.execute("command -v script >/dev/null 2>&1") ~= true then T.skip("script(1) is not installed") end
  local code = DEMO .. " io.write('<', select('#', srgeo.plot.profile(p)), '>')"
  -- kitty: APC G chunks of base64 PNG, a=T f=100 q=2 on the first, m=1 until the last
  local out = view_run("KITTY_WINDOW_ID=7", code, { name = "kitty", pty = true })
  out = out:gsub("\r", "")
  local chunks = {}
  for ctl, payload in out:gmatch("\27_G([^;]*);([^\27]*)\27\\") do chunks[#chunks + 1] = { ctl, payload } end
  T.truthy(#chunks >= 2, "the PNG in several chunks, got " .. #chunks .. ":\n" .. out:sub(1, 300))
  T.eq(chunks[1][1], "a=T,f=100,q=2,m=1")
  for i = 2, #chunks - 1 do T.eq(chunks[i][1], "m=1") end
  T.eq(chunks[#chunks][1], "m=0")
  local b64 = {}
  for i, c in ipairs(chunks) do
    if i < #chunks then T.eq(#c[2], 4096, "chunk " .. i .. " size") end
    b64[i] = c[2]
  end
  T.truthy(plot.figure_complete("png", unbase64(table.concat(b64))), "the chunks decode to a complete PNG")
  T.truthy(out:find("<0>", 1, true), "a shown figure returns nothing")
  T.truthy(not out:find("the figure is", 1, true), "no path printed")
  view_run("TERM=xterm-kitty", code, { name = "kitty_term", pty = true })
  T.truthy(read(VIEW_DIR .. "/kitty_term/out"):find("\27_Ga=T,f=100", 1, true), "TERM=xterm-kitty too")
  -- under tmux: no escape sequences (tmux drops them), a file
  out = view_run("KITTY_WINDOW_ID=7 TMUX=/tmp/x,1,0", code, { name = "kitty_tmux", pty = true })
  T.truthy(not out:find("\27_G", 1, true) and out:find("the figure is", 1, true), out)
  -- iTerm2: OSC 1337 File=inline=1;size=N:base64 BEL
  out = view_run("TERM_PROGRAM=iTerm.app", code, { name = "iterm", pty = true })
  local size, payload = out:gsub("\r", ""):match("\27%]1337;File=inline=1;size=(%d+);preserveAspectRatio=1:([%w+/=]+)\7")
  T.truthy(payload, "an iTerm2 inline image:\n" .. out:sub(1, 300))
  local png = unbase64(payload)
  T.eq(#png, tonumber(size), "size= is the PNG's")
  T.truthy(plot.figure_complete("png", png))
  -- sixel (when this gnuplot has sixelgd): DCS q .. ST
  if T.sh("gnuplot -e 'set terminal'"):find("\n%s+sixelgd%s") then
    out = view_run("TERM=foot", code, { name = "sixel", pty = true })
    local six = out:match("\27Pq.-\27\\")
    T.truthy(six and #six > 1000 and six:find('"1;1;800;500', 1, true), "a sixel image of 800x500:\n" .. out:sub(1, 300))
    T.truthy(out:find("<0>", 1, true))
  end
  -- without a terminal on stdout: a file, whatever TERM says
  local _, err = view_run("KITTY_WINDOW_ID=7", code, { name = "kitty_pipe" })
  T.truthy(err:find("the figure is", 1, true), err)
end)

T.test("plot without out with a display: a gnuplot window (qt/wxt/x11, persist) started in the background", function()
  -- gnuplot-nox has no window terminal and this machine may have no X
  -- server: a gnuplot that lists x11 among its terminals records the script
  -- it is run on, checks it with the real gnuplot (dumb in place of x11) and
  -- keeps running 3 s, as a window does
  local real = T.sh("command -v gnuplot"):match("^(%S+)")
  if not real then T.skip("gnuplot is not installed") end
  os.execute("mkdir -p " .. q(VIEW_DIR))
  local fake, log = VIEW_DIR .. "/gnuplot-x11", VIEW_DIR .. "/window_log"
  os.execute("rm -f " .. q(log) .. "*")
  T.write(fake, string.format([[#!/bin/sh
case "$*" in *"set terminal"*) %s -e 'set terminal' 2>&1; echo '             x11  X11 Window System interactive terminal'; exit 0;; esac
echo "$@" >%s.args; cp "$2" %s.gp
sed 's/^set terminal x11 .*/set terminal dumb/' "$2" | %s >%s.text 2>&1; echo $? >%s.rc
sleep 3; echo done >%s.done
]], q(real), q(log), q(log), q(real), q(log), q(log), q(log)))
  os.execute("chmod +x " .. q(fake))
  local out, err, tmp, dt = view_run("DISPLAY=:97 SRGEO_GNUPLOT=" .. q(fake),
    DEMO .. " io.write('<', select('#', srgeo.plot.profile(p)), '>')", { name = "window" })
  T.eq(out, "<0>", "nothing returned, nothing printed: " .. err)
  T.truthy(dt < 2.5, string.format("the shell did not wait for the window (%.2f s)", dt))
  for _ = 1, 100 do
    if read(log .. ".rc") then break end
    os.execute("sleep 0.05")
  end
  T.eq(read(log .. ".args"), "-persist ./profile-1.gp\n")
  local gp = read(log .. ".gp")
  T.truthy(gp:find("\nset terminal x11 enhanced persist size 800,500 font 'Sans,11' title 'srgeo.plot.profile'\n", 1, true), gp)
  T.truthy(not gp:find("set output", 1, true), "a window has no output file")
  T.eq(read(log .. ".rc"), "0\n", "the script runs: " .. tostring(read(log .. ".text")))
  T.truthy(read(log .. ".text"):find("demo", 1, true), "and draws the curve")
  T.truthy(T.sh("ls " .. q(tmp) .. "/srgeo-plot.*/"):find("profile-1.dat", 1, true), "the data beside the script")
  -- forced without a window terminal: an error naming the packages
  local _, e2 = view_run("SRGEO_PLOT_VIEW=window SRGEO_GNUPLOT=" .. q(real), DEMO .. " srgeo.plot.profile(p)", { name = "forced" })
  if not T.sh(real .. " -e 'set terminal'"):find("\n%s+x11%s") then
    T.truthy(e2:find("SRGEO_PLOT_VIEW=window, but", 1, true) and e2:find("gnuplot-qt", 1, true), e2)
  end
  local _, e3 = view_run("SRGEO_PLOT_VIEW=popup", DEMO .. " srgeo.plot.profile(p)", { name = "bad" })
  T.truthy(e3:find("SRGEO_PLOT_VIEW=popup is not one of window, kitty, iterm, sixel, file", 1, true), e3)
end)

T.test("plot: every figure's title names the models, evaluation set and image count of its data (plot.about)", function()
  local function measured(label, model, eval, n)
    local p = bump(label, 0.5, 0.3, n)
    p.identity, p.model, p.n_images = { model = model, eval = eval, preset = "quick" }, model, n
    return p
  end
  local a = measured("trained", "small_resnet", "fmnist-test:32@0", 32)
  local b = measured("init", "small_resnet@init", "fmnist-test:32@0", 32)
  local c = measured("pgd", "small_resnet_pgd", "fmnist-test:16@0", 16)
  T.eq(plot.about { a, b }, "small_resnet, small_resnet@init on fmnist-test, 32 images")
  local f1 = measured("file", "/data/ckpt/face.onnx", "fmnist-test:32@0", 32)
  local f2 = measured("file@init", "/data/ckpt/face.onnx@init", "fmnist-test:32@0", 32)
  T.eq(plot.about { f1, f2 }, "face.onnx, face.onnx@init on fmnist-test, 32 images", "a model file by its name, not its path")
  T.eq(plot.about({ a, b, c }, "r_η on fmnist-test (16–32 images)"), "small_resnet, small_resnet@init, small_resnet_pgd")
  T.eq(plot.about({ a }, "small_resnet on fmnist-test, 32 images"), nil, "nothing the title already says")
  T.eq(plot.about({ a }, "small_resnet_v2 on fmnist-test-blur, 132 images"), "small_resnet on fmnist-test, 32 images",
    "a name is named on its own, not inside a longer one")
  T.eq(plot.about { { scales = { 1 }, median = { 1 }, per_image = { { 1 }, { 1 } } } }, "2 images", "rows count images")
  local many = {}
  for i = 1, 5 do
    many[i] = measured("m" .. i, "ckpt_" .. i, "noise:4@0", 4)
    many[i].identity.arch = "tiny"
  end
  T.eq(plot.about(many), "5 models (tiny) on noise, 4 images")
  -- the .gp of each figure kind: its title line carries the three
  local function title_of(out)
    local gp = T.truthy(read(out:gsub("%.%w+$", ".gp")), out)
    return T.truthy(gp:match("\nset multiplot [^\n]* title ([^\n]*) margins") or gp:match("\nset title ([^\n]*)\n"),
      "no title in " .. out .. ":\n" .. gp)
  end
  local function names_all(out, what)
    local t = title_of(out)
    for _, s in ipairs(what) do T.truthy(t:find(s, 1, true), out .. ": the title lacks '" .. s .. "': " .. t) end
    return t
  end
  local std = { "small_resnet", "fmnist-test", "32 images" }
  local f = DIR .. "/about_"
  plot.profile({ a, b }, { out = f .. "profile.png" })
  names_all(f .. "profile.png", { "small_resnet, small_resnet@init", "on fmnist-test", "32 images" })
  -- a caller's title first, the rest on a second line
  plot.profile({ a, b }, { out = f .. "titled.png", title = "r_η on fmnist-test (32 images, seed 0)" })
  T.eq(title_of(f .. "titled.png"), "'r_η on fmnist-test (32 images, seed 0)'.\"\\n\".'small_resnet, small_resnet@init' noenhanced")
  plot.profile({ a }, { out = f .. "bare.png", title = "mine", about = false })
  T.eq(title_of(f .. "bare.png"), "'mine' noenhanced", "about = false: the title alone")
  plot.multiples({ { a, b }, { a } }, { out = f .. "multiples.png", titles = { "one", "two" } })
  names_all(f .. "multiples.png", std)
  plot.descriptors({ a, b }, { out = f .. "descriptors.png", field = "peak_height" })
  names_all(f .. "descriptors.png", { "Peak height on fmnist-test (preset quick)", "small_resnet, small_resnet@init", "32 images" })
  plot.descriptors({ { a, b }, { c } }, { out = f .. "grouped.png", field = "peak_eta", groups = { "g1", "g2" } })
  names_all(f .. "grouped.png", { "small_resnet_pgd", "fmnist-test", "16–32 images" })
  plot.heatmap({ a.median, b.median }, { out = f .. "heatmap.png", cols = a.scales, from = { a, b } })
  names_all(f .. "heatmap.png", std)
  plot.lines({ 1, 2 }, { 3, 4 }, { out = f .. "lines.png", title = plot.JF .. " vs step", from = { a, b } })
  names_all(f .. "lines.png", { "‖J‖F vs step", "small_resnet", "fmnist-test", "32 images" })
  local _, text = plot.profile(a, { terminal = "dumb" })
  T.truthy(text:find("small_resnet on fmnist-test, 32 images", 1, true), "text figures too:\n" .. text)
end)

-- The window for real where it can be: an X server from xvfb-run and a
-- gnuplot with a window terminal ($SRGEO_TEST_WINDOW_GNUPLOT, else gnuplot:
-- Debian's gnuplot-nox has none, so this skips on a machine with it alone).
T.test("plot without out with a display: a real gnuplot window on Xvfb (skipped without xvfb-run or a window gnuplot)", function()
  local shell = os.getenv("SRGEO_SHELL") or T.shell()
  if not shell then T.skip("not run by the srgeo shell") end
  for _, tool in ipairs { "xvfb-run", "xwininfo" } do
    if os.execute("command -v " .. tool .. " >/dev/null 2>&1") ~= true then T.skip(tool .. " is not installed") end
  end
  local gp = os.getenv("SRGEO_TEST_WINDOW_GNUPLOT") or "gnuplot"
  local terms = T.sh(q(gp) .. " -e 'set terminal'")
  if not (terms:find("\n%s+qt%s") or terms:find("\n%s+wxt%s") or terms:find("\n%s+x11%s")) then
    T.skip(gp .. " has no qt, wxt or x11 terminal")
  end
  local tmp = VIEW_DIR .. "/xvfb"
  os.execute("rm -rf " .. q(tmp) .. " && mkdir -p " .. q(tmp))
  T.write(tmp .. "/run.sh", string.format([[
t0=$(date +%%s.%%N)
env -u TMUX -u SRGEO_PLOT_VIEW TMPDIR=%s SRGEO_GNUPLOT=%s %s -e %s >%s/out 2>%s/err
t1=$(date +%%s.%%N)
echo "$t1 - $t0" | bc >%s/seconds
sleep 2
xwininfo -root -tree >%s/windows
]], q(tmp), q(gp), q(shell), q(DEMO .. " io.write('<', select('#', srgeo.plot.profile(p)), '>', srgeo.plot.view_mode())"),
    q(tmp), q(tmp), q(tmp), q(tmp)))
  T.truthy(os.execute("timeout 60 xvfb-run -a sh " .. q(tmp .. "/run.sh") .. " >/dev/null 2>&1"), "xvfb-run")
  T.truthy(read(tmp .. "/out"):find("^<0>window"), read(tmp .. "/out") .. read(tmp .. "/err"))
  local dt = tonumber(read(tmp .. "/seconds"))
  T.truthy(dt and dt < 2.5, "the shell returned while the window stays: " .. tostring(dt) .. " s")
  local win = read(tmp .. "/windows")
  T.truthy(win:find('"srgeo.plot.profile"', 1, true), "a window titled srgeo.plot.profile:\n" .. win)
  T.eq(T.sh("cat " .. q(tmp) .. "/srgeo-plot.*/profile-1.err"), "", "gnuplot said nothing")
end)

T.test("plot.display (srgeo kernel's hook): without out PNG and SVG of the same figure, then removed; with out the file", function()
  local calls = {}
  local saved = plot.display
  plot.display = function(files, kept)
    local c = { kept = kept, files = {} }
    for term, path in pairs(files) do c.files[term] = { path = path, bytes = read(path) } end
    calls[#calls + 1] = c
  end
  local ok, r1 = pcall(plot.profile, { trained, random })
  local ok2, r2 = pcall(plot.profile, { trained, random }, { terminal = "svg" })
  local out = DIR .. "/display_kept.png"
  os.remove(out)
  local ok3, r3 = pcall(plot.profile, { trained, random }, { out = out })
  plot.display = saved
  T.truthy(ok and ok2 and ok3, tostring(r1) .. tostring(r2) .. tostring(r3))
  T.eq(#calls, 3)
  local a = calls[1]
  T.eq(a.kept, false)
  T.truthy(plot.figure_complete("png", a.files.png.bytes), "a complete PNG")
  T.truthy(plot.figure_complete("svg", a.files.svg.bytes), "a complete SVG")
  T.truthy(a.files.svg.bytes:find("trained_net", 1, true), "the SVG is the same figure")
  T.eq(read(a.files.png.path), nil, "the temporary files are removed after")
  T.eq(r1, nil, "no path returned for a shown figure")
  T.truthy(calls[2].files.svg and not calls[2].files.png, "terminal = 'svg': the SVG alone")
  T.eq(calls[3].kept, true)
  T.eq(calls[3].files.png.path, out)
  T.eq(r3, out, "with out the path is the result")
  T.truthy(read(out), "the file stays")
end)
