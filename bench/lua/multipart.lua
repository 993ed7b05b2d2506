-- wrk script: the same multipart/form-data upload on every request (bench/run's Files part),
-- counting the answers that have the expected status.
--   wrk ... -s multipart.lua URL -- APP_KEY ACCESS_TOKEN BODY_FILE BOUNDARY EXPECTED_STATUS
-- BODY_FILE is the whole multipart body (bench/files.py prepare writes it); the request, with
-- Content-Type, X-App-Key and Authorization: Bearer, is built once per thread in init().
-- done() prints one line that bench/run parses:
--   statuses: ok=… other=… seconds=… first_other=…
-- ok counts answers with EXPECTED_STATUS; first_other is the status of the first other answer.

local threads = {}

function setup(thread)
    table.insert(threads, thread)
end

function init(args)
    local f = assert(io.open(args[3], "rb"))
    local body = f:read("*a")
    f:close()
    expected = tonumber(args[5])
    prepared = wrk.format("POST", wrk.path, {
        ["Content-Type"] = "multipart/form-data; boundary=" .. args[4],
        ["X-App-Key"] = args[1],
        ["Authorization"] = "Bearer " .. args[2],
    }, body)
    ok, other, first_other = 0, 0, 0
end

function request()
    return prepared
end

function response(status, headers, body)
    if status == expected then
        ok = ok + 1
    else
        other = other + 1
        if first_other == 0 then first_other = status end
    end
end

function done(summary, latency, requests)
    local t = { ok = 0, other = 0 }
    local first = 0
    for _, thread in ipairs(threads) do
        for k, _ in pairs(t) do t[k] = t[k] + (thread:get(k) or 0) end
        if first == 0 then first = thread:get("first_other") or 0 end
    end
    io.write(string.format("statuses: ok=%d other=%d seconds=%.3f first_other=%d\n",
        t.ok, t.other, summary.duration / 1e6, first))
end
