import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The server's private folder for spooled uploads: `gatehouse-spool-<pid>-<random>`, mode 0700,
/// made by `mkdtemp` inside the configured spool directory when the server starts and removed when
/// it stops. Nobody else can create, replace or link a file inside it, so a spool file re-opened by
/// its path (to sniff it, to store it) is the file this server wrote, even when the configured
/// directory is shared.
///
/// A process killed without stopping leaves its folder behind; a later start removes the folders
/// of processes that no longer run here, once they are older than ``staleAfterSeconds``.
final class SpoolFolder: Sendable {
    static let prefix = "gatehouse-spool-"
    /// Age (by the folder's modification time) after which a dead process's folder is removed.
    static let staleAfterSeconds = 600

    private let current = Mutex<String?>(nil)

    /// The folder of the running server; nil before `create` and after `remove`.
    var path: String? { current.withLock { $0 } }

    /// Makes this server's folder in `parent`, after removing dead processes' stale folders there.
    func create(in parent: String) throws(HTTPServer.StartError) {
        let parent = parent.hasSuffix("/") ? String(parent.dropLast()) : parent
        Self.removeStale(in: parent)
        var template = Array("\(parent)/\(Self.prefix)\(getpid())-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw HTTPServer.StartError(description: "cannot make a private spool folder in \(parent): \(String(cString: strerror(errno)))")
        }
        let path = String(cString: made)
        current.withLock { $0 = path }
    }

    /// Removes the folder and anything a request left in it.
    func remove() {
        guard let path = current.withLock({ $0.take() }) else { return }
        Self.removeTree(path)
    }

    /// Folders named for a process id that is not running, not modified for `staleAfterSeconds`.
    private static func removeStale(in parent: String) {
        guard let directory = opendir(parent) else { return }
        defer { closedir(directory) }
        let now = time(nil)
        while let entry = readdir(directory) {
            let name = entryName(entry)
            guard name.hasPrefix(prefix), let pid = Int32(name.dropFirst(prefix.count).prefix { $0 != "-" }), pid != getpid() else { continue }
            guard kill(pid, 0) != 0, errno == ESRCH else { continue }
            let path = "\(parent)/\(name)"
            var status = stat()
            guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == getuid(),
                now - status.st_mtim.tv_sec > staleAfterSeconds
            else { continue }
            removeTree(path)
        }
    }

    /// The name of a `readdir` entry, read where it lies. Copying `d_name` out (a 256-byte tuple)
    /// would read past the end of a short entry, which may be the end of a mapped page (seen:
    /// a crash in memcpy in a /tmp with many entries).
    private static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        return String(cString: (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: CChar.self))
    }

    /// Unlinks the plain files of `path` (a spool folder holds nothing else), then the folder.
    private static func removeTree(_ path: String) {
        if let directory = opendir(path) {
            while let entry = readdir(directory) {
                let name = entryName(entry)
                guard name != ".", name != ".." else { continue }
                unlink("\(path)/\(name)")
            }
            closedir(directory)
        }
        rmdir(path)
    }
}
