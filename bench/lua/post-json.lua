-- wrk script: a POST with a JSON body on every request (password sign-in with one user, Sign in
-- with Apple with tokens that are each accepted once), counting the answers by status.
--   wrk ... -s post-json.lua URL -- APP_KEY BODY_FILE [FORWARDED_ADDRESSES]
-- BODY_FILE is one body, or, when it ends in "-", the prefix of one file per thread
-- (<prefix><thread>.jsonl) of bodies, one per line, sent in turn (each once, until they run out).
-- With FORWARDED_ADDRESSES = N (> 0), requests carry `X-Forwarded-For: 10.<thread>.x.y`, cycling
-- through N addresses per thread (the server must trust 127.0.0.1 as a proxy): the per-IP
-- sign-in limit (at most 1000 a minute) then never answers 429, even when the server refuses
-- thousands of sign-ins a second with 503 server/busy. The requests are built once, in init().
-- done() prints one line that bench/run parses:
--   statuses: ok=… busy503=… other503=… status429=… other=… seconds=…
-- ok counts 2xx; busy503 counts 503 answers whose body has "server/busy"; seconds is wrk's run time.

local threads = {}

function setup(thread)
    table.insert(threads, thread)
    thread:set("id", #threads)
end

function init(args)
    local headers = { ["Content-Type"] = "application/json", ["X-App-Key"] = args[1] }
    local path = wrk.path
    addresses = tonumber(args[3] or "0") or 0
    prepared = {}
    if string.sub(args[2], -1) == "-" then
        local i = 0
        for line in io.lines(args[2] .. id .. ".jsonl") do
            if addresses > 0 then
                headers["X-Forwarded-For"] = string.format("10.%d.%d.%d", id, math.floor(i / 256) % 256, i % 256)
                i = (i + 1) % addresses
            end
            prepared[#prepared + 1] = wrk.format("POST", path, headers, line)
        end
        nextRequest = 0
        ok, busy503, other503, s429, other = 0, 0, 0, 0, 0
        return
    end
    local f = assert(io.open(args[2], "r"))
    local body = f:read("*a")
    f:close()
    if addresses > 0 then
        for i = 0, addresses - 1 do
            headers["X-Forwarded-For"] = string.format("10.%d.%d.%d", id, math.floor(i / 256) % 256, i % 256)
            prepared[i + 1] = wrk.format("POST", path, headers, body)
        end
    else
        prepared[1] = wrk.format("POST", path, headers, body)
    end
    nextRequest = 0
    ok, busy503, other503, s429, other = 0, 0, 0, 0, 0
end

function request()
    nextRequest = nextRequest % #prepared + 1
    return prepared[nextRequest]
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
