-- wrk: each request carries a W3C traceparent of its own (a fresh trace and parent span id),
-- and each thread writes what it sent to LOG.<thread> (one "trace parent" line a request) for
-- bench/traceparent_node.py to check against Jaeger. With TT_TRACESTATE=1 a tracestate of two
-- members goes beside it (bench/tcp_spans.sh's tracestate mode). The path is
-- /$TT_TRACEPARENT_PATH (default /).  wrk -s bench/traceparent.lua URL
local counter = 0
local threads = {}

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

function init(args)
  math.randomseed(os.time() * 1000 + id)
  out = io.open((os.getenv("TT_TRACEPARENT_LOG") or "/tmp/traceparent") .. "." .. id, "w")
  with_state = os.getenv("TT_TRACESTATE") == "1"
  path = "/" .. (os.getenv("TT_TRACEPARENT_PATH") or "")
end

local function hex(n)
  local t = {}
  for i = 1, n do t[i] = string.format("%x", math.random(0, 15)) end
  t[1] = string.format("%x", math.random(1, 15)) -- never all zeros
  return table.concat(t)
end

function request()
  local trace, parent = hex(32), hex(16)
  out:write(trace, " ", parent, "\n")
  local headers = { ["traceparent"] = "00-" .. trace .. "-" .. parent .. "-01" }
  if with_state then
    headers["tracestate"] = "rojo=" .. parent .. ",congo=t61rcWkgMzE"
  end
  return wrk.format("GET", path, headers)
end

function done(summary, latency, requests)
end
