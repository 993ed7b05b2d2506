import GatehouseCore
import GatehouseHTTP

/// `/v1/me*`: the signed-in user's profile, devices, password and sign-in methods.
struct MeController {
    let auth: Authenticator
    let accounts: AccountService
    let passwords: PasswordService
    let sessions: SessionService
    let deletion: AccountDeletion
    let files: FilesService
    let accountExport: AccountExport

    func register(_ routes: inout Routes) {
        routes.get("/v1/me", me)
        routes.patch("/v1/me", doesFileIO: true, updateMe)
        routes.delete("/v1/me", deleteMe)
        routes.get("/v1/me/sessions", sessions)
        routes.delete("/v1/me/sessions/{id}", endSession)
        routes.put("/v1/me/password", hashesPassword: true, changePassword)
        routes.get("/v1/me/identities", identities)
        routes.post("/v1/me/identities/password", hashesPassword: true, addPassword)
        // Not for a HEAD: it is counted against the user's hourly exports and recorded.
        routes.get("/v1/me/export", head: false, export)
    }

    func me(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let account = try accounts.me(app: app, claims: claims)
        let body = account.meBody { JSON.object(["data": UserObject.json(account.user, account.identities)]).serialized() }
        return HTTPResponse.json(serialized: body).noStore()
    }

    func updateMe(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let first = body.nullable("first_name", maxLength: 200)
        let last = body.nullable("last_name", maxLength: 200)
        let locale = body.nullable("locale", maxLength: 64)
        let photo = body.nullable("photo_file_id", maxLength: 64)
        let displayName = body.nullable("display_name", maxLength: 400)
        let userMetadata = body.nullableValue("user_metadata")
        try body.finish()
        // A chosen file is decoded here (on the network offload threads: the route does file I/O).
        let photoChange = try photo.map { try files.photoChange(app: app, user: claims.userID, session: claims.sessionID, fileID: $0, origin: request.origin) }
        let (user, identities) = try accounts.updateProfile(
            app: app, user: claims.userID, session: claims.sessionID, firstName: first, lastName: last, locale: locale,
            displayName: displayName, userMetadata: userMetadata, photo: photoChange,
            origin: request.origin)
        return HTTPResponse.data(UserObject.json(user, identities)).noStore()
    }

    /// Deletes the account (API.md, "Deleting the account"); the body is optional.
    func deleteMe(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request, allowEmpty: true)
        let reason = body.optional("reason", maxLength: 2000)
        let code = body.optional("apple_authorization_code", maxLength: 4096)
        try body.finish()
        try deletion.deleteOwnAccount(app: app, claims: claims, reason: reason, appleAuthorizationCode: code, origin: request.origin)
        return .noContent
    }

    func sessions(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let page = try Page(request)
        let sessions = try sessions.sessions(app: app, claims: claims)
        return HTTPResponse.json(page.response(sessions) { AccountJSON.session($0, current: claims.sessionID) }).noStore()
    }

    func endSession(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        guard let id = request.parameters["id"].flatMap({ SessionID(parsing: $0) }) else { throw GatehouseError(.notFound, "No such session.") }
        try sessions.endSession(app: app, claims: claims, id: id, origin: request.origin)
        return .noContent
    }

    func changePassword(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let current = body.required("current_password", maxLength: 4096)
        let new = body.required("password", maxLength: 4096)
        try body.finish()
        try passwords.changePassword(app: app, claims: claims, current: current, new: new, origin: request.origin)
        return .noContent
    }

    func identities(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let page = try Page(request)
        return HTTPResponse.json(page.response(try accounts.identities(app: app, claims: claims), AccountJSON.identity)).noStore()
    }

    /// The user's own data to take away (API.md, "Moving users in and out"): the profile (the user
    /// object), identities, live sessions, files' metadata (no URL: nothing here grants access),
    /// second factors and the newest events. No secret of any kind (``AccountExport``).
    func export(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let contents = try accountExport.export(app: app, claims: claims, origin: request.origin)
        return HTTPResponse.data([
            "profile": UserObject.json(contents.user, contents.identities),
            "identities": .array(contents.identities.map(AccountJSON.identity)),
            "sessions": .array(contents.sessions.map { AccountJSON.session($0, current: claims.sessionID) }),
            "files": .array(contents.files.map { file in
                [
                    "id": .string(file.id.rawValue), "name": .string(file.name), "content_type": .string(file.contentType), "size": .int(file.size),
                    "visibility": .string(file.visibility.rawValue), "created_at": .string(rfc3339(millis: file.createdAt)),
                ]
            }),
            "factors": .array(contents.factors.map(MFAController.factor)),
            "events": .array(contents.events.map(EventsQuery.json)),
        ]).noStore()
    }

    func addPassword(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let password = body.required("password", maxLength: 4096)
        // An anonymous account's address (it has none); refused for any other.
        let email = body.optional("email", maxLength: 320)
        try body.finish()
        let identities = try passwords.addPassword(app: app, claims: claims, password: password, email: email, origin: request.origin)
        return HTTPResponse.json(["data": .array(identities.map(AccountJSON.identity)), "next_cursor": .null]).noStore()
    }
}
