-- wrk script: the same POST with a JSON body on every request (sign-in with one user).
--   wrk ... -s post-json.lua URL -- APP_KEY BODY_FILE
function init(args)
    local f = assert(io.open(args[2], "r"))
    wrk.method = "POST"
    wrk.body = f:read("*a")
    f:close()
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["X-App-Key"] = args[1]
end
