extension AppSettings {
    /// The `mfa` section: whether sign-ins ask for a second factor, and which factors users may enrol.
    public struct MFA: Sendable, Equatable {
        public enum Policy: String, Sendable, CaseIterable {
            /// No second step is asked, and no factor may be enrolled.
            case off
            /// Users who enrolled a factor answer the second step.
            case optional
            /// Every user answers it; one without a factor enrols one first.
            case required
        }

        /// A kind of factor a user may enrol.
        public enum Method: String, Sendable, CaseIterable {
            case totp, passkey
        }

        public var policy = Policy.off
        public var methods: [Method] = Method.allCases

        public init() {}
    }
}

extension AppSettings.MFA {
    static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self {
        var mfa = Self()
        if let v = f.string("policy") {
            if let policy = Policy(rawValue: v) { mfa.policy = policy } else { f.fail("policy", "Must be off, optional or required.") }
        }
        if let v = f.stringArray("methods", maxCount: 2) {
            for m in v where Method(rawValue: m) == nil { f.fail("methods", "Unknown method \(m); use totp, passkey.") }
            let methods = uniqued(v).compactMap(Method.init(rawValue:))
            if methods.isEmpty, !f.errors.contains(where: { $0.field == "mfa.methods" }) {
                f.fail("methods", "Give at least one of totp, passkey.")
            }
            mfa.methods = methods
        }
        return mfa
    }

    var json: JSON { ["policy": .string(policy.rawValue), "methods": .strings(methods.map(\.rawValue))] }
}
