-- wrk script: POST /v1/auth/refresh as rotation chains.
--   wrk -tN ... -s refresh.lua URL -- APP_KEY TOKEN_PREFIX
-- Thread i reads its own refresh tokens from TOKEN_PREFIX<i>.txt (one per line, disjoint between
-- threads) into a free list. request() pops a token and sends it; response() takes the successor
-- from the answer and pushes it back. So every in-flight request carries its own chain, always
-- with the newest token, and no token is ever sent twice (checked: `dup` must stay 0). A token
-- whose answer never comes (failure, timeout, end of the run) ends its chain; it is not reused.
-- done() prints one line, "chains: key=value ...", that bench/run parses.

local threads = {}

function setup(thread)
    table.insert(threads, thread)
    thread:set("id", #threads)
end

function init(args)
    free = {}
    local f = assert(io.open(args[2] .. id .. ".txt", "r"))
    for line in f:lines() do
        if #line > 0 then free[#free + 1] = line end
    end
    f:close()
    initial = #free
    sent, ok, failed, unparsed, starved, dup = 0, 0, 0, 0, 0, 0
    s401, s429, s503, other = 0, 0, 0, 0
    seen = {}
    headers = { ["Content-Type"] = "application/json", ["X-App-Key"] = args[1] }
end

function request()
    local token = table.remove(free)
    if token == nil then
        -- More connections than live chains: send a token that cannot be valid so the failure
        -- shows (401) instead of silently reusing one.
        starved = starved + 1
        token = "starved-no-free-refresh-token"
    else
        if seen[token] then dup = dup + 1 end
        seen[token] = true
    end
    sent = sent + 1
    return wrk.format("POST", "/v1/auth/refresh", headers, '{"refresh_token":"' .. token .. '"}')
end

function response(status, headers, body)
    if status == 200 then
        local token = string.match(body, '"refresh_token":"([^"]+)"')
        if token then
            ok = ok + 1
            free[#free + 1] = token
        else
            unparsed = unparsed + 1
        end
    else
        failed = failed + 1
        if status == 401 then s401 = s401 + 1
        elseif status == 429 then s429 = s429 + 1
        elseif status == 503 then s503 = s503 + 1
        else other = other + 1 end
    end
end

function done(summary, latency, requests)
    local t = { sent = 0, ok = 0, failed = 0, unparsed = 0, starved = 0, dup = 0, s401 = 0, s429 = 0, s503 = 0, other = 0, initial = 0, free = 0 }
    for _, thread in ipairs(threads) do
        for k, _ in pairs(t) do
            if k ~= "free" then t[k] = t[k] + (thread:get(k) or 0) end
        end
        t.free = t.free + #(thread:get("free") or {})
    end
    io.write(string.format(
        "chains: threads=%d initial=%d sent=%d ok=%d failed=%d status401=%d status429=%d status503=%d other=%d unparsed=%d starved=%d dup=%d free_at_end=%d\n",
        #threads, t.initial, t.sent, t.ok, t.failed, t.s401, t.s429, t.s503, t.other, t.unparsed, t.starved, t.dup, t.free))
end
