-- bench_models.lua: forward images/s and stacked-JVP cost per tangent for
-- zoo models, against srgeo's own forward (the ratio the foundation issue
-- targets: JVP time per tangent <= 1.2x one forward with k = 8) and, when
-- PyTorch is installed, against PyTorch 1.13 on the same task in the same run
-- (tests/bench/torch_models.py).
--   build/srgeo tests/bench/bench_models.lua [model ...] [--batch N] [--threads N]
local srgeo = require "srgeo"

local models, batch, threads, k, size = {}, 8, nil, 8, nil
local i = 1
while arg[i] do
  if arg[i] == "--batch" then batch = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--threads" then threads = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--size" then size = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "-k" then k = tonumber(arg[i + 1]); i = i + 2
  else models[#models + 1] = arg[i]; i = i + 1 end
end
if #models == 0 then models = { "resnet18", "resnet50" } end

local function time(fn, reps)
  fn() -- warm up: buffers allocated and touched once
  local best = math.huge
  for _ = 1, reps do
    local t0 = srgeo._clock()
    fn()
    best = math.min(best, srgeo._clock() - t0)
  end
  return best
end

local function torch_figures(name, shape)
  local py = io.open("/usr/bin/python3") and "/usr/bin/python3" or nil
  if not py then return nil end
  local cmd = string.format("%s tests/bench/torch_models.py %s %d %d %d %d %d 2>/dev/null", py, name, batch,
    shape[1], shape[2], k, srgeo.threads())
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  local fwd, jvp = out:match("forward ([%d%.e%-]+) jvp ([%d%.e%-]+)")
  return tonumber(fwd), tonumber(jvp)
end

if threads then srgeo.threads(threads) end
print(string.format("threads %d, batch %d, k = %d tangents per input", srgeo.threads(), batch, k))
print(string.format("%-16s %10s %10s %12s %14s %10s %10s", "model", "fwd img/s", "jvp dir/s", "jvp/tangent",
  "(x forward)", "torch fwd", "torch jvp"))
for _, name in ipairs(models) do
  local m = srgeo.models[name] { init = true }
  m:eval()
  local info = nil
  for _, e in ipairs(srgeo.models.list()) do if e.name == name then info = e end end
  local shape = info.input
  if size then shape = { shape[1], size, size } end
  local x = srgeo.rand({ batch, shape[1], shape[2], shape[3] }, 1)
  local tf = time(function() m:forward(x) end, 3)
  -- one input, k tangents: the profile engine's shape of work
  local x1 = srgeo.rand({ 1, shape[1], shape[2], shape[3] }, 2)
  local v = srgeo.randn({ k, shape[1], shape[2], shape[3] }, 3)
  local x1f = srgeo.rand({ 1 + k, shape[1], shape[2], shape[3] }, 2)
  local tj = time(function() m:jvp(x1, v) end, 3)
  local t1 = time(function() m:forward(x1f) end, 3) -- forward of the same 1+k rows
  local per_tangent = tj / k
  local fwd_one = t1 / (1 + k)
  local tfwd, tjvp = torch_figures(name, { shape[2], shape[3] })
  print(string.format("%-16s %10.1f %10.1f %10.2f ms %13.2fx %10s %10s", name, batch / tf, k / tj, 1e3 * per_tangent,
    per_tangent / fwd_one, tfwd and string.format("%.1f", tfwd) or "-", tjvp and string.format("%.1f", tjvp) or "-"))
end
