-- Mixed load over the seven TechEmpower endpoints, for soak runs: each
-- connection cycles through the paths in turn, starting at a different one,
-- so every endpoint gets a steady share of requests.
--
-- Usage: wrk -s lab/wrk/mixed.lua URL -- [QUERIES]
-- (URL's path is ignored; QUERIES is the count for /queries, /updates and
-- /cached-queries, default 20.)

local paths
local counter = 0

init = function(args)
  local n = args[1] or "20"
  paths = {
    "/plaintext",
    "/json",
    "/db",
    "/queries?queries=" .. n,
    "/fortunes",
    "/updates?queries=" .. n,
    "/cached-queries?count=" .. n,
  }
end

request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter % #paths) + 1])
end
