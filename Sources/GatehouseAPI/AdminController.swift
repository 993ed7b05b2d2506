import Foundation
import GatehouseCore
import GatehouseHTTP

/// `/v1/admin/*`: creating apps (platform token) and configuring one's own app (secret key).
struct AdminController {
    let auth: Authenticator
    let apps: AppService
    let auditLog: AuditLog
    let users: AdminUsers
    let exports: UserExport
    let deletion: AccountDeletion
    let deadLetters: DeadLetters
    let mfa: MFAService
    let userImport: UserImport
    let sessions: SessionService
    let testMail: TestMail
    let webhookTest: WebhookTest
    let clock: any Clock

    func register(_ routes: inout Routes) {
        routes.post("/v1/admin/apps", createApp)
        routes.get("/v1/admin/apps", listApps)
        routes.post("/v1/admin/apps/{app_id}/disable", body: .none, disableApp)
        routes.post("/v1/admin/apps/{app_id}/enable", body: .none, enableApp)
        routes.get("/v1/admin/app", settings)
        routes.patch("/v1/admin/app", updateSettings)
        routes.post("/v1/admin/app/signing-keys/rotate", body: .none, rotateSigningKey)
        routes.post("/v1/admin/app/secret-keys", body: .none, rotateSecretKey)
        // Waits for the app's SMTP server (20 s at most): on the network offload threads, as a
        // provider call, never on an HTTP worker.
        routes.post("/v1/admin/app/email/test", callsProvider: true, testEmail)
        routes.post("/v1/admin/app/webhooks/test", testWebhook)
        routes.get("/v1/admin/webhooks/deliveries", webhookDeliveries)
        routes.get("/v1/admin/events", events)
        routes.get("/v1/admin/users", listUsers)
        // Not for a HEAD: an export is recorded (users.exported). It reads the whole table, a page
        // at a time, and writes a spool file: on the offload threads, never on an HTTP worker.
        routes.get("/v1/admin/users/export", head: false, doesFileIO: true, exportUsers)
        // The secret key is checked before the body is read: a stranger's 16 MiB is not spooled;
        // nor is anyone's while the app or the node is busy importing.
        routes.post(
            "/v1/admin/users/import", body: .ndjson(maxBytes: UserImport.maxRequestBytes),
            beforeBody: { [userImport] request in try userImport.refuseIfBusy(app: try auth.adminApp(request).id) }, importUsers)
        routes.get("/v1/admin/users/{id}", user)
        routes.patch("/v1/admin/users/{id}", updateUser)
        routes.delete("/v1/admin/users/{id}", deleteUser)
        routes.get("/v1/admin/users/{id}/sessions", userSessions)
        routes.delete("/v1/admin/users/{id}/sessions", endSessions)
        routes.post("/v1/admin/users/{id}/ban", ban)
        routes.delete("/v1/admin/users/{id}/ban", unban)
        routes.get("/v1/admin/outbox", outbox)
        routes.post("/v1/admin/outbox/{id}/retry", body: .none, retryOutboxItem)
    }

    /// `POST /v1/admin/users/import`: an NDJSON body, a user a line, at most 10,000 lines (ADR 0031).
    func importUsers(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        guard let body = request.spooledBody else { throw GatehouseError(.malformedRequest, "Send the users as an application/x-ndjson body.") }
        let report = try userImport.run(app: try apps.latest(app), path: body.path, maxLines: UserImport.maxRequestLines, source: .api)
        return HTTPResponse.data(report.json).noStore()
    }

    /// `{"to"}`: a test message through the app's own SMTP server; 200 once the server took it,
    /// 502 `email/test-failed` with its `reason` when not (ADR 0035).
    func testEmail(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        var body = try Body(request)
        let to = body.required("to", maxLength: 320)
        try body.finish()
        try testMail.send(app: try apps.latest(app), to: to)
        return HTTPResponse.data(["sent": true]).noStore()
    }

    /// `{"url"}` (optional): queues a `webhook.test` delivery to that webhook, else to each; 202.
    func testWebhook(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        var body = try Body(request, allowEmpty: true)
        let url = body.optional("url", maxLength: 2048)
        try body.finish()
        let queued = try webhookTest.send(app: try apps.latest(app), url: url)
        return HTTPResponse.data(
            ["deliveries": .array(queued.map { ["id": .string($0.id), "url": .string($0.url), "webhook_id": .string($0.eventID)] })], status: 202
        ).noStore()
    }

    /// The app's webhook deliveries, newest first (`state`, `event_type`, `limit`, `cursor`).
    func webhookDeliveries(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let query = try DeliveriesQuery.parse(request)
        let (items, next) = try webhookTest.deliveries(app: app, state: query.state, eventType: query.eventType, after: query.after, limit: query.limit)
        return HTTPResponse.json(["data": .array(items.map(\.deliveryJSON)), "next_cursor": next.map { .string(DeliveriesQuery.cursor($0)) } ?? .null])
            .noStore()
    }

    /// Dead outbox items, newest first: an app's own (secret key) or every app's (platform token).
    func outbox(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminAppOrPlatform(request)
        let query = try OutboxQuery.parse(request)
        let viewer: DeadLetters.Viewer = app.map { .app($0.id) } ?? .platform
        if let app, let only = query.app, only != app.id {
            throw GatehouseError.validation("app_id", "A secret key lists its own app's items only.")
        }
        let (items, next) = try deadLetters.list(viewer, only: query.app, after: query.after, limit: query.limit)
        return HTTPResponse.json(["data": .array(items.map(OutboxQuery.json)), "next_cursor": next.map { .string(OutboxQuery.cursor($0)) } ?? .null]).noStore()
    }

    /// Queues a dead item again (due now, attempts from 0, a fresh give-up window).
    func retryOutboxItem(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminAppOrPlatform(request)
        let item = try deadLetters.retry(app.map { .app($0.id) } ?? .platform, id: request.parameters["id"] ?? "")
        return HTTPResponse.data(OutboxQuery.json(item)).noStore()
    }

    func createApp(_ request: Request) throws -> HTTPResponse {
        try auth.platform(request)
        let created = try apps.create(settings: try request.jsonBody())
        return HTTPResponse.data(
            ["app": apps.adminView(created.app), "app_key": .string(created.app.record.appKey), "secret_key": .string(created.secretKey)],
            status: 201
        ).noStore()
    }

    /// Every app, oldest first, with `disabled` (platform token).
    func listApps(_ request: Request) throws -> HTTPResponse {
        try auth.platform(request)
        let page = try Page(request)
        return HTTPResponse.json(page.response(try apps.all(), apps.platformView)).noStore()
    }

    /// Switches a tenant off (platform token): nothing is deleted, nothing of it is served.
    func disableApp(_ request: Request) throws -> HTTPResponse {
        try auth.platform(request)
        let app = try apps.app(id: request.parameters["app_id"] ?? "")
        return HTTPResponse.data(apps.platformView(try apps.setDisabled(app, true))).noStore()
    }

    func enableApp(_ request: Request) throws -> HTTPResponse {
        try auth.platform(request)
        let app = try apps.app(id: request.parameters["app_id"] ?? "")
        return HTTPResponse.data(apps.platformView(try apps.setDisabled(app, false))).noStore()
    }

    /// The app's audit log, newest first.
    func events(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let (events, next) = try auditLog.page(app: app, try EventsQuery.parse(request))
        return HTTPResponse.json(["data": .array(events.map(EventsQuery.json)), "next_cursor": next.map { .string(EventsQuery.cursor($0)) } ?? .null]).noStore()
    }

    func listUsers(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let (query, anonymous, after, limit) = try UsersQuery.parse(request)
        let (users, next) = try users.list(app: app, query: query, anonymous: anonymous, after: after, limit: limit)
        let factors = try mfa.factors(app: app, users: users.map(\.0.id))
        return HTTPResponse.json([
            "data": .array(users.map { user, identities in
                var fields = AccountJSON.adminUser(user, identities, now: clock.nowMillis()).objectValue ?? [:]
                fields["factors"] = .array((factors[user.id] ?? []).map(MFAController.factor))
                return .object(fields)
            }),
            "next_cursor": next.map { .string(UsersQuery.cursor($0)) } ?? .null,
        ]).noStore()
    }

    /// The app's users as NDJSON, one import line each (API.md, "Moving users in and out"):
    /// written to a spool file a page at a time here, on an offload thread, then sent from the
    /// file by the connection's thread, which waits on no database. The app's export slot is held
    /// until the body has been sent.
    func exportUsers(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let includeHashes = try flag(request, "include_hashes")
        guard let directory = request.http.spoolDirectory else { throw GatehouseError(.unavailable, "The server is stopping.") }
        let ticket = try exports.start(app: app, includeHashes: includeHashes)
        var stream: ResponseStream
        do {
            let spool = try ResponseSpool(in: directory)
            do {
                _ = try exports.write(ticket, origin: request.origin) { page in try spool.write(page) }
            } catch {
                spool.discard()
                throw error
            }
            stream = spool.stream(onClose: { ticket.end() })
        } catch is ResponseSpool.Failure {
            // The spool folder's disk: full or failing. Not the client's doing, and it may pass.
            ticket.end()
            throw GatehouseError(.unavailable, "The export could not be written on the server; retry later.", retryAfter: 60)
        } catch {
            ticket.end()
            throw error
        }
        var headers = HTTPHeaders()
        headers.set("Content-Type", "application/x-ndjson")
        headers.set("Content-Disposition", "attachment; filename=\"users.ndjson\"")
        return HTTPResponse(status: 200, headers: headers, stream: stream).noStore()
    }

    func user(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let (user, identities) = try users.user(app: app, id: request.parameters["id"] ?? "")
        return HTTPResponse.data(try adminUser(app, user, identities)).noStore()
    }

    /// The user's custom data: `app_metadata`, `user_metadata`, `display_name` (API.md, "Moving
    /// users in and out").
    func updateUser(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        var body = try Body(request)
        let appMetadata = body.nullableValue("app_metadata")
        let userMetadata = body.nullableValue("user_metadata")
        let displayName = body.nullable("display_name", maxLength: 400)
        try body.finish()
        let (user, identities) = try users.update(
            app: app, id: request.parameters["id"] ?? "", appMetadata: appMetadata, userMetadata: userMetadata, displayName: displayName)
        return HTTPResponse.data(try adminUser(app, user, identities)).noStore()
    }

    /// The account's deletion, as `DELETE /v1/me` does it (without a recent login).
    func deleteUser(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        try deletion.deleteByAdmin(app: app, id: request.parameters["id"] ?? "")
        return .noContent
    }

    func ban(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        var body = try Body(request)
        let code = body.required("sanction_code", maxLength: 256)
        let reason = body.optional("reason", maxLength: 2048)
        let until = body.nullable("suspended_until", maxLength: 64)
        try body.finish()
        var suspendedUntil: Int64?
        if case .some(.some(let text)) = until {
            guard let millis = Self.rfc3339Millis(text) else {
                throw GatehouseError.validation("suspended_until", "Must be an RFC 3339 time, such as 2027-01-31T12:00:00Z, or null.")
            }
            suspendedUntil = millis
        }
        let (user, identities) = try users.ban(app: app, id: request.parameters["id"] ?? "", sanctionCode: code, reason: reason, suspendedUntil: suspendedUntil)
        return HTTPResponse.data(try adminUser(app, user, identities)).noStore()
    }

    func unban(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let (user, identities) = try users.unban(app: app, id: request.parameters["id"] ?? "")
        return HTTPResponse.data(try adminUser(app, user, identities)).noStore()
    }

    /// One user as the admin sees them: with their second factors (no secrets).
    private func adminUser(_ app: AppContext, _ user: User, _ identities: [Identity]) throws -> JSON {
        var fields = AccountJSON.adminUser(user, identities, now: clock.nowMillis()).objectValue ?? [:]
        fields["factors"] = .array(try mfa.factors(app: app, user: user.id).map(MFAController.factor))
        return .object(fields)
    }

    /// `2027-01-31T12:00:00Z`, with or without fractions of a second, or with an offset.
    static func rfc3339Millis(_ text: String) -> Int64? {
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds]] {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = options
            if let date = formatter.date(from: text) { return Int64((date.timeIntervalSince1970 * 1000).rounded()) }
        }
        return nil
    }

    /// The user's live sessions, as their own `GET /v1/me/sessions` lists them (without `current`).
    func userSessions(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let page = try Page(request)
        let (user, _) = try users.user(app: app, id: request.parameters["id"] ?? "")
        let list = try sessions.sessions(app: app, user: user.id)
        return HTTPResponse.json(page.response(list) { AccountJSON.adminSession($0) }).noStore()
    }

    func endSessions(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        try users.endSessions(app: app, id: request.parameters["id"] ?? "")
        return .noContent
    }

    func settings(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        return HTTPResponse.data(apps.adminView(try apps.latest(app))).noStore()
    }

    func updateSettings(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let updated = try apps.update(app, patch: try request.jsonBody())
        return HTTPResponse.data(apps.adminView(updated)).noStore()
    }

    func rotateSigningKey(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let revoke = try flag(request, "revoke_previous")
        return HTTPResponse.data(["kid": .string(try apps.rotateSigningKey(app, revokePrevious: revoke))])
    }

    func rotateSecretKey(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        let revoke = try flag(request, "revoke_others")
        return HTTPResponse.data(["secret_key": .string(try apps.rotateSecretKey(app, revokeOthers: revoke))], status: 201).noStore()
    }

    /// A `true`/`false` query parameter, false when absent.
    private func flag(_ request: Request, _ name: String) throws -> Bool {
        switch request.http.queryValue(name) {
        case nil, "false": false
        case "true": true
        default: throw GatehouseError.validation(name, "Must be true or false.")
        }
    }
}
