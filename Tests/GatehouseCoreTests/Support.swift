import GatehouseCore
import GatehouseTesting
import Testing

/// Expects `body` to throw the domain error `code` (what the API would answer as problem+json).
func expectRefusal(_ code: ErrorCode, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as GatehouseError {
        #expect(error.code == code, "\(error.detail ?? "")", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

let origin = CoreWorld.origin
let password = "correct horse battery"

extension CoreWorld {
    /// A password account of `app`, signed up with ``password``.
    func signUp(_ app: AppContext, _ email: String = "ada@example.com") throws -> SessionGrant {
        try passwords.signUp(app: app, email: email, password: password, firstName: nil, lastName: nil, origin: Self.origin)
    }

    func signIn(_ app: AppContext, _ email: String = "ada@example.com", password: String = password) throws -> SessionGrant {
        try passwords.signIn(app: app, email: email, password: password, origin: Self.origin)
    }

    func refresh(_ app: AppContext, _ refreshToken: String) throws -> SessionGrant {
        try sessions.refresh(app: app, refreshToken: refreshToken, origin: Self.origin)
    }

    /// The app's audit events of `type`, newest first.
    func events(_ app: AppContext, _ type: EventType) throws -> [Event] {
        try auditLog.page(app: app, EventQuery(type: type, limit: 100)).events
    }
}
