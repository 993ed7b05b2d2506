import Foundation

/// Programs from Debian's packages that tests use as independent checkers and tools.
public enum ExternalProgram {
    /// Debian's Python, with python3-jwt and python3-jsonschema (scripts/install-deps --test).
    public static let python = "/usr/bin/python3"

    /// Runs a program and returns its standard output; throws when it exits non-zero. `stdin`
    /// (small: it is written before the output is read) is the program's standard input.
    public static func run(_ program: String, _ arguments: [String], stdin: [UInt8]? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        // Standard error goes to a file: with two pipes read one after the other, a program that
        // filled the second (64 KiB) before closing the first would wait for us forever.
        let errorPath = NSTemporaryDirectory() + "gatehouse-stderr-\(UUID().uuidString)"
        guard FileManager.default.createFile(atPath: errorPath, contents: nil), let errorFile = FileHandle(forWritingAtPath: errorPath) else {
            throw TestHTTPClient.Failure(description: "cannot create \(errorPath)")
        }
        defer {
            try? errorFile.close()
            try? FileManager.default.removeItem(atPath: errorPath)
        }
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = errorFile
        let input = stdin.map { _ in Pipe() }
        if let input { process.standardInput = input }
        try process.run()
        if let input, let stdin {
            input.fileHandleForWriting.write(Data(stdin))
            try input.fileHandleForWriting.close()
        }
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let err = FileManager.default.contents(atPath: errorPath) ?? Data()
            throw TestHTTPClient.Failure(description: "\(program) exited \(process.terminationStatus): \(String(decoding: err, as: UTF8.self))")
        }
        return String(decoding: out, as: UTF8.self)
    }
}
