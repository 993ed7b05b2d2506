/// A store's typed refusal of a write (another account or app holds what it would take). Stores
/// know no client-facing text: Core says what the client is told, here, once per conflict.
protocol StoreConflict: Error {
    /// What the client is answered.
    var error: GatehouseError { get }
}

extension StoreConflict {
    /// Runs a store write and answers its conflict as the client's error.
    static func answering<T>(_ write: () throws -> T) throws -> T {
        do {
            return try write()
        } catch let conflict as Self {
            throw conflict.error
        }
    }
}

extension UserConflict: StoreConflict {
    var error: GatehouseError {
        switch self {
        case .identityTaken: GatehouseError(.emailAlreadyInUse, "An account with this email already exists.")
        case .emailTaken: GatehouseError(.emailAlreadyInUse, "Another account signs in with this email.")
        }
    }
}

extension PasswordConflict: StoreConflict {
    var error: GatehouseError {
        switch self {
        case .emailTaken: GatehouseError(.emailAlreadyInUse, "Another account signs in with this email and a password.")
        }
    }
}

extension IdentityConflict: StoreConflict {
    var error: GatehouseError {
        switch self {
        case .alreadyLinked: GatehouseError(.credentialAlreadyInUse, "This sign-in method is already linked to an account of this app.")
        case .accountGone: GatehouseError(.sessionRevoked, "This account no longer exists.")
        }
    }
}

extension AppConflict: StoreConflict {
    var error: GatehouseError {
        switch self {
        case .appKeyTaken: GatehouseError(.appKeyTaken, "Another app uses this app key.")
        }
    }
}
