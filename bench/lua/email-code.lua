-- wrk script: POST /v1/auth/email-code/send with an address of its own on every request, so that
-- the per-address send window (one code a minute per address and purpose) never answers 429.
--   wrk ... -s email-code.lua URL -- APP_KEY TAG [FORWARDED_ADDRESSES]
-- The address is <TAG>-<thread>-<n>@bench.example.com: TAG must differ between runs against the
-- same server within a minute. With FORWARDED_ADDRESSES = N (> 0), requests carry
-- `X-Forwarded-For: 10.<100 + thread>.x.y`, cycling through N addresses per thread (the server
-- must trust 127.0.0.1 as a proxy), so that the per-IP send limit (at most 1000 a minute) never
-- answers 429 either.
-- done() prints the line bench/run parses (every answer must be 202):
--   statuses: ok=… busy503=… other503=… status429=… other=… seconds=…

local threads = {}

function setup(thread)
    table.insert(threads, thread)
    thread:set("id", #threads)
end

function init(args)
    key = args[1]
    tag = args[2]
    addresses = tonumber(args[3] or "0") or 0
    n = 0
    ok, busy503, other503, s429, other = 0, 0, 0, 0, 0
end

function request()
    n = n + 1
    local headers = { ["Content-Type"] = "application/json", ["X-App-Key"] = key }
    if addresses > 0 then
        local i = n % addresses
        headers["X-Forwarded-For"] = string.format("10.%d.%d.%d", 100 + id, math.floor(i / 256) % 256, i % 256)
    end
    local body = string.format('{"email": "%s-%d-%d@bench.example.com"}', tag, id, n)
    return wrk.format("POST", wrk.path, headers, body)
end

function response(status, headers, body)
    if status >= 200 and status < 300 then ok = ok + 1
    elseif status == 503 then
        if body and string.find(body, "server/busy", 1, true) then busy503 = busy503 + 1 else other503 = other503 + 1 end
    elseif status == 429 then s429 = s429 + 1
    else other = other + 1 end
end

function done(summary, latency, requests)
    local t = { ok = 0, busy503 = 0, other503 = 0, s429 = 0, other = 0 }
    for _, thread in ipairs(threads) do
        for k, _ in pairs(t) do t[k] = t[k] + (thread:get(k) or 0) end
    end
    io.write(string.format("statuses: ok=%d busy503=%d other503=%d status429=%d other=%d seconds=%.3f\n",
        t.ok, t.busy503, t.other503, t.s429, t.other, summary.duration / 1e6))
end
