import GatehouseCore
import GatehouseCrypto

// The rows of apps and their keys, shared by the catalog and each app's settings store.

func replaceOrigins(_ db: any SQLConnection, app: AppID, origins: [String]) throws {
    try db.execute("DELETE FROM app_origins WHERE app_id = \(app)")
    for origin in Set(origins) {
        try db.execute("INSERT INTO app_origins (app_id, origin) VALUES (\(app), \(origin))")
    }
}

func insertSecretKey(_ db: any SQLConnection, app: AppID, _ key: SecretKeyRecord) throws {
    try db.execute("""
        INSERT INTO app_secret_keys (id, app_id, key_hash, hint, created_at, expires_at)
        VALUES (\(key.id), \(app), \(key.keyHash), \(key.hint), \(key.createdAt), \(key.expiresAt))
        """)
}

func insertSigningKey(_ db: any SQLConnection, app: AppID, _ key: SigningKeyRecord) throws {
    try db.execute("""
        INSERT INTO signing_keys (kid, app_id, algorithm, private_key, public_jwk, state, created_at, expires_at)
        VALUES (\(key.kid), \(app), \(key.algorithm.rawValue), \(key.sealedPrivateKey), \(key.publicJWK), \(key.state.rawValue),
                \(key.createdAt), \(key.expiresAt))
        """)
}

func appRecord(_ row: SQLRow) throws -> AppRecord {
    AppRecord(
        id: AppID(unchecked: try row.string("id")), appKey: try row.string("app_key"), settingsJSON: try row.string("settings"),
        version: try row.int64("version"), source: try row.string("source"), sourceChecksum: try row.optionalString("source_checksum"),
        legacySourceChecksum: try row.optionalString("legacy_source_checksum"),
        createdAt: try row.int64("created_at"), updatedAt: try row.int64("updated_at"), disabledAt: try row.optionalInt64("disabled_at"))
}

func signingKeyRecord(_ row: SQLRow) throws -> SigningKeyRecord {
    let algorithmText = try row.string("algorithm")
    let stateText = try row.string("state")
    guard let algorithm = SignatureAlgorithm(rawValue: algorithmText), let state = SigningKeyState(rawValue: stateText) else {
        throw SQLError(kind: .decoding, message: "signing_keys row has algorithm \(algorithmText) / state \(stateText)")
    }
    return SigningKeyRecord(
        kid: try row.string("kid"), algorithm: algorithm, sealedPrivateKey: try row.string("private_key"),
        publicJWK: try row.string("public_jwk"), state: state, createdAt: try row.int64("created_at"),
        expiresAt: try row.optionalInt64("expires_at"))
}
