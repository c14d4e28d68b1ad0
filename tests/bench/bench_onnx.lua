-- bench_onnx.lua: imported ONNX graphs against srgeo's native builds of the
-- same networks with the same weights (issue 34's target: forward and
-- stacked JVP within 10%, i.e. imported / native time <= 1.10), on two
-- networks:
--  * ResNet-50: one torchvision resnet50 (seed 0) through
--    scripts/convert_torch.py, the ONNX export (PyTorch folds each BatchNorm
--    into its convolution) and the safetensors checkpoint for the zoo's
--    srgeo.models.resnet50 (sequential / residual, conv -> BN -> relu fused);
--  * a face ResNet (tests/bench/face_resnet.py: 3x3 convolutions, dlib's
--    shortcut of a 2x2 average pool and zero-padded channels, a 128-D
--    descriptor), its ONNX export against the same network built here from
--    srgeo.nn's sequential / residual / pad, loaded from the state_dict.
-- The files are made once into build/bench_onnx/; without PyTorch and
-- without those files there is nothing to compare.
-- The two models of a network run in one process, their timings alternating
-- round by round (native, imported, native, ...), so both see the same
-- machine; the figures are the medians over the rounds (best beside them).
--   build/srgeo tests/bench/bench_onnx.lua [--batch N] [-k N] [--rounds N] [--threads N] [--net resnet50|face]
local srgeo = require "srgeo"
local nn = srgeo.nn
package.path = "./?.lua;" .. package.path
local B = require "tests.bench.common"

local batch, k, rounds, threads, only = 8, 8, 7, nil, nil
local i = 1
while arg[i] do
  if arg[i] == "--batch" then batch = tonumber(arg[i + 1])
  elseif arg[i] == "-k" then k = tonumber(arg[i + 1])
  elseif arg[i] == "--rounds" then rounds = tonumber(arg[i + 1])
  elseif arg[i] == "--threads" then threads = tonumber(arg[i + 1])
  elseif arg[i] == "--net" then only = arg[i + 1]
  else error("bench_onnx.lua: unknown argument " .. arg[i]) end
  i = i + 2
end
if threads then srgeo.threads(threads) end

local DIR = "build/bench_onnx"
local function exists(p)
  local f = io.open(p)
  if f then f:close() end
  return f ~= nil
end
local py, has_torch = B.torch_python()

-- The files of a network, made by cmds (shell commands whose output says
-- "in srgeo:") when missing; false when they cannot be.
local function files(names, cmds)
  local all = true
  for _, p in ipairs(names) do all = all and exists(p) end
  if all then return true end
  if not has_torch then return false end
  os.execute("mkdir -p " .. DIR)
  for _, c in ipairs(cmds) do
    local out = B.run(py .. " " .. c .. " 2>&1")
    if not out:match("in srgeo:") then error("bench_onnx.lua: " .. c .. " failed:\n" .. out) end
  end
  return true
end

-- The face ResNet of face_resnet.py, natively: the zoo's block structure
-- (models/resnet.lua), the shortcut a sequential of avgpool2d and pad.
local FACE_WIDTHS, FACE_BLOCKS = { 32, 64, 128, 256 }, 2
local function face_native()
  local function conv(cin, cout, s)
    return nn.conv2d { in_channels = cin, out_channels = cout, kernel_size = 3, stride = s, padding = 1, bias = false }
  end
  local function bn(c) return nn.batchnorm2d { num_features = c } end
  local children = { { "normalize", nn.normalize { mean = { 0.5, 0.5, 0.5 }, std = { 0.5, 0.5, 0.5 } } },
                     { "conv1", conv(3, FACE_WIDTHS[1], 2) }, { "bn1", bn(FACE_WIDTHS[1]) }, { "relu", nn.relu {} } }
  local cin = FACE_WIDTHS[1]
  for s, w in ipairs(FACE_WIDTHS) do
    local blocks = {}
    for j = 1, FACE_BLOCKS do
      local stride = (s > 1 and j == 1) and 2 or 1
      local body = nn.sequential {
        { "conv1", conv(cin, w, stride) }, { "bn1", bn(w) }, { "relu1", nn.relu {} },
        { "conv2", conv(w, w, 1) }, { "bn2", bn(w) },
      }
      local res = { { "", body } }
      if stride ~= 1 or w ~= cin then
        local sc = {}
        if stride ~= 1 then sc[#sc + 1] = { "pool", nn.avgpool2d { kernel_size = 2 } } end
        if w ~= cin then sc[#sc + 1] = { "pad", nn.pad { padding = { 0, 0, 0, 0, 0, w - cin } } } end
        res[2] = { "shortcut", nn.sequential(sc) }
      end
      blocks[j] = nn.sequential { { "", nn.residual(res) }, { "relu", nn.relu {} } }
      cin = w
    end
    children[#children + 1] = { "layer" .. s, nn.sequential(blocks) }
  end
  children[#children + 1] = { "avgpool", nn.adaptive_avgpool2d { output_size = 1 } }
  children[#children + 1] = { "flatten", nn.flatten {} }
  children[#children + 1] = { "fc", nn.linear { in_features = cin, out_features = 128 } }
  local m = nn.sequential(children)
  m:load(DIR .. "/face_resnet.safetensors")
  m:eval()
  return m
end

local NETS = {
  { name = "resnet50", what = "ResNet-50 at 224x224 to the features tap", size = 224,
    make = function()
      local onnx, st = DIR .. "/resnet50.onnx", DIR .. "/resnet50.safetensors"
      if not files({ onnx, st }, { "scripts/convert_torch.py --onnx --torchvision resnet50 --seed 0 " .. onnx,
                                   "scripts/convert_torch.py --torchvision resnet50 --seed 0 " .. st }) then
        return nil
      end
      return srgeo.models.load(onnx), srgeo.models.load(st), "output", "logits"
    end },
  { name = "face", what = "face ResNet (3x3 convs, pooled zero-channel-padded shortcuts, 32-256 wide) at 112x112 "
      .. "to its 128-D descriptor", size = 112,
    make = function()
      local base = DIR .. "/face_resnet"
      if not files({ base .. ".onnx", base .. ".safetensors" }, { "tests/bench/face_resnet.py " .. base }) then
        return nil
      end
      return srgeo.models.load(base .. ".onnx"), face_native(), "output", ""
    end },
}

local function median(v)
  local s = {}
  for j, x in ipairs(v) do s[j] = x end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

B.system()
print(string.format("forward batch %d, JVP 1 input x %d tangents; %d rounds alternating native / imported; "
  .. "median (best) seconds, wall clock and process CPU", batch, k, rounds))
local verdicts = {}
for _, net in ipairs(NETS) do
  if not only or only == net.name then
    local imported, native, itap, ntap = net.make()
    if not imported then
      print(net.name .. ": PyTorch not installed and no files in " .. DIR .. ": nothing to compare (skipped)")
    else
      local sz = net.size
      -- The same model: outputs agree to float32 rounding (PyTorch's BN
      -- folding rounds the weights once more).
      local xc = srgeo.rand({ 2, 3, sz, sz }, 7)
      local la, lb = imported:forward(xc, { tap = itap }), native:forward(xc, { tap = ntap })
      local rel = (la - lb):abs():max() / lb:abs():max()
      local x = srgeo.rand({ batch, 3, sz, sz }, 1)
      local x1 = srgeo.rand({ 1, 3, sz, sz }, 2)
      local v = srgeo.randn({ k, 3, sz, sz }, 3)
      local tasks = {
        { "forward", function(m) m:forward(x) end },
        { "jvp", function(m) m:jvp(x1, v) end },
      }
      local models = { native = native, imported = imported }
      local t = {} -- t[task][model] = { wall = {...}, cpu = {...} }
      for _, task in ipairs(tasks) do
        t[task[1]] = { native = { wall = {}, cpu = {} }, imported = { wall = {}, cpu = {} } }
        for _, m in pairs(models) do task[2](m) end -- warm up: buffers allocated and touched once
      end
      for r = 1, rounds do
        for _, task in ipairs(tasks) do
          -- alternate which runs first, so neither always follows the other
          local order = r % 2 == 1 and { "native", "imported" } or { "imported", "native" }
          for _, which in ipairs(order) do
            local w0, c0 = srgeo._clock(), os.clock()
            task[2](models[which])
            local b = t[task[1]][which]
            b.wall[r], b.cpu[r] = srgeo._clock() - w0, os.clock() - c0
          end
        end
      end
      -- the profile engine's shared prefix (issue 34: imports had none)
      local shared = {}
      for which, m in pairs(models) do
        shared[which] = srgeo.profile(m, { x1 }, { preset = "quick", directions = 1, jvp_directions = 1,
                                                  progress = false, bootstrap = 1 }).shared_layers
      end
      print()
      print(string.format("%s: output imported vs native max |diff| / max |out| = %.2g (float32); "
        .. "profiles share a prefix of %d native layers, %d imported nodes", net.what, rel, shared.native,
        shared.imported))
      print(string.format("%-8s %18s %18s %15s | %18s %18s %15s", "pass", "native wall s", "imported", "ratio",
        "native cpu s", "imported", "ratio"))
      for _, task in ipairs(tasks) do
        local n, im = t[task[1]].native, t[task[1]].imported
        local function best(s) return math.min(table.unpack(s)) end
        local rw, rc = median(im.wall) / median(n.wall), median(im.cpu) / median(n.cpu)
        local bw, bc = best(im.wall) / best(n.wall), best(im.cpu) / best(n.cpu)
        local function fig(s) return string.format("%.4f (%.4f)", median(s), best(s)) end
        local function within(a, b) return a <= 1.10 and "yes" or b <= 1.10 and "best only" or "no" end
        print(string.format("%-8s %18s %18s %6.3fx (%.3fx) | %18s %18s %6.3fx (%.3fx)  within 10%%: wall %s, CPU %s",
          task[1], fig(n.wall), fig(im.wall), rw, bw, fig(n.cpu), fig(im.cpu), rc, bc, within(rw, bw), within(rc, bc)))
        verdicts[#verdicts + 1] = string.format("%s %s %.3fx (%.3fx) wall, %.3fx (%.3fx) CPU", net.name, task[1], rw, bw,
          rc, bc)
      end
    end
  end
end
print()
print("ratio: imported ONNX time / native srgeo build's time, of the medians (of the bests) (target <= 1.10): "
  .. table.concat(verdicts, "; "))
print("(on a machine others load, the best of the rounds and the process CPU time are the steadier figures)")
io.write(srgeo._describe(true):match("[^\n]*load[^\n]*") or "", "\n")
