-- Mixed reads and writes against the notes API (examples/notes and its
-- axum twin, lab/peers/axum-notes): each connection rotates through
--   GET /api/notes (a page of 20), GET /api/notes/{id}, POST /api/notes,
--   PUT /api/notes/{id}
-- with the bearer token on every request. Ids are drawn from 1..SEEDED,
-- the notes scripts/notes-bench creates before the run; POSTs make new notes
-- with unique titles, PUTs rewrite a seeded note under its own title.
--
-- Usage: wrk -s lab/wrk/notes.lua URL -- [TOKEN] [SEEDED]
-- (defaults: dev-token, 100)

local token, seeded
local counter = 0
local run = tostring(os.time())

init = function(args)
  token = args[1] or "dev-token"
  seeded = tonumber(args[2] or "100")
  math.randomseed(os.time())
end

request = function()
  counter = counter + 1
  local headers = { ["Authorization"] = "Bearer " .. token }
  local kind = counter % 4
  local id = math.random(1, seeded)
  if kind == 0 then
    return wrk.format("GET", "/api/notes", headers)
  elseif kind == 1 then
    return wrk.format("GET", "/api/notes/" .. id, headers)
  end
  headers["Content-Type"] = "application/json"
  if kind == 2 then
    local body = '{"title":"note ' .. run .. "-" .. counter .. '","body":"written by wrk"}'
    return wrk.format("POST", "/api/notes", headers, body)
  end
  local body = '{"title":"seed ' .. id .. '","body":"rewritten ' .. counter .. '"}'
  return wrk.format("PUT", "/api/notes/" .. id, headers, body)
end
