import Foundation

/// Runs real command-line tools (openssl, python3) so interop tests check against independent code.
enum ExternalTool {
    struct Output {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs `executable` with `arguments` in `directory`, feeding `input` on stdin.
    static func run(_ executable: String, _ arguments: [String], in directory: URL? = nil, input: String = "") throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Output(status: process.terminationStatus,
                      stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self))
    }

    /// Runs `openssl` and fails the test with its stderr if it exits non-zero.
    @discardableResult
    static func openssl(_ arguments: [String], in directory: URL) throws -> Output {
        let output = try run("/usr/bin/openssl", arguments, in: directory)
        guard output.status == 0 else { throw ToolFailure(message: "openssl \(arguments): \(output.stderr)") }
        return output
    }

    struct ToolFailure: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}

/// A fresh directory under the system temporary directory, removed by `remove()`.
struct ScratchDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-crypto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ bytes: some Sequence<UInt8>) throws {
        try Data(bytes).write(to: url.appendingPathComponent(name))
    }

    func read(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: url.appendingPathComponent(name)))
    }

    func readText(_ name: String) throws -> String {
        String(decoding: try read(name), as: UTF8.self)
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Minimal DER reader for the test only: `SEQUENCE { INTEGER r, INTEGER s }` as produced by
/// `openssl dgst` for P-256 (short-form lengths), turned into the 64-byte JWS `r || s`.
func rawECDSASignature(fromDER der: [UInt8]) -> [UInt8]? {
    guard der.count >= 8, der[0] == 0x30, Int(der[1]) == der.count - 2 else { return nil }
    var index = 2
    var output: [UInt8] = []
    for _ in 0..<2 {
        guard der[index] == 0x02 else { return nil }
        let length = Int(der[index + 1])
        var integer = Array(der[(index + 2)..<(index + 2 + length)])
        while integer.count > 32, integer.first == 0 { integer.removeFirst() }
        guard integer.count <= 32 else { return nil }
        output += [UInt8](repeating: 0, count: 32 - integer.count) + integer
        index += 2 + length
    }
    return index == der.count ? output : nil
}

/// The inverse of ``rawECDSASignature(fromDER:)`` for feeding our signatures to `openssl dgst -verify`.
func derECDSASignature(fromRaw raw: [UInt8]) -> [UInt8] {
    func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var value = Array(bytes.drop { $0 == 0 })
        if value.isEmpty { value = [0] }
        if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return [0x02, UInt8(value.count)] + value
    }
    let body = integer(raw[0..<32]) + integer(raw[32..<64])
    return [0x30, UInt8(body.count)] + body
}
