-- layers.lua: layer-resolved profiles of one encoder: one panel per tap (stages, activations, the embedding).
--
--   srgeo.profile(m, X, {tap = "layer2"})   -- any module path, or the aliases "features" / "logits"
local srgeo = require "srgeo"
local E = require "srgeo.experiment"

local o, ex = E.script({
  name = "layers.lua",
  about = "Profiles of one encoder at several taps (module paths): layers.png (one panel per\n"
       .. "tap), layers_overlay.png, a descriptor table per tap.",
  options = {
    { "model", "small_resnet", "the encoder", metavar = "SPEC" },
    { "taps", type = "list", help = "module paths to tap (default: top-level stages, then features)" },
    { "eval", "fmnist-test", "the evaluation set", metavar = "SPEC" },
  },
  examples = {
    "srgeo layers --model small_resnet --out out/layers",
    "srgeo layers --model small_resnet --taps layer1,layer2,layer3,features,logits",
  },
}, { ... }, { out = "out/layers" })

local taps = o.taps
if not taps or #taps == 0 then taps = E.default_taps((ex:model(o.model))) end
local units = {}
for i, t in ipairs(taps) do units[i] = { model = o.model, tap = t, label = t } end
local ps = ex:run(units, o.eval)
local panels = {}
for i, p in ipairs(ps) do panels[i] = { p } end
ex:figure("layers", srgeo.plot.multiples, panels, { titles = taps })
ex:figure("layers_overlay", srgeo.plot.profile, ps, { labels = taps, title = E.title(o.eval, ex, E.parse_model(o.model).label) })
ex:finish(ps, taps)
