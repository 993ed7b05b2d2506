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
/// nobody holds, once they are older than ``staleAfterSeconds``. A server holds its folder with
/// `flock` for as long as it runs (the kernel lets go when the process dies), so a node in another
/// container sharing the directory, whose process id means nothing here, keeps its folder.
final class SpoolFolder: Sendable {
    static let prefix = "gatehouse-spool-"
    /// Age (by the folder's modification time) after which a dead process's folder is removed.
    static let staleAfterSeconds = 600

    private let current = Mutex<String?>(nil)
    /// The folder, open and `flock`ed while the server runs.
    private let held = Mutex<Int32>(-1)

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
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0, flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            if descriptor >= 0 { close(descriptor) }
            rmdir(path)
            throw HTTPServer.StartError(description: "cannot hold the private spool folder \(path): \(String(cString: strerror(errno)))")
        }
        held.withLock { $0 = descriptor }
        current.withLock { $0 = path }
    }

    /// Removes the folder and anything a request left in it.
    func remove() {
        guard let path = current.withLock({ $0.take() }) else { return }
        Self.removeTree(path)
        let descriptor = held.withLock { value in defer { value = -1 }; return value }
        if descriptor >= 0 { close(descriptor) }
    }

    /// Folders no server holds (`flock`), not modified for `staleAfterSeconds`, named for a process
    /// id that is not running here.
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
            let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { continue }  // a live server's, elsewhere
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
