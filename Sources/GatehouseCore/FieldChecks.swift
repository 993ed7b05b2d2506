/// Runs the checks of several fields and throws their validation errors together, so that a
/// client learns every field's problem at once:
///
/// ```swift
/// var checks = FieldChecks()
/// var email = ""
/// try checks.run { () throws(GatehouseError) in email = try InputRules.email(rawEmail) }
/// try checks.run { () throws(GatehouseError) in try InputRules.presentedPassword(password) }
/// try checks.finish()
/// ```
public struct FieldChecks {
    private var errors: [FieldError] = []
    private var failed = false

    public init() {}

    /// Runs `check`, keeping a validation error it throws for ``finish()``. Any other error
    /// propagates at once.
    public mutating func run(_ check: () throws(GatehouseError) -> Void) throws(GatehouseError) {
        do {
            try check()
        } catch where error.code == .validationFailed {
            errors += error.fieldErrors
            failed = true
        }
    }

    /// Throws every validation error kept, if any: after it, every check has passed.
    public func finish() throws(GatehouseError) {
        guard failed else { return }
        throw errors.isEmpty ? GatehouseError(.validationFailed, "Some fields are not valid.") : .validation(errors)
    }
}
