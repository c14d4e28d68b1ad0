-- bench_profile.lua: the statistic for one image, srgeo vs a PyTorch script
-- computing the same quantity (torch.autograd.forward_ad JVPs + batched
-- forwards) on the same cores in the same run, and the sequential mode's
-- forward count at the paper preset's CI.
--   build/srgeo tests/bench/bench_profile.lua [--model resnet18_cifar] [--directions 1024] [--size 32]
local srgeo = require "srgeo"
local cli = require "srgeo.cli"

local o = cli.run({
  name = "bench_profile.lua",
  about = "r_eta for one image: srgeo vs PyTorch, and sequential vs paper forwards",
  options = {
    { "model", "resnet18_cifar", "architecture" },
    { "directions", 1024, "distinct directions (paper: 1024)" },
    { "size", 32, "image size" },
    { "threads", 0, "threads (0: default)" },
  },
}, { ... })
if o.threads > 0 then srgeo.threads(o.threads) end
local m = srgeo.models[o.model] {}
m:eval()
local x = srgeo.rand({ 1, 3, o.size, o.size }, 1)
local opts = { preset = "paper", directions = o.directions, jvp_directions = math.min(256, 2 * o.directions),
               progress = false, noise_directions = 0 }
local t0 = srgeo._clock()
local p = srgeo.profile(m, { x }, opts)
local t = srgeo._clock() - t0
print(string.format("srgeo  %-16s %d dirs x %d rungs: %.1f s, %d forwards, %.1f forwards/s",
  o.model, 2 * o.directions, #p.scales, t, p.forwards, p.forwards / t))

local torch_t
if io.open("/usr/bin/python3") then
  local cmd = string.format("/usr/bin/python3 tests/bench/torch_profile.py %s %d %d %d 2>/dev/null",
    o.model, o.directions, o.size, srgeo.threads())
  local pipe = io.popen(cmd)
  local out = pipe:read("a")
  pipe:close()
  torch_t = tonumber(out:match("seconds ([%d%.]+)"))
  if torch_t then
    print(string.format("torch  same task: %.1f s  -> srgeo is %.2fx PyTorch (target >= 1.5x)", torch_t, torch_t / t))
  else
    print("torch  (not available for this architecture: " .. out:gsub("\n", " ") .. ")")
  end
end

-- sequential mode at the CI the paper preset reached on this image
local worst = 0
for _, c in ipairs(p.ci[1]) do if c == c and c > worst then worst = c end end
local q = srgeo.profile(m, { x }, { preset = "sequential", directions = o.directions, target_ci = worst,
                                    progress = false, noise_directions = 0 })
print(string.format("sequential at the paper CI (%.3g): %d forwards vs %d (%.1fx fewer), %d directions used",
  worst, q.forwards, p.forwards, p.forwards / q.forwards, q.directions_used[1]))
