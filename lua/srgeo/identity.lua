-- srgeo.identity: what a profile was measured on, recorded when it is made
-- (srgeo.profile), so a profile from the REPL, a script or a notebook says
-- which model, which weights, which images and which estimator settings it
-- came from, and figures can name their curves without being told.
--
--   local id = srgeo.identity.of(model, images, opts)
--   id.model     "small_resnet" (opts.model_name, else the checkpoint's or ONNX file's name, NAME@init for a
--                random-init twin, the zoo architecture, the kind)
--   id.arch      the zoo architecture, when the model was built by srgeo.models
--   id.path      the checkpoint it was loaded from (relative to the project when inside it)
--   id.weights   FNV-1a 64 of every parameter and buffer, in name order (16 hex digits)
--   id.eval      the evaluation set: opts.eval, a dataset's name, or "tensor (32,1,28,28)"
--   id.n_images, id.preset, id.tap
--   id.label     the curve's name: opts.label, else the model's
local util = require "srgeo.util"

local I = {}

local function models() return package.loaded["srgeo.models"] end

--- FNV-1a 64 of a module's parameters and buffers (names sorted), as 16 hex
--- digits: two models with the same architecture and values hash alike
--- whatever file they came from.
function I.weights_hash(m)
  local params = m:parameters()
  local names = {}
  for k in pairs(params) do names[#names + 1] = k end
  table.sort(names)
  local h
  for _, k in ipairs(names) do h = params[k]:hash(h) end
  return h and string.format("%016x", h) or "none"
end

local function stem(path) return ((path:match("([^/]+)$") or path):gsub("%.safetensors$", "")) end

--- The images' name: a dataset's own, else the tensor's size or the count.
function I.eval_name(X)
  if type(X) == "table" and X.name then return tostring(X.name) end
  if type(X) == "userdata" and X.size then return "tensor " .. tostring(X:size()) end
  if type(X) == "table" then return string.format("%d images", #X) end
  return "?"
end

--- I.of(model, images, opts) -> the identity table above.  opts: label,
--- model_name, eval (an evaluation-set spec), preset, tap.
function I.of(m, X, opts)
  opts = opts or {}
  local info = models() and models().info(m) or {}
  local id = { arch = info.arch, weights = I.weights_hash(m), eval = opts.eval or I.eval_name(X),
               preset = opts.preset or "paper",
               tap = opts.tap or m:default_tap() or (info.arch == "onnx" and "output") or "" }
  if info.path then id.path = util.relpath(info.path, require("srgeo").root) end
  -- a random-init twin (srgeo.models.twin) is named as its spec is: small_resnet@init, x.onnx@init
  id.model = opts.model_name or (info.twin_of and stem(info.twin_of) .. "@init") or (info.path and stem(info.path))
    or info.arch or m:kind()
  id.label = opts.label or id.model
  return id
end

--- A one-line description: "small_resnet (weights 1a2b3c4d…) on fashion_mnist/test[sample 32, seed 0], preset quick".
function I.describe(id)
  if type(id) ~= "table" then return nil end
  return string.format("%s (weights %s) on %s, preset %s%s", tostring(id.model), tostring(id.weights):sub(1, 8),
    tostring(id.eval), tostring(id.preset), (id.tap and id.tap ~= "" and id.tap ~= "features") and ", tap " .. id.tap or "")
end

return I
