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
       .. "(‖J‖_F with CIs), robustness_peak_vs_eps.png and robustness_jacobian_vs_eps.png (peak η,\n"
       .. "‖J‖_F against ε with 95% CIs; peak η when two models have a bump, else only in the table).",
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
local plo, phi, jlo, jhi = {}, {}, {}, {}
for i, p in ipairs(ps) do
  labels[i], jps[i] = p.label, E.with_jacobian(p)
  local d, j = p.descriptors.peak_eta, jps[i].descriptors.jacobian_fro
  peak[i], plo[i], phi[i] = d.value, d.lo, d.hi
  jac[i], jlo[i], jhi[i] = j.value, j.lo, j.hi
end
ex:figure("robustness", srgeo.plot.profile, ps, { labels = labels, title = E.title(o.eval, ex) })
ex:figure("robustness_peak_eta", srgeo.plot.descriptors, ps, { field = "peak_eta", labels = labels })
ex:figure("robustness_jacobian", srgeo.plot.descriptors, jps, { field = "jacobian_fro", labels = labels })
-- One quantity per figure, each with its 95% CIs: peak η (only where the
-- shape test found a bump: NaN otherwise, a gap) and ‖J‖_F against ε.
local defined = 0
for _, v in ipairs(peak) do if v == v then defined = defined + 1 end end
if defined >= 2 then
  ex:figure("robustness_peak_vs_eps", function(ys, op) return srgeo.plot.lines(eps, ys, op) end, peak,
    { lo = plo, hi = phi, xlabel = "training ε (L2)", ylabel = "peak η, parabolic (bumps only)", logy = true,
      title = E.title(o.eval, ex, nil, "Peak η vs training ε"), from = ps })
end
ex:figure("robustness_jacobian_vs_eps", function(ys, op) return srgeo.plot.lines(eps, ys, op) end, jac,
  { lo = jlo, hi = jhi, xlabel = "training ε (L2)", ylabel = srgeo.plot.field_label("jacobian_fro"),
    title = E.title(o.eval, ex, nil, srgeo.plot.JF .. " vs training ε"), from = ps })
local function num(v) return v == v and string.format("%.4g", v) or "–" end
local t = { { "model", "ε", "shape", "peak η (parabolic)", "peak r", "‖J‖_F" } }
for i, p in ipairs(ps) do
  t[#t + 1] = { o.models[i], string.format("%g", eps[i]), (E.bump(p)), num(peak[i]),
                num(p.descriptors.peak_height.value), num(jac[i]) }
end
ex:note("Peak location and ‖J‖_F vs ε", E.columns(t))
ex:set("eps", eps)
ex:finish(ps)
