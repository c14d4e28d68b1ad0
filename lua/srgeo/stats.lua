-- srgeo.stats: small robust statistics used by profiles and comparisons.
-- NaN entries (discarded rungs) are ignored everywhere.
local M = {}

local function isnan(v) return v ~= v end
M.isnan = isnan

local function finite_sorted(xs)
  local t = {}
  for _, v in ipairs(xs) do
    if type(v) == "number" and not isnan(v) and v ~= math.huge and v ~= -math.huge then t[#t + 1] = v end
  end
  table.sort(t)
  return t
end

--- Quantile q in [0,1] with linear interpolation (type 7, NumPy's default); NaN if empty.
function M.quantile(xs, q)
  local t = finite_sorted(xs)
  local n = #t
  if n == 0 then return 0 / 0 end
  local h = (n - 1) * q + 1
  local lo = math.floor(h)
  if lo >= n then return t[n] end
  return t[lo] + (h - lo) * (t[lo + 1] - t[lo])
end

function M.median(xs) return M.quantile(xs, 0.5) end

function M.mean(xs)
  local s, n = 0, 0
  for _, v in ipairs(xs) do
    if not isnan(v) then s, n = s + v, n + 1 end
  end
  return n > 0 and s / n or 0 / 0
end

--- A seeded uniform generator in [0,1) (xorshift-style; independent of math.random's global state).
function M.rng(seed)
  local s = (seed or 1) * 2654435761 % 4294967296
  if s == 0 then s = 1 end
  return function()
    s = s ~ (s << 13) & 0xffffffff
    s = s ~ (s >> 17)
    s = s ~ (s << 5) & 0xffffffff
    return s / 4294967296
  end
end

--- Bootstrap over rows: rows is a list of per-item records; stat(sample) -> number or list.
--- Returns the list of B statistics.
function M.bootstrap(rows, stat, B, seed)
  local u = M.rng(seed or 1)
  local n = #rows
  local out = {}
  for b = 1, B do
    local s = {}
    for i = 1, n do s[i] = rows[math.floor(u() * n) + 1] end
    out[b] = stat(s)
  end
  return out
end

--- Sample standard deviation (n − 1); NaN with fewer than two values.
function M.sd(xs)
  local m, s, n = M.mean(xs), 0, 0
  for _, v in ipairs(xs) do
    if not isnan(v) then s, n = s + (v - m) ^ 2, n + 1 end
  end
  return n > 1 and math.sqrt(s / (n - 1)) or 0 / 0
end

--- A robust standard deviation: the interquartile range over 1.349 (the
--- SD of a normal sample; one wild value moves it little).
function M.robust_sd(xs)
  return (M.quantile(xs, 0.75) - M.quantile(xs, 0.25)) / 1.3489795003921634
end

--- The standard normal quantile Φ⁻¹(p) (Acklam's rational approximation,
--- relative error below 1.2e-9), for p in (0, 1).
function M.qnorm(p)
  if not (p > 0 and p < 1) then
    if p == 0 then return -math.huge elseif p == 1 then return math.huge end
    return 0 / 0
  end
  local a = { -3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
              -3.066479806614716e+01, 2.506628277459239e+00 }
  local b = { -5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
              -1.328068155288572e+01 }
  local c = { -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
              4.374664141464968e+00, 2.938163982698783e+00 }
  local d = { 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00 }
  local lo = 0.02425
  if p < lo or p > 1 - lo then
    local q = math.sqrt(-2 * math.log(p < lo and p or 1 - p))
    local x = (((((c[1] * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) * q + c[6]) /
      ((((d[1] * q + d[2]) * q + d[3]) * q + d[4]) * q + 1)
    return p < lo and x or -x
  end
  local q = p - 0.5
  local r = q * q
  return (((((a[1] * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * r + a[6]) * q /
    (((((b[1] * r + b[2]) * r + b[3]) * r + b[4]) * r + b[5]) * r + 1)
end

--- Column j of a list of rows.
function M.column(rows, j)
  local c = {}
  for i, r in ipairs(rows) do c[i] = r[j] end
  return c
end

return M
