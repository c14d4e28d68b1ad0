-- Run by mpi_spec.lua with and without mpirun: srgeo.profile of the shipped
-- small_resnet on a few images (spread over the ranks under mpirun); rank 0
-- writes the profile to arg[1] (JSON) and arg[1].bin (every field, packed).
-- arg[2] "sequential": the sequential estimator with range = "auto" (its
-- pilot, its rounds and the added rungs each spread over the ranks).
local srgeo = require "srgeo"
local m = srgeo.models.load(srgeo.root .. "/models/shipped/small_resnet.safetensors")
local X = srgeo.data.fashion_mnist { split = "test" }:sample(5, 3)
local opts = { preset = "quick", directions = 8, nscales = 5, bootstrap = 40, seed = 7, per_direction = true, progress = false }
if arg[2] == "sequential" then
  opts = { preset = "sequential", range = "auto", directions = 32, seq_chunk = 8, nscales = 5, log10_lo = -1, log10_hi = 1,
           bootstrap = 40, seed = 7, progress = false }
end
local p = srgeo.profile(m, X, opts)
p:save_json(arg[1])
p.seconds = nil
if srgeo.mpi.root() then
  local f = assert(io.open(arg[1] .. ".bin", "wb"))
  f:write(srgeo._mpi.pack(setmetatable(p, nil)))
  f:close()
end
