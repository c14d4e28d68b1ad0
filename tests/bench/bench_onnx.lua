-- bench_onnx.lua: an imported ONNX ResNet-50 against srgeo's native
-- resnet50 with the same weights (issue 26's target: forward and stacked JVP
-- within 10%, i.e. imported / native time <= 1.10).  Both come from one
-- torchvision resnet50 (seed 0) through scripts/convert_torch.py: the ONNX
-- export (PyTorch folds each BatchNorm into its convolution, so the graph runs
-- conv+bias -> relu and conv -> add -> relu fused through the graph container)
-- and the safetensors checkpoint (the zoo's sequential / residual, conv -> BN
-- -> relu fused).  The two files are made once into build/bench_onnx/; without
-- PyTorch and without those files there is nothing to compare.
-- The two models run in one process, their timings interleaved round by round
-- (best of each), so both see the same machine.
--   build/srgeo tests/bench/bench_onnx.lua [--batch N] [-k N] [--rounds N] [--threads N]
local srgeo = require "srgeo"
package.path = "./?.lua;" .. package.path
local B = require "tests.bench.common"

local batch, k, rounds, threads = 8, 8, 5, nil
local i = 1
while arg[i] do
  if arg[i] == "--batch" then batch = tonumber(arg[i + 1])
  elseif arg[i] == "-k" then k = tonumber(arg[i + 1])
  elseif arg[i] == "--rounds" then rounds = tonumber(arg[i + 1])
  elseif arg[i] == "--threads" then threads = tonumber(arg[i + 1])
  else error("bench_onnx.lua: unknown argument " .. arg[i]) end
  i = i + 2
end
if threads then srgeo.threads(threads) end

local DIR = "build/bench_onnx"
local ONNX, NATIVE = DIR .. "/resnet50.onnx", DIR .. "/resnet50.safetensors"
local function exists(p)
  local f = io.open(p)
  if f then f:close() end
  return f ~= nil
end

local py, has_torch = B.torch_python()
if not (exists(ONNX) and exists(NATIVE)) then
  if not has_torch then
    print("PyTorch not installed and no " .. DIR .. "/resnet50.{onnx,safetensors}: nothing to compare (skipped)")
    return
  end
  os.execute("mkdir -p " .. DIR)
  for _, c in ipairs({ "--onnx --torchvision resnet50 --seed 0 " .. ONNX,
                       "--torchvision resnet50 --seed 0 " .. NATIVE }) do
    local out = B.run(py .. " scripts/convert_torch.py " .. c .. " 2>&1")
    if not out:match("in srgeo:") then error("bench_onnx.lua: convert_torch.py " .. c .. " failed:\n" .. out) end
  end
end

local imported = srgeo.models.load(ONNX)
local native = srgeo.models.load(NATIVE)

-- The same model: logits agree to float32 rounding (PyTorch's BN folding
-- rounds the weights once more).
local xc = srgeo.rand({ 2, 3, 224, 224 }, 7)
local la, lb = imported:forward(xc, { tap = "output" }), native:forward(xc, { tap = "logits" })
local rel = (la - lb):abs():max() / lb:abs():max()

local x = srgeo.rand({ batch, 3, 224, 224 }, 1)
local x1 = srgeo.rand({ 1, 3, 224, 224 }, 2)
local v = srgeo.randn({ k, 3, 224, 224 }, 3)
local tasks = {
  { "forward", function(m) m:forward(x) end },
  { "jvp", function(m) m:jvp(x1, v) end },
}
local models = { native = native, imported = imported }
-- best[task][model] = { wall seconds, CPU seconds of the process }: on a
-- machine others load too, wall time mostly measures them; the CPU time the
-- pass itself took (all threads) is the steadier figure then.
local best = {}
for _, t in ipairs(tasks) do
  best[t[1]] = { native = { math.huge, math.huge }, imported = { math.huge, math.huge } }
  for _, m in pairs(models) do t[2](m) end -- warm up: buffers allocated and touched once
end
for _ = 1, rounds do
  for _, t in ipairs(tasks) do
    for _, which in ipairs({ "native", "imported" }) do
      local w0, c0 = srgeo._clock(), os.clock()
      t[2](models[which])
      local b = best[t[1]][which]
      b[1], b[2] = math.min(b[1], srgeo._clock() - w0), math.min(b[2], os.clock() - c0)
    end
  end
end

B.header(string.format("ResNet-50 at 224x224 to the features tap, forward batch %d, JVP 1 input x %d tangents, "
  .. "best of %d interleaved rounds", batch, k, rounds), true)
print(string.format("logits imported vs native: max |diff| / max |logit| = %.2g (float32)", rel))
print(string.format("%-8s %10s %10s %8s | %10s %10s %8s", "pass", "native s", "imported", "ratio", "native cpu",
  "imported", "ratio"))
for _, t in ipairs(tasks) do
  local n, im = best[t[1]].native, best[t[1]].imported
  local rw, rc = im[1] / n[1], im[2] / n[2]
  print(string.format("%-8s %10.4f %10.4f %7.3fx | %10.4f %10.4f %7.3fx  %s", t[1], n[1], im[1], rw, n[2], im[2], rc,
    (rw <= 1.10 and rc <= 1.10) and "within 10%" or rc <= 1.10 and "CPU within 10%"
      or rw <= 1.10 and "wall within 10%" or "NOT within 10%"))
end
print("ratio: imported ONNX time / native srgeo.models.resnet50 time, wall clock and process CPU (target <= 1.10)")
