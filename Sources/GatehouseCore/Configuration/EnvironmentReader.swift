import Foundation

extension Configuration {
    /// Reads the configuration from `environment`. Throws `ConfigurationError` listing every problem.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Configuration {
        var config = Configuration()
        var e = EnvironmentReader(environment: environment)
        // In this order: a variable read later may depend on one read before (the public URL on
        // the listen address, the blob folder and the master key on the database).
        config.readStorage(&e)
        config.readAddress(&e)
        config.readSecrets(&e)
        config.readFolders(&e)
        config.readMail(&e)
        config.readOutbound(&e)
        config.readTuning(&e)
        config.readLogging(&e)
        if !e.problems.isEmpty { throw ConfigurationError(problems: e.problems) }
        return config
    }
}

/// The process environment as ``Configuration/fromEnvironment(_:)`` reads it: every problem is
/// collected, so that all are reported at once.
struct EnvironmentReader {
    let environment: [String: String]
    var problems: [String] = []

    /// The variable's value without surrounding white space; nil when unset or blank.
    func value(_ name: String) -> String? {
        guard let v = environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !v.isEmpty else { return nil }
        return v
    }

    /// Sets `target` to the variable's whole number when it is in `range`; a problem when it is not.
    mutating func integer(_ name: String, _ range: ClosedRange<Int>, into target: inout Int) {
        guard let raw = value(name) else { return }
        guard let n = Int(raw), range.contains(n) else {
            problems.append("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound).")
            return
        }
        target = n
    }
}
