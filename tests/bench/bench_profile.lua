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
--    how the sequential rungs closed.  The sequential preset runs with
--    --seeds direction seeds (5: cheap next to one paper run), because a
--    band's width moves by tens of percent with the directions alone; a
--    rung's band counts as wider than paper's only when all seeds' are (a
--    sign test, p = 2^-5).  --paper-seeds 2 also measures how far the paper
--    preset's band moves against itself (a second full paper run).
--    Target: >= 5x fewer forwards than paper on the trained model with the
--    same band or a narrower one at every rung.  Where PyTorch runs the
--    architecture (case 1), the end-to-end ratio: PyTorch's paper protocol
--    on all images (its measured time per image times the count: its work
--    per image is fixed) against srgeo's sequential median profile.
--   build/srgeo tests/bench/bench_profile.lua [--cases ...] [--medians ...] [--images 32] [--rounds 3]
--     [--seeds 5] [--paper-seeds 1]
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
    { "seeds", 5, "direction seeds of the sequential preset per median case" },
    { "paper_seeds", 1, "direction seeds of the paper preset per median case (each costs a full paper run)" },
  },
}, { ... })
if o.threads > 0 then srgeo.threads(o.threads) end
if o.rounds < 1 or o.images < 8 or o.seeds < 1 or o.paper_seeds < 1 then
  io.stderr:write("bench_profile.lua: --rounds, --seeds and --paper-seeds must be at least 1 and --images at least 8\n")
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
    local X = srgeo.data.noise { n = o.images, shape = { B.input_shape(arch)[1], tonumber(size), tonumber(size) }, seed = 1,
                                 kind = "uniform" }
    return m, X, string.format("%s @%s, random init, %d uniform-noise images", arch, size, o.images), arch .. "@" .. size
  end
  local E = require "srgeo.experiment"
  local m = E.load_model(case, 0)
  local X = srgeo.data.fashion_mnist { split = "test" }:sample(o.images, 0)
  return m, X, string.format("%s, %d Fashion-MNIST test images", case, o.images), nil
end

local function width(p, s) return p.hi[s] - p.lo[s] end

-- A band's width is a noisy statistic: the percentile bootstrap of a median
-- over 32 images puts its ends at single order statistics, which move by
-- about one within-image standard error whenever the directions change.  So
-- the sequential preset runs with --seeds direction seeds (the paper preset
-- with --paper-seeds) and a rung counts as "wider" only when every
-- sequential seed's band is wider than every paper seed's: with 5 seeds
-- against one paper run that is a sign test at p = 2^-5 = 0.031 < 0.05.
local function bench_median(case)
  local m, X, what, torch_key = median_case(case)
  print(string.format("== median profile: %s", what))
  local function run(preset, seed)
    local t0 = srgeo._clock()
    local p = srgeo.profile(m, X, { noise_directions = 0, progress = false, range = "paper", preset = preset, seed = seed })
    return p, srgeo._clock() - t0
  end
  local paps, seqs = {}, {}
  for k = 1, o.paper_seeds do
    local p, t = run("paper", k - 1)
    paps[k] = { p = p, t = t }
    print(string.format("paper      seed %d %8d forwards %7.1f s   shape: %s", k - 1, p.forwards, t, p.shape.text))
  end
  for k = 1, o.seeds do
    local p, t = run("sequential", k - 1)
    seqs[k] = { p = p, t = t }
    print(string.format("sequential seed %d %8d forwards %7.1f s   shape: %s", k - 1, p.forwards, t, p.shape.text))
  end
  local pap, seq = paps[1].p, seqs[1].p
  local rows = { string.format("  rung  eta        paper r [95%% band]          seq r [95%% band] (seed 0)   width seq/paper: "
    .. "seed 0  all %d seeds     seq wider  seq dirs  closed by (seed 0)", o.seeds) }
  local wider, worst0, worst_mean, fw, tp, ts = 0, 0, 0, 0, 0, 0
  for _, q in ipairs(paps) do tp = tp + q.t / #paps end
  for _, q in ipairs(seqs) do fw, ts = fw + q.p.forwards / #seqs, ts + q.t / #seqs end
  for s, eta in ipairs(pap.scales) do
    local wp_lo, wp_hi = math.huge, 0
    for _, q in ipairs(paps) do
      wp_lo, wp_hi = math.min(wp_lo, width(q.p, s)), math.max(wp_hi, width(q.p, s))
    end
    local ratios, all_wider = {}, true
    for k, q in ipairs(seqs) do
      local ws = width(q.p, s)
      ratios[k] = wp_lo > 0 and ws / width(pap, s) or (ws > 0 and math.huge or 1)
      all_wider = all_wider and ws > wp_hi
    end
    if all_wider then wider = wider + 1 end
    local mean = stats.mean(ratios)
    worst0, worst_mean = math.max(worst0, ratios[1]), math.max(worst_mean, mean)
    local lo, hi = math.huge, 0
    for _, r in ipairs(ratios) do lo, hi = math.min(lo, r), math.max(hi, r) end
    local dirs, why = {}, {}
    for i = 1, seq.n_images do
      dirs[i] = seq.rung_directions[i][s]
      local c = seq.closed_by[i][s] or "?"
      why[c] = (why[c] or 0) + 1
    end
    local wtxt = {}
    for _, k in ipairs { "between", "paper", "cap", "noise" } do if why[k] then wtxt[#wtxt + 1] = k .. " " .. why[k] end end
    rows[#rows + 1] = string.format("  %4d  %-9.3g  %-7.4g [%-7.4g %-7.4g]   %-7.4g [%-7.4g %-7.4g]   %6.3f  %5.3f [%5.3f %5.3f]  %-9s %7.0f  %s",
      s, eta, pap.median[s], pap.lo[s], pap.hi[s], seq.median[s], seq.lo[s], seq.hi[s], ratios[1], mean, lo, hi,
      all_wider and "yes" or "no", stats.mean(dirs), table.concat(wtxt, ", "))
  end
  print(table.concat(rows, "\n"))
  local pf = pap.forwards
  print(string.format("sequential (mean of %d seeds): %.1fx fewer forwards, %.1fx less time than paper (target >= 5x)",
    o.seeds, pf / fw, tp / ts))
  print(string.format("band: wider than paper's at %d of %d rungs by the seed test (all %d sequential seeds wider than "
    .. "the widest of %d paper seed(s): p = %.3g per rung%s); width ratio seed 0 at most %.3f, mean over seeds at most %.3f",
    wider, #pap.scales, o.seeds, o.paper_seeds, 0.5 ^ o.seeds, 0.5 ^ o.seeds <= 0.05 and ", alpha 0.05" or
    ", too few seeds for alpha 0.05", worst0, worst_mean))
  if o.paper_seeds > 1 then
    local lo, hi = math.huge, 0
    for s = 1, #pap.scales do
      local r = width(paps[2].p, s) / width(pap, s)
      lo, hi = math.min(lo, r), math.max(hi, r)
    end
    print(string.format("paper against itself (seed 1 / seed 0): band width ratio %.3f .. %.3f over the rungs", lo, hi))
  end
  local tpi = torch_key and torch_per_image[torch_key]
  if tpi then
    print(string.format("end to end: PyTorch paper protocol on %d images %.0f s (%d x %.1f s measured above) vs srgeo "
      .. "sequential %.1f s -> %.1fx (goal >= 10x)", o.images, o.images * tpi, o.images, tpi, seqs[1].t, o.images * tpi / seqs[1].t))
  elseif torch_key then
    print("end to end: no PyTorch time for " .. torch_key .. " at 1024 directions in this run (see --cases)")
  end
end

for case in o.medians:gmatch("[^,]+") do bench_median(case) end
