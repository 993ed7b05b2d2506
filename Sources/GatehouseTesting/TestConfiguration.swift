import GatehouseCore

extension Configuration {
    /// The configuration every test composes Gatehouse from, on `database`: a fixed master key,
    /// the platform token and public URL of ``TestServer``, and cheap password hashes (the cost
    /// parameters change no behaviour). ``TestServer`` and ``CoreWorld`` both start here.
    public static func forTests(on database: TestDatabase) -> Configuration {
        var configuration = Configuration()
        configuration.database = database.configuration
        configuration.masterKey = Array(repeating: 7, count: 32)
        configuration.adminToken = TestServer.adminToken
        configuration.publicURL = TestServer.publicURL
        configuration.httpThreads = 4
        configuration.accessLog = false
        configuration.argon2MemoryKiB = 1024
        configuration.argon2Iterations = 1
        return configuration
    }
}
