-- zoo.lua: several encoders side by side on one evaluation set: overlaid profiles, a peak-η chart and a descriptor table.
--
--   ps = {} ; for i, name in ipairs{"small_resnet", "small_vgg"} do
--     ps[i] = srgeo.profile(srgeo.models.load("models/shipped/" .. name .. ".safetensors"), X, {preset = "quick"}) end
--   srgeo.plot.profile(ps, {out = "zoo.png"}) ; srgeo.plot.descriptors(ps, {out = "zoo_peak.png"})
local srgeo = require "srgeo"
local E = require "srgeo.experiment"

local o, ex = E.script({
  name = "zoo.lua",
  about = "Several encoders on one evaluation set: zoo.png (overlay), zoo_peak_eta.png and\n"
       .. "zoo_peak_height.png (descriptors with 95% CIs), a descriptor table.",
  options = {
    { "models", { "small_resnet", "small_vgg", "small_vit" }, "the encoders (comma-separated model specs)" },
    { "eval", "fmnist-test", "the evaluation set", metavar = "SPEC" },
  },
  examples = {
    "srgeo zoo --models small_resnet,small_vgg,small_vit --out out/zoo",
    "srgeo zoo --models small_resnet,small_resnet@init,small_vit@init --eval noise:16",
  },
}, { ... }, { out = "out/zoo" })

local units = {}
for i, m in ipairs(o.models) do units[i] = { model = m } end
local ps = ex:run(units, o.eval)
ex:figure("zoo", srgeo.plot.profile, ps, { title = E.title(o.eval, ex) })
ex:figure("zoo_peak_eta", srgeo.plot.descriptors, ps, { field = "peak_eta" })
ex:figure("zoo_peak_height", srgeo.plot.descriptors, ps, { field = "peak_height" })
ex:finish(ps)
