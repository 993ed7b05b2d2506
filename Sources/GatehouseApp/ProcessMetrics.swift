import Foundation

/// The `process_*` metrics of the Prometheus client libraries, read from Linux's `/proc` at each
/// scrape: memory, CPU, descriptors and the start time. A value that cannot be read is left out.
enum ProcessMetrics {
    static func render() -> String {
        var out = ""
        func add(_ name: String, _ type: String, _ help: String, _ value: Double?) {
            guard let value else { return }
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        let stat = self.stat()
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        add("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.", stat.map { (Double($0.utime) + Double($0.stime)) / ticks })
        add("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", stat.map { Double($0.rss) * pageSize })
        add("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", stat.map { Double($0.vsize) })
        add("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.",
            stat.flatMap { s in bootTime().map { $0 + Double(s.startTicks) / ticks } })
        add("process_open_fds", "gauge", "Open file descriptors.",
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { Double($0.count) })
        var limit = rlimit()
        add("process_max_fds", "gauge", "The most file descriptors the process may open.",
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Double(limit.rlim_cur) : nil)
        return out
    }

    struct Stat {
        var utime: UInt64
        var stime: UInt64
        var startTicks: UInt64
        var vsize: UInt64
        var rss: UInt64
    }

    /// `/proc/self/stat`, after the command name (which may hold spaces and parentheses):
    /// fields 14 and 15 (utime, stime), 22 (starttime), 23 (vsize) and 24 (rss, in pages).
    static func stat() -> Stat? {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return nil }
        // Fields from the third (state) on.
        let fields = text[text.index(after: close)...].split(separator: " ").map(String.init)
        func field(_ number: Int) -> UInt64? { number - 3 < fields.count ? UInt64(fields[number - 3]) : nil }
        guard let utime = field(14), let stime = field(15), let start = field(22), let vsize = field(23), let rss = field(24) else { return nil }
        return Stat(utime: utime, stime: stime, startTicks: start, vsize: vsize, rss: rss)
    }

    /// The boot time (`btime` of `/proc/stat`), in seconds since the epoch.
    static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
