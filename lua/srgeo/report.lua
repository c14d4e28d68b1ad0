-- srgeo.report: what an experiment writes and prints: the descriptor and
-- comparison tables, ‖J‖_F with its CI, and the result files of a finished
-- experiment (OUT/profiles.csv, OUT/descriptors.csv, OUT/results.json,
-- OUT/summary.txt).  srgeo.experiment's ex:finish() calls report.write.
local srgeo = require "srgeo"
local util = require "srgeo.util"
local json = require "srgeo.json"
local stats = require "srgeo.stats"
local bump = require "srgeo.bump"

local R = {}
local NAN = 0 / 0

local fail = util.failer("experiment: ")

-- ---------------------------------------------------------------------------
-- Tables

local function g(v, p)
  if v == nil or v ~= v then return "nan" end
  return string.format("%." .. (p or 3) .. "g", v)
end

--- report.jacobian_fro(p) -> {value, lo, hi}: the median over images of the
--- Hutchinson ‖J‖_F estimates, with a bootstrap CI of that median.
function R.jacobian_fro(p, B, seed)
  local vals = {}
  for i, j in ipairs(p.jacobian_fro or {}) do vals[i] = type(j) == "table" and j.value or j end
  if #vals == 0 then return { value = NAN, lo = NAN, hi = NAN } end
  local med = stats.median(vals)
  if #vals < 2 then return { value = med, lo = NAN, hi = NAN } end
  local rows = {}
  for i, v in ipairs(vals) do rows[i] = { v } end
  local boots = stats.bootstrap(rows, function(s) return stats.median(stats.column(s, 1)) end, B or 500, seed or 1)
  local ci = (p.options and p.options.ci) or 0.95
  return { value = med, lo = stats.quantile(boots, (1 - ci) / 2), hi = stats.quantile(boots, 1 - (1 - ci) / 2) }
end

--- report.bump(p) -> "bump" | "rise" | "fall" | "edge" | "flat" | "undetermined":
--- the class of the profile's shape test (p.shape, srgeo.bump), and the
--- test's text as a second value.
function R.bump(p)
  if not p.shape then return "undetermined", "no shape test (a profile from an older srgeo: recompute it)" end
  return p.shape.class, p.shape.text
end

--- A stand-in profile for plot.descriptors carrying ‖J‖_F as the
--- descriptor "jacobian_fro".
function R.with_jacobian(p)
  return { label = p.label, model = p.model, identity = p.identity, n_images = p.n_images,
           descriptors = setmetatable({ jacobian_fro = R.jacobian_fro(p) }, { __index = p.descriptors }) }
end

local function ci_cell(d, p)
  if type(d) ~= "table" then return g(d, p) end
  if d.reason and d.value ~= d.value then return "–" end
  if d.lo ~= d.lo or d.lo == nil then return g(d.value, p) end
  return string.format("%s [%s, %s]", g(d.value, p), g(d.lo, p), g(d.hi, p))
end

-- Left-justify text columns to their widest cell.
local function columns(rows)
  local w = {}
  for _, r in ipairs(rows) do for j, c in ipairs(r) do w[j] = math.max(w[j] or 0, utf8.len(c) or #c) end end
  local out = {}
  for _, r in ipairs(rows) do
    local cells = {}
    for j, c in ipairs(r) do
      cells[j] = j < #r and c .. string.rep(" ", w[j] - (utf8.len(c) or #c)) or c
    end
    out[#out + 1] = table.concat(cells, "  ")
  end
  return table.concat(out, "\n")
end
R.columns = columns

-- A table that prints as its columns: print, tostring, .. and string
-- methods (t:find) see that text; Jupyter also shows it as an HTML table
-- (its __name picks srgeo.html's form).  rows[1] is the header.
local Table = { __name = "srgeo.table" }
Table.__tostring = function(t) return columns(t.rows) end
Table.__concat = function(a, b) return tostring(a) .. tostring(b) end
Table.__len = function(t) return #tostring(t) end
Table.__index = function(t, k)
  if k == "text" then return tostring(t) end
  local f = string[k]
  if f then return function(self, ...) return f(tostring(self), ...) end end
end

--- report.table(rows) -> a table (rows[1] the header) that prints as
--- aligned columns and shows in Jupyter as HTML.
function R.table(rows) return setmetatable({ rows = rows }, Table) end

--- report.images_text(list): util.images_text ("8 images", "8–32 images").
R.images_text = util.images_text

--- report.descriptor_table(profiles [, labels]) -> a table (report.table;
--- prints as text): one row per profile:
--- its shape (srgeo.bump's class), plateau, onset η, peak η and height (with
--- CIs), half-width, area, ‖J‖_F.  A descriptor the shape leaves undefined
--- shows as "–" (R.shape_table says why).
function R.descriptor_table(ps, labels)
  local rows = { { "profile", "shape", "plateau", "onset η", "peak η (parabolic) [95% CI]", "peak r [95% CI]", "half-width",
                   "area", "‖J‖_F [95% CI]" } }
  for i, p in ipairs(ps) do
    local d = p.descriptors
    rows[#rows + 1] = {
      tostring(labels and labels[i] or p.label or p.model or ("#" .. i)),
      (R.bump(p)),
      ci_cell(d.plateau), ci_cell(d.onset), ci_cell(d.peak_eta), ci_cell(d.peak_height),
      ci_cell(d.half_width), ci_cell(d.area), ci_cell(R.jacobian_fro(p)),
    }
  end
  return R.table(rows)
end

--- report.shape_table(profiles [, labels]) -> text: per profile, the shape
--- test that decided its class (with the numbers), the per-image classes,
--- and the range (which rungs, why it stopped).
function R.shape_table(ps, labels)
  local out = {}
  for i, p in ipairs(ps) do
    local name = tostring(labels and labels[i] or p.label or p.model or ("#" .. i))
    local _, text = R.bump(p)
    out[#out + 1] = string.format("%s: %s", name, text)
    if p.image_shapes and #p.image_shapes > 0 then
      out[#out + 1] = "  per image (within-image SEs): " .. bump.counts(p.image_shapes)
    end
    if p.range then
      out[#out + 1] = string.format("  range %s: %d rungs up to η %.4g (per-pixel RMS %.3g), %s", p.range.mode,
        #p.scales, p.range.top_eta or NAN, p.range.top_rms or NAN, p.range.reason or "")
    end
  end
  return table.concat(out, "\n")
end

--- report.finding(claim, checks) -> holds, text: a finding stated as checks
--- at a stated level, each {what, holds, evidence} (evidence: the numbers
--- that decided it); prints every check and then "finding reproduced:
--- CLAIM" when all hold, else "finding not reproduced: CLAIM" with the checks
--- that failed.
function R.finding(claim, checks)
  local out, failed = {}, {}
  for _, c in ipairs(checks) do
    out[#out + 1] = string.format("  [%s] %s%s", c[2] and "holds" or "fails", c[1], c[3] and (" -- " .. c[3]) or "")
    if not c[2] then failed[#failed + 1] = c[1] end
  end
  local ok = #failed == 0
  out[#out + 1] = ok and ("finding reproduced: " .. claim)
    or string.format("finding not reproduced: %s (fails: %s)", claim, table.concat(failed, "; "))
  local text = table.concat(out, "\n")
  print(text)
  return ok, text
end

--- report.compare_table(pairs) -> a table (report.table): rows {label, compare result} from
--- srgeo.profile.compare: p-values of the curve and of each descriptor.
function R.compare_table(list)
  local names = { "curve", "plateau", "onset", "peak_eta", "peak_height", "half_width", "area" }
  local head = { "comparison" }
  for _, k in ipairs(names) do head[#head + 1] = "p(" .. k .. ")" end
  local rows = { head }
  for _, e in ipairs(list) do
    local r = { e[1] }
    for _, k in ipairs(names) do r[#r + 1] = g(e[2].p[k], 2) end
    rows[#rows + 1] = r
  end
  return R.table(rows)
end

-- ---------------------------------------------------------------------------
-- Result files

local function num(v) return (v == nil or v ~= v) and "nan" or string.format("%.10g", v) end

local function csv_cell(s)
  s = tostring(s)
  if s:find('[,"\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end


-- A CSV row: the unit's identity (label, model, eval, tap), then the cells.
local function unit_row(u, ...)
  return table.concat({ csv_cell(u.label), csv_cell(u.model), csv_cell(u.eval), csv_cell(u.tap or ""), ... }, ",")
end

--- profiles.csv: one row per unit and rung.
function R.profiles_csv(units)
  local lines = { "label,model,eval,tap,eta,median,lo,hi,mean" }
  for _, u in ipairs(units) do
    local p = u.profile
    for s, eta in ipairs(p.scales) do
      lines[#lines + 1] = unit_row(u, num(eta), num(p.median[s]), num(p.lo[s]), num(p.hi[s]), num(p.mean[s]))
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

--- descriptors.csv: one row per unit and descriptor (‖J‖_F last).
function R.descriptors_csv(units)
  local lines = { "label,model,eval,tap,descriptor,value,lo,hi" }
  for _, u in ipairs(units) do
    local p = u.profile
    local rows = {}
    for _, k in ipairs(bump.DESCRIPTORS) do rows[#rows + 1] = { k, p.descriptors[k] } end
    rows[#rows + 1] = { "jacobian_fro", R.jacobian_fro(p) }
    for _, r in ipairs(rows) do
      lines[#lines + 1] = unit_row(u, r[1], num(r[2].value), num(r[2].lo), num(r[2].hi))
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

--- The command line that reruns an experiment (shell-quoted where needed).
function R.command(name, argv)
  -- a script's subcommand reruns from any folder; other experiments keep their script's path
  local parts = { "srgeo", require("srgeo.cli").command(name) and name or "scripts/" .. name .. ".lua" }
  for _, a in ipairs(argv or {}) do
    a = tostring(a)
    parts[#parts + 1] = a:match("^[%w%-%._/:=@,]+$") and a or util.shell_quote(a)
  end
  return table.concat(parts, " ")
end

--- report.write(ex [, profiles, labels]) -> summary text.  Writes
--- OUT/profiles.csv, OUT/descriptors.csv, OUT/results.json and
--- OUT/summary.txt of experiment ex (srgeo.experiment; read only): its
--- units, figures, notes, extra values and options.  profiles and labels:
--- the rows of summary.txt's descriptor table (default: every unit).
function R.write(ex, ps, labels)
  if not ps then
    ps, labels = {}, {}
    for i, u in ipairs(ex.units) do ps[i], labels[i] = u.profile, u.label end
  end
  local out, command = ex.out, R.command(ex.name, ex.argv)
  util.write_atomic(out .. "/profiles.csv", R.profiles_csv(ex.units))
  util.write_atomic(out .. "/descriptors.csv", R.descriptors_csv(ex.units))
  -- results.json: the files of the run relative to its folder, a model
  -- given by an absolute path relative to the project when inside it, so the
  -- folder can be moved or shared
  local function rel(path) return util.relpath(path, out) end
  local function model_spec(m) return type(m) == "string" and m:sub(1, 1) == "/" and util.relpath(m, srgeo.root) or m end
  local units = json.array {} -- lists stay [] in the file when empty
  for i, u in ipairs(ex.units) do
    local p = u.profile
    units[i] = { key = u.key, label = u.label, model = model_spec(u.model), eval = u.eval, tap = u.tap, json = rel(u.json),
                 csv = rel(u.csv), cached = u.cached, seconds = p.seconds, n_images = p.n_images, bump = p.bump,
                 bump_kind = (R.bump(p)), shape = p.shape, image_shapes = p.image_shapes, range = p.range, estimator = p.estimator,
                 descriptors = p.descriptors, jacobian_fro = R.jacobian_fro(p), scales = p.scales,
                 median = p.median, lo = p.lo, hi = p.hi, forwards = p.forwards, identity = p.identity }
  end
  local figs = json.array {}
  for i, f in ipairs(ex.figures) do
    local files = {}
    for j, path in ipairs(f.files) do files[j] = rel(path) end
    figs[i] = { name = f.name, files = files }
  end
  local opts = {}
  for k, v in pairs(ex.opts) do if type(k) == "string" and k:sub(1, 1) ~= "_" then opts[k] = v end end
  util.write_atomic(out .. "/results.json", json.encode({
    format = "srgeo.experiment/1", name = ex.name, command = command, options = opts,
    units = units, figures = figs, extra = ex.extra, version = srgeo.version,
    seconds = srgeo._clock() - ex.t0, written = os.date("!%Y-%m-%dT%H:%M:%SZ"),
  }, { indent = true }) .. "\n")
  -- summary.txt
  local s = {}
  s[#s + 1] = string.format("%s — srgeo %s, preset %s, seed %d, %d units (%d computed, %d cached), %.1f s",
    ex.name, srgeo.version, ex.preset, ex.seed, #ex.units, ex.computed, ex.cached, srgeo._clock() - ex.t0)
  s[#s + 1] = "command: " .. command
  -- what was measured when it is not a zoo model's features (an imported
  -- graph's "embedding" or "output", a --tap)
  local taps = {}
  for _, u in ipairs(ex.units) do
    local t = u.profile and u.profile.identity and u.profile.identity.tap
    if t and t ~= "" and t ~= "features" then taps[#taps + 1] = string.format("%s at %s", u.label, t) end
  end
  if #taps > 0 then s[#s + 1] = "taps: " .. table.concat(taps, ", ") end
  s[#s + 1] = ""
  if #ps > 0 then
    s[#s + 1] = "Descriptors (median over images; 95% bootstrap CIs over images; –: undefined for the shape):"
    s[#s + 1] = tostring(R.descriptor_table(ps, labels))
    s[#s + 1] = bump.PEAK_NOTE .. "."
    s[#s + 1] = ""
    s[#s + 1] = "Shape tests (srgeo.bump: simultaneous bounds at familywise level alpha):"
    s[#s + 1] = R.shape_table(ps, labels)
  end
  for _, n in ipairs(ex.notes) do
    s[#s + 1] = ""
    s[#s + 1] = n.title .. ":"
    s[#s + 1] = n.text
  end
  local text = table.concat(s, "\n") .. "\n"
  util.write_atomic(out .. "/summary.txt", text)
  return text
end

--- The files report.write writes for an experiment, then its figures.
function R.files(ex)
  local out = ex.out
  local files = { out .. "/summary.txt", out .. "/results.json", out .. "/profiles.csv", out .. "/descriptors.csv" }
  for _, f in ipairs(ex.figures) do for _, p in ipairs(f.files) do files[#files + 1] = p end end
  return files
end

--- report.load_results(out) -> the results.json table of a finished
--- experiment, its file paths (stored relative to OUT) joined to out.
function R.load_results(out)
  local t = json.decode(util.read_file(out .. "/results.json"))
  if type(t) ~= "table" or t.format ~= "srgeo.experiment/1" then fail("%s/results.json is not an srgeo experiment", out) end
  local function at(p) return type(p) == "string" and p:sub(1, 1) ~= "/" and out .. "/" .. p or p end
  for _, u in ipairs(t.units or {}) do u.json, u.csv = at(u.json), at(u.csv) end
  for _, f in ipairs(t.figures or {}) do
    for j, p in ipairs(f.files or {}) do f.files[j] = at(p) end
  end
  return t
end

return R
