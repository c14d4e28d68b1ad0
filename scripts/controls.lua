-- controls.lua: a standard encoder vs its random-label and random-data controls, on test, train and noise sets.
--
--   the published control: the bump is a property of learned structure, absent when the labels
--   or the images carry no signal.
local srgeo = require "srgeo"
local E = require "srgeo.experiment"

local o, ex = E.script({
  name = "controls.lua",
  about = "Standard vs random-label vs random-data encoders on several evaluation sets:\n"
       .. "controls.png (one panel per evaluation set), controls_peak.png (peak height, grouped).",
  options = {
    { "models", { "small_resnet", "small_resnet_random_labels", "small_resnet_random_data" }, "encoders (model specs)" },
    { "evals", { "fmnist-test", "fmnist-train", "noise" }, "evaluation sets (specs)" },
  },
  examples = {
    "srgeo controls --out out/controls",
    "srgeo controls --evals fmnist-test:64,noise-pink:64 --preset paper",
  },
}, { ... }, { out = "out/controls" })

local units = {}
for _, e in ipairs(o.evals) do
  for _, m in ipairs(o.models) do units[#units + 1] = { model = m, eval = e } end
end
local ps = ex:run(units)
local panels, titles, labels = {}, {}, {}
for i, m in ipairs(o.models) do labels[i] = E.parse_model(m).label end
local labelled = {}
for j, e in ipairs(o.evals) do
  panels[j], titles[j] = {}, E.parse_eval(e, ex).name
  for i = 1, #o.models do
    local p = ps[(j - 1) * #o.models + i]
    panels[j][i] = p
    labelled[#labelled + 1] = labels[i] .. " @ " .. titles[j]
  end
end
ex:figure("controls", srgeo.plot.multiples, panels, { titles = titles, labels = labels })
ex:figure("controls_peak", srgeo.plot.descriptors, panels, { field = "peak_height", groups = titles, labels = labels })
ex:finish(ps, labelled)
