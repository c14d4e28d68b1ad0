-- bench_image.lua: image decode + resize + crop to 224 against libvips' own
-- vipsthumbnail on the same generated JPEGs in the same run, and the
-- Fashion-MNIST full load time.
--   srgeo tests/bench/bench_image.lua [nimages]
-- Targets (issue 5): images/s >= 0.8x vipsthumbnail; Fashion-MNIST < 1 s.
local srgeo = require "srgeo"
local B = require "tests.bench.common"
local C = srgeo._data

local N = tonumber(arg and arg[1]) or 48
local DIR = os.tmpname()
os.remove(DIR)
os.execute("mkdir -p '" .. DIR .. "/out'")

local function clock() return srgeo._clock() end

-- ImageNet-like photographs: 500x375 JPEGs (q 90) of pink noise with a
-- gradient, so the decoder sees realistic entropy.
local files = {}
for i = 1, N do
  local w, h = (i % 2 == 0) and 500 or 375, (i % 2 == 0) and 375 or 500
  local x = C.synth("pink", i, { 1 }, { 3, h, w })
  files[i] = string.format("%s/img%03d.jpg", DIR, i)
  srgeo.image.save(files[i], x, { quality = 90 })
end

local function best_of(reps, fn)
  local best = math.huge
  for _ = 1, reps do
    local t0 = clock()
    fn()
    best = math.min(best, clock() - t0)
  end
  return best
end

local threads = srgeo.threads()
local la = io.open("/proc/loadavg")
if la then print("load average: " .. la:read("l")) la:close() end
B.system()
print(string.format("images: %d JPEGs 500x375 / 375x500 (q90), Resize(256) + CenterCrop(224), %d threads", N, threads))

-- warm-up (libvips start-up, page cache)
srgeo.image.load(files[1])
local t_single = best_of(3, function()
  for i = 1, N do srgeo.image.load(files[i]) end
end)
local t_batch = best_of(3, function() srgeo.image.load_batch(files) end)

-- vipsthumbnail: the same shrink-on-load + Lanczos resize to 341x256 / 256x341,
-- written as .v (libvips' raw format, the cheapest output it has).  It runs as
-- one process over all files (start-up included, ~10 ms).
local list = {}
for i = 1, N do list[i] = "'" .. files[i] .. "'" end
local land = {}
local port = {}
for i = 1, N do if i % 2 == 0 then land[#land + 1] = list[i] else port[#port + 1] = list[i] end end
local cmd = string.format("vipsthumbnail %s --size 341x256! -o '%s/out/%%s.v' && vipsthumbnail %s --size 256x341! -o '%s/out/%%s.v'",
  table.concat(land, " "), DIR, table.concat(port, " "), DIR)
local t_vips = best_of(3, function()
  local ok = os.execute(cmd)
  if not ok then error("vipsthumbnail failed: " .. cmd) end
end)

local function rate(t) return N / t end
print(string.format("  srgeo.image.load (one at a time)   %7.1f images/s  (%.2f ms each)", rate(t_single), 1e3 * t_single / N))
print(string.format("  srgeo.image.load_batch (parallel)  %7.1f images/s", rate(t_batch)))
print(string.format("  vipsthumbnail (same resize, .v)    %7.1f images/s", rate(t_vips)))
print(string.format("  ratio single / vipsthumbnail %.2fx, batch / vipsthumbnail %.2fx  (target >= 0.8x)",
  t_vips / t_single, t_vips / t_batch))

-- folder screening cost (check = "full" decodes each file once at 1/8 scale)
local t_check = best_of(2, function() for i = 1, N do srgeo.image.check(files[i]) end end)
print(string.format("  image.check (folder screening)     %7.1f images/s", rate(t_check)))

-- Fashion-MNIST: the readers themselves (uncached), images + labels
local root = "/usr/share/datasets/fashion-mnist/"
local cpu0 = os.clock()
local t_fm = best_of(3, function()
  local s = C.idx_images(root .. "train-images-idx3-ubyte.gz")
  local l = C.idx_labels(root .. "train-labels-idx1-ubyte.gz")
  assert(#s == 60000 and #l == 60000)
  s, l = nil, nil
  collectgarbage()
end)
local cpu_fm = (os.clock() - cpu0) / 3
local t_fm_test = best_of(3, function()
  local s = C.idx_images(root .. "t10k-images-idx3-ubyte.gz")
  assert(#s == 10000)
end)
print(string.format("fashion-mnist: train (60000) full load %.3f s wall (%.3f s CPU), test (10000) %.3f s  (target < 1 s)",
  t_fm, cpu_fm, t_fm_test))
local ds = srgeo.data.fashion_mnist { split = "train" }
local idx = {}
for i = 1, 128 do idx[i] = i * 311 % 60000 + 1 end
local t_b = best_of(5, function() for _ = 1, 100 do ds:batch(idx) end end)
print(string.format("fashion-mnist: batch of 128 (uint8 -> float32) %.1f us", 1e6 * t_b / 100))

os.execute("rm -rf '" .. DIR .. "'")
