-- distributions.lua: one encoder across evaluation distributions (test, train, blur, noise) and other encoders on one set, with two-sample tests.
--
--   c = srgeo.profile.compare(p_test, p_blur1)   -- permutation test over images: curve and descriptors
local srgeo = require "srgeo"
local E = require "srgeo.experiment"

local o, ex = E.script({
  name = "distributions.lua",
  about = "One encoder on several evaluation distributions (distributions.png), each compared\n"
       .. "with the first by permutation tests (srgeo.profile.compare); optionally other encoders\n"
       .. "(e.g. blur-trained) on the first set, compared with the main one (encoders.png).",
  options = {
    { "model", "small_resnet", "the encoder", metavar = "SPEC" },
    { "evals", { "fmnist-test", "fmnist-train", "blur1", "blur2", "noise" }, "evaluation sets; the first is the reference" },
    { "others", {}, "other encoders (e.g. trained on other distributions), profiled on the reference set" },
    { "permutations", 500, "permutations per two-sample test" },
  },
  examples = {
    "srgeo distributions --out out/distributions",
    "srgeo distributions --evals fmnist-test:64,fmnist-test-blur2:64 --others blur2=runs/blur2/ckpt_00002000.safetensors",
  },
}, { ... }, { out = "out/distributions" })

local units = {}
for _, e in ipairs(o.evals) do units[#units + 1] = { model = o.model, eval = e, label = E.parse_eval(e, ex).name } end
for _, m in ipairs(o.others) do units[#units + 1] = { model = m, eval = o.evals[1] } end
local ps = ex:run(units)
local ne = #o.evals
local dist, labels, tests, cmp = {}, {}, {}, {}
for j = 1, ne do dist[j], labels[j] = ps[j], ps[j].label end
for j = 2, ne do
  local c = srgeo.profile.compare(ps[1], ps[j], { permutations = o.permutations, seed = o.seed + j })
  tests[#tests + 1] = { labels[1] .. " vs " .. labels[j], c }
  cmp[labels[1] .. " vs " .. labels[j]] = c
end
ex:figure("distributions", srgeo.plot.profile, dist,
  { labels = labels, title = E.parse_model(o.model).label .. " across evaluation sets (" .. o.preset .. " preset)" })
ex:figure("distributions_peak", srgeo.plot.descriptors, dist, { field = "peak_height", labels = labels })
local all_labels = {}
for j = 1, ne do all_labels[j] = E.parse_model(o.model).label .. " @ " .. labels[j] end
if #o.others > 0 then
  local enc = { ps[1] }
  local el = { E.parse_model(o.model).label }
  for k = 1, #o.others do
    local p = ps[ne + k]
    enc[#enc + 1], el[#el + 1] = p, p.label
    all_labels[ne + k] = p.label .. " @ " .. labels[1]
    local c = srgeo.profile.compare(ps[1], p, { permutations = o.permutations, seed = o.seed + 100 + k })
    tests[#tests + 1] = { el[1] .. " vs " .. p.label .. " (on " .. labels[1] .. ")", c }
    cmp[el[1] .. " vs " .. p.label] = c
  end
  ex:figure("encoders", srgeo.plot.profile, enc, { labels = el, title = E.title(o.evals[1], ex) })
end
if #tests > 0 then
  ex:note(string.format("Permutation tests (%d permutations over images; small p: the profiles differ)", o.permutations),
    E.compare_table(tests))
end
ex:set("compare", cmp)
ex:finish(ps, all_labels)
