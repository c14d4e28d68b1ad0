-- robustness.lua: a sweep over adversarial-training ε: how the peak location and ‖J‖_F (the local prediction's scale) move.
--
--   ε per model comes from the checkpoint's training metadata (PGD or LLR eps, Gaussian-noise σ)
--   or a name like *_eps0.5; --eps gives it explicitly.  Mixing objectives in one sweep works:
--   --models pgd=a.safetensors,gauss=b.safetensors --eps 0.5,0.25
local srgeo = require "srgeo"
local E = require "srgeo.experiment"

local o, ex = E.script({
  name = "robustness.lua",
  about = "Encoders adversarially trained at several ε on one evaluation set: robustness.png\n"
       .. "(overlay), robustness_peak_eta.png (peak η with 95% CIs), robustness_jacobian.png\n"
       .. "(‖J‖_F with CIs), robustness_vs_eps.png (peak η and ‖J‖_F against ε).",
  options = {
    { "models", { "small_resnet", "small_resnet_pgd_eps0.5", "small_resnet_pgd_eps1.0" }, "encoders (model specs)" },
    { "eps", type = "numbers", help = "training ε of each model (default: the checkpoint's PGD/LLR eps or Gaussian σ, or *_epsX names)" },
    { "eval", "fmnist-test", "the evaluation set", metavar = "SPEC" },
  },
  examples = {
    "srgeo robustness --out out/robustness",
    "srgeo robustness --models r0=a.safetensors,r1=b.safetensors --eps 0,1",
  },
  epilog = "The default ladder runs from 10^-1 to 10^2.5 at 224² (8 rungs; at 28×28 η = 0.0072 … 23),\n"
      .. "half a decade past the paper preset's top: the L2-PGD models' bumps sit beyond it.\n"
      .. "With --range auto (the default) it is extended further, at the same spacing, until the shape\n"
      .. "test sees a decay or the perturbation's per-pixel RMS reaches 1.",
}, { ... }, { out = "out/robustness", log10_lo = -1, log10_hi = 2.5, nscales = 8 })

local eps = {}
for i, m in ipairs(o.models) do
  eps[i] = o.eps and o.eps[i] or E.model_eps(m)
  if eps[i] == nil then
    io.stderr:write(string.format("robustness.lua: cannot tell the training ε of %s; give --eps\n", m))
    os.exit(2)
  end
end
if o.eps and #o.eps ~= #o.models then
  io.stderr:write(string.format("robustness.lua: --eps has %d values for %d models\n", #o.eps, #o.models))
  os.exit(2)
end
local units = {}
for i, m in ipairs(o.models) do units[i] = { model = m, label = string.format("ε = %g", eps[i]) } end
local ps = ex:run(units, o.eval)
local labels, jps, peak, jac = {}, {}, {}, {}
for i, p in ipairs(ps) do
  labels[i], jps[i] = p.label, E.with_jacobian(p)
  peak[i], jac[i] = p.descriptors.peak_eta.value, jps[i].descriptors.jacobian_fro.value
end
ex:figure("robustness", srgeo.plot.profile, ps, { labels = labels, title = E.title(o.eval, ex) })
ex:figure("robustness_peak_eta", srgeo.plot.descriptors, ps, { field = "peak_eta", labels = labels })
ex:figure("robustness_jacobian", srgeo.plot.descriptors, jps,
  { field = "jacobian_fro", labels = labels, ylabel = "‖J‖_F (median over images)" })
-- peak η only where the shape test found a bump (NaN otherwise: a gap)
local series, names = { jac }, { "‖J‖_F" }
for _, v in ipairs(peak) do
  if v == v then series, names = { peak, jac }, { "peak η, parabolic (bumps only)", "‖J‖_F" } break end
end
ex:figure("robustness_vs_eps", function(ys, op) return srgeo.plot.lines(eps, ys, op) end, series,
  { labels = names, xlabel = "training ε (L2)", ylabel = "value", logy = true,
    title = E.title(o.eval, ex, nil, "Peak η and ‖J‖_F vs training ε") })
local function num(v) return v == v and string.format("%.4g", v) or "–" end
local t = { { "model", "ε", "shape", "peak η (parabolic)", "peak r", "‖J‖_F" } }
for i, p in ipairs(ps) do
  t[#t + 1] = { o.models[i], string.format("%g", eps[i]), (E.bump(p)), num(peak[i]),
                num(p.descriptors.peak_height.value), num(jac[i]) }
end
ex:note("Peak location and ‖J‖_F vs ε", E.columns(t))
ex:set("eps", eps)
ex:finish(ps)
