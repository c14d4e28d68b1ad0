-- bench_profile_seeds.lua: how much the 95% band of the median profile moves
-- between two sequential runs that differ only in their direction seed (the
-- same 32 test images, the shipped small_resnet, the paper ladder).  The
-- per-rung band-width ratios of bench_profile.lua (sequential / paper) are
-- read against this spread: a width ratio inside it is no evidence that
-- one band is wider.  Run: build/srgeo tests/bench/bench_profile_seeds.lua
local E = require "srgeo.experiment"
local m = E.load_model("small_resnet", 0)
local X = srgeo.data.fashion_mnist { split = "test" }:sample(32, 0)
local ps = {}
for k, seed in ipairs { 0, 1 } do
  local t0 = srgeo._clock()
  ps[k] = srgeo.profile(m, X, { preset = "sequential", range = "paper", noise_directions = 0, progress = false, seed = seed })
  print(string.format("seed %d: %d forwards, %.1f s", seed, ps[k].forwards, srgeo._clock() - t0))
end
local lo, hi = math.huge, 0
for s, eta in ipairs(ps[1].scales) do
  local w0, w1 = ps[1].hi[s] - ps[1].lo[s], ps[2].hi[s] - ps[2].lo[s]
  local r = w1 / w0
  lo, hi = math.min(lo, r), math.max(hi, r)
  print(string.format("%3d %9.3g  seed0 %.4g [%.4g %.4g]  seed1 %.4g [%.4g %.4g]  width seed1/seed0 %.3f", s, eta,
    ps[1].median[s], ps[1].lo[s], ps[1].hi[s], ps[2].median[s], ps[2].lo[s], ps[2].hi[s], r))
end
print(string.format("width ratio seed1/seed0 over rungs: %.3f .. %.3f", lo, hi))
