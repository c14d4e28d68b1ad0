-- bench_profile.lua: the r_η engine against PyTorch, and the sequential
-- estimator against the paper protocol on what users publish: the median
-- profile over an evaluation set with its 95% band.
--
-- 1. Throughput, one image: srgeo vs a PyTorch script computing the same
--    paper-preset statistic (torch.autograd.forward_ad JVPs + batched
--    forwards) on the same cores in the same run.  Each side runs its own
--    batch: srgeo its automatic one, PyTorch the rows per forward and memory
--    format its script finds fastest on this machine (an untimed sweep; see
--    torch_profile.py).  The two sides alternate for --rounds rounds (the
--    sweep only in the first) and each keeps its best: these VMs change
--    speed by tens of percent within minutes.
-- 2. The median over --images images (test images for the shipped models,
--    uniform-noise images for the zoo architectures), paper preset vs
--    sequential preset on the same images and ladder: forwards, wall time
--    and, per rung, the width of the 95% bootstrap band of the median and
--    how the sequential rungs closed.  Target: >= 5x fewer forwards than
--    paper on the trained model with the same band or a narrower one at
--    every rung.  Where PyTorch runs the architecture (case 1), the
--    end-to-end ratio: PyTorch's paper protocol on all images (its measured
--    time per image times the count: its work per image is fixed) against
--    srgeo's sequential median profile.
--   build/srgeo tests/bench/bench_profile.lua [--cases ...] [--medians ...] [--images 32] [--rounds 3]
-- A case is MODEL:SIZE:DIRECTIONS (paper: 1024 directions, i.e. 2048 with
-- antipodes); ResNet-50 at 224 runs a reduced direction count by default
-- (the full preset is 34816 forwards per side, about an hour on 2 cores;
-- the ratio is a throughput ratio either way).  A median case is a shipped
-- model name, NAME@init (its random-init twin) or ARCH:SIZE (a zoo
-- architecture at random init on noise images).  No float32 noise check on
-- either side (PyTorch has none).
local srgeo = require "srgeo"
package.path = "./?.lua;" .. package.path
local B = require "tests.bench.common"
local cli = require "srgeo.cli"
local stats = require "srgeo.stats"

local o = cli.run({
  name = "bench_profile.lua",
  about = "r_eta: srgeo vs PyTorch for one image; sequential vs paper for the median over images",
  options = {
    { "cases", "resnet18_cifar:32:1024,resnet50:224:64", "MODEL:SIZE:DIRECTIONS,... (throughput vs PyTorch)" },
    { "medians", "small_resnet,small_resnet@init,resnet18_cifar:32", "median cases (see the header)" },
    { "images", 32, "images behind each median" },
    { "threads", 0, "threads (0: default)" },
    { "rounds", 3, "alternating timed rounds per side (best kept)" },
  },
}, { ... })
if o.threads > 0 then srgeo.threads(o.threads) end
if o.rounds < 1 or o.images < 8 then
  io.stderr:write("bench_profile.lua: --rounds must be at least 1 and --images at least 8\n")
  os.exit(2)
end
local py, has_torch = B.torch_python()
B.header("r_eta engine", has_torch)

-- One timed PyTorch run: seconds, "R format F" and the raw output (rows
-- nil: its own sweep first).
local function torch_run(model, size, ndir, rows)
  local cmd = string.format("%s tests/bench/torch_profile.py %s %d %d %d %s 2>/dev/null", py,
    model, ndir, size, srgeo.threads(), rows and rows:gsub(" format ", " ") or "")
  local out = B.run(cmd)
  return tonumber(out:match("seconds ([%d%.]+)")), out:match("rows (%d+ format %S+)"), out
end

local torch_per_image = {} -- model@size -> best PyTorch seconds for one image, paper preset, 1024 directions

local function bench(model, size, ndir)
  local m = srgeo.models[model] {}
  m:eval()
  local x = srgeo.rand({ 1, 3, size, size }, 1)
  local opts = { preset = "paper", directions = ndir, jvp_directions = math.min(256, 2 * ndir),
                 progress = false, noise_directions = 0 }
  local torch = has_torch
  local best, tbest, p, rows = math.huge, math.huge, nil, nil
  for round = 1, o.rounds do
    local t0 = srgeo._clock()
    p = srgeo.profile(m, { x }, opts)
    local t = srgeo._clock() - t0
    best = math.min(best, t)
    print(string.format("round %d  srgeo  %s @%d, %d dirs x %d rungs: %.1f s, %d forwards, %.1f forwards/s",
      round, model, size, 2 * ndir, #p.scales, t, p.forwards, p.forwards / t))
    if torch then
      local tt, r, out = torch_run(model, size, ndir, rows)
      if tt then
        rows = rows or r
        tbest = math.min(tbest, tt)
        print(string.format("round %d  torch  same task, its best batch (%s): %.1f s (this round: srgeo %.2fx)",
          round, rows, tt, tt / t))
      else
        print("torch  (not available for this architecture: " .. out:gsub("\n", " ") .. ")")
        torch = false
      end
    end
  end
  if tbest < math.huge then
    print(string.format("best of %d rounds: srgeo %.1f s (%.1f forwards/s), torch %.1f s -> srgeo is %.2fx PyTorch (target >= 1.5x)",
      o.rounds, best, p.forwards / best, tbest, tbest / best))
    if ndir == 1024 then torch_per_image[model .. "@" .. size] = tbest end
  end
end

for case in o.cases:gmatch("[^,]+") do
  local model, size, ndir = case:match("^([%w_]+):(%d+):(%d+)$")
  if not model then
    io.stderr:write("bench_profile.lua: bad case '", case, "' (want MODEL:SIZE:DIRECTIONS)\n")
    os.exit(2)
  end
  print("== " .. case)
  bench(model, tonumber(size), tonumber(ndir))
end

-- The model and images of a median case.
local function median_case(case)
  local arch, size = case:match("^([%w_]+):(%d+)$")
  if arch then
    local m = srgeo.models[arch] {}
    m:eval()
    local X = srgeo.data.noise { n = o.images, shape = { 3, tonumber(size), tonumber(size) }, seed = 1, kind = "uniform" }
    return m, X, string.format("%s @%s, random init, %d uniform-noise images", arch, size, o.images), arch .. "@" .. size
  end
  local E = require "srgeo.experiment"
  local m = E.load_model(case, 0)
  local X = srgeo.data.fashion_mnist { split = "test" }:sample(o.images, 0)
  return m, X, string.format("%s, %d Fashion-MNIST test images", case, o.images), nil
end

local function width(p, s) return p.hi[s] - p.lo[s] end

local function bench_median(case)
  local m, X, what, torch_key = median_case(case)
  print(string.format("== median profile: %s", what))
  local common = { noise_directions = 0, progress = false, range = "paper" }
  local t0 = srgeo._clock()
  local common_p = {}
  for k, v in pairs(common) do common_p[k] = v end
  common_p.preset = "paper"
  local pap = srgeo.profile(m, X, common_p)
  local tp = srgeo._clock() - t0
  common.preset = "sequential"
  t0 = srgeo._clock()
  local seq = srgeo.profile(m, X, common)
  local ts = srgeo._clock() - t0
  print(string.format("paper      %8d forwards %7.1f s   shape: %s", pap.forwards, tp, pap.shape.text))
  print(string.format("sequential %8d forwards %7.1f s   shape: %s", seq.forwards, ts, seq.shape.text))
  local wider, worst = 0, 0
  local rows = { "  rung  eta        paper r [95% band]          seq r [95% band]            width seq/paper  "
    .. "seq dirs (mean, of 2048)  closed by" }
  for s, eta in ipairs(pap.scales) do
    local wp, ws = width(pap, s), width(seq, s)
    local ratio = wp > 0 and ws / wp or (ws > 0 and math.huge or 1)
    if ratio > 1 then wider = wider + 1 end
    worst = math.max(worst, ratio)
    local dirs, why = {}, {}
    for i = 1, seq.n_images do
      dirs[i] = seq.rung_directions[i][s]
      local c = seq.closed_by[i][s] or "?"
      why[c] = (why[c] or 0) + 1
    end
    local wtxt = {}
    for _, k in ipairs { "between", "paper", "cap", "noise" } do if why[k] then wtxt[#wtxt + 1] = k .. " " .. why[k] end end
    rows[#rows + 1] = string.format("  %4d  %-9.3g  %-7.4g [%-7.4g %-7.4g]   %-7.4g [%-7.4g %-7.4g]   %6.3f           %7.0f                 %s",
      s, eta, pap.median[s], pap.lo[s], pap.hi[s], seq.median[s], seq.lo[s], seq.hi[s], ratio, stats.mean(dirs),
      table.concat(wtxt, ", "))
  end
  print(table.concat(rows, "\n"))
  print(string.format("sequential: %.1fx fewer forwards, %.1fx less time than paper (target >= 5x); band no wider "
    .. "than paper's at %d of %d rungs (widest: %.3fx)", pap.forwards / seq.forwards, tp / ts, #pap.scales - wider,
    #pap.scales, worst))
  local tpi = torch_key and torch_per_image[torch_key]
  if tpi then
    print(string.format("end to end: PyTorch paper protocol on %d images %.0f s (%d x %.1f s measured above) vs srgeo "
      .. "sequential %.1f s -> %.1fx (goal >= 10x)", o.images, o.images * tpi, o.images, tpi, ts, o.images * tpi / ts))
  elseif torch_key then
    print("end to end: no PyTorch time for " .. torch_key .. " at 1024 directions in this run (see --cases)")
  end
end

for case in o.medians:gmatch("[^,]+") do bench_median(case) end
