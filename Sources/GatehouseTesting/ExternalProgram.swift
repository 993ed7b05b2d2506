import Foundation

/// Programs from Debian's packages that tests use as independent checkers and tools.
public enum ExternalProgram {
    /// Debian's Python, with python3-jwt and python3-jsonschema (scripts/install-deps --test).
    public static let python = "/usr/bin/python3"

    /// Runs a program and returns its standard output; throws when it exits non-zero.
    public static func run(_ program: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let stdout = Pipe(), stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestHTTPClient.Failure(description: "\(program) exited \(process.terminationStatus): \(String(decoding: err, as: UTF8.self))")
        }
        return String(decoding: out, as: UTF8.self)
    }
}
