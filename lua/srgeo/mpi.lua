-- srgeo.mpi: the processes of an mpirun job, and work spread over them.
--
--   mpirun -np 4 srgeo script.lua      -- every rank runs the script
--   local mpi = srgeo.mpi
--   mpi.rank(), mpi.size()             -- 0-based rank, number of ranks (0 and 1 without mpirun)
--   mpi.barrier()
--   v = mpi.bcast(v [, root])          -- root's value on every rank
--   list = mpi.gather(v [, root])      -- on root: {v of rank 0, v of rank 1, ...}; nil elsewhere
--   x = mpi.allreduce(x [, op])        -- op "sum" (default), "max" or "min"; x a number or a tensor
--   results = mpi.map(n, fn [, opts])  -- fn(i) for i = 1..n spread over the ranks
--
-- The collectives are C over Open MPI (core/lua/mpi.c); values travel
-- exactly (numbers bit for bit, integers stay integers, tensors whole).
-- Without mpirun srgeo is one process: rank 0 of 1, the collectives return
-- their argument, and MPI is never loaded.  Every rank must call the
-- collectives in the same order.
--
-- mpi.map hands items out statically first (rank r takes r+1, r+1+N, ...
-- for the first opts.static of them, default half, in whole rounds), then
-- one at a time to whichever rank asks first, so ranks with long items do
-- not hold the others up.  Each result goes to rank 0 as soon as it is
-- computed; opts.on_result(i, v) runs there, in arrival order (cache a
-- unit as soon as it is complete); then every rank returns the list of all
-- results in item order (opts.root_only: only rank 0 does; the others get
-- nil).  The arguments, and results that could not travel between ranks,
-- are checked in one process too.  A map inside a map item runs on its
-- rank alone.  A rank that fails ends the whole job (Open MPI's MPI_ABORT
-- message names it).
local srgeo = require "srgeo"
local C = srgeo._mpi

local M = {}

M.rank, M.size, M.local_size, M.barrier, M.bcast, M.gather, M.allreduce =
  C.rank, C.size, C.local_size, C.barrier, C.bcast, C.gather, C.allreduce

--- True when launched by mpirun (MPI is loaded), whatever the size.
M.active = C.active

--- Rank 0 writes the job's files: true on rank 0, and without mpirun.
function M.root() return C.rank() == 0 end

local busy = false -- inside a map item: nested maps run locally

local function local_map(n, fn, opts)
  local out = {}
  for i = 1, n do
    out[i] = C.check(fn(i)) -- what could not travel between ranks fails alone too
    if opts.on_result then opts.on_result(i, out[i]) end
  end
  return out
end

local function callable(f)
  local mt = getmetatable(f)
  return type(f) == "function" or (type(mt) == "table" and mt.__call ~= nil)
end

-- The arguments of mpi.map, checked alike in one process and under mpirun.
local function check_map(n, fn, opts)
  local function bad(fmt, ...) error("mpi.map: " .. string.format(fmt, ...), 4) end
  if math.type(n) ~= "integer" or n < 0 then bad("n must be a non-negative integer, got %s", tostring(n)) end
  if not callable(fn) then bad("fn must be a function (called as fn(i) for i = 1..n), got %s", type(fn)) end
  if type(opts) ~= "table" then bad("opts must be a table, got %s", type(opts)) end
  local s = opts.static
  if s ~= nil and not (type(s) == "number" and s >= 0 and s <= 1) then
    bad("static must be a number in [0, 1] (the fraction of items handed out in turn), got %s", tostring(s))
  end
  if opts.root_only ~= nil and type(opts.root_only) ~= "boolean" then
    bad("root_only must be a boolean, got %s", tostring(opts.root_only))
  end
  if opts.on_result ~= nil and not callable(opts.on_result) then
    bad("on_result must be a function, got %s", type(opts.on_result))
  end
end

--- mpi.map(n, fn [, opts]) -> results: fn(i) for i = 1..n over the ranks
--- (static interleave of opts.static of the items, default 0.5, then one at
--- a time to whichever rank asks); opts.on_result(i, v) on rank 0 as each
--- arrives; every rank returns all n results in order (opts.root_only:
--- rank 0 only).  fn(i) must return a value srgeo.mpi can send.
function M.map(n, fn, opts)
  if opts == nil then opts = {} end
  check_map(n, fn, opts)
  local size, rank = C.size(), C.rank()
  if size == 1 or busy then return local_map(n, fn, opts) end
  local frac = opts.static or 0.5
  if not C.dynamic() then frac = 1 end
  local nstatic = math.floor(n * frac / size) * size
  if frac == 1 then nstatic = n end
  local results, got = {}, 0
  local function drain(wait)
    while got < n do
      local i, v = C.serve_take(wait)
      if not i and wait then error(string.format("mpi.map: %d of %d results never arrived", n - got, n), 0) end
      if not i then return end
      results[i], got = v, got + 1
      if opts.on_result then opts.on_result(i, v) end
    end
  end
  local function run(i)
    busy = true
    local ok, v = pcall(fn, i)
    busy = false
    if not ok then error(v, 0) end
    C.serve_put(i, v)
    if rank == 0 then drain(false) end
  end
  C.serve_begin(nstatic + 1, n)
  for i = rank + 1, nstatic, size do run(i) end
  while true do
    local i = C.serve_next()
    if not i then break end
    run(i)
  end
  if rank == 0 then drain(true) end
  C.serve_end()
  if opts.root_only then return rank == 0 and results or nil end
  return C.bcast(results, 0)
end

return M
