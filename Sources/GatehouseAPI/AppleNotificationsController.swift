import GatehouseCore
import GatehouseHTTP

/// Apple's server-to-server notifications: the endpoint an app registers with Apple
/// (docs/sign-in-with-apple.md). No app key: the app is the path's, and Apple proves itself by
/// the signed `payload`.
struct AppleNotificationsController {
    let directory: AppDirectory
    let notifications: AppleNotifications

    func register(_ routes: inout Routes) {
        // A `kid` not cached fetches Apple's keys: on the provider threads.
        routes.post("/v1/apps/{app_id}/apple/notifications", callsProvider: true, receive)
    }

    func receive(_ request: Request) throws -> HTTPResponse {
        let app = try pathApp(request)
        var body = try Body(request)
        let payload = body.required("payload", maxLength: AppleNotifications.maxPayloadLength)
        // Fields Apple may add later are left alone: refusing them would make Apple retry forever.
        try body.check()
        let outcome = try notifications.receive(app: app, payload: payload)
        return .data(["outcome": .string(outcome.rawValue)])
    }

    /// The app of the path; a disabled one is not found, as for its keys and metadata.
    private func pathApp(_ request: Request) throws -> AppContext {
        guard let id = request.parameters["app_id"].flatMap({ AppID(parsing: $0) }), let app = try directory.app(id: id), !app.isDisabled else {
            throw GatehouseError(.notFound, "No such app.")
        }
        RequestLogContext.current?.appID = app.id.rawValue
        return app
    }
}
