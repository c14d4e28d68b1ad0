-- bench_train.lua: training images/s (one SGD step: forward with BatchNorm in
-- train mode, softmax cross-entropy, backward, momentum + weight-decay update)
-- and peak RSS, srgeo vs PyTorch 1.13 on the same model, batch and cores in
-- the same run (tests/bench/torch_train.py).  Training issue target: >= 1.0x.
-- Each model runs in a process of its own, so its peak RSS is its own.  The
-- sides alternate for --rounds rounds, PyTorch in both memory formats each
-- round, and each keeps its best (PyTorch: its best format, as
-- bench_profile's PyTorch gets its best configuration): these VMs change
-- speed by tens of percent within minutes.
--   build/srgeo tests/bench/bench_train.lua [model ...] [--batch 128] [--steps 10] [--threads N] [--rounds 3]
local srgeo = require "srgeo"
package.path = "./?.lua;" .. package.path
local B = require "tests.bench.common"

local models, batch, steps, threads, one, rounds = {}, 128, 10, nil, nil, 3
local i = 1
while arg[i] do
  if arg[i] == "--batch" then batch = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--rounds" then rounds = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--steps" then steps = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--threads" then threads = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--one" then one = arg[i + 1]; i = i + 2
  else models[#models + 1] = arg[i]; i = i + 1 end
end
if #models == 0 then models = { "small_resnet", "resnet18_cifar" } end
if threads then srgeo.threads(threads) end

if one then
  local m = srgeo.models[one] {}
  m:train()
  local shape = B.input_shape(one)
  local X = srgeo.rand({ batch, shape[1], shape[2], shape[3] }, 1)
  local labels = {}
  for b = 1, batch do labels[b] = (b * 7) % 10 end
  local opt = srgeo.optim.sgd { lr = 0.01, momentum = 0.9, weight_decay = 5e-4 }
  for _ = 1, 2 do srgeo._train_step(m, opt, X, labels) end -- warm up: buffers allocated and touched
  local t0 = srgeo._clock()
  for _ = 1, steps do srgeo._train_step(m, opt, X, labels) end
  local t = srgeo._clock() - t0
  print(string.format("RESULT %.6g %.1f %dx%dx%d", steps * batch / t, B.peak_rss_mb(), shape[1], shape[2], shape[3]))
  os.exit(0)
end

local run = B.run
local py, has_torch = B.torch_python()
B.header(string.format("batch %d, %d timed steps after 2 warm-up, best of %d alternating rounds", batch, steps, rounds),
  has_torch)
print(string.format("%-16s %9s %10s %8s | %10s %8s | %6s %6s  %s", "model", "input", "img/s", "RSS MB", "torch img/s",
  "RSS MB", "x", "RSS x", "torch format"))
for _, name in ipairs(models) do
  local ips, rss, shape, tips, trss, tfmt, err
  for _ = 1, rounds do
    local out = run(string.format("%s %s --one %s --batch %d --steps %d%s 2>&1", arg[-1] or "build/srgeo", arg[0], name,
      batch, steps, threads and (" --threads " .. threads) or ""))
    local a, b, c = out:match("RESULT (%S+) (%S+) (%S+)")
    if not a then err = out:gsub("\n", " "):sub(1, 200) break end
    if not ips or tonumber(a) > ips then ips, rss, shape = tonumber(a), tonumber(b), c end
    for _, fmt in ipairs(has_torch and { "contiguous", "channels_last" } or {}) do
      local tout = run(string.format("%s tests/bench/torch_train.py %s %d %d %d %s 2>&1", py, name, batch, steps,
        srgeo.threads(), fmt))
      local i2, r2 = tout:match("images_per_s (%S+) rss (%S+)")
      if not i2 then print("    (torch_train.py: " .. tout:gsub("\n", " "):sub(1, 200) .. ")")
      elseif not tips or tonumber(i2) > tips then tips, trss, tfmt = tonumber(i2), tonumber(r2), fmt end
    end
  end
  if err then
    print(string.format("%-16s failed: %s", name, err))
  else
    print(string.format("%-16s %9s %10.1f %8.0f | %10s %8s | %6s %6s  %s", name, shape, ips, rss,
      tips and string.format("%.1f", tips) or "-", trss and string.format("%.0f", trss) or "-",
      tips and string.format("%.2f", ips / tips) or "-", trss and string.format("%.2f", rss / trss) or "-",
      tfmt or ""))
  end
end
print("x: srgeo / PyTorch training images/s (target >= 1.0), each side's best round, PyTorch in its faster memory "
  .. "format; RSS x: srgeo / PyTorch peak RSS")
