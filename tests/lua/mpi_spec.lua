-- mpi_spec.lua: srgeo.mpi and the scale-out on Open MPI (core/lua/mpi.c,
-- core/mpi/comm.c, lua/srgeo/mpi.lua): one process without mpirun, the
-- collectives and the hand-out on 2 and 3 ranks, srgeo.profile and a script
-- sweep sharded with outputs identical to one process, a killed rank and
-- the resume, threads per rank, stock lua5.4.
--
-- Every run here sets SRGEO_THREADS=1: srgeo's results are identical for a
-- fixed seed and thread count (README, Threads), so one process and N ranks
-- agree bit for bit when they run the same threads per process.
local T = ...
local srgeo = require "srgeo"
local mpi = require "srgeo.mpi"

local ROOT = "build/test-mpi"
local function exe() return T.shell() or "build/srgeo" end
local MPIRUN = "mpirun --allow-run-as-root --oversubscribe"
-- Under make sanitize, the ranks' leak check is off: Open MPI 4.1.4 leaves
-- allocations of its plugins at exit, reported from frames LeakSanitizer
-- cannot name (tests/lsan.supp cannot suppress them).  ASan's and UBSan's
-- other checks stay on, and srgeo's own code is leak-checked in one process.
if T.under_asan() then
  MPIRUN = "ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0 " .. MPIRUN
end
local ENV = "SRGEO_THREADS=1"

local function run(cmd) return T.sh(ENV .. " " .. cmd) end
local function mpirun(n, args, env) return T.sh(string.format("%s %s %s -np %d %s", ENV, env or "", MPIRUN, n, args)) end

local function fresh(name)
  local d = ROOT .. "/" .. name
  os.execute("rm -rf " .. d .. " && mkdir -p " .. d)
  return d
end

-- Deep equality, numbers compared bit for bit (NaN equal to itself).
local function same(a, b, path)
  path = path or "value"
  if type(a) ~= type(b) then return false, path .. ": " .. type(a) .. " vs " .. type(b) end
  if type(a) == "number" then
    if math.type(a) ~= math.type(b) or string.format("%a", a) ~= string.format("%a", b) then
      return false, string.format("%s: %s vs %s", path, tostring(a), tostring(b))
    end
    return true
  end
  if type(a) == "userdata" then
    if a:dtype() ~= b:dtype() or tostring(a:shape()) ~= tostring(b:shape()) then return false, path .. ": tensor shape" end
    local fa, fb = a:reshape({ a:numel() }), b:reshape({ b:numel() })
    for i = 1, #fa do
      if string.format("%a", fa:get(i)) ~= string.format("%a", fb:get(i)) then return false, path .. ": tensor entry " .. i end
    end
    return true
  end
  if type(a) ~= "table" then return a == b, path end
  for k, v in pairs(a) do
    local ok, w = same(v, b[k], path .. "." .. tostring(k))
    if not ok then return false, w end
  end
  for k in pairs(b) do if a[k] == nil then return false, path .. "." .. tostring(k) .. " missing" end end
  return true
end

local function unpack_file(path)
  local s = T.read(path)
  T.truthy(s, "no file " .. path)
  return srgeo._mpi.unpack(s)
end

-- ---------------------------------------------------------------------------

T.test("mpi: without mpirun one process: rank 0 of 1, collectives return their argument, libmpi not loaded", function()
  T.eq(mpi.rank(), 0)
  T.eq(mpi.size(), 1)
  T.eq(mpi.active(), false)
  T.eq(mpi.root(), true)
  local t = { a = 1 }
  T.eq(mpi.bcast(t), t)
  T.eq(mpi.gather(5)[1], 5)
  T.eq(mpi.allreduce(3), 3)
  T.eq(math.type(mpi.allreduce(3)), "integer")
  local x = srgeo.ones({ 2 }) * 2
  T.eq(mpi.allreduce(x, "max"):get(2), 2)
  mpi.barrier()
  local order = {}
  local r = mpi.map(4, function(i) order[#order + 1] = i; return i * 10 end, { on_result = function(i, v) T.eq(v, i * 10) end })
  T.eq(table.concat(order, ","), "1,2,3,4")
  T.eq(table.concat(r, ","), "10,20,30,40")
  T.raises(function() mpi.map(-1, print) end, "mpi.map: n must be a non-negative integer")
  T.raises(function() mpi.bcast(1, 1) end, "mpi: root 1 is not a rank of 0..0")
  -- no MPI start-up cost: the library is not even mapped
  local out = run(exe() .. [[ -e 'for l in io.lines("/proc/self/maps") do if l:find("libmpi") then print("libmpi loaded") end end print(srgeo.mpi.size())']])
  T.eq(out, "1\n")
  -- under mpirun it is, and SRGEO_MPI=0 keeps a launched process alone
  out = mpirun(1, exe() .. [[ -e 'local n = 0 for l in io.lines("/proc/self/maps") do if l:find("libmpi") then n = n + 1 end end print(n > 0, srgeo.mpi.active())']])
  T.eq(out, "true\ttrue\n")
  out = mpirun(2, exe() .. [[ -e 'print(srgeo.mpi.size(), srgeo.mpi.active())']], "SRGEO_MPI=0")
  T.eq(out, "1\tfalse\n1\tfalse\n")
end)

-- What cannot travel between ranks is refused in one process too, with the
-- message mpirun gives (a bcast of a function worked alone and failed only
-- on a cluster), and mpi.map's arguments are checked alike ("attempt to
-- call a nil value" for a missing fn; static = 2, NaN or true ran alone).
T.test("mpi: one process refuses what mpirun cannot send, and mpi.map's bad arguments, with clear messages", function()
  local SEND = "mpi: cannot send field '(value)': a function (values are nil, booleans, numbers, strings, tables and tensors)"
  T.raises(function() mpi.bcast(print) end, SEND)
  T.raises(function() mpi.gather(print) end, SEND)
  T.raises(function() mpi.bcast({ a = { b = coroutine.create(print) } }) end, "mpi: cannot send field 'b': a thread")
  T.raises(function() mpi.bcast(io.stdout) end, "mpi: cannot send field '(value)': a userdata")
  T.raises(function() mpi.map(2, function() return print end) end, SEND)
  T.eq(mpi.bcast({ x = srgeo.ones({ 2 }) }).x:get(1), 1.0, "tensors pass")
  local out, code = mpirun(2, exe() .. [[ -e 'srgeo.mpi.bcast(print)']])
  T.truthy(code ~= 0 and out:find(SEND, 1, true), "under mpirun: " .. out)
  local id = function(i) return i end
  T.raises(function() mpi.map(3, nil) end, "mpi.map: fn must be a function (called as fn(i) for i = 1..n), got nil")
  for _, s in ipairs { 2, -0.5, 0 / 0, true, "0.5" } do
    T.raises(function() mpi.map(3, id, { static = s }) end, "mpi.map: static must be a number in [0, 1]")
  end
  T.raises(function() mpi.map(3, id, { root_only = 1 }) end, "mpi.map: root_only must be a boolean")
  T.raises(function() mpi.map(3, id, { on_result = 5 }) end, "mpi.map: on_result must be a function")
  T.raises(function() mpi.map(3, id, 7) end, "mpi.map: opts must be a table")
  local ok, err = pcall(mpi.map, 3, nil)
  T.truthy(not ok and not tostring(err):find("mpi.lua", 1, true), "the error names the caller, not mpi.lua: " .. tostring(err))
  T.eq(#mpi.map(3, id, { static = 1, root_only = false }), 3)
end)

T.test("mpi: values travel exactly (numbers bit for bit, integers, strings, nested tables, tensors)", function()
  local v = {
    1, 2.5, -0.0, 1 / 0, -1 / 0, math.maxinteger, math.mininteger, 0x1p-1074, 3.0, "a\0b", true, false,
    nested = { deeper = { { x = "y" } }, [7] = 8, [2.5] = "k" },
    f32 = srgeo.randn({ 3, 4 }, 1), f64 = srgeo.randn({ 2, 1, 3 }, 2):double(), scalar = srgeo.ones({ 1 }):reshape({}),
  }
  local back = srgeo._mpi.unpack(srgeo._mpi.pack(v))
  local ok, where = same(back, v)
  T.truthy(ok, where)
  T.eq(math.type(back[9]), "float") -- 3.0 stays a float, so JSON writes it the same
  local nan = srgeo._mpi.unpack(srgeo._mpi.pack(0 / 0))
  T.truthy(nan ~= nan, "NaN")
  T.raises(function() srgeo._mpi.pack({ ok = 1, bad = print }) end, "mpi: cannot send field 'bad': a function")
  local cyc = {}
  cyc.self = cyc
  T.raises(function() srgeo._mpi.pack(cyc) end, "nested more than 64 deep (a cycle?)")
  T.raises(function() srgeo._mpi.unpack("T") end, "mpi: a truncated message")
  T.raises(function() srgeo._mpi.unpack("nn") end, "1 bytes after the value")
  T.raises(function() srgeo._mpi.unpack("Q") end, "mpi: a corrupt message")
end)

T.test("mpi: collectives and the hand-out on 2 and 3 ranks (uneven splits)", function()
  for _, n in ipairs { 2, 3 } do
    local out, code = mpirun(n, exe() .. " tests/lua/mpi/collectives.lua")
    T.eq(code, 0, out)
    for r = 0, n - 1 do T.truthy(out:find(string.format("collectives ok %d/%d", r, n), 1, true), out) end
  end
  -- stock lua5.4 with srgeo.so: the same, and a clean exit
  local so = (exe():gsub("srgeo$", ""))
  -- (under make sanitize srgeo.so wants the ASan runtime loaded first, which lua5.4 does not link)
  local preload = T.under_asan() and "-x LD_PRELOAD=" .. io.popen("cc -print-file-name=libasan.so"):read("l") .. " " or ""
  local out, code = mpirun(2, string.format("%slua5.4 -e 'package.cpath=%q..package.cpath' tests/lua/mpi/collectives.lua",
    preload, so .. "?.so;"))
  T.eq(code, 0, out)
  T.truthy(out:find("collectives ok 1/2", 1, true), out)
end)

T.test("mpi: a rank that fails ends the job with its message and a non-zero status", function()
  local out, code = mpirun(3, exe() .. [[ -e '
    srgeo.mpi.map(9, function(i) if srgeo.mpi.rank() == 1 then error("item " .. i .. " broke on rank 1") end return i end)
    print("not reached")']])
  T.truthy(code ~= 0, "exit status " .. tostring(code))
  T.truthy(out:find("broke on rank 1", 1, true), out)
  T.truthy(out:find("srgeo: rank 1 of 3 failed (exit status 1); ending the MPI job", 1, true), out)
  T.truthy(not out:find("not reached", 1, true), out)
end)

T.test("mpi: threads per rank default to the rank's cores; SRGEO_THREADS overrides", function()
  local ncpu = tonumber((T.sh("nproc")))
  local out = T.sh(MPIRUN .. " -np 2 --bind-to none " .. exe() .. [[ -e 'print(srgeo.threads())']])
  local want = math.max(1, ncpu // 2)
  T.eq(out, want .. "\n" .. want .. "\n")
  out = T.sh(MPIRUN .. " -np 1 --bind-to none " .. exe() .. [[ -e 'print(srgeo.threads())']])
  T.eq(out, ncpu .. "\n")
  -- never more than the CPUs a rank may run on (each of 2 unbound ranks: all of them)
  out = T.sh("SRGEO_THREADS=" .. ncpu .. " " .. MPIRUN .. " -np 2 --bind-to none " .. exe() .. [[ -e 'print(srgeo.threads())']])
  T.eq(out, ncpu .. "\n" .. ncpu .. "\n")
end)

-- tests/lua/mpi/profile.lua's profile (its extra argument: `what`) in one
-- process, then on each count of `ranks`, each compared bit for bit with the
-- first; returns the one-process profile.
local function profile_on_ranks(name, what, ranks)
  local d = fresh(name)
  local script = exe() .. " tests/lua/mpi/profile.lua "
  local out, code = run(script .. d .. "/p0.json " .. what)
  T.eq(code, 0, out)
  local ref = unpack_file(d .. "/p0.json.bin")
  for _, n in ipairs(ranks) do
    out, code = mpirun(n, script .. d .. "/p" .. n .. ".json " .. what)
    T.eq(code, 0, out)
    local ok, where = same(unpack_file(d .. "/p" .. n .. ".json.bin"), ref)
    T.truthy(ok, n .. " ranks: " .. tostring(where))
  end
  return ref
end

T.test("mpi: srgeo.profile over 2 and 3 ranks gives one process's profile bit for bit", function()
  T.eq(profile_on_ranks("profile", "", { 2, 3 }).n_images, 5)
end)

T.test("mpi: a sequential profile with range = \"auto\" over 2 ranks gives one process's profile bit for bit", function()
  -- the pilot step, each round of steps and the rungs range auto adds are spread over the ranks
  local ref = profile_on_ranks("profile_seq", "sequential", { 2 })
  T.eq(ref.estimator.mode, "sequential")
  T.truthy(ref.range.added > 0, "range auto added no rung")
  T.truthy(ref.estimator.calls > 2 * ref.n_images, "the sequential estimator took no second step")
end)

-- The files of an experiment folder, with what differs between any two runs
-- (timings, the command line, the folder's name) blanked.
local function outputs(dir)
  local files = {}
  local p = io.popen("cd " .. dir .. " && find . -type f | sort")
  for f in p:lines() do
    local s = T.read(dir .. "/" .. f:sub(3))
    s = s:gsub('"seconds": [%d%.e%+%-]+', '"seconds": X'):gsub('"written": "[^"]*"', '"written": X')
    s = s:gsub(dir:gsub("%p", "%%%0"), "OUT"):gsub(", [%d%.]+ s\n", ", X s\n")
    -- and what a resumed run reports differently: which units it computed
    s = s:gsub("%(%d+ computed, %d+ cached%)", "(X)"):gsub('"cached": %a+', '"cached": X')
    files[f:sub(3)] = s
  end
  p:close()
  return files
end

local function same_outputs(a, b, what)
  local fa, fb = outputs(a), outputs(b)
  local n = 0
  for f, s in pairs(fa) do
    T.truthy(fb[f], what .. ": " .. f .. " missing")
    T.truthy(fb[f] == s, what .. ": " .. f .. " differs")
    n = n + 1
  end
  for f in pairs(fb) do T.truthy(fa[f], what .. ": extra file " .. f) end
  return n
end

local SMALL = "--images 4 --directions 8 --nscales 5 --bootstrap 50"

T.test("mpi: bump.lua sharded over 1, 2 and 3 ranks writes what one process writes", function()
  local ref = fresh("bump0")
  local out, code = run(exe() .. " scripts/bump.lua --twin " .. SMALL .. " --out " .. ref)
  T.eq(code, 0, out)
  for _, n in ipairs { 1, 2, 3 } do
    local d = fresh("bump" .. n)
    out, code = mpirun(n, exe() .. " scripts/bump.lua --twin " .. SMALL .. " --out " .. d)
    T.eq(code, 0, out)
    -- rank 0 alone reports
    local _, lines = out:gsub("wrote ", "")
    T.eq(lines, 1, out)
    local files = same_outputs(ref, d, n .. " ranks")
    T.truthy(files >= 14, "files compared: " .. files)
  end
end)

-- Ranks asking for different thread counts (SRGEO_THREADS=1 and 2, as when
-- the cores per rank differ) agree on the smallest at start-up, and rank 0
-- says so: bump.lua's whole output folder is then byte-identical to one
-- process with SRGEO_THREADS=1.  Before, each rank kept its own count and
-- profiles.csv matched neither the 1- nor the 2-thread run (and two
-- identical jobs differed in the 6th digit: images go to whichever rank asks).
T.test("mpi: ranks with different thread counts agree on the smallest and write what one process writes", function()
  if tonumber((T.sh("nproc"))) < 2 then T.skip("needs 2 CPUs for a 2-thread rank") end
  local args = " scripts/bump.lua --twin " .. SMALL .. " --out "
  local ref = fresh("threads_ref")
  local out, code = run(exe() .. args .. ref)
  T.eq(code, 0, out)
  local d = fresh("threads_mixed")
  out, code = T.sh(string.format("%s --bind-to none -np 1 env SRGEO_THREADS=1 %s%s%s : -np 1 env SRGEO_THREADS=2 %s%s%s",
    MPIRUN, exe(), args, d, exe(), args, d))
  T.eq(code, 0, out)
  T.truthy(out:find("srgeo: the ranks' thread counts differ (1 to 2); every rank uses 1, so results match one process "
    .. "with SRGEO_THREADS=1", 1, true), out)
  local _, notices = out:gsub("thread counts differ", "")
  T.eq(notices, 1, "rank 0 alone says so")
  T.truthy(same_outputs(ref, d, "threads 1 and 2") >= 14)
end)

-- The PID of rank r of the job whose command line holds `pattern`, read
-- from /proc (procps' pgrep is not on a minimal Debian).
local function rank_pid(pattern, r)
  local ls = io.popen("ls /proc")
  local pid
  for l in ls:lines() do
    if l:match("^%d+$") then
      local cmd = (T.read("/proc/" .. l .. "/cmdline") or ""):gsub("%z", " ")
      local env = T.read("/proc/" .. l .. "/environ") or ""
      if cmd:find(pattern, 1, true) and ("\0" .. env):find("\0OMPI_COMM_WORLD_RANK=" .. r .. "\0", 1, true) then pid = l end
    end
  end
  ls:close()
  return pid
end

T.test("mpi: a killed rank fails the job; a rerun with another number of ranks resumes from the cached units and images", function()
  local ref = fresh("sweep0")
  local args = " tests/lua/mpi/sweep.lua --images 24 --directions 8 --nscales 5 --bootstrap 50 --out "
  local out, code = run(exe() .. args .. ref)
  T.eq(code, 0, out)
  local d = fresh("sweep")
  local log = d .. ".log"
  os.execute(string.format("(%s %s -np 2 %s%s%s > %s 2>&1; echo \"status $?\" >> %s) &", ENV, MPIRUN, exe(), args, d, log, log))
  -- wait for the small first unit and the second's first image, then kill rank 1
  local first = d .. "/units/small_resnet__fmnist-test_2@0.unit.json"
  local image = d .. "/units/small_resnet@init__fmnist-test_48@0.partial/000001.json"
  local t0 = srgeo._clock()
  while not (T.read(first) and T.read(image)) and srgeo._clock() - t0 < 60 do os.execute("sleep 0.05") end
  T.truthy(T.read(first), "the first unit was never cached")
  T.truthy(T.read(image), "the second unit's first image was never checkpointed")
  local pid = rank_pid(args .. d, 1)
  T.truthy(pid, "rank 1 not found")
  os.execute("kill -9 " .. pid)
  t0 = srgeo._clock()
  while not (T.read(log) or ""):find("status %d+") and srgeo._clock() - t0 < 60 do os.execute("sleep 0.05") end
  local text = T.read(log)
  local status = tonumber(text:match("status (%d+)"))
  T.truthy(status and status ~= 0, text)
  T.truthy(text:find("srgeo: stopped by mpirun (another rank failed or was killed); what was finished is kept: rerun", 1, true), text)
  T.truthy(not T.read(d .. "/results.json"), "a failed job wrote results")
  -- resume on 3 ranks: the cached unit is reused, the outputs are one process's
  out, code = mpirun(3, exe() .. args .. d)
  T.eq(code, 0, out)
  T.truthy(out:find("[1/3] small_resnet on fmnist-test:2@0: cached", 1, true), out)
  -- and the unfinished unit from its checkpointed images (srgeo.cache)
  T.truthy(out:find("small_resnet@init__fmnist-test_48@0: resuming after image", 1, true), out)
  same_outputs(ref, d, "resumed")
end)

-- ---------------------------------------------------------------------------
-- Data-parallel training (lua/srgeo/train.lua, core/train/train.c's
-- sr_train_step, synchronised BatchNorm in core/nn/norm.c)

-- Train with tests/lua/mpi/train.lua on n ranks (0: no mpirun); the final
-- parameters and buffers, and the log rows.
local function train(n, name, args)
  local d = ROOT .. "/train"
  os.execute("mkdir -p " .. d)
  local cmd = exe() .. " tests/lua/mpi/train.lua " .. d .. "/" .. name .. " " .. args
  local out, code
  if n == 0 then out, code = run(cmd) else out, code = mpirun(n, cmd) end
  T.eq(code, 0, out)
  return unpack_file(d .. "/" .. name .. ".bin"), unpack_file(d .. "/" .. name .. ".rows"), out
end

-- The largest |a − b| / max(1, |b|) over every entry of two parameter sets.
local function gap(a, b)
  local worst = 0
  for k, t in pairs(b) do
    T.truthy(a[k], "missing " .. k)
    local x, y = a[k]:reshape({ a[k]:numel() }), t:reshape({ t:numel() })
    for i = 1, #y do
      worst = math.max(worst, math.abs(x:get(i) - y:get(i)) / math.max(1, math.abs(y:get(i))))
    end
  end
  return worst
end

T.test("mpi: data-parallel training on 2 and 3 ranks gives one process's weights (BN-free; float32 and float64; PGD)", function()
  for _, dt in ipairs { "float64", "float32" } do
    local tol = dt == "float64" and 1e-13 or 2e-6 -- the sums' order differs: float rounding, nothing more
    local ref, rows = train(0, "plain_" .. dt, "plain " .. dt)
    for _, n in ipairs { 2, 3 } do
      local got, grows = train(n, "plain_" .. dt .. n, "plain " .. dt) -- (every rank checked equal in the script)
      local g = gap(got, ref)
      T.truthy(g <= tol, string.format("%s on %d ranks: relative gap %.3g > %.3g", dt, n, g, tol))
      T.truthy(g > 0 or dt == "float64", "the sums' order never mattered? " .. g)
      -- the log: the whole batch's loss and accuracy, not a shard's
      for i, r in ipairs(rows) do
        T.close(grows[i].loss, r.loss, tol * 10, "loss of step " .. r.step)
        T.eq(grows[i].acc, r.acc, "accuracy of step " .. r.step)
        T.eq(grows[i].train_acc, r.train_acc, "train accuracy of step " .. r.step)
      end
    end
  end
  -- PGD: each rank attacks its rows with the random starts of those rows in the whole batch
  local ref = train(0, "pgd", "plain float64 objective=pgd steps=3")
  T.truthy(gap(train(3, "pgd3", "plain float64 objective=pgd steps=3"), ref) <= 1e-13, "pgd")
  ref = train(0, "gauss", "plain float64 objective=gaussian steps=3")
  T.truthy(gap(train(2, "gauss2", "plain float64 objective=gaussian steps=3"), ref) <= 1e-13, "gaussian")
end)

T.test("mpi: gradient sums overlapped with backward give the bits of sums after it (2 and 3 ranks, 4 buckets)", function()
  -- bucket=50: fc.bias packed | fc.weight (240) in place | bn1, conv1.bias packed | conv1.weight (54) in place
  for _, c in ipairs { { 2, "plain float32" }, { 3, "plain float32" }, { 3, "bn float32 sync_bn=true" } } do
    local n, args = c[1], c[2] .. " steps=4 bucket=50"
    local name = args:gsub("[ =]", "_")
    local on = train(n, name .. "_on" .. n, args .. " overlap=true")
    local off = train(n, name .. "_off" .. n, args .. " overlap=false")
    T.eq(gap(on, off), 0, string.format("%s on %d ranks: overlapped vs after backward", args, n))
    T.eq(gap(off, on), 0)
  end
end)

T.test("mpi: synchronised BatchNorm gives one process's weights and running statistics; per-rank BatchNorm does not", function()
  for _, dt in ipairs { "float64", "float32" } do
    local tol = dt == "float64" and 1e-13 or 2e-6
    local ref = train(0, "bn_" .. dt, "bn " .. dt)
    for _, n in ipairs { 2, 3 } do
      local got = train(n, "bn_" .. dt .. n, "bn " .. dt .. " sync_bn=true")
      local g = gap(got, ref)
      T.truthy(g <= tol, string.format("%s on %d ranks: relative gap %.3g", dt, n, g))
      T.eq(got["bn1.num_batches_tracked"]:get(), 6)
    end
  end
  local ref = train(0, "bn_float64", "bn float64")
  local per_rank = train(3, "bn_per_rank", "bn float64")
  T.truthy(gap(per_rank, ref) > 1e-4, "per-rank statistics should change the trajectory")
end)

T.test("mpi: training resumes with another number of ranks; rank 0 alone writes the checkpoints", function()
  local d = fresh("train_run")
  local ref = train(0, "resume_ref", "bn float64 sync_bn=true")
  train(2, "resume_a", "bn float64 sync_bn=true stop_at=3 out=" .. d)
  local names = {}
  for f in io.popen("ls " .. d):lines() do names[#names + 1] = f end
  T.eq(table.concat(names, " "), "ckpt_00000002.safetensors log.csv optim_00000002.safetensors")
  local meta = srgeo.safetensors.open(d .. "/optim_00000002.safetensors"):metadata()
  T.eq(meta.ranks, "2")
  local got, _, out = train(3, "resume_b", "bn float64 sync_bn=true out=" .. d)
  T.truthy(out:find("resuming a run of 2 ranks on 3", 1, true), out)
  T.truthy(gap(got, ref) <= 1e-13, "resumed on 3 ranks vs one process: " .. gap(got, ref))
  -- and one process resumes what ranks wrote
  train(3, "resume_c", "bn float64 sync_bn=true stop_at=3 out=" .. fresh("train_run2"))
  T.truthy(gap(train(0, "resume_d", "bn float64 sync_bn=true out=" .. ROOT .. "/train_run2"), ref) <= 1e-13)
end)

T.test("mpi: a rank killed while training (sums in flight) fails the job with the message", function()
  local d = fresh("train_kill")
  local log = d .. ".log"
  local args = " tests/lua/mpi/train.lua " .. d .. "/w plain float32 steps=1000000 bucket=50 overlap=true"
  os.execute("mkdir -p " .. d)
  os.execute(string.format("(%s %s -np 2 %s%s > %s 2>&1; echo \"status $?\" >> %s) &", ENV, MPIRUN, exe(), args, log, log))
  local pid, t0 = nil, srgeo._clock()
  while not pid and srgeo._clock() - t0 < 30 do
    os.execute("sleep 0.2")
    pid = rank_pid(args, 1)
  end
  T.truthy(pid, "rank 1 not found")
  os.execute("sleep 1; kill -9 " .. pid)
  t0 = srgeo._clock()
  while not (T.read(log) or ""):find("status %d+") and srgeo._clock() - t0 < 60 do os.execute("sleep 0.05") end
  local text = T.read(log) or ""
  local status = tonumber(text:match("status (%d+)"))
  T.truthy(status and status ~= 0, text)
  T.truthy(text:find("srgeo: stopped by mpirun (another rank failed or was killed)", 1, true), text)
end)

T.test("mpi: training refuses batches the ranks cannot share and objectives it cannot split", function()
  local out, code = mpirun(3, exe() .. " tests/lua/mpi/train.lua " .. ROOT .. "/x plain float32 batch=2")
  T.truthy(code ~= 0, out)
  T.truthy(out:find("a batch of 2 rows cannot be split over 3 ranks (each needs a row)", 1, true), out)
  out, code = mpirun(2, exe() .. [[ -e 'srgeo.train{model = srgeo.models.mlp{hidden = {4}, input = {1, 4, 4}},
    data = srgeo.data.noise{n = 8, shape = {1, 4, 4}}, steps = 1, batch = 4, objective = "llr", progress = false}']])
  T.truthy(code ~= 0, out)
  T.truthy(out:find('objective "llr" runs in one process', 1, true), out)
end)
