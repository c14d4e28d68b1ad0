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
       .. "dynamics_profiles.png (overlay, coloured in step order),\n"
       .. "dynamics_peak.png / dynamics_peak_eta.png / dynamics_jacobian.png (vs step).",
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

local rows, steps, x, peak, peak_eta, jac, accs = {}, {}, {}, {}, {}, {}, {}
for i, p in ipairs(ps) do
  rows[i], steps[i] = p.median, tostring(ckpts[i].step)
  x[i] = ckpts[i].step + 1
  peak[i], peak_eta[i] = p.descriptors.peak_height.value, p.descriptors.peak_eta.value
  jac[i] = E.jacobian_fro(p).value
  accs[i] = ckpts[i].test_acc
end
-- r is a ratio of energies (never below 0): a log colour scale centred at 1
-- shows r = 0.5 and r = 2 equally far from linear
ex:figure("dynamics", srgeo.plot.heatmap, rows, { rows = steps, cols = ps[1].scales, ylabel = "checkpoint step",
  logcb = true, title = E.title(o.eval, ex) })
ex:figure("dynamics_profiles", srgeo.plot.profile, ps, { title = E.title(o.eval, ex), band = false, palette = "ordered" })
local xl = "training step + 1"
ex:figure("dynamics_peak", function(ys, op) return srgeo.plot.lines(x, ys, op) end, { peak },
  { labels = { "peak r_η" }, xlabel = xl, ylabel = "peak height (max r_η)", logx = true, hline = 1,
    title = E.title(o.eval, ex, nil, "Peak height vs step") })
ex:figure("dynamics_peak_eta", function(ys, op) return srgeo.plot.lines(x, ys, op) end, { peak_eta },
  { labels = { "peak η" }, xlabel = xl, ylabel = "peak η", logx = true, logy = true,
    title = E.title(o.eval, ex, nil, "Peak η vs step") })
ex:figure("dynamics_jacobian", function(ys, op) return srgeo.plot.lines(x, ys, op) end, { jac },
  { labels = { "‖J‖_F" }, xlabel = xl, ylabel = "‖J‖_F (median over images)", logx = true,
    title = E.title(o.eval, ex, nil, "‖J‖_F vs step") })
local t = { { "step", "test acc", "peak r", "peak η", "‖J‖_F" } }
for i, c in ipairs(ckpts) do
  t[#t + 1] = { tostring(c.step), accs[i] and string.format("%.4f", accs[i]) or "-", string.format("%.4g", peak[i]),
                string.format("%.4g", peak_eta[i]), string.format("%.4g", jac[i]) }
end
ex:note("Descriptors vs step", E.columns(t))
ex:set("steps", steps)
ex:finish(ps)
