-- bench_mpi.lua: scale-out on this machine and the figures of README's cost
-- model ("Running on a cluster").  Same run, alternating rounds, best of each:
--   profile sweep   srgeo.profile over the images of an evaluation set:
--                   1 process x 2 threads vs mpirun -np 2 x 1 thread each
--   training        srgeo.train steps: 1 x 2 threads vs 2 ranks x 1 thread
--   all-reduce      one step's gradient sum (MPI_Allreduce of every
--                   trainable parameter, float32) on 2 ranks, by model
--   overlap         data-parallel steps on 2 ranks with the gradient sums
--                   overlapped with backward vs after it, alternating in
--                   one run, over shared memory and over TCP
--   per unit        seconds per image of the paper preset on ResNet-50 at
--                   224 (measured on a few directions, scaled by forwards)
--                   and per training step of resnet18_cifar by batch
--   build/srgeo tests/bench/bench_mpi.lua [--rounds 3] [--images 16] [--skip-units]
local srgeo = require "srgeo"
package.path = "./?.lua;" .. package.path
local B = require "tests.bench.common"
local cli = require "srgeo.cli"

local o = cli.run({
  name = "bench_mpi.lua",
  about = "srgeo on 1 process x 2 threads vs 2 MPI ranks x 1 thread; the cost model's measurements",
  options = {
    { "rounds", 3, "alternating rounds (best kept)" },
    { "images", 16, "images of the profile sweep" },
    { "steps", 8, "timed training steps" },
    { "overlap_steps", 6, "steps per variant of the overlap comparison" },
    { "skip_units", false, "skip the per-unit timings (ResNet-50 at 224: minutes)" },
    { "child", type = "string", help = "internal: profile, train, allreduce, overlap, unit" },
    { "model", "small_resnet", "internal: the child's model" },
    { "batch", 128, "internal: the child's batch" },
  },
}, { ... })

local mpi = srgeo.mpi

-- Children: one measurement, printed by rank 0 as "RESULT ...".
if o.child == "profile" then
  local m = srgeo.models.load(srgeo.root .. "/models/shipped/small_resnet.safetensors")
  local X = srgeo.data.fashion_mnist { split = "test" }:sample(o.images, 1)
  mpi.barrier()
  local t0 = srgeo._clock()
  srgeo.profile(m, X, { preset = "quick", directions = 128, progress = false })
  local t = srgeo._clock() - t0
  if mpi.root() then print(string.format("RESULT %.4f", t)) end
  os.exit(0)
elseif o.child == "train" then
  local m = srgeo.models[o.model] {}
  local shape = B.input_shape(o.model)
  local ds = srgeo.data.noise { n = o.batch * (o.steps + 2), shape = shape, seed = 1 }
  local t
  srgeo.train { model = m, data = ds, steps = o.steps + 2, batch = o.batch, progress = false, eval_train = false,
                augment = false, log_every = 1, on_log = function(r) if r.step == 2 then t = srgeo._clock() end end }
  t = srgeo._clock() - t
  if mpi.root() then print(string.format("RESULT %.6g", o.steps * o.batch / t)) end
  os.exit(0)
elseif o.child == "allreduce" then
  local m = srgeo.models[o.model] {}
  local n = 0
  for _, t in pairs(m:parameters({ trainable = true })) do n = n + t:numel() end
  local g = srgeo.zeros({ n })
  mpi.allreduce(g) -- warm up: connections and buffers
  local best = math.huge
  for _ = 1, 5 do
    mpi.barrier()
    local t0 = srgeo._clock()
    mpi.allreduce(g)
    best = math.min(best, srgeo._clock() - t0)
  end
  if mpi.root() then print(string.format("RESULT %d %.6g", n, best)) end
  os.exit(0)
elseif o.child == "overlap" then
  -- Data-parallel steps with the gradient sums overlapped with backward and
  -- after it, alternating step by step in one run; per variant the median
  -- step time and the median seconds the step spent in the sums' calls (the
  -- all-reduce time not hidden), the larger of the ranks'.
  local m = srgeo.models[o.model] {}
  m:train()
  local B_, size, rank = o.batch, mpi.size(), mpi.rank()
  local lo, hi = B_ * rank // size, B_ * (rank + 1) // size
  local X = srgeo.rand(table.move(B.input_shape(o.model), 1, 3, 2, { hi - lo }), 1 + rank)
  local lab = {}
  for i = 1, hi - lo do lab[i] = (lo + i) % 10 end
  local opt = srgeo.optim.sgd { lr = 1e-3 }
  for _ = 1, 2 do srgeo._train_step(m, opt, X, lab, { rows = B_ }) end -- the first step makes the gradients
  local times = { [true] = { step = {}, sum = {} }, [false] = { step = {}, sum = {} } }
  for s = 1, o.steps do
    for _, ov in ipairs(s % 2 == 1 and { true, false } or { false, true }) do
      local tm = {}
      mpi.barrier()
      local t0 = srgeo._clock()
      srgeo._train_step(m, opt, X, lab, { rows = B_, overlap = ov, timing = tm })
      local t = mpi.allreduce(srgeo._clock() - t0, "max")
      local r = times[ov]
      r.step[#r.step + 1], r.sum[#r.sum + 1] = t, mpi.allreduce(tm.sum_seconds, "max")
    end
  end
  local function median(v)
    table.sort(v)
    return #v % 2 == 1 and v[(#v + 1) // 2] or (v[#v // 2] + v[#v // 2 + 1]) / 2
  end
  if mpi.root() then
    print(string.format("RESULT %.6g %.6g %.6g %.6g", median(times[false].step), median(times[true].step),
      median(times[false].sum), median(times[true].sum)))
  end
  os.exit(0)
elseif o.child == "unit" then
  local m = srgeo.models.resnet50 {}
  local X = srgeo.rand({ 1, 3, 224, 224 }, 1)
  local p = srgeo.profile(m, X, { preset = "paper", directions = 8, jvp_directions = 16, progress = false,
                                  noise_directions = 0, bootstrap = 1 })
  print(string.format("RESULT %.6g %d", p.seconds, p.forwards))
  os.exit(0)
end

local self = string.format("%s %s", arg[-1] or "build/srgeo", arg[0])
local MPIRUN = "mpirun --allow-run-as-root --oversubscribe --bind-to none"
local function result(cmd)
  local out = B.run(cmd .. " 2>&1")
  local r = out:match("RESULT ([^\n]+)")
  if not r then error("bench_mpi: " .. cmd .. " failed:\n" .. out) end
  local v = {}
  for x in r:gmatch("%S+") do v[#v + 1] = tonumber(x) end
  return table.unpack(v)
end

local ncpu = tonumber(B.run("nproc"))
B.system()
print(string.format("1 process x %d threads vs %d ranks x 1 thread, best of %d alternating rounds", ncpu, ncpu, o.rounds))

local function ab(what, one, many, higher_better)
  local a, b = higher_better and 0 or math.huge, higher_better and 0 or math.huge
  local pick = higher_better and math.max or math.min
  for _ = 1, o.rounds do
    a = pick(a, result(one))
    b = pick(b, result(many))
  end
  local speedup = higher_better and b / a or a / b
  return a, b, speedup
end

local a, b, s = ab("profile", string.format("SRGEO_THREADS=%d %s --child profile --images %d", ncpu, self, o.images),
  string.format("SRGEO_THREADS=1 %s -np %d %s --child profile --images %d", MPIRUN, ncpu, self, o.images))
print(string.format("profile sweep (small_resnet, %d images, quick preset, 128 directions): %.2f s vs %.2f s -> "
  .. "%.2fx from ranks instead of threads", o.images, a, b, s))
a, b, s = ab("train", string.format("SRGEO_THREADS=%d %s --child train --steps %d", ncpu, self, o.steps),
  string.format("SRGEO_THREADS=1 %s -np %d %s --child train --steps %d", MPIRUN, ncpu, self, o.steps), true)
print(string.format("training (small_resnet, batch 128): %.1f vs %.1f images/s -> %.2fx from ranks instead of threads",
  a, b, s))

print("all-reduce of one step's gradients (float32) on 2 ranks here:")
for _, name in ipairs { "small_resnet", "resnet18_cifar", "resnet50" } do
  local n, t = result(string.format("SRGEO_THREADS=1 %s -np 2 %s --child allreduce --model %s", MPIRUN, self, name))
  print(string.format("  %-15s %10d parameters  %8.1f MB  %8.2f ms  (%.2f GB/s)", name, n, 4 * n / 1e6, 1e3 * t,
    4 * n / t / 1e9))
end

print(string.format("gradient sums overlapped with backward vs after it, 2 ranks x 1 thread, batch %d, median of %d "
  .. "alternating steps (exposed: the step's seconds in the sums' calls, the larger rank's):", o.batch, o.overlap_steps))
for _, net in ipairs { { "shared memory", "" }, { "TCP", "--mca btl tcp,self" } } do
  for _, name in ipairs { "small_resnet", "resnet18_cifar" } do
    local s_off, s_on, x_off, x_on = result(string.format("SRGEO_THREADS=1 %s %s -np 2 %s --child overlap --model %s "
      .. "--batch %d --steps %d", MPIRUN, net[2], self, name, o.batch, o.overlap_steps))
    print(string.format("  %-13s %-15s step %.3f s after vs %.3f s overlapped (%.3fx); exposed all-reduce %.1f ms vs "
      .. "%.1f ms (%.0f%% hidden)", net[1], name, s_off, s_on, s_off / s_on, 1e3 * x_off, 1e3 * x_on,
      100 * (1 - x_on / x_off)))
  end
end

if not o.skip_units then
  print("per unit (1 process x " .. ncpu .. " threads):")
  local t, f = result(string.format("SRGEO_THREADS=%d %s --child unit", ncpu, self))
  local paper = 2 * 1024 * 17
  print(string.format("  resnet50 at 224, paper preset: %d forwards in %.1f s on 8 directions -> %.3f s per forward, "
    .. "about %.1f min per image (%d forwards)", f, t, t / f, paper * t / f / 60, paper))
  for _, bs in ipairs { 128, 16, 2 } do
    local ips = result(string.format("SRGEO_THREADS=%d %s --child train --model resnet18_cifar --batch %d --steps 3",
      ncpu, self, bs))
    print(string.format("  resnet18_cifar training step at batch %3d: %.3f s (%.1f images/s)", bs, bs / ips, ips))
  end
end
