-- identity_spec.lua: profiles carry what they were measured on from the
-- moment they are made (srgeo.identity): the model's name, a hash of its
-- weights, the evaluation set, the preset; legends name curves by it.
local T = ...
local srgeo = require "srgeo"
local json = require "srgeo.json"
local util = require "srgeo.util"
local I = require "srgeo.identity"

local DIR = "build/test-identity"
util.mkdir(DIR)

-- FNV-1a 64 written out in Lua over the little-endian float32 bytes: the
-- reference for t:hash.
local function fnv(bytes, h)
  h = h or -3750763034362895579 -- 0xcbf29ce484222325 as a signed integer
  for i = 1, #bytes do h = (h ~ bytes:byte(i)) * 0x100000001b3 end
  return h
end

local function f32_bytes(t)
  local parts = {}
  for i, v in ipairs(t:reshape(t:numel()):totable()) do parts[i] = string.pack("<f", v) end
  return table.concat(parts)
end

T.test("t:hash is FNV-1a 64 of the element bytes and chains", function()
  T.eq(fnv("a"), math.tointeger(0xaf63dc4c8601ec8c), "the reference itself (FNV-1a of 'a')")
  local a, b = srgeo.tensor { 1.5, -2, 3 }, srgeo.randn({ 4, 5 }, 1)
  T.eq(a:hash(), fnv(f32_bytes(a)))
  T.eq(b:hash(a:hash()), fnv(f32_bytes(b), fnv(f32_bytes(a))), "chained")
  T.truthy(a:hash() ~= a:double():hash(), "float64 bytes differ")
  T.eq(srgeo.zeros(0):hash(), fnv(""))
end)

local function tiny(seed) return srgeo.models.mlp { hidden = { 8 }, input = { 1, 8, 8 }, seed = seed } end
local POPTS = { preset = "quick", directions = 8, nscales = 5, bootstrap = 20, progress = false }

T.test("profile: label, model and identity from creation (REPL use, no options)", function()
  local m = tiny(1)
  local X = srgeo.data.noise { n = 3, shape = { 1, 8, 8 }, seed = 1 }
  local p = srgeo.profile(m, X, POPTS)
  T.eq(p.label, "mlp"); T.eq(p.model, "mlp")
  local id = p.identity
  T.eq(id.arch, "mlp"); T.eq(id.preset, "quick"); T.eq(id.tap, "features")
  T.eq(id.eval, "noise/uniform(seed 1)")
  -- the weights hash: every parameter and buffer in name order
  local params, names = m:parameters(), {}
  for k in pairs(params) do names[#names + 1] = k end
  table.sort(names)
  local h
  for _, k in ipairs(names) do h = fnv(f32_bytes(params[k]), h) end
  T.eq(id.weights, string.format("%016x", h))
  T.eq(I.weights_hash(tiny(1)), id.weights, "same architecture and values: same hash")
  T.truthy(I.weights_hash(tiny(2)) ~= id.weights, "other weights: another hash")
  -- float64 profiles hash the weights as they were given
  local q = srgeo.profile(m, X:batch(1, 3), { preset = "quick", directions = 8, nscales = 5, bootstrap = 20,
                                              progress = false, precision = "float64", label = "mine" })
  T.eq(q.identity.weights, id.weights); T.eq(q.label, "mine"); T.eq(q.identity.eval, "tensor (3,1,8,8)")
  T.truthy(tostring(p):find("mlp (weights " .. id.weights:sub(1, 8) .. ") on noise/uniform(seed 1), preset quick", 1, true),
    "print(p) states it:\n" .. tostring(p))
  -- a checkpoint: its file name, its path relative to the project
  local path = DIR .. "/named_model.safetensors"
  m:save(path)
  local r = srgeo.profile(srgeo.models.load(path), X, POPTS)
  T.eq(r.model, "named_model"); T.eq(r.identity.path, path); T.eq(r.identity.weights, id.weights)
  -- kept by the JSON round trip
  p:save_json(DIR .. "/p.json")
  local back = srgeo.profile.load(DIR .. "/p.json")
  T.eq(back.label, "mlp"); T.eq(back.identity.weights, id.weights); T.eq(back.identity.eval, id.eval)
end)

T.test("legends default to the profiles' identity: labels, then what differs; one profile shows its label", function()
  local m = tiny(1)
  local X = srgeo.data.noise { n = 3, shape = { 1, 8, 8 }, seed = 1 }
  local Y = srgeo.data.noise { n = 3, shape = { 1, 8, 8 }, seed = 2, kind = "gaussian" }
  local p, q = srgeo.profile(m, X, POPTS), srgeo.profile(m, Y, POPTS)
  srgeo.plot.profile({ p, q }, { out = DIR .. "/two.png" })
  local gp = T.read(DIR .. "/two.gp")
  T.truthy(gp:find("title 'mlp · noise/uniform(seed 1)' noenhanced", 1, true)
    and gp:find("title 'mlp · noise/gaussian(seed 2)' noenhanced", 1, true), "two curves, two key entries:\n" .. gp)
  srgeo.plot.profile(p, { out = DIR .. "/one.png" })
  gp = T.read(DIR .. "/one.gp")
  T.truthy(gp:find("title 'mlp' noenhanced", 1, true) and gp:find("title '95% CI'", 1, true), "label and band:\n" .. gp)
  -- same model and set, other weights: the weights tell them apart; nothing at all: numbered
  local w = srgeo.profile(tiny(2), X, POPTS)
  srgeo.plot.profile({ p, w }, { out = DIR .. "/w.png" })
  gp = T.read(DIR .. "/w.gp")
  T.truthy(gp:find("title 'mlp · weights " .. p.identity.weights:sub(1, 8) .. "'", 1, true), gp)
  srgeo.plot.profile({ p, p }, { out = DIR .. "/same.png" })
  T.truthy(T.read(DIR .. "/same.gp"):find("title 'mlp #2' noenhanced", 1, true))
  -- labels given by the caller win
  srgeo.plot.profile({ p, q }, { out = DIR .. "/given.png", labels = { "a", "b" } })
  T.truthy(T.read(DIR .. "/given.gp"):find("title 'b' noenhanced", 1, true))
end)

T.test("util.relpath: inside the base relative, outside unchanged", function()
  T.eq(util.relpath("out/units/a.json", "out"), "units/a.json")
  T.eq(util.relpath("./out//units/../units/a.json", "out/"), "units/a.json")
  T.eq(util.relpath(util.absolute("out/x.png"), "out"), "x.png")
  T.eq(util.relpath("out", "out"), ".")
  T.eq(util.relpath("/elsewhere/m.safetensors", "out"), "/elsewhere/m.safetensors")
  T.eq(util.relpath("outside/x", "out"), "outside/x", "a common prefix is not a parent folder")
end)
