-- init_vs_trained.lua: each trained encoder against its random-init twin (same architecture, random weights), with permutation tests.
--
--   pt = srgeo.profile(trained, X, opts) ; pi = srgeo.profile(twin, X, opts)
--   srgeo.profile.compare(pt, pi)     -- p-values: curve and each descriptor
local srgeo = require "srgeo"
local E = require "srgeo.experiment"

local o, ex = E.script({
  name = "init_vs_trained.lua",
  about = "Trained encoders vs their random-init twins: init_vs_trained.png (one panel per\n"
       .. "architecture), init_vs_trained_peak.png (peak height, grouped), permutation tests\n"
       .. "(srgeo.profile.compare) of trained vs init in summary.txt.",
  options = {
    { "models", { "small_resnet", "small_vgg", "small_vit" }, "trained encoders (model specs)" },
    { "eval", "fmnist-test", "the evaluation set", metavar = "SPEC" },
    { "permutations", 500, "permutations per two-sample test" },
  },
  examples = {
    "srgeo init_vs_trained --out out/init_vs_trained",
    "srgeo init_vs_trained --models small_resnet --eval fmnist-test:64@3 --preset paper",
  },
}, { ... }, { out = "out/init_vs_trained" })

local units = {}
for _, m in ipairs(o.models) do
  units[#units + 1] = { model = m }
  units[#units + 1] = { model = E.twin(m) }
end
local ps = ex:run(units, o.eval)
local panels, titles, groups, tests, cmp = {}, {}, {}, {}, {}
for i, m in ipairs(o.models) do
  local pt, pi = ps[2 * i - 1], ps[2 * i]
  panels[i], titles[i], groups[i] = { pt, pi }, E.parse_model(m).label, { pt, pi }
  local c = srgeo.profile.compare(pt, pi, { permutations = o.permutations, seed = o.seed + i })
  tests[#tests + 1] = { titles[i] .. ": trained vs init", c }
  cmp[titles[i]] = c
end
ex:figure("init_vs_trained", srgeo.plot.multiples, panels, { titles = titles, labels = { "trained", "random init" } })
ex:figure("init_vs_trained_peak", srgeo.plot.descriptors, groups,
  { field = "peak_height", groups = titles, labels = { "trained", "random init" } })
ex:note(string.format("Permutation tests, trained vs init (%d permutations; small p: the profiles differ)", o.permutations),
  E.compare_table(tests))
ex:set("compare", cmp)
ex:finish(ps)
