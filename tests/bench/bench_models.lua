-- bench_models.lua: forward images/s, stacked-JVP cost per tangent and peak
-- RSS for zoo models, against srgeo's own forward (the foundation issue's
-- target: JVP time per tangent <= 1.2x one forward with k = 8) and, when
-- PyTorch is installed, against PyTorch 1.13 on the same task in the same run
-- (tests/bench/torch_models.py; zoo issue: forward >= 1.0x, JVP >= 2.0x,
-- peak RSS <= 1.5x PyTorch's).  PyTorch runs at its best rows per forward and
-- memory format (torch_sweep.py, as bench_profile's PyTorch does), its peak
-- RSS on srgeo's shape of the task.  Each model runs in a process of its own,
-- so its peak RSS is its own.
--   build/srgeo tests/bench/bench_models.lua [model ...] [--all] [--batch N] [--threads N] [--size N] [-k N]
local srgeo = require "srgeo"
package.path = "./?.lua;" .. package.path
local B = require "tests.bench.common"

-- The default set: one of each family at ImageNet size.  --all adds every
-- torchvision architecture of the zoo.
local DEFAULT = { "resnet18", "resnet50", "vgg11", "convnext_tiny", "vit_b_16" }
local ALL = { "resnet18", "resnet34", "resnet50", "resnet101", "wide_resnet50_2", "vgg11", "vgg11_bn", "vgg16",
              "vgg16_bn", "convnext_tiny", "convnext_small", "vit_b_16" }

local models, batch, threads, k, size, one, all = {}, 8, nil, 8, nil, nil, false
local i = 1
while arg[i] do
  if arg[i] == "--batch" then batch = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--threads" then threads = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--size" then size = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "-k" then k = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--one" then one = arg[i + 1]; i = i + 2
  elseif arg[i] == "--all" then all = true; i = i + 1
  else models[#models + 1] = arg[i]; i = i + 1 end
end
if #models == 0 then models = all and ALL or DEFAULT end
if threads then srgeo.threads(threads) end

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

local function input_shape(name)
  local s = B.input_shape(name)
  return size and { s[1], size, size } or s
end

-- Child: measure one model, print one machine-readable line.
if one then
  local cfg = {}
  for _, o in ipairs(srgeo.models.options(one)) do
    if o == "image_size" and size then cfg.image_size = size end -- ViTs are built for their size
  end
  local m = srgeo.models[one](cfg)
  m:eval()
  local shape = input_shape(one)
  local x = srgeo.rand({ batch, shape[1], shape[2], shape[3] }, 1)
  local tf = time(function() m:forward(x) end, 3)
  -- one input, k tangents: the profile engine's shape of work
  local x1 = srgeo.rand({ 1, shape[1], shape[2], shape[3] }, 2)
  local v = srgeo.randn({ k, shape[1], shape[2], shape[3] }, 3)
  local x1f = srgeo.rand({ 1 + k, shape[1], shape[2], shape[3] }, 2)
  local tj = time(function() m:jvp(x1, v) end, 3)
  local t1 = time(function() m:forward(x1f) end, 3) -- forward of the same 1+k rows
  print(string.format("RESULT %.6g %.6g %.6g %.6g %.1f %dx%d", batch / tf, k / tj, tj / k, (tj / k) / (t1 / (1 + k)),
                      B.peak_rss_mb(), shape[2], shape[3]))
  os.exit(0)
end

local run = B.run
local py, has_torch = B.torch_python()
local self = arg[0]
local srgeo_bin = arg[-1] or "build/srgeo"

B.header(string.format("batch %d, k = %d tangents per input", batch, k), has_torch)
print(string.format("%-16s %7s %9s %9s %8s %8s | %9s %9s %8s %-16s | %6s %6s %6s", "model", "input", "fwd img/s",
  "jvp dir/s", "jvp/tan", "RSS MB", "torch fwd", "torch jvp", "RSS MB", "torch best", "fwd x", "jvp x", "RSS x"))
local function fmt(v, f) return v and string.format(f, v) or "-" end
for _, name in ipairs(models) do
  local out = run(string.format("%s %s --one %s --batch %d -k %d%s%s 2>&1", srgeo_bin, self, name, batch, k,
    threads and (" --threads " .. threads) or "", size and (" --size " .. size) or ""))
  local f, j, _, ratio, rss, hw = out:match("RESULT (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)")
  if not f then
    print(string.format("%-16s failed: %s", name, out:gsub("\n", " "):sub(1, 200)))
  else
    f, j, ratio, rss = tonumber(f), tonumber(j), tonumber(ratio), tonumber(rss)
    local tf, tj, trss, terr, tbest, tmeth
    if has_torch then
      local h, w = hw:match("(%d+)x(%d+)")
      local cmd = string.format("%s tests/bench/torch_models.py %s %d %s %s %d %d %%s 2>&1", py, name, batch, h, w, k,
        srgeo.threads())
      local tout = run(cmd:format("best"))
      local rows, tfmt
      tf, tj, rows, tfmt = tout:match("forward (%S+) jvp (%S+) rows (%S+) format (%S+)")
      tf, tj = tonumber(tf), tonumber(tj) -- tj nil ("fail"): forward AD does not run this model
      tbest = rows and rows .. " " .. tfmt
      terr = tout:match("jvp_error (.-)\n")
      tmeth = tout:match("jvp_method functional: (.-)\n")
      trss = tonumber(run(cmd:format("rss")):match("rss (%S+)"))
    end
    print(string.format("%-16s %7s %9.1f %9.1f %7.2fx %8.0f | %9s %9s %8s %-16s | %6s %6s %6s", name, hw, f, j, ratio,
      rss, fmt(tf, "%.1f"), tj and string.format("%.1f", tj) or (terr and "fails" or "-"), fmt(trss, "%.0f"),
      tbest or "", tf and fmt(f / tf, "%.2f") or "-", tj and fmt(j / tj, "%.2f") or "-",
      trss and fmt(rss / trss, "%.2f") or "-"))
    if terr then print("    (PyTorch forward AD: " .. terr .. ")") end
    if tmeth then
      print("    (PyTorch JVP by torch.autograd.functional.jvp, two reverse passes: forward AD fails here: " .. tmeth .. ")")
    end
  end
end
print("jvp/tan: JVP time per tangent / forward time per row (target <= 1.2); fwd x, jvp x: srgeo (batch " .. batch
  .. ") / PyTorch at its best rows and format (torch best) throughput (targets >= 1.0, >= 2.0); RSS x: srgeo / "
  .. "PyTorch peak RSS, both on batch " .. batch .. " (target <= 1.5)")
