-- bench_bf16.lua: what bfloat16 inputs with float32 accumulation would cost
-- r_η, rung by rung, and what they could save (README, "Precision").
--
-- 1. Accuracy.  Per case, the quick preset's directions on the paper ladder
--    extended as range = "auto" extends it at most (20 rungs, up to a
--    per-pixel RMS of about 1.5), three runs on the same images and
--    directions: the numerator's forwards with conv2d's and linear's
--    factors rounded to bf16 (emulate_bf16; the JVPs exact), plain float32,
--    and float64, the reference.  Per rung: the bf16 error of each image's
--    r against float64 (median and largest |error| over images), the
--    image's 95% CI half-width of r, srgeo's own bound on the bf16 error
--    (the float64 check of the preset's noise_directions, p.noise), and on
--    how many images a precision = "auto" rule would run the rung in bf16:
--    bound <= 5% (noise_max, the noise rule) and <= the CI half-width.
-- 2. Share.  The notebooks' estimator (sequential preset, range = "auto")
--    on --seq-images images of the first case: the share of the numerator's
--    forwards per rung, and from it the saving bf16 could bring: the rows
--    of the rungs every image ran in bf16 in part 1 times (1 − 1/F), F a
--    forward's speed-up when its products (--product-share of its time; 1,
--    the default, is the upper bound) run S times faster, S the bf16 GEMM's
--    speed ratio over float32 (--speedup; 0: build/bench_bf16_gemm's
--    geometric mean, measured now).
-- 3. PyTorch: its forward of resnet18_cifar @32 in float32 and under CPU bf16
--    autocast, each at its best rows and memory format (torch_bf16.py).
--   build/srgeo tests/bench/bench_bf16.lua [--cases ...] [--images 3] [--directions 32] [--seq-images 8]
-- A case is a shipped model name (Fashion-MNIST test images) or ARCH:SIZE (a
-- zoo architecture at random init on uniform-noise images).
local srgeo = require "srgeo"
package.path = "./?.lua;" .. package.path
local B = require "tests.bench.common"
local cli = require "srgeo.cli"
local stats = require "srgeo.stats"

local o = cli.run({
  name = "bench_bf16.lua",
  about = "bf16 emulation: per-rung error of r against float64, and the forwards' share per rung",
  options = {
    { "cases", "small_resnet,small_vgg,resnet18_cifar:32", "shipped model names or ARCH:SIZE" },
    { "images", 3, "images per case" },
    { "directions", 32, "directions per image, each with its antipode (the quick preset has 64)" },
    { "seq_images", 8, "images of the sequential run behind the share per rung (0: skip)" },
    { "speedup", 0.0, "bf16/float32 speed ratio of the products (0: measure with build/bench_bf16_gemm)" },
    { "product_share", 1.0, "share of a forward's time in its products (perf; 1: the upper bound)" },
    { "threads", 0, "threads (0: default)" },
    { "torch", true, "also PyTorch's forward of resnet18_cifar @32 in float32 and under bf16 autocast (torch_bf16.py)" },
  },
}, { ... })
if o.threads > 0 then srgeo.threads(o.threads) end
if o.images < 2 or o.directions < 2 then
  io.stderr:write("bench_bf16.lua: --images and --directions must be at least 2\n")
  os.exit(2)
end
B.system()
print("bf16 emulation (kernels/bf16.h) against float64")

local NSCALES, LOG10_HI = 20, 2.75 -- the paper ladder (0.25 decades a rung) plus three rungs

local function case_of(case)
  local arch, size = case:match("^([%w_]+):(%d+)$")
  if arch then
    local m = srgeo.models[arch] {}
    m:eval()
    local shape = { B.input_shape(arch)[1], tonumber(size), tonumber(size) }
    return m, function(n) return srgeo.data.noise { n = n, shape = shape, seed = 1, kind = "uniform" } end,
      string.format("%s @%s, random init, uniform-noise images", arch, size)
  end
  local m = require("srgeo.experiment").load_model(case, 0)
  return m, function(n) return srgeo.data.fashion_mnist { split = "test" }:sample(n, 0) end,
    string.format("%s, Fashion-MNIST test images", case)
end

local function median(t)
  local s = {}
  for _, v in ipairs(t) do if v == v then s[#s + 1] = v end end
  return #s > 0 and stats.median(s) or 0 / 0
end

local function maxabs(t)
  local m = 0 / 0
  for _, v in ipairs(t) do if v == v and not (math.abs(v) <= m) then m = math.abs(v) end end
  return m
end

-- Returns the model, its images and the rungs (η as "%.6g") that
-- precision = "auto" would run in bf16 on every image.
local function accuracy(case)
  local m, images, what = case_of(case)
  local X = images(o.images)
  print(string.format("== %s: %d images, %d directions ± antipodes, %d rungs", what, o.images, o.directions, NSCALES))
  local base = { preset = "quick", directions = o.directions, nscales = NSCALES, log10_hi = LOG10_HI, range = "paper",
                 progress = false, noise_max = math.huge, seed = 0 }
  local function run(extra)
    local t = {}
    for k, v in pairs(base) do t[k] = v end
    for k, v in pairs(extra) do t[k] = v end
    local t0 = srgeo._clock()
    local p = srgeo.profile(m, X, t)
    return p, srgeo._clock() - t0
  end
  local allowed = {}
  local pb, tb = run { emulate_bf16 = true }
  local p32, t32 = run { noise_directions = 0 }
  local p64, t64 = run { precision = "float64", noise_directions = 0 }
  print(string.format("seconds: bf16 emulated + its float64 check %.1f, float32 %.1f, float64 %.1f", tb, t32, t64))
  print(string.format("%4s %9s %8s  %9s %9s %9s  %9s %9s %9s  %7s %7s", "rung", "eta", "rms", "bf16 med", "bf16 max",
    "f32 max", "CI med", "bound max", "med prof", "auto ok", "true ok"))
  for s, eta in ipairs(p64.scales) do
    local eb, e32, ci, bound = {}, {}, {}, {}
    local auto_ok, true_ok = 0, 0
    for i = 1, o.images do
      local r64 = p64.per_image[i][s]
      eb[i] = pb.per_image[i][s] / r64 - 1
      e32[i] = p32.per_image[i][s] / r64 - 1
      ci[i] = p64.ci[i][s]
      bound[i] = pb.noise[i][s]
      if bound[i] <= 0.05 and bound[i] <= ci[i] then auto_ok = auto_ok + 1 end
      if math.abs(eb[i]) <= 0.05 and math.abs(eb[i]) <= ci[i] then true_ok = true_ok + 1 end
    end
    allowed[string.format("%.6g", eta)] = auto_ok == o.images
    local absb = {}
    for i, v in ipairs(eb) do absb[i] = math.abs(v) end
    print(string.format("%4d %9.4g %8.3g  %8.2f%% %8.2f%% %8.3f%%  %8.2f%% %8.2f%% %8.2f%%  %3d/%-3d %3d/%-3d", s, eta,
      eta / math.sqrt(p64.input_dim), 100 * median(absb), 100 * maxabs(eb), 100 * maxabs(e32), 100 * median(ci),
      100 * maxabs(bound), 100 * (pb.median[s] / p64.median[s] - 1), auto_ok, o.images, true_ok, o.images))
  end
  return m, images, allowed
end

local first_m, first_images, first_allowed
for case in o.cases:gmatch("[^,]+") do
  local m, images, allowed = accuracy(case)
  if not first_m then first_m, first_images, first_allowed = m, images, allowed end
end
print("bf16 med/max: |r_bf16 / r_float64 - 1| over images; f32 max: the same "
  .. "for plain float32; CI med: the images' relative 95% CI half-width of r; bound max: srgeo's 95% bound on the "
  .. "bf16 error (its float64 check); med prof: error of the median profile; auto ok: images whose bound is "
  .. "<= 5% and <= their CI (precision = \"auto\" would run the rung in bf16); true ok: the same with the true error")

if o.seq_images > 0 then
  local S = o.speedup
  if S <= 0 then
    local out = B.run("build/bench_bf16_gemm 3 cpu 2>/dev/null")
    S = tonumber(out:match("geometric mean bf16/f32 speed ratio: ([%d%.]+)")) or 0 / 0
  end
  local X = first_images(o.seq_images)
  local p = srgeo.profile(first_m, X, { preset = "sequential", range = "auto", progress = false })
  local per, total = {}, 0
  for s = 1, #p.scales do
    per[s] = 0
    for i = 1, p.n_images do per[s] = per[s] + (p.rung_directions[i][s] or 0) end
    total = total + per[s]
  end
  print(string.format("== share of the numerator's forwards per rung: first case, sequential preset, range auto, "
    .. "%d images (%d forwards in all, JVP rows included)", p.n_images, p.forwards))
  local share_ok = 0
  for s, eta in ipairs(p.scales) do
    local ok = first_allowed[string.format("%.6g", eta)]
    if ok then share_ok = share_ok + per[s] / total end
    print(string.format("%4d %9.4g %7.2f%%  %s", s, eta, 100 * per[s] / total,
      ok == nil and "(not measured)" or ok and "bf16 on every image" or "float32"))
  end
  -- a forward with share f of its time in products runs 1 / (1 − f + f/S) faster
  local f = o.product_share
  local fwd = 1 / (1 - f + f / S)
  print(string.format("rungs bf16 could run: %.1f%% of the numerator's forwards, which are %.1f%% of all rows; "
    .. "products %.2fx faster, %.0f%% of a forward: forwards %.2fx faster, the profile's rows %.1f%% less time",
    100 * share_ok, 100 * total / p.forwards, S, 100 * f, fwd, 100 * share_ok * total / p.forwards * (1 - 1 / fwd)))
end

local py, has_torch = B.torch_python()
if o.torch and has_torch then
  print("== PyTorch forward, resnet18_cifar @32, float32 vs bf16 autocast (tests/bench/torch_bf16.py)")
  io.write(B.run(string.format("%s tests/bench/torch_bf16.py resnet18_cifar 32 %d 3 2>/dev/null", py, srgeo.threads())))
end
