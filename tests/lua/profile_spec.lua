-- profile_spec.lua: srgeo.profile's Lua side: options, ladder, aggregation,
-- bands, descriptors, files, comparison.
local T = ...
local srgeo = require "srgeo"
local stats = require "srgeo.stats"
local nn = srgeo.nn

local function linear_model()
  return nn.sequential { nn.linear { in_features = 12, out_features = 16, seed = 1 },
                         nn.linear { in_features = 16, out_features = 4, seed = 2 } }
end

-- A test's shared options with one case's own on top.
local function merged(common, extra)
  local o = {}
  for k, v in pairs(common) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

local function images(n)
  local X = {}
  for i = 1, n do X[i] = srgeo.rand({ 1, 12 }, i) end
  return X
end

T.test("profile.ladder: paper ladder at 224 and shifted for 32x32x3", function()
  local l = srgeo.profile.ladder(3 * 224 * 224)
  T.eq(#l, 17)
  T.close(l[1], 1e-2, 1e-12)
  T.close(l[17], 1e2, 1e-12)
  local s = srgeo.profile.ladder(3 * 32 * 32)
  T.close(math.log(s[1], 10), -2 - math.log(7, 10), 1e-12)
  T.close(math.log(s[17], 10), 2 - math.log(7, 10), 1e-12)
end)

T.test("profile of a linear model: r = 1 at every rung (float64), CI ordered", function()
  local p = srgeo.profile(linear_model(), images(4), { preset = "quick", jvp_directions = 128,
                                                       precision = "float64", progress = false })
  for s = 1, #p.scales do
    T.close(p.median[s], 1, 1e-6, "rung " .. s)
    T.truthy(p.lo[s] <= p.median[s] + 1e-15 and p.median[s] <= p.hi[s] + 1e-15, "lo <= median <= hi")
  end
  T.eq(p.bump, false)
  T.eq(p.n_images, 4)
end)

T.test("profile: model dtype restored after a float64 run", function()
  local m = linear_model()
  srgeo.profile(m, images(1), { preset = "quick", precision = "float64", progress = false })
  T.eq(m:dtype(), "float32")
end)

T.test("profile: summary, CSV and JSON round trip", function()
  local p = srgeo.profile(linear_model(), images(3), { preset = "quick", label = "lin", progress = false })
  local txt = p:summary()
  T.truthy(txt:find("lin: 3 images", 1, true), txt)
  T.truthy(txt:find("peak_height", 1, true))
  -- their folder made as a figure's is (README's first example writes out/ in a fresh checkout)
  os.execute("rm -rf build/test-profile")
  p:save_csv("build/test-profile/p.csv")
  p:save_json("build/test-profile/p.json")
  local q = srgeo.profile.load("build/test-profile/p.json")
  T.same(q, p, "reloaded")
  T.eq(q.label, "lin")
  -- the paper protocol (unpaired JVPs: moments without a co-moment), per-direction energies
  local pp = srgeo.profile(linear_model(), images(2), { preset = "paper", directions = 8, nscales = 4,
                                                        per_direction = true, progress = false })
  pp:save_json("build/test-profile/pp.json")
  T.same(srgeo.profile.load("build/test-profile/pp.json"), pp, "paper, reloaded")
  local f = io.open("build/test-profile/p.csv")
  local head = f:read("l")
  local n = 0
  for _ in f:lines() do n = n + 1 end
  f:close()
  T.eq(head, "eta,median,lo,hi,mean,r_img1,r_img2,r_img3")
  T.eq(n, #p.scales)
  T.raises(function() srgeo.profile.load("build/test-profile/p.csv") end, "json.decode")
end)

T.test("profile: bad options are clear errors", function()
  local m = linear_model()
  T.raises(function() srgeo.profile(m, images(1), { preset = "papr" }) end, "unknown preset 'papr'")
  T.raises(function() srgeo.profile(m, images(1), { directons = 3 }) end, "unknown option 'directons'")
  T.raises(function() srgeo.profile(m, images(1), { scales = { 1, 0.5 } }) end, "scales must increase")
  T.raises(function() srgeo.profile(m, {}, {}) end, "no images")
  T.raises(function() srgeo.profile(m, images(1), { precision = "half" }) end, "precision must be")
end)

T.test("profile: a bad option value names the option, what it takes and the value", function()
  local m = linear_model()
  local cases = {
    { { ci = -1 }, "profile: ci must be a number in (0, 1), got -1" },
    { { bootstrap = 0 }, "profile: bootstrap must be an integer in 1..1000000, got 0" },
    { { noise_max = -1 }, "profile: noise_max must be a number >= 0, got -1" },
    { { batch = 0 }, "profile: batch must be an integer in 1..1000000, got 0" },
    { { batch = -1 }, "profile: batch must be an integer in 1..1000000, got -1" },
    { { tap = "" }, "profile: tap must be a module path, got ''" },
    { { seq_chunk = 0 }, "profile: seq_chunk must be an integer in 1..1000000, got 0" },
    { { seq_min = -1 }, "profile: seq_min must be an integer in 0..1000000, got -1" },
    { { target_ci = 0 }, "profile: target_ci must be a number in (0, 1), got 0" },
    { { noise_directions = -1 }, "profile: noise_directions must be an integer in 0..1000000, got -1" },
    { { lowpass_sigma = 0 / 0 }, "profile: lowpass_sigma must be a number in [0, 10000], got " },
    { { directions = 2.5 }, "profile: directions must be an integer in 1..1000000, got 2.5" },
    { { jvp_directions = "half" }, "profile: jvp_directions must be an integer in 1..2000000, got 'half'" },
    { { jvp_batch = 0 }, "profile: jvp_batch must be an integer in 1..4096, got 0" },
    { { antipodal = "yes" }, "profile: antipodal must be true or false, got 'yes'" },
    { { range = "sideways" }, "profile: range must be \"auto\" or \"paper\", got 'sideways'" },
    { { alpha = 0.7 }, "profile: alpha must be a number in (0, 0.5], got 0.7" },
    { { seq_between = -1 }, "profile: seq_between must be a number in [0, 1], got -1" },
    { { orthogonal = -3 }, "profile: orthogonal must be an integer in 0..1000000 or false, got -3" },
    { { refine = "yes" }, "profile: refine must be true or false, got 'yes'" },
  }
  for _, c in ipairs(cases) do
    local err = T.raises(function() srgeo.profile(m, images(1), c[1]) end, c[2])
    -- raised at the caller's line, before any image is run
    T.truthy(err:find("profile_spec.lua:%d+: profile: "), err)
  end
  -- the engine reads its options through the same declaration
  local x = images(1)[1]
  T.raises(function() srgeo._profile_image(m, x, { scales = { 1 }, batch = 0 }) end,
    "profile: batch must be an integer in 1..1000000, got 0")
  T.raises(function() srgeo._profile_image(m, x, { scales = { 1 }, tap = "" }) end,
    "profile: tap must be a module path, got ''")
  T.raises(function() srgeo._profile_image(m, x, { scales = { 1 }, directons = 3 }) end,
    "profile: unknown option 'directons'")
  -- jvp_directions above the set's size means the whole set
  local r = srgeo._profile_image(m, x, { scales = { 1 }, directions = 4, jvp_directions = 100, noise_directions = 0 })
  T.eq(#r.jvp_sq, 4)
  local listed = {}
  for _, o in ipairs(srgeo._profile_options()) do listed[o.name] = o end
  T.eq(listed.jvp_directions.what, "an integer in 1..2000000")
  T.eq(listed.jvp_directions.default, "256")
  T.eq(listed.batch.default, "auto")
  T.eq(listed.ci.what, "a number in (0, 1)")
  T.truthy(#listed.target_ci.help > 0, "help text")
end)

T.test("profile.descriptors on a synthetic bump", function()
  local scales, r = {}, {}
  for i = 1, 41 do
    local lx = -2 + (i - 1) * 0.1
    scales[i] = 10 ^ lx
    r[i] = 1 + 2 * math.exp(-((lx - 0.5) / 0.4) ^ 2 / 2) -- peak 3 at 10^0.5, sigma 0.4 decades
  end
  local d = srgeo.profile.descriptors(scales, r)
  T.close(d.plateau, 1, 1e-6)
  T.close(d.peak_height, 3, 1e-3)
  T.close(math.log(d.peak_eta, 10), 0.5, 0.01)
  T.close(d.half_width, 2 * math.sqrt(2 * math.log(2)) * 0.4, 0.02) -- FWHM of the Gaussian
  T.close(d.area, 2 * 0.4 * math.sqrt(2 * math.pi), 0.01)
  T.truthy(d.onset < d.peak_eta, "onset before peak")
  T.truthy(d.decay_slope < 0, "decays after the peak")
end)

T.test("bootstrap CI of the median has near-nominal coverage (simulation)", function()
  -- Per-image values from a lognormal with known median 1.3: the 95% band
  -- of the median should cover it in about 95% of repeated experiments.
  local u = stats.rng(42)
  local function normal()
    local a, b = u(), u()
    return math.sqrt(-2 * math.log(a + 1e-300)) * math.cos(2 * math.pi * b)
  end
  local covered, R = 0, 200
  for rep = 1, R do
    local rows = {}
    for i = 1, 40 do rows[i] = { 1.3 * math.exp(0.3 * normal()) } end
    local boots = stats.bootstrap(rows, function(s) return stats.median(stats.column(s, 1)) end, 400, rep)
    local lo, hi = stats.quantile(boots, 0.025), stats.quantile(boots, 0.975)
    if lo <= 1.3 and 1.3 <= hi then covered = covered + 1 end
  end
  local cov = covered / R
  -- binomial sd at 95% over 200 reps is 1.5%; percentile bootstrap of a
  -- median at n = 40 runs slightly under nominal
  T.truthy(cov > 0.88 and cov <= 1.0, "coverage " .. cov)
end)

T.test("profile.compare: same data gives large p, shifted data small p", function()
  local function fake(shift, seed)
    local u = stats.rng(seed)
    local p = { scales = { 0.1, 1, 10 }, per_image = {}, options = { ci = 0.95, bootstrap = 0, seed = 0 } }
    for i = 1, 20 do
      p.per_image[i] = { 1 + 0.01 * u(), 1.2 + shift + 0.05 * u(), 1.1 + 0.05 * u() }
    end
    return srgeo.profile.aggregate(p)
  end
  local a, b, c = fake(0, 1), fake(0, 2), fake(0.5, 3)
  local same = srgeo.profile.compare(a, b, { permutations = 200 })
  local diff = srgeo.profile.compare(a, c, { permutations = 200 })
  T.truthy(diff.p.curve < 0.01, "shifted: p = " .. diff.p.curve)
  T.truthy(diff.p.peak_height < 0.01, "shifted peak height: p = " .. diff.p.peak_height)
  T.truthy(same.p.curve > 0.01, "same distribution: p = " .. same.p.curve)
  -- a descriptor one profile lacks (a rise has no decay) prints as undefined, not "nan -nan"
  local u = stats.rng(4)
  local r = { scales = { 0.1, 1, 10 }, per_image = {}, options = { ci = 0.95, bootstrap = 0, seed = 0 } }
  for i = 1, 20 do r.per_image[i] = { 1 + 0.01 * u(), 1.3 + 0.05 * u(), 1.9 + 0.05 * u() } end
  local rc = srgeo.profile.compare(a, srgeo.profile.aggregate(r), { permutations = 50 })
  T.truthy(rc.statistic.decay_slope ~= rc.statistic.decay_slope, "decay_slope undefined for the rise")
  local text = tostring(rc)
  T.truthy(text:find("decay_slope%s+undefined%s+%(in one profile or both%)"), text)
  T.truthy(not text:lower():find("nan", 1, true), text)
  local html = require("srgeo.html").rich(rc)
  T.truthy(html:find("undefined", 1, true) and not html:lower():find(">%-?nan<"), html)
end)

T.test("profile direction families: lowpass, toward, jacobian_top, gradient, user", function()
  local m = nn.sequential { nn.flatten {}, nn.linear { in_features = 3 * 8 * 8, out_features = 5, seed = 1 } }
  m:double()
  local X = { srgeo.rand({ 1, 3, 8, 8 }, 1):double(), srgeo.rand({ 1, 3, 8, 8 }, 2):double() }
  local common = { preset = "quick", precision = "float64", progress = false }
  local function with(extra) return srgeo.profile(m, X, merged(common, extra)) end
  -- every family of a linear map gives r = 1 when the JVPs cover the set
  for _, o in ipairs {
    { family = "lowpass", lowpass_sigma = 1.5, jvp_directions = "all" },
    { family = "toward", toward = { X[2], X[1] } },
    { family = "jacobian_top", k = 3, iters = 10 },
    { family = "user", user_directions = srgeo.randn({ 4, 3, 8, 8 }, 5):double() },
  } do
    local p = with(o)
    for s = 1, #p.scales do T.close(p.median[s], 1, 1e-6, o.family .. " rung " .. s) end
  end
  T.raises(function() with { family = "towards" } end, "unknown family 'towards'")
  T.raises(function() with { family = "toward" } end, "needs opts.toward")
  T.raises(function() with { family = "gradient" } end, "needs opts.labels")
end)

T.test("orthogonal blocks: the mean JVP energy of a linear map varies (d - k)/(d - 1) as much as with independent directions", function()
  -- u·Au summed over an orthonormal basis is tr(A): within a block of k in d
  -- dimensions the covariance of two terms is -Var/(d - 1), so the block
  -- mean's variance shrinks by (d - k)/(d - 1) (here 4/11)
  local d, k, R = 12, 8, 400
  local lin = nn.linear { in_features = d, out_features = 5, seed = 2 }
  lin:double()
  local x = srgeo.rand({ 1, d }, 1):double()
  local function var(block)
    local v = {}
    for s = 1, R do
      v[s] = srgeo.profile(lin, { x }, { preset = "quick", directions = k, orthogonal = block, scales = { 1 },
        precision = "float64", seed = s, progress = false, noise_directions = 0 }).jac_energy[1]
    end
    return stats.sd(v) ^ 2
  end
  local ratio, want = var(k) / var(0), (d - k) / (d - 1)
  -- the sampling error of a variance over 400 draws is ~7%, of the ratio ~10%
  T.truthy(math.abs(ratio / want - 1) < 0.3, string.format("variance ratio %.3f, exact %.3f", ratio, want))
  print(string.format("     variance ratio %.3f, exact %.3f", ratio, want))
end)

T.test("profile: Hutchinson Jacobian norm matches the exact Frobenius norm of a linear map", function()
  local lin = nn.linear { in_features = 12, out_features = 5, seed = 2 }
  lin:double()
  local W = lin:get("weight")
  local fro = W:norm()
  local p = srgeo.profile(lin, { srgeo.rand({ 1, 12 }, 1):double() },
    { directions = 512, jvp_directions = 1024, scales = { 1 }, precision = "float64", progress = false })
  local h = p.jacobian_fro[1]
  T.truthy(h.lo <= fro and fro <= h.hi, string.format("CI [%g, %g] misses %g", h.lo, h.hi, fro))
  T.close(h.value, fro, 0.05)
end)

T.test("profile: Ctrl-C stops cleanly and keeps the images already done", function()
  local bin = T.shell() or "build/srgeo"
  os.execute("mkdir -p build/test-profile && rm -f build/test-profile/int.json build/test-profile/ready")
  local script = [[
    local nn = srgeo.nn
    local m = nn.sequential { nn.linear { in_features = 64, out_features = 64 }, nn.relu {},
                              nn.linear { in_features = 64, out_features = 8 } }
    local X = {}
    for i = 1, 100000 do X[i] = srgeo.rand({ 1, 64 }, i) end
    io.open("build/test-profile/ready", "w"):close()
    local p = srgeo.profile(m, X, { preset = "quick", progress = false })
    p:save_json("build/test-profile/int.json")
  ]]
  local f = io.open("build/test-profile/int.lua", "w")
  f:write(script)
  f:close()
  local cmd = string.format([[
    %s build/test-profile/int.lua 2>build/test-profile/int.err & pid=$!
    for i in $(seq 100); do [ -f build/test-profile/ready ] && break; sleep 0.1; done
    sleep 1; kill -INT $pid; wait $pid]], bin)
  os.execute(cmd)
  local p = srgeo.profile.load("build/test-profile/int.json")
  T.eq(p.interrupted, true)
  T.truthy(p.n_images > 0 and p.n_images < 100000, "kept " .. tostring(p.n_images))
  T.eq(#p.per_image, p.n_images)
  local err = io.open("build/test-profile/int.err"):read("a")
  T.truthy(err:find("interrupted after", 1, true), err)
end)

-- hooks: images report their first stage's state; a profile resumed from
-- images 1..k (through JSON, as srgeo.cache keeps them) is the uninterrupted
-- one field by field, also when range "auto" adds rungs after the first
-- stage; a sequential profile (its images close together) reports none.
T.test("profile hooks: resumed from k images' states equals the uninterrupted run; sequential reports no image", function()
  local json = require "srgeo.json"
  local m = nn.sequential { nn.linear { in_features = 12, out_features = 16, seed = 3 }, nn.relu {},
                            nn.linear { in_features = 16, out_features = 4, seed = 4 } }
  local X = images(6)
  local o = { preset = "quick", directions = 16, nscales = 6, range = "auto", bootstrap = 50, progress = false }
  local kept, k = {}, 3
  local full = srgeo.profile(m, X, o, { on_image = function(p, i)
    if i <= k then kept[i] = json.decode(json.encode(p._state[i])) end
    kept.totals = kept.totals or (i == k and { forwards = p.forwards, exact_pairs = p.exact_pairs,
                                               shared_layers = p.shared_layers }) or nil
  end })
  T.truthy(#full.scales > 6, "range auto added rungs: " .. #full.scales)
  local resume = { n_images = k, _state = kept, forwards = kept.totals.forwards, exact_pairs = kept.totals.exact_pairs,
                   shared_layers = kept.totals.shared_layers }
  local again = srgeo.profile(m, X, o, { resume = resume })
  full.seconds, again.seconds = 0, 0
  T.same(again, full, "resumed")
  resume._state[2] = nil
  T.raises(function() srgeo.profile(m, X, o, { resume = resume }) end, "lacks image 2's state")
  local called = 0
  srgeo.profile(m, X, { preset = "sequential", nscales = 4, directions = 64, progress = false },
    { on_image = function() called = called + 1 end })
  T.eq(called, 0, "a sequential profile reports no image")
end)

T.test("the shipped trained encoder has a bump; its random-init twin rises (range auto, refine)", function()
  local path = srgeo.root .. "/models/shipped/small_resnet.safetensors"
  if not io.open(path) then T.skip("no shipped small_resnet") end
  local trained = srgeo.models.load(path)
  local init = srgeo.models.small_resnet { seed = 3 }
  init:eval()
  local X = srgeo.data.fashion_mnist { split = "test" }:sample(16, 1)
  local o = { preset = "quick", directions = 8, nscales = 9, progress = false, noise_directions = 4,
              range = "auto", refine = true, bootstrap = 400 }
  local pt, pi = srgeo.profile(trained, X, o), srgeo.profile(init, X, o)
  T.eq(pt.shape.class, "bump", pt.shape.text)
  T.eq(pt.bump, true)
  -- the decay is seen inside the paper ladder: nothing added, two rungs refined around the peak
  T.eq(pt.range.stop, "decided")
  T.eq(pt.range.added, 0)
  T.eq(pt.range.refined, 2)
  T.eq(#pt.scales, 11)
  T.truthy(pt.descriptors.peak_height.value > 1.5, "peak " .. pt.descriptors.peak_height.value)
  -- the twin keeps rising: extended to the physical bound (per-pixel RMS >= 1), no bump
  T.truthy(pi.shape.class ~= "bump", pi.shape.text)
  T.eq(pi.range.stop, "bound")
  T.truthy(pi.range.added >= 1 and pi.range.top_rms >= 1, "top rms " .. pi.range.top_rms)
  T.truthy(pi.scales[#pi.scales] / math.sqrt(784) >= 1 and pi.scales[#pi.scales - 1] / math.sqrt(784) < 1, "stops at the first rung past RMS 1")
  -- paired JVPs: both plateaus at 1
  T.truthy(math.abs(pt.median[1] - 1) < 0.01 and math.abs(pi.median[1] - 1) < 0.01, "both plateaus near 1")
  local c = srgeo.profile.compare(pt, pi, { permutations = 200 })
  T.eq(#c.scales, 9, "compared over the shared rungs")
end)

T.test("profile: JVPs past the base directions are their base's (J(-u) = -Ju): not run, not counted as samples", function()
  local m = nn.sequential { nn.linear { in_features = 12, out_features = 32, seed = 1 }, nn.relu {},
                            nn.linear { in_features = 32, out_features = 6, seed = 2 } }
  -- the subgradient rule: −u's JVP is −Ju (the directional rule's are run, below)
  local o = { directions = 8, jvp_batch = 4, scales = { 0.5, 2 }, noise_directions = 0, progress = false,
              directional = false }
  local half = srgeo.profile(m, images(1), merged(o, { jvp_directions = 8 }))
  local all = srgeo.profile(m, images(1), merged(o, { jvp_directions = 16 }))
  -- primal + 2 stacks of 1 + 4 rows + 16 directions x 2 rungs, either way
  T.eq(half.forwards, 1 + 2 * 5 + 32)
  T.eq(all.forwards, half.forwards)
  for s = 1, 2 do T.eq(all.per_image[1][s], half.per_image[1][s], "rung " .. s) end
  T.eq(all.jacobian_fro[1].value, half.jacobian_fro[1].value)
  T.eq(all.jacobian_fro[1].probes, 8)
  -- exact_relu's boundary walk has every base direction's JVP: none more
  local ex = srgeo.profile(m, images(1), merged(o, { jvp_directions = 16, exact_relu = true }))
  T.eq(ex.forwards, 1 + 2 * 5 + 32 - ex.exact_pairs)
  T.eq(ex.jacobian_fro[1].value, half.jacobian_fro[1].value)
  for s = 1, 2 do T.close(ex.per_image[1][s], half.per_image[1][s], 1e-6, "rung " .. s) end
end)

T.test("profile: the directional rule runs -u's own JVP, stacked with u's; without ties the same r", function()
  local m = nn.sequential { nn.linear { in_features = 12, out_features = 32, seed = 1 }, nn.relu {},
                            nn.linear { in_features = 32, out_features = 6, seed = 2 } }
  local o = { directions = 8, jvp_batch = 4, jvp_directions = 8, scales = { 0.5, 2 }, noise_directions = 0,
              progress = false }
  local dir = srgeo.profile(m, images(1), o)
  local sub = srgeo.profile(m, images(1), merged(o, { directional = false }))
  T.eq(dir.options.directional, true)
  T.truthy(dir.estimator.jvp_rule:find("directional", 1, true), dir.estimator.jvp_rule)
  T.truthy(sub.estimator.jvp_rule:find("subgradient", 1, true), sub.estimator.jvp_rule)
  -- primal + 4 stacks of 1 + 2 directions x 2 signs + 16 directions x 2 rungs
  T.eq(dir.forwards, 1 + 4 * 5 + 32)
  T.eq(dir.ties[1], 0)
  for s = 1, 2 do T.eq(dir.per_image[1][s], sub.per_image[1][s], "rung " .. s) end
  T.truthy(dir:summary():find("JVP rule: directional", 1, true))
  T.truthy(sub:summary():find("subgradient", 1, true))
end)

-- A ReLU net on an input with exact zeros into its ReLUs: the directional
-- rule's r is 1 at tiny η (paired directions), the subgradient's is not,
-- and the ties are counted per image.
T.test("profile: at ties the directional rule gives r = 1 at tiny eta, the subgradient r != 1", function()
  local m = nn.sequential { nn.relu {}, nn.linear { in_features = 12, out_features = 6, seed = 2 } }
  -- six inputs exactly 0 (the ReLU's kink), the others in [0.1, 1)
  local x = srgeo.rand({ 1, 12 }, 3) * 0.9 + 0.1
  for j = 1, 6 do x:set(0, 1, 2 * j) end
  local o = { preset = "quick", directions = 32, scales = { 1e-4, 1e-3 }, noise_directions = 0, progress = false,
              precision = "float64" }
  local dir = srgeo.profile(m, { x, srgeo.rand({ 1, 12 }, 4) * 0.9 + 0.1 }, o)
  local sub = srgeo.profile(m, { x }, merged(o, { directional = false }))
  T.eq(dir.ties[1], 6)
  T.eq(dir.ties[2], 0)
  T.eq(sub.ties[1], 0)
  for s = 1, 2 do
    T.close(dir.per_image[1][s], 1, 1e-6, "directional, rung " .. s)
    T.truthy(math.abs(sub.per_image[1][s] - 1) > 0.1, "subgradient r " .. sub.per_image[1][s])
  end
  T.truthy(dir:summary():find("ties: 1 of 2 images (6 units/windows", 1, true), dir:summary())
end)

-- The float64 check behind every call: the JVP energies of the noise
-- directions against a float64 one-sided forward difference (forwards only).
-- On the tie input above the directional rule agrees with it, the
-- subgradient misses by as much as its r misses 1; float32 and float64 runs
-- both check; without noise directions nothing is checked and the summary
-- says so.
T.test("profile: the float64 forward-difference check: the directional JVP agrees, the subgradient's does not", function()
  local m = nn.sequential { nn.relu {}, nn.linear { in_features = 12, out_features = 6, seed = 2 } }
  local x = srgeo.rand({ 1, 12 }, 3) * 0.9 + 0.1
  for j = 1, 6 do x:set(0, 1, 2 * j) end
  -- every direction checked (32 with antipodes): the check's set is r's own
  local o = { preset = "quick", directions = 32, scales = { 1e-4, 1e-3 }, noise_directions = 64, progress = false }
  for _, prec in ipairs { "float32", "float64" } do
    local dir = srgeo.profile(m, { x }, merged(o, { precision = prec }))
    local sub = srgeo.profile(m, { x }, merged(o, { precision = prec, directional = false }))
    T.truthy(math.abs(dir.fd_jvp[1]) < 1e-6, prec .. " directional vs forward difference " .. dir.fd_jvp[1])
    T.truthy(math.abs(sub.fd_jvp[1]) > 0.05, prec .. " subgradient vs forward difference " .. sub.fd_jvp[1])
    T.close(1 + sub.fd_jvp[1], 1 / sub.per_image[1][1], 1e-3, prec .. ": the subgradient's r is off 1 by as much")
    T.truthy(dir:summary():find("float64 check: the JVP energies of 1 images lie within", 1, true), dir:summary())
  end
  local none = srgeo.profile(m, { x }, merged(o, { noise_directions = 0 }))
  T.truthy(none.fd_jvp[1] ~= none.fd_jvp[1], "not checked: NaN")
  T.truthy(none:summary():find("float64 check: none", 1, true), none:summary())
end)

T.test("profile: points without a one-sided derivative are counted and the summary warns", function()
  -- sqrt(|x|) at x = 0: abs has a kink there (a tie), sqrt an infinite slope (singular)
  local m = nn.sequential { nn.abs {}, nn.sqrt {}, nn.linear { in_features = 12, out_features = 3, seed = 2 } }
  local x = srgeo.rand({ 1, 12 }, 3) + 0.5
  x:set(0, 1, 4)
  local p = srgeo.profile(m, { x, srgeo.rand({ 1, 12 }, 4) + 0.5 },
                          { preset = "quick", directions = 8, scales = { 1e-3 }, noise_directions = 0, progress = false })
  T.eq(p.singular[1], 1)
  T.eq(p.ties[1], 1)
  T.eq(p.singular[2], 0)
  T.truthy(p:summary():find("WARNING: 1 points without a finite one-sided derivative", 1, true), p:summary())
  local clean = srgeo.profile(m, { srgeo.rand({ 1, 12 }, 4) + 0.5 },
                              { preset = "quick", directions = 8, scales = { 1e-3 }, noise_directions = 0, progress = false })
  T.truthy(not clean:summary():find("WARNING", 1, true), clean:summary())
end)

-- Sequential mode: steps of directions, each rung closing on its own.
-- The forwards a profile reports, from what it says it ran: per engine call
-- (p.steps[i]: the base directions of each) the primal, the stacked JVPs
-- (one primal row per stack of jvp_k, plus the tangents), then one
-- perturbed forward per direction and rung evaluated (no noise check); a
-- float64 run's first call checks its JVPs against a forward difference:
-- one row per noise direction (antipodes included).
local function seq_forwards(p, jvp_k)
  local n = 0
  if p.options.precision == "float64" then
    local nd, mult = p.options.noise_directions or 0, p.options.antipodal and 2 or 1
    for i = 1, p.n_images do n = n + mult * math.min((nd + mult - 1) // mult, p.steps[i][1]) end
  end
  -- the directional rule stacks u and −u: jvp_k / 2 base directions a stack
  local both = p.options.directional and p.options.antipodal
  local k, signs = both and math.max(1, jvp_k // 2) or jvp_k, both and 2 or 1
  for i = 1, p.n_images do
    for _, nb in ipairs(p.steps[i]) do n = n + 1 + (nb + k - 1) // k + signs * nb end
    for _, k in ipairs(p.rung_directions[i]) do n = n + k end
  end
  return n
end

T.test("sequential: a linear model gives r = 1 at every rung, each closed after one chunk", function()
  local p = srgeo.profile(linear_model(), images(1), { preset = "sequential", directions = 256,
                                                       precision = "float64", progress = false })
  for s = 1, #p.scales do
    T.close(p.median[s], 1, 1e-6, "rung " .. s)
    T.eq(p.rung_directions[1][s], 64, "rung " .. s)
    T.truthy(p.ci[1][s] < 1e-6, "ci " .. p.ci[1][s])
  end
  T.eq(p.directions_used[1], 64)
  T.eq(p.forwards, seq_forwards(p, 16))
  T.eq(p.closed_by[1][1], "paper")
end)

T.test("sequential: converged rungs stop early; r agrees with the paper preset within the CIs", function()
  local m = srgeo.models.mlp { seed = 2 }
  m:eval()
  local X = { srgeo.rand({ 1, 1, 28, 28 }, 3) }
  local common = { directions = 256, noise_directions = 0, progress = false, nscales = 9, per_direction = true }
  local function with(extra) return srgeo.profile(m, X, merged(common, extra)) end
  local pap = with { preset = "paper", jvp_directions = 256 }
  local worst = 0
  for _, c in ipairs(pap.ci[1]) do worst = math.max(worst, c) end
  local seq = with { preset = "sequential", target_ci = worst }
  local rd, ns = seq.rung_directions[1], #seq.scales
  -- the plateau closes after one chunk, the far rungs need more
  T.eq(rd[1], 64)
  T.truthy(rd[ns] > rd[1], "last rung " .. rd[ns])
  T.eq(seq.directions_used[1], math.max(table.unpack(rd)))
  T.eq(seq.forwards, seq_forwards(seq, 16))
  T.truthy(seq.forwards < pap.forwards / 3, seq.forwards .. " vs " .. pap.forwards)
  for s = 1, ns do
    local a, b = pap.per_image[1][s], seq.per_image[1][s]
    T.truthy(seq.ci[1][s] <= worst, "rung " .. s .. " ci " .. seq.ci[1][s])
    T.truthy(math.abs(a - b) <= pap.ci[1][s] * a + seq.ci[1][s] * b,
      string.format("rung %d: paper %.5f, sequential %.5f", s, a, b))
    -- per-direction energies: NaN exactly where a rung stopped
    local row, nan = seq.per_direction[1][s], 0
    for _, v in ipairs(row) do if v ~= v then nan = nan + 1 end end
    T.eq(nan, #row - rd[s], "rung " .. s)
  end
end)

T.test("sequential over images: each rung closes by its stated rule", function()
  local m = srgeo.models.mlp { hidden = { 32 }, input = { 1, 8, 8 }, seed = 4 }
  m:eval()
  local X = srgeo.data.noise { n = 8, shape = { 1, 8, 8 }, seed = 2, kind = "uniform" }
  local p = srgeo.profile(m, X, { preset = "sequential", directions = 256, nscales = 9, progress = false,
                                  noise_directions = 0 })
  local seen = {}
  for i = 1, p.n_images do
    for s = 1, #p.scales do
      local why, rs = p.closed_by[i][s], p.rung_directions[i][s]
      seen[why] = true
      T.truthy(why == "paper" or why == "between" or why == "cap", "rule " .. tostring(why))
      if why == "paper" then
        -- its CI at most half the paper protocol's, predicted from its own moments
        local ref = srgeo._rung_estimate(p.moments[i][s], p.scales[s], 1024, 256)
        T.truthy(p.ci[i][s] <= 0.5 * ref.ci + 1e-12, string.format("image %d rung %d: ci %g, paper's %g", i, s, p.ci[i][s], ref.ci))
      elseif why == "cap" then
        T.eq(rs, 512, "a rung at the cap used every direction")
      end
      T.eq(p.moments[i][s].n * 2, rs, "the moments rest on the rung's directions")
    end
  end
  T.truthy(seen.paper, "the paper match closes some rungs")
  T.truthy(p.estimator.rule:find("1/4", 1, true) and p.estimator.rule:find("1/2", 1, true), p.estimator.rule)
end)

T.test("sequential with exact_relu: same r, fewer forwards", function()
  local m = nn.sequential { nn.linear { in_features = 12, out_features = 32, seed = 1 }, nn.relu {},
                            nn.linear { in_features = 32, out_features = 6, seed = 2 } }
  m:double()
  local o = { preset = "sequential", directions = 512, precision = "float64", progress = false, target_ci = 0.01,
              scales = srgeo.util.logspace(-3, 1, 9) }
  local p1 = srgeo.profile(m, images(1), o)
  o.exact_relu = true
  local p2 = srgeo.profile(m, images(1), o)
  for s = 1, 9 do
    T.close(p2.per_image[1][s], p1.per_image[1][s], 1e-9, "rung " .. s)
    T.eq(p2.rung_directions[1][s], p1.rung_directions[1][s], "rung " .. s)
  end
  T.truthy(p2.exact_pairs > 0, "some pairs solved exactly")
  T.truthy(p2.forwards < p1.forwards, p2.forwards .. " vs " .. p1.forwards)
end)

T.test("share_prefix: normalize → conv1 → bn1 run once per direction, same energies; a tap inside cuts it", function()
  local m = srgeo.models.resnet20 {}
  m:eval()
  m:double()
  local X = { srgeo.rand({ 1, 3, 16, 16 }, 5):double() }
  local o = { preset = "quick", directions = 3, per_direction = true, progress = false, precision = "float64" }
  local function energies(extra)
    local p = srgeo.profile(m, X, merged(o, extra))
    return p.per_direction[1], p.shared_layers, p.forwards
  end
  local ref, none, f_ref = energies { share_prefix = false }
  T.eq(none, 0)
  for _, case in ipairs { { {}, 3 }, { { tap = "conv1" }, 1 } } do
    local want = case[1].tap and energies { share_prefix = false, tap = case[1].tap } or ref
    local got, shared, f = energies(case[1])
    T.eq(shared, case[2], "shared layers")
    T.eq(f, f_ref, "forwards count the rows")
    for s = 1, #got do
      for i, v in ipairs(want[s]) do
        T.truthy(math.abs(got[s][i] - v) <= 1e-9 * v, ("rung %d direction %d: %.17g vs %.17g"):format(s, i, got[s][i], v))
      end
    end
  end
end)

-- A graph's prefix: its leading affine nodes, up to the last value through
-- which alone the input reaches the rest (a later node reading the input or
-- an earlier value cuts it there).
T.test("share_prefix on nn.graph: the leading affine nodes that cut the graph, same energies", function()
  local function lin(i, o, seed) return nn.linear { in_features = i, out_features = o, seed = seed } end
  local graphs = {
    { 3, nn.graph { { "a", lin(12, 8, 1) }, { "b", lin(8, 8, 2) }, { "s", nn.add {}, { "a", "b" } }, { "r", nn.relu {} },
                    { "o", lin(8, 3, 3) } } },
    { 0, nn.graph { { "a", lin(12, 8, 1) }, { "r", nn.relu {} }, { "skip", lin(12, 8, 2), "input" },
                    { "s", nn.add {}, { "r", "skip" } }, { "o", lin(8, 3, 3) } } },
    { 1, nn.graph { { "a", lin(12, 8, 1) }, { "b", lin(8, 8, 2) }, { "r", nn.relu {}, "a" },
                    { "s", nn.add {}, { "r", "b" } }, { "o", lin(8, 3, 3) } } },
  }
  local X = { srgeo.rand({ 1, 12 }, 5):double() }
  local o = { preset = "quick", directions = 3, per_direction = true, progress = false, precision = "float64" }
  for gi, c in ipairs(graphs) do
    local m = c[2]
    m:double()
    local ref = srgeo.profile(m, X, merged(o, { share_prefix = false }))
    local got = srgeo.profile(m, X, o)
    T.eq(ref.shared_layers, 0)
    T.eq(got.shared_layers, c[1], "graph " .. gi .. ": shared layers")
    for s = 1, #got.per_direction[1] do
      for i, v in ipairs(ref.per_direction[1][s]) do
        local w = got.per_direction[1][s][i]
        T.truthy(math.abs(w - v) <= 1e-9 * v, ("graph %d rung %d direction %d: %.17g vs %.17g"):format(gi, s, i, w, v))
      end
    end
  end
end)

T.test("p.noise bounds the float32 error of r over the whole direction set (float64 run), 1 and 2 threads", function()
  -- the fast version of tests/bench/bench_noise.lua: small models, 32
  -- directions ± (8 checked in float64), a tiny rung (float32 cancellation)
  -- and a mid one, paired and unpaired (the paper's 16 JVPs)
  local models = { { "mlp@init", srgeo.models.mlp { seed = 1 } } }
  for _, name in ipairs { "small_vgg", "small_resnet" } do
    local path = srgeo.root .. "/models/shipped/" .. name .. ".safetensors"
    if io.open(path) then models[#models + 1] = { name, srgeo.models.load(path) } end
  end
  local X = srgeo.data.fashion_mnist { split = "test" }:sample(2, 5)
  local threads = srgeo.threads()
  local cases, worst = 0, math.huge
  for _, mm in ipairs(models) do
    local m = mm[2]
    m:eval()
    for _, paired in ipairs { true, false } do
      local o = { directions = 32, jvp_directions = 16, paired = paired, noise_directions = 8, scales = { 1e-3, 1 },
                  progress = false, bootstrap = 1 }
      local q = merged(o, { precision = "float64", noise_directions = 0 })
      local p64 = srgeo.profile(m, X, q)
      m:float()
      for _, th in ipairs { 1, 2 } do
        srgeo.threads(th)
        local p32 = srgeo.profile(m, X, o)
        for i = 1, #X do
          for s = 1, 2 do
            local a, b = p32.moments[i][s], p64.moments[i][s]
            local actual = math.abs((a.d_mean / a.j_mean) / (b.d_mean / b.j_mean) - 1)
            local bound = p32.noise[i][s]
            cases = cases + 1
            T.truthy(bound >= actual, string.format("%s paired %s, %d threads, image %d, η %g: p.noise %.3g < float32 "
              .. "error %.3g", mm[1], tostring(paired), th, i, o.scales[s], bound, actual))
            if actual > 0 then worst = math.min(worst, bound / actual) end
          end
        end
      end
    end
  end
  srgeo.threads(threads)
  print(string.format("     %d cases, smallest p.noise / float32 error %.3g", cases, worst))
end)

T.test("p.noise: the sequential estimator's first step bounds without the finite-population correction", function()
  -- every direction checked: the fixed estimator's bound is the exact error;
  -- the sequential one's first step (here all 16 directions, the cap) keeps
  -- the sampling term, since its rungs may take more directions later
  local m = srgeo.models.mlp { seed = 2 }
  m:eval()
  local X = srgeo.data.fashion_mnist { split = "test" }:sample(1, 3)
  local o = { preset = "quick", directions = 16, noise_directions = 32, scales = { 1e-3 }, progress = false,
              bootstrap = 1, orthogonal = 0 }
  local fixed = srgeo.profile(m, X, o)
  local seq = srgeo.profile(m, X, merged(o, { preset = "sequential", seq_chunk = 16 }))
  T.eq(seq.rung_directions[1][1], 32, "the sequential run rests on the same 16 directions ±")
  T.close(seq.median[1], fixed.median[1], 1e-12)
  T.truthy(seq.noise[1][1] > 1.5 * fixed.noise[1][1], string.format("sequential %.3g, fixed %.3g", seq.noise[1][1],
    fixed.noise[1][1]))
end)

T.test("progress: every stage of sequential and range auto reports, with the whole profile's forecast", function()
  local m = srgeo.models.mlp { hidden = { 16 } }
  local X = srgeo.rand({ 4, 1, 28, 28 }, 3)
  for _, preset in ipairs { "sequential", "quick" } do
    local log = {}
    local p = srgeo.profile(m, X, { preset = preset, nscales = 5, directions = 64, range = "auto",
      progress = function(info) log[#log + 1] = info end })
    T.truthy(p.range.added >= 1, preset .. ": range auto added a rung")
    local stages, first_end = {}, nil
    for _, l in ipairs(log) do
      T.truthy(l.total >= l.done - 1e-9 and l.done >= 0, preset .. ": done within the forecast")
      if l.stage:find("^first stage") then first_end = l end
      if l.stage:find("step %d") then stages.step = true end
      if l.stage:find("^range auto: rung") then stages.rung = true end
    end
    T.truthy(first_end and first_end.stage:find("≤ %d+ more rungs"), preset .. ": the first stage counts the rungs to come")
    -- at the end of the first stage the forecast already holds the added rungs
    T.truthy(first_end.total > first_end.done, preset .. ": forecast beyond the first stage: " .. first_end.total)
    T.truthy(first_end.total > 0.6 * p.forwards and first_end.total < 1.6 * p.forwards,
      string.format("%s: the forecast at the first stage's end (%g) is within 0.6..1.6 of the passes run (%d)", preset,
        first_end.total, p.forwards))
    if preset == "sequential" then T.truthy(stages.step, "sequential steps report") end
    T.truthy(stages.rung, preset .. ": the added rungs report")
    T.eq(log[#log].done, p.forwards, preset .. ": the last report is the whole profile")
    T.eq(log[#log].total, p.forwards, preset .. ": ... and its forecast has met it")
  end
end)

T.test("profile emulate_bf16: the bf16 error of a linear model's r, bounded by the float64 check", function()
  -- a linear model: r is 1 in float32 and float64; bf16's rounding of the
  -- rows moves it by far more than float32 at the smallest rung, and the
  -- float64 check (every direction: the exact error) sees it
  local o = { preset = "quick", directions = 8, noise_directions = 16, noise_max = math.huge, progress = false,
              scales = { 1e-3, 1 } }
  local pb = srgeo.profile(linear_model(), images(2), merged(o, { emulate_bf16 = true }))
  local p32 = srgeo.profile(linear_model(), images(2), o)
  for i = 1, 2 do
    T.truthy(math.abs(pb.per_image[i][1] - 1) > 1e-2, "bf16 r at 1e-3: " .. pb.per_image[i][1])
    T.close(pb.noise[i][1], math.abs(pb.per_image[i][1] - 1), 1e-3)
    T.truthy(p32.noise[i][1] < 1e-2, "float32 noise at 1e-3: " .. p32.noise[i][1])
  end
  T.raises(function()
    srgeo.profile(linear_model(), images(1), merged(o, { emulate_bf16 = true, precision = "float64" }))
  end, "needs a float32 model")
end)

T.test("progress: with util.live set (srgeo kernel's hook) the bar is one line shown in place, its last line 'done'", function()
  local util = require "srgeo.util"
  local m = srgeo.models.mlp { hidden = { 16 } }
  local X = srgeo.rand({ 4, 1, 28, 28 }, 3)
  local shown, labels, done = {}, {}, 0
  local saved = util.live
  util.live = function(label)
    labels[#labels + 1] = label
    return { show = function(text) shown[#shown + 1] = text end, done = function() done = done + 1 end }
  end
  local ok, err = pcall(srgeo.profile, m, X, { preset = "quick", nscales = 5, directions = 64 })
  util.live = saved
  T.truthy(ok, tostring(err))
  T.same(labels, { "profile" })
  T.eq(done, 1, "done once")
  T.truthy(#shown >= 2, "shown")
  T.truthy(shown[1]:find("^profile %[[#.]+%] %d+%%"), "a bar: " .. shown[1])
  T.truthy(shown[#shown]:find("^profile: done in %d"), "the last line: " .. tostring(shown[#shown]))
  for _, s in ipairs(shown) do T.truthy(not s:find("[\r\n\27]"), "a line, no terminal codes: " .. s) end
end)
