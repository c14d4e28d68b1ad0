-- bump.lua: the r_η profile (the bump) of one encoder on one evaluation set, optionally beside its random-init twin.
--
-- The main job.  Everything here is a few library calls:
--   p = srgeo.profile(srgeo.models.load("models/shipped/small_resnet.safetensors"),
--                     srgeo.data.fashion_mnist{split = "test"}:sample(32, 0), {preset = "quick"})
--   srgeo.plot.profile(p, {out = "bump.png"}); print(p:summary())
local srgeo = require "srgeo"
local E = require "srgeo.experiment"

local o, ex = E.script({
  name = "bump.lua",
  about = "The r_η profile of one encoder on one evaluation set: bump.png/.svg, CSV, JSON and a\n"
       .. "descriptor table (plateau, onset, peak η and height with 95% CIs, ‖J‖_F).",
  options = {
    { "model", "small_resnet", "the encoder (see Models below)", metavar = "SPEC" },
    { "eval", "fmnist-test", "the evaluation set (see Evaluation sets below)", metavar = "SPEC" },
    { "twin", false, "also profile the model's random-init twin (MODEL@init) and overlay it" },
    { "label", type = "string", help = "legend label of the model (default: its name)" },
    { "title", type = "string", help = "figure title (literal text)" },
  },
  examples = {
    "srgeo bump --model small_resnet --twin --out out/bump",
    "srgeo bump --model runs/r18/ckpt_00001000.safetensors --eval fmnist-test:128@1 --preset paper",
    "srgeo bump --model 'mlp{hidden={64}}@init' --eval noise:16",
  },
}, { ... }, { out = "out/bump" })

local units = { { model = o.model, label = o.label } }
if o.twin then
  if E.parse_model(o.model).init then
    ex:log("note: %s is already a random-init network; --twin ignored", o.model)
  else
    units[2] = { model = E.twin(o.model), label = o.label and o.label .. " (init)" }
  end
end
local ps = ex:run(units, o.eval)
local labels = {}
for i, p in ipairs(ps) do labels[i] = p.label end
-- the title's image count is what the profiles hold (E.title), not what --eval asked for
local prefix = #ps == 1 and ps[1].label or (o.twin and ps[1].label .. ": trained vs random init") or nil
ex:figure("bump", srgeo.plot.profile, ps, { labels = labels, title = o.title or E.title(o.eval, ex, prefix, nil, ps) })
ex:finish(ps, labels)
