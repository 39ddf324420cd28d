-- Pipelined load for wrk, in the manner of TechEmpower's plaintext test:
-- every write sends `depth` requests back to back (default 16), so a server
-- is measured on how well it parses and answers a burst from one read.
--
-- Usage: wrk -s lab/wrk/pipeline.lua URL -- DEPTH
-- Headers given with -H are part of each request (wrk.format uses them).

local pipelined

init = function(args)
  local depth = tonumber(args[1]) or 16
  if depth < 1 then
    depth = 1
  end
  local one = wrk.format()
  local batch = {}
  for i = 1, depth do
    batch[i] = one
  end
  pipelined = table.concat(batch)
end

request = function()
  return pipelined
end
