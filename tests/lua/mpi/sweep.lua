-- Run by mpi_spec.lua: a sweep of three units of very different sizes
-- through srgeo.experiment (like scripts/bump.lua), so that the small first
-- unit is cached long before the others finish.  Args: the common options.
local srgeo = require "srgeo"
local E = require "srgeo.experiment"
local o, ex = E.script({ name = "sweep.lua", about = "mpi_spec's sweep" }, { ... }, { out = "out/sweep" })
local ps = ex:run {
  { model = "small_resnet", eval = "fmnist-test:2" },
  { model = "small_resnet@init", eval = "fmnist-test:" .. (o.images * 2) },
  { model = "small_resnet", eval = "fmnist-test:" .. o.images .. "@1", label = "other draw" },
}
ex:figure("bump", srgeo.plot.profile, ps, { title = "sweep" })
ex:finish(ps)
