-- Run by mpi_spec.lua under `mpirun -np N`: every collective of srgeo.mpi
-- and mpi.map on N ranks; raises on the first wrong value, prints
-- "collectives ok RANK/N" at the end.
local srgeo = require "srgeo"
local mpi = srgeo.mpi
local rank, size = mpi.rank(), mpi.size()
local function check(c, what) if not c then error("rank " .. rank .. ": " .. what, 2) end end
assert(mpi.active(), "launched by mpirun but srgeo.mpi is not active")

-- bcast: root's value, exactly, from any root
for root = 0, size - 1 do
  local mine = { from = rank, x = 0.1 + rank, t = srgeo.rand({ 3, 2 }, 10 + rank) }
  local v = mpi.bcast(mine, root)
  check(v.from == root and math.type(v.from) == "integer", "bcast from " .. root)
  check(v.x == 0.1 + root, "bcast float from " .. root)
  local want = srgeo.rand({ 3, 2 }, 10 + root)
  for i = 0, 5 do check(v.t:get(i // 2 + 1, i % 2 + 1) == want:get(i // 2 + 1, i % 2 + 1), "bcast tensor") end
end

-- gather: rank order at the root, nil elsewhere
local g = mpi.gather({ rank = rank, name = "r" .. rank }, size - 1)
if rank == size - 1 then
  check(#g == size, "gather size")
  for r = 0, size - 1 do check(g[r + 1].rank == r and g[r + 1].name == "r" .. r, "gather order") end
else
  check(g == nil, "gather off the root")
end

-- allreduce: numbers (integers stay integers) and tensors
local s = mpi.allreduce(rank + 1)
check(s == size * (size + 1) // 2 and math.type(s) == "integer", "allreduce integer sum")
check(mpi.allreduce(rank + 0.5, "max") == size - 0.5, "allreduce max")
check(mpi.allreduce(rank + 0.5, "min") == 0.5, "allreduce min")
for _, dt in ipairs { "float32", "float64" } do
  local t = srgeo.ones({ 2, 3 }, dt) * (rank + 1)
  local r = mpi.allreduce(t)
  check(r:dtype() == dt and r:get(2, 3) == size * (size + 1) / 2, "allreduce tensor " .. dt)
  check(t:get(1, 1) == rank + 1, "allreduce leaves its argument")
  check(mpi.allreduce(t, "max"):get(1, 2) == size, "allreduce tensor max")
end

-- map: every item once, results in item order on every rank, on_result at
-- the root once per item; slow ranks take fewer items
local computed, arrived = 0, {}
local n = 7 * size + 3
local res = mpi.map(n, function(i)
  computed = computed + 1
  if rank == size - 1 then local t0 = srgeo._clock() while srgeo._clock() - t0 < 0.03 do end end
  return { i = i, sq = i * i, by = rank }
end, { on_result = function(i, v) arrived[#arrived + 1] = i; check(v.i == i, "on_result value") end })
check(#res == n, "map result count")
for i = 1, n do check(res[i].i == i and res[i].sq == i * i, "map result " .. i) end
check(mpi.allreduce(computed) == n, "map: items computed exactly once in all")
if rank == 0 then
  check(#arrived == n, "on_result calls")
  local seen = {}
  for _, i in ipairs(arrived) do check(not seen[i], "on_result twice for " .. i); seen[i] = true end
end
-- a map inside a map item runs on its rank alone
local nested = mpi.map(size, function(i) return #mpi.map(3, function(j) return j end) end)
for i = 1, size do check(nested[i] == 3, "nested map") end
-- root_only
local ro = mpi.map(4, function(i) return i end, { root_only = true })
check((rank == 0) == (ro ~= nil), "root_only")
mpi.barrier()
print(string.format("collectives ok %d/%d", rank, size))
