-- wrk script: GET with the app key and a bearer access token.
--   wrk ... -s bearer.lua URL -- APP_KEY ACCESS_TOKEN
function init(args)
    wrk.headers["X-App-Key"] = args[1]
    wrk.headers["Authorization"] = "Bearer " .. args[2]
end
