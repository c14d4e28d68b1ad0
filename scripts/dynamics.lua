-- dynamics.lua: profiles across a training run's checkpoints: a step × η heatmap and descriptors vs step (when the bump forms).
--
--   for _, c in ipairs(srgeo.experiment.checkpoints("models/shipped/small_resnet_run")) do
--     ps[#ps + 1] = srgeo.profile(srgeo.models.load(c.path), X, opts) end
--   srgeo.plot.heatmap(rows_of_medians, {rows = steps, cols = ps[1].scales, out = "dynamics.png"})
local srgeo = require "srgeo"
local E = require "srgeo.experiment"

local o, ex = E.script({
  name = "dynamics.lua",
  about = "Profiles across the checkpoints of a run (srgeo.train's OUT folder, ckpt_*.safetensors):\n"
       .. "dynamics.png (heatmap: step × η, colour r on a log scale centred at 1),\n"
       .. "dynamics_profiles.png (overlay, coloured in step order), dynamics_peak.png /\n"
       .. "dynamics_peak_eta.png (peak per checkpoint with 95% CIs; checkpoints without a bump are\n"
       .. "listed, not drawn), dynamics_jacobian.png (vs step).",
  options = {
    { "run", "models/shipped/small_resnet_run", "folder with the run's checkpoints", metavar = "DIR" },
    { "eval", "fmnist-test", "the evaluation set", metavar = "SPEC" },
    { "max_checkpoints", 0, "use at most N checkpoints, spread over the run (0: all)" },
  },
  examples = {
    "srgeo dynamics --run models/shipped/small_resnet_run --out out/dynamics",
    "srgeo dynamics --run runs/r18 --max-checkpoints 8 --eval fmnist-test:16",
  },
}, { ... }, { out = "out/dynamics" })

local ckpts = E.checkpoints(o.run)
if o.max_checkpoints > 0 and #ckpts > o.max_checkpoints then
  -- evenly spaced in index (the schedule is already log-spaced), always the first and last
  local pick, n = {}, o.max_checkpoints
  for i = 1, n do pick[#pick + 1] = ckpts[1 + math.floor((i - 1) * (#ckpts - 1) / math.max(1, n - 1) + 0.5)] end
  ckpts = pick
end
local units = {}
for i, c in ipairs(ckpts) do units[i] = { model = c.path, label = "step " .. c.step } end
local ps = ex:run(units, o.eval)

-- the medians on one ladder: range auto may have extended some further
local cols, rows = srgeo.profile.grid(ps)
local steps, x, jac, accs = {}, {}, {}, {}
for i, p in ipairs(ps) do
  steps[i] = tostring(ckpts[i].step)
  x[i] = ckpts[i].step + 1
  jac[i] = E.jacobian_fro(p).value
  accs[i] = ckpts[i].test_acc
end
-- r is a ratio of energies (never below 0): a log colour scale centred at 1
-- shows r = 0.5 and r = 2 equally far from linear
ex:figure("dynamics", srgeo.plot.heatmap, rows, { rows = steps, cols = cols, ylabel = "checkpoint step",
  logcb = true, title = E.title(o.eval, ex), from = ps })
ex:figure("dynamics_profiles", srgeo.plot.profile, ps, { title = E.title(o.eval, ex), band = false, palette = "ordered" })
-- Peak height and location per checkpoint with their CIs; a checkpoint
-- whose shape test finds no bump (edge, rise, ...) has no peak and is
-- listed under the chart instead of drawn.
local labels = {}
for i = 1, #ps do labels[i] = "step " .. steps[i] end
ex:figure("dynamics_peak", srgeo.plot.descriptors, ps, { field = "peak_height", labels = labels, style = "points",
  xlabel = "checkpoint", title = E.title(o.eval, ex, nil, "Peak height vs step") })
ex:figure("dynamics_peak_eta", srgeo.plot.descriptors, ps, { field = "peak_eta", labels = labels, xlabel = "checkpoint",
  title = E.title(o.eval, ex, nil, "Peak η vs step") })
ex:figure("dynamics_jacobian", function(ys, op) return srgeo.plot.lines(x, ys, op) end, { jac },
  { labels = { srgeo.plot.JF }, xlabel = "training step + 1", ylabel = srgeo.plot.field_label("jacobian_fro"), logx = true,
    title = E.title(o.eval, ex, nil, srgeo.plot.JF .. " vs step"), from = ps })
local function cell(d)
  if d.value ~= d.value then return "–" end
  return d.lo == d.lo and string.format("%.4g [%.4g, %.4g]", d.value, d.lo, d.hi) or string.format("%.4g", d.value)
end
local t = { { "step", "test acc", "shape", "peak r [95% CI]", "peak η (parabolic) [95% CI]", "‖J‖_F" } }
for i, c in ipairs(ckpts) do
  local d = ps[i].descriptors
  t[#t + 1] = { tostring(c.step), accs[i] and string.format("%.4f", accs[i]) or "-", (E.bump(ps[i])),
                cell(d.peak_height), cell(d.peak_eta), string.format("%.4g", jac[i]) }
end
ex:note("Shape and descriptors vs step (–: no peak for that shape; the shape tests below say why)", E.columns(t))
ex:set("steps", steps)
ex:finish(ps)
