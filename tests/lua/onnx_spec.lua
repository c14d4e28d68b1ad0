-- onnx_spec.lua: the ONNX importer (core/import/) on exports of real
-- architectures (tests/fixtures/gen_onnx.py) against PyTorch's own
-- features and JVPs, and on ONNX's backend node tests (libonnx-testdata)
-- when the package is installed.
local T = ...
local srgeo = require "srgeo"

local FIX = "tests/fixtures/onnx/"
local MODELS = { "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf", "densenet121", "shufflenet_v2",
                 "squeezenet1_1", "swin_t", "vit_b_16", "convnext_tiny" }

local function rel(a, b)
  local d = (a - b):abs():max()
  return d / math.max(b:abs():max(), 1e-300)
end

local function npy(name, what) return srgeo.npy.load(FIX .. name .. "_" .. what .. ".npy"):double() end

T.test("onnx: torchvision exports match PyTorch (features 1e-10, JVPs 1e-8 in float64; features 1e-4 in float32)",
  function()
  local lines = {}
  for _, name in ipairs(MODELS) do
    local x, want_f, want_y = npy(name, "x"), npy(name, "features"), npy(name, "y")
    local v, want_jv = npy(name, "v"), npy(name, "jv")
    local m, info = srgeo.onnx.load(FIX .. name .. ".onnx", { dtype = "float64" })
    -- squeezenet's classifier is a convolution: its features are the output
    T.eq(info.features ~= nil, name ~= "squeezenet1_1", name .. ": the classifier's input is found")
    local f = m:forward(x)
    local y = m:forward(x, { tap = "" })
    local _, jv = m:jvp(x, v)
    local ef, ey, ej = rel(f, want_f), rel(y, want_y), rel(jv, want_jv)
    local m32 = srgeo.onnx.load(FIX .. name .. ".onnx")
    local e32 = rel(m32:forward(x:float()):double(), want_f)
    lines[#lines + 1] = string.format("     %-20s f64 features %.1e logits %.1e jvp %.1e | f32 features %.1e", name, ef,
      ey, ej, e32)
    if not (ef <= 1e-10 and ey <= 1e-10 and ej <= 1e-8 and e32 <= 1e-4) then
      error(lines[#lines])
    end
  end
  print(table.concat(lines, "\n"))
end)
